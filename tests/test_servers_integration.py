"""Real servers end to end: conformance of every app, every server with 2 processes or threads,
and what happens when a server crashes at start or mid-run. Every test ends by proving that
nothing of the server is left: no process in (or tagged for) its set, the group gone, the port free.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from arena.app.check import check_one
from arena.probe import Probe
from arena.errors import ArenaError
from arena.http_client import Client, free_port, port_free
from arena.servers import catalog, cgroup
from arena.servers.launch import KEEP_MARK, ServerSpec, start
from arena.subjects import APPS, App, conformance
from tests.conftest import require_server

pytestmark = pytest.mark.integration

# One server per app for the conformance of the implementations themselves.
APP_SERVER = {"wsgi": "gunicorn-gthread", "flask": "gunicorn-gthread", "asgi": "uvicorn",
              "rack": "puma", "sinatra": "puma", "rails": "puma"}


def assert_nothing_left(running) -> None:
    assert cgroup.survivors(running.procset.name) == []
    assert ours_alive() == [] and ours_groups() == []
    assert port_free(running.host, running.port)
    assert not running.workdir.exists()


@pytest.mark.parametrize("app", list(APPS))
def test_every_app_implementation_conforms(app):
    require_server(APP_SERVER[app])
    with start(ServerSpec(APP_SERVER[app], app, threads=2, strict_knobs=False)) as running:
        failures = conformance.run(running.host, running.port, app, server=running.server.name,
                                   pids=running.procset.pids)
    assert [str(f) for f in failures] == []
    assert_nothing_left(running)


@pytest.mark.parametrize("server", list(catalog.CATALOG))
def test_every_server_with_two_processes_or_threads(server):
    require_server(server)
    entry = catalog.CATALOG[server]
    result = check_one(server, entry.apps[0], processes=2, threads=2)
    assert result.problems == [] and result.status == "pass"
    for knob in ("processes", "threads"):
        if knob in entry.knobs:
            assert result.knobs[knob] == 2
    assert result.pss_bytes > 0


def test_the_conformance_suite_catches_a_wrong_implementation(tmp_path):
    """A Rack app that answers 200 "ok" to everything must fail most checks."""
    require_server("puma")
    liar = tmp_path / "liar.ru"
    liar.write_text('run ->(env) { [200, {"Content-Type" => "text/plain", "Content-Length" => "2"}, ["ok"]] }\n')
    failures = {f.check for f in conformance_failures_of(liar)}
    assert {"work", "queue", "bounds", "fib", "pi", "server", "mix"} <= failures


def conformance_failures_of(rackup: Path):
    port = free_port("127.0.0.1")
    proc = subprocess.Popen(["puma", "-b", f"tcp://127.0.0.1:{port}", "-t", "1:1", str(rackup)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while port_free("127.0.0.1", port):
            assert time.monotonic() < deadline, "puma did not listen"
            time.sleep(0.05)
        return conformance.run("127.0.0.1", port, "liar")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class _extra_app:
    """Register an app for one test (the catalog's apps are the contract's; tests add broken ones)."""

    def __init__(self, app: App):
        self.app = app

    def __enter__(self):
        APPS[self.app.name] = self.app

    def __exit__(self, *exc):
        del APPS[self.app.name]


# What each server writes to its log about the failure (puma 5.6 in production does not log the
# exception's message, only that the worker could not start).
@pytest.mark.parametrize("server, evidence", [("puma", "Unable to start worker"),
                                              ("passenger", "arena test: broken at boot"),
                                              ("unicorn", "arena test: broken at boot")])
def test_a_ruby_server_that_crashes_at_start(tmp_path, server, evidence):
    require_server(server)
    broken = tmp_path / "broken.ru"
    broken.write_text('raise "arena test: broken at boot"\n')
    _assert_start_fails_cleanly(server, App("broken", "ruby", "rack", str(broken), "raises at boot"), evidence)


def test_a_python_server_that_crashes_at_start(tmp_path):
    require_server("gunicorn-sync")
    (tmp_path / "arena_broken_app.py").write_text('raise RuntimeError("arena test: broken at boot")\n')
    _assert_start_fails_cleanly("gunicorn-sync", App("broken", "python", "wsgi", "arena_broken_app:app", "raises"),
                                "arena test: broken at boot", env={"PYTHONPATH": str(tmp_path)})


def _assert_start_fails_cleanly(server: str, app: App, evidence: str, env: dict | None = None) -> None:
    pattern = f"{cgroup.PREFIX}{os.getpid()}-*-{server}-*"
    before = set(Path(tempfile.gettempdir()).glob(pattern))
    with _extra_app(app):
        with pytest.raises(ArenaError) as e:
            start(ServerSpec(server, "broken", processes=2, strict_knobs=False, env=env or {}), ready_timeout=5)
    message = str(e.value)
    assert message.startswith(f"{server} (broken)")
    assert evidence in message  # the tail of its log is in the error
    assert ours_alive() == [] and ours_groups() == []
    kept = [d for d in Path(tempfile.gettempdir()).glob(pattern) if d not in before]
    assert len(kept) == 1 and (kept[0] / "server.log").exists()  # kept: the error points to its log
    assert (kept[0] / KEEP_MARK).exists() and str(kept[0]) in message
    shutil.rmtree(kept[0])


def ours_alive() -> list[int]:
    """Live processes in any set this test process created (by cgroup path or fallback tag)."""
    mark = f"{cgroup.PREFIX}{os.getpid()}-"
    found = set(cgroup.tagged_pids(f"{cgroup.ProcessTree.TAG}={mark}".encode()))
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if f"/{mark}" in Path(f"/proc/{entry.name}/cgroup").read_text():
                    found.add(int(entry.name))
            except OSError:
                pass
    return sorted(p for p in found if not cgroup._zombie(p))


def ours_groups() -> list[str]:
    roots = set(cgroup.v1_roots().values()) | ({cgroup.v2_root()} - {None})
    return sorted(str(d) for r in roots for d in r.glob(f"{cgroup.PREFIX}{os.getpid()}-*"))


@pytest.mark.parametrize("server, outlives", [("puma", False), ("unicorn", False), ("passenger", True)])
def test_a_server_whose_main_process_dies_mid_run_leaves_nothing(server, outlives):
    """SIGKILL the main process mid-run. Puma's and unicorn's workers notice and exit by themselves
    (sooner or later); Passenger's daemonized watchdog and core certainly outlive it: stop() must
    end whatever is left, in every case."""
    require_server(server)
    running = start(ServerSpec(server, "rack", processes=2))
    with running:
        with Client(running.host, running.port) as client:
            assert client.get("/work?cpu_ms=1").status == 200
        os.kill(running.proc.pid, signal.SIGKILL)
        running.proc.wait(timeout=5)
        if outlives:
            assert running.procset.pids(), "Passenger's daemons should outlive the launcher"
    assert_nothing_left(running)


def test_the_probe_accounts_a_real_servers_cpu_and_memory():
    """40 requests of 10 ms thread CPU each: the group's CPU must show at least 0.4 s."""
    require_server("puma")
    with start(ServerSpec("puma", "rack", processes=2, threads=2, cpus=[0])) as running:
        assert all(os.sched_getaffinity(pid) == {0} for pid in running.procset.pids())
        p = Probe(running.procset, interval=0.05).start()
        with Client(running.host, running.port) as client:
            for _ in range(40):
                assert client.get("/work?cpu_ms=10").status == 200
        r = p.stop()
    assert r.cpu_user_s + r.cpu_system_s >= 0.4
    assert r.cpu_s <= r.window_s * 1.05  # one CPU allowed: the set cannot use more than one core
    assert r.processes == 3 and r.threads >= 3 and r.samples >= 3
    assert 0 < r.uss_bytes < r.pss_bytes < r.rss_bytes  # forked workers share pages
    assert r.memory_peak_bytes is None or r.memory_peak_bytes >= r.uss_bytes


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().partition("=")[::2] for item in raw if item)


