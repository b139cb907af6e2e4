import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from arena.servers import catalog

# Commands run in-process print as piped output does (arena.cli.console: 200 columns): a COLUMNS
# the runner's environment carries would wrap their tables (pytest-xdist's workers have 80).
os.environ.pop("COLUMNS", None)


def pytest_collection_modifyitems(items):
    """A test marked alone is an integration test too: ``-m integration`` selects every test that
    starts something, ``-m alone`` the ones among them that need the CPUs to themselves."""
    for item in items:
        if item.get_closest_marker("alone"):
            item.add_marker(pytest.mark.integration)


def require_server(name: str) -> None:
    """Skip when ``name`` is not installed, unless ARENA_REQUIRE_ALL=1 (make test, CI): then fail,
    so a missing install step can never pass as a skip."""
    if not catalog.available(catalog.CATALOG[name]):
        message = f"{name} is not installed ({catalog.CATALOG[name].install_hint})"
        if os.environ.get("ARENA_REQUIRE_ALL") == "1":
            pytest.fail(message)
        pytest.skip(message)


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def require_browser() -> None:
    """Skip when Debian's Chromium or Playwright is missing (fail under ARENA_REQUIRE_ALL=1, as above)."""
    missing = []
    if not os.access(CHROMIUM, os.X_OK):
        missing.append("chromium (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("playwright (uv sync)")
    if missing:
        if os.environ.get("ARENA_REQUIRE_ALL") == "1":
            pytest.fail("browser test needs: " + ", ".join(missing))
        pytest.skip("browser test needs: " + ", ".join(missing))


_copies: dict[str, str] = {}


def report_store(kind: str = "report") -> str:
    """A copy of tests/fixtures/<kind>/store.db for this test session: opening a store upgrades it
    to the current schema, and a test must not change its fixture."""
    import atexit
    import shutil
    import tempfile
    from pathlib import Path

    if kind not in _copies:
        where = tempfile.mkdtemp(prefix=f"{kind}-fixture-")
        atexit.register(shutil.rmtree, where, True)
        copy = Path(where) / "store.db"
        shutil.copy(Path(__file__).parent / "fixtures" / kind / "store.db", copy)
        _copies[kind] = str(copy)
    return _copies[kind]


@pytest.fixture
def tmpfs(tmp_path):
    """A directory on a tmpfs of 80 KiB (a stored run takes about 20): it fills after a few runs."""
    where = tmp_path / "small"
    where.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=80k", "tmpfs", str(where)]).returncode:
        pytest.skip("mounting a small tmpfs needs root")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=True)


@pytest.fixture(scope="session", autouse=True)
def kept_logs_removed():
    """The tests start servers that fail on purpose, whose work dirs Arena keeps for their log: those
    that appeared during this session are removed at its end, when their owner is this process or a
    process that is gone (the arena commands it ran). Never those that were there before, nor a
    living process's (another test session's on the same machine)."""
    from arena.servers.cgroup import OWNED
    from arena.servers.launch import KEEP_MARK

    def kept() -> set[Path]:
        return {m.parent for m in Path(tempfile.gettempdir()).glob(f"arena-*/{KEEP_MARK}")}

    def ours(d: Path) -> bool:
        m = OWNED.match(d.name)
        return m is not None and (int(m.group(1)) == os.getpid() or not Path(f"/proc/{m.group(1)}").exists())

    before = kept()
    yield
    for d in kept() - before:
        if ours(d):
            shutil.rmtree(d, ignore_errors=True)


def leak_experiment(name: str, kb: int, rate: int, memory_limit: str, length: str = 'duration = "2s"', load: str = "",
                    warmup: str = "500ms") -> str:
    """An experiment file of two gunicorn-sync workers on CPU 1 under ``memory_limit``, an open load of
    ``rate`` req/s from CPU 0 of /leak?kb=``kb`` (each request keeps that much in its worker), for
    ``length`` (a top-level duration; a soak puts its own in ``load``, lines of [load])."""
    return (f'name = "{name}"\n{length}\nwarmup = "{warmup}"\nrepetitions = 1\n[workload]\npath = "/leak?kb={kb}"\n'
            f'[load]\nmodel = "open"\nrates = [{rate}]\n{load}[layout]\nserver_cpus = "1"\nload_cpus = "0"\n'
            f'[[servers]]\nserver = "gunicorn-sync"\nprocesses = 2\nmemory_limit = "{memory_limit}"\n')
