import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from arena.servers import catalog


def require_server(name: str) -> None:
    """Skip when ``name`` is not installed, unless ARENA_REQUIRE_ALL=1 (make test, CI): then fail,
    so a missing install step can never pass as a skip."""
    if not catalog.available(catalog.CATALOG[name]):
        message = f"{name} is not installed ({catalog.CATALOG[name].install_hint})"
        if os.environ.get("ARENA_REQUIRE_ALL") == "1":
            pytest.fail(message)
        pytest.skip(message)


_copies: dict[str, str] = {}


def report_store() -> str:
    """A copy of tests/fixtures/report/store.db for this test session: opening a store upgrades it
    to the current schema, and a test must not change its fixture."""
    import atexit
    import shutil
    import tempfile
    from pathlib import Path

    if "report" not in _copies:
        where = tempfile.mkdtemp(prefix="report-fixture-")
        atexit.register(shutil.rmtree, where, True)
        copy = Path(where) / "store.db"
        shutil.copy(Path(__file__).parent / "fixtures" / "report" / "store.db", copy)
        _copies["report"] = str(copy)
    return _copies["report"]


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