@pytest.mark.parametrize("server, app", [("puma", "rack"), ("unicorn", "rails")])
def test_settings_reach_the_real_server_and_are_recorded(server, app):
    """preload and YJIT with 2 workers: the preload is the server's own (Puma says so in its log;
    Unicorn's master holds the Rails app, so it is about as big as a worker: without preload it is a
    third of one), YJIT's variable is in every process's environment, and the start records it."""
    import psutil

    require_server(server)
    spec = ServerSpec(server, app, processes=2, settings={"preload": True, "yjit": True},
                      env={"MALLOC_ARENA_MAX": "2"}, options=("--tag", "arena-test") if server == "puma" else ())
    with start(spec) as running:
        pids = running.procset.pids()
        assert len(pids) == 3
        for pid in pids:
            env = _environ(pid)
            assert env["RUBY_YJIT_ENABLE"] == "1" and env["MALLOC_ARENA_MAX"] == "2"
        if server == "puma":
            assert "* Preloading application" in running.log_path.read_text()
            assert running.argv[-3:-1] == ["--tag", "arena-test"]
        else:
            rss = {pid: psutil.Process(pid).memory_info().rss for pid in pids}
            master = rss.pop(running.proc.pid)
            assert master >= 0.7 * max(rss.values()), (master, rss)
        assert running.described()["settings"] == {"preload": True, "yjit": True}
        with Client(running.host, running.port) as client:
            assert client.get(APPS[app].health).status == 200
    assert_nothing_left(running)
