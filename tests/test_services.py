"""The services' lifecycle with the real programs: a managed PostgreSQL (initdb, run as an
unprivileged user, seeded) and a downstream HTTP service, each confined like a server, ready when
they answer, stopped without a trace; a crash at start is one line with the log's tail; an
experiment starts them before its servers, probes them with every run and stores what it probed."""

import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

from arena.errors import ArenaError
from arena.http_client import Client, port_free
from arena.results.store import Store
from arena.servers import cgroup
from arena.services import ServiceSpec, start_service
from tests.conftest import require_server
from tests.test_signals import leftovers_of


def gone(svc) -> None:
    assert cgroup.survivors(svc.procset.name) == []
    roots = set(cgroup.v1_roots().values()) | ({cgroup.v2_root()} - {None})
    assert not [d for r in roots for d in r.glob(svc.procset.name)]


@pytest.mark.integration
def test_postgres_starts_seeded_and_leaves_nothing():
    import psycopg

    with start_service(ServiceSpec("postgres", {"rows": 1000, "max_connections": 12}), [1]) as pg:
        assert pg.procset.pids() and all(os.sched_getaffinity(p) == {1} for p in pg.procset.pids())
        assert all(Path(f"/proc/{p}").stat().st_uid != 0 for p in pg.procset.pids())  # not root
        with psycopg.connect(pg.dsn) as c:
            count, total, first = c.execute("SELECT count(*), sum(price), min(name) FROM items").fetchone()
            assert c.execute("SHOW max_connections").fetchone() == ("12",)
            assert c.execute("SELECT count(*) FROM items WHERE category = 7").fetchone() == (10,)
        # the deterministic table: price = (id * 7919 mod 10000) / 100
        assert (count, total) == (1000, sum(Decimal(i * 7919 % 10000) / 100 for i in range(1, 1001)))
        workdir, port = pg.workdir, pg.port
    assert not workdir.exists() and port_free("127.0.0.1", port)
    gone(pg)


@pytest.mark.integration
def test_a_postgres_that_cannot_start_is_one_error_with_its_log_and_leaves_nothing():
    before = set(Path("/tmp").glob(f"{cgroup.PREFIX}{os.getpid()}-*-postgres-*"))
    with pytest.raises(ArenaError) as e:
        start_service(ServiceSpec("postgres", {"shared_buffers": "100000GB"}), [1])
    first, heading, *tail = str(e.value).splitlines()
    # the first line says why, from the log: PostgreSQL's FATAL line
    assert first.startswith("service postgres: postgres exited with code 1 before it was ready: ") and "FATAL" in first
    assert heading == "last lines of its log:" and tail
    assert set(Path("/tmp").glob(f"{cgroup.PREFIX}{os.getpid()}-*-postgres-*")) == before


def test_a_temporary_directory_postgres_cannot_reach_is_said_before_anything_starts(monkeypatch):
    """PostgreSQL runs as its own user: a TMPDIR under a directory only root may enter (as pytest's
    own) failed in initdb, 'Permission denied' in its log; it is now one line naming TMPDIR."""
    import pwd
    import shutil
    import tempfile

    from arena.services import postgres

    try:
        user = pwd.getpwnam(postgres.USER)
    except KeyError:
        pytest.skip(f"no user {postgres.USER}")
    base = Path(tempfile.mkdtemp(dir="/tmp"))  # every user may enter it; root alone the one below
    try:
        base.chmod(0o755)
        private, tmp = base / "private", base / "private" / "tmp"
        private.mkdir(mode=0o700)
        tmp.mkdir(mode=0o1777)
        assert postgres.reaches(user, Path("/tmp")) and postgres.reaches(user, base)
        assert not postgres.reaches(user, tmp)
        os.chown(private, user.pw_uid, user.pw_gid)  # its owner may enter it, whatever the others may
        assert postgres.reaches(user, tmp)
        os.chown(private, 0, 0)
        monkeypatch.setattr(tempfile, "tempdir", str(tmp))
        with pytest.raises(ArenaError, match=rf"^service postgres: the temporary directory {tmp} \(TMPDIR\) is out of "
                                             rf"reach of user '{postgres.USER}', who runs PostgreSQL: set TMPDIR to a "
                                             r"directory every user can enter, such as /tmp$"):
            start_service(ServiceSpec("postgres", {}), [1])
        assert list(tmp.iterdir()) == []  # nothing made, nothing left
    finally:
        shutil.rmtree(base)


@pytest.mark.integration
def test_the_downstream_service_answers_with_the_latency_asked_for():
    require_server("uvicorn")
    with start_service(ServiceSpec("http", {"distribution": "lognormal", "sigma": 0.5}), [1]) as api:
        assert api.env["ARENA_API_DIST"] == "lognormal" and api.env["ARENA_API_URL"] == api.server.url
        with Client(api.server.host, api.server.port) as c:
            r = c.get("/work?io_ms=15&bytes=300")
        assert r.status == 200 and len(r.body) == 300 and "io;dur=" in r.headers["server-timing"]
    gone(api)


EXPERIMENT = """
name = "with-services"
duration = "1s"
speed_threshold = 10  # not about the machine (test_runner_seams.py is): a spell must not fail it,
others_threshold = 1  # nor a neighbour
warmup = "0s"
repetitions = 1
[workload]
path = "/work?cpu_ms=1"
[load]
concurrency = [2]
[[services]]
kind = "postgres"
rows = 500
[[services]]
kind = "http"
[[servers]]
server = "puma"
threads = 2
"""


@pytest.mark.integration
def test_an_experiment_starts_its_services_first_and_stores_their_resources(tmp_path):
    require_server("puma")
    (tmp_path / "e.toml").write_text(EXPERIMENT)
    r = subprocess.run([sys.executable, "-m", "arena", "run", str(tmp_path / "e.toml"), "--store", str(tmp_path / "s.db")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    with Store(tmp_path / "s.db") as s:
        (run,) = s.runs("with-services")
    assert set(run.services) == {"postgres", "http"}
    for res in run.services.values():
        assert res.window_s == pytest.approx(1.0, abs=0.2) and res.pss_bytes > 0 and res.cpu_s is not None
    pg = run.environment.services["postgres"]
    assert pg.startswith("PostgreSQL 15") and "500 rows" in pg and "127.0.0.1" not in pg  # the same every run
    assert "postgres" not in subprocess.run(["ps", "-eo", "comm"], capture_output=True, text=True).stdout.split()


@pytest.mark.integration
def test_a_killed_arena_s_database_is_reaped(tmp_path):
    import signal

    from tests.test_signals import wait_for_load

    require_server("puma")
    (tmp_path / "e.toml").write_text(EXPERIMENT.replace('duration = "1s"', 'duration = "5s"'))
    proc = subprocess.Popen([sys.executable, "-m", "arena", "run", str(tmp_path / "e.toml"), "--store",
                             str(tmp_path / "s.db")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    wait_for_load(proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert any("-postgres" in x for x in leftovers_of(proc.pid))
    reap = subprocess.run([sys.executable, "-m", "arena", "reap"], capture_output=True, text=True, timeout=60)
    assert reap.returncode == 0 and "-postgres" in reap.stdout
    deadline = time.monotonic() + 10  # a killed process leaves /proc when its parent has waited for it
    while leftovers_of(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leftovers_of(proc.pid) == []


@pytest.fixture(scope="module")
def services_env():
    from arena.services import started_services

    with started_services(["postgres", "http"], [1]) as env:
        yield env


@pytest.mark.integration
@pytest.mark.parametrize("app", ["wsgi", "asgi", "flask", "rack", "sinatra", "rails"])
def test_every_app_implementation_serves_db_and_api(app, services_env):
    """The /db and /api checks of the contract against each implementation, pointed at a real
    PostgreSQL and a real downstream service (two processes or threads, so the pool is per process)."""
    from arena.servers.launch import ServerSpec, start
    from arena.subjects import conformance
    from tests.test_servers_integration import APP_SERVER

    require_server(APP_SERVER[app])
    with start(ServerSpec(APP_SERVER[app], app, threads=2, strict_knobs=False, env=services_env)) as running:
        failures = conformance.run(running.host, running.port, app, server=running.server.name,
                                   pids=running.procset.pids, services={"postgres", "http"})
    assert [str(f) for f in failures] == []


@pytest.mark.integration
def test_a_pool_that_cannot_serve_in_time_is_a_503_naming_the_pool(services_env):
    """One connection per process, a 1 s wait: while a 3 s query holds it, a second request gets the
    one-line 503 (and a database that refuses connections would give its own line the same way)."""
    import threading

    from arena.servers.launch import ServerSpec, start

    require_server("gunicorn-gthread")
    env = {**services_env, "ARENA_POOL": "1", "ARENA_POOL_TIMEOUT": "1"}
    with start(ServerSpec("gunicorn-gthread", "wsgi", processes=1, threads=2, env=env, cpus=[1])) as s:
        with Client(s.host, s.port) as warm:
            assert warm.get("/db").status == 200  # the pool exists and holds its one connection
        def hold() -> None:  # a 3 s query on the one connection
            with Client(s.host, s.port, timeout=30) as c:
                c.get("/db?q=sleep&ms=3000")

        slow = threading.Thread(target=hold)
        slow.start()
        import psycopg
        with psycopg.connect(env["ARENA_DATABASE_URL"], autocommit=True) as watch:  # until the query runs
            deadline = time.monotonic() + 10
            while not watch.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%'"
                                    ).fetchone()[0]:
                assert time.monotonic() < deadline, "the slow query never started"
                time.sleep(0.02)
        with Client(s.host, s.port, timeout=30) as c:
            r = c.get("/db")
        slow.join()
    assert r.status == 503 and r.body == b"db: no pooled connection within 1 s (pool of 1 per process)\n"


@pytest.mark.integration
def test_a_pool_axis_runs_against_the_real_database(tmp_path):
    """pool = [1, "threads"] with a /db workload: each configuration's app gets its pool size, the
    runs store it with processes x pool, and the Server-Timing pool and db figures reach the store."""
    require_server("puma")
    (tmp_path / "e.toml").write_text('name = "pools"\nduration = "1s"\nspeed_threshold = 10\nothers_threshold = 1\nwarmup = "300ms"\nrepetitions = 1\n'
                                     '[workload]\npath = "/db?q=range&rows=5"\n[load]\nconcurrency = [4]\n'
                                     '[[services]]\nkind = "postgres"\nrows = 1000\n'
                                     '[[servers]]\nserver = "puma"\nprocesses = 2\nthreads = 4\npool = [1, "threads"]\n')
    r = subprocess.run([sys.executable, "-m", "arena", "run", str(tmp_path / "e.toml"), "--store", str(tmp_path / "s.db")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    with Store(tmp_path / "s.db") as s:
        runs = sorted(s.runs("pools"), key=lambda run: run.pool)
    assert [(run.pool, run.db_connections) for run in runs] == [(1, 2), (4, 8)]
    for run in runs:
        timing = run.load.measured.server_timing
        assert {"pool", "db"} <= set(timing) and run.load.measured.completed > 50
    # four clients on one connection per process wait for it; with a connection per thread, hardly
    assert runs[0].load.measured.server_timing["pool"].mean > runs[1].load.measured.server_timing["pool"].mean
    assert all(run.db_max_connections == 100 and run.db_refused == 0 and run.database.note() is None for run in runs)


@pytest.mark.integration
def test_more_connections_than_max_connections_are_refusals_counted_not_a_hang(tmp_path):
    """2 processes x a pool of 4 against max_connections 5: the database refuses the extra
    connections, the app answers those requests 503 at once, the run ends on time, and the store
    keeps the refusals PostgreSQL logged (the count and the first message) beside processes x pool."""
    require_server("puma")
    (tmp_path / "e.toml").write_text('name = "too-many"\nduration = "1s"\nwarmup = "200ms"\nrepetitions = 1\n'
                                     '[workload]\npath = "/db?q=point"\n[load]\nconcurrency = [8]\n'
                                     '[[services]]\nkind = "postgres"\nrows = 100\nmax_connections = 5\n'
                                     '[[servers]]\nserver = "puma"\nprocesses = 2\nthreads = 4\npool = 4\n')
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "arena", "run", str(tmp_path / "e.toml"), "--store", str(tmp_path / "s.db")],
                       capture_output=True, text=True, timeout=300)
    assert time.monotonic() - started < 120, "the run must end on its own bound"
    assert r.returncode in (0, 1), r.stdout + r.stderr  # 1: the errors make the run invalid
    with Store(tmp_path / "s.db") as s:
        (run,) = s.runs("too-many")
    m = run.load.measured
    assert run.db_connections == 8 and run.db_max_connections == 5
    assert run.db_refused > 0 and "too many clients" in run.db_refused_first
    assert m.completed > 0 and m.status.get(503, 0) > 0  # refused requests are 503s, served ones 200
    note = run.database.note()
    assert note.startswith(f"the database refused {run.db_refused} connection(s) (processes x pool = 8 > max_connections 5)")
    assert "the database refused" in r.stdout
