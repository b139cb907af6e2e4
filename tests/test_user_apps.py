"""A user's own app: a Rack config.ru, a WSGI and an ASGI callable written into a temp dir, each
served by a real server with Arena's timing around it, measured, stopped with nothing left; the
app's own Server-Timing metric reaching the store; the caller's environment kept from the server;
bad app sources, a crashing app and a missing health path as one-line errors with the log's tail."""

import time
from pathlib import Path

import pytest

from arena.report.data import app_metrics_table
from arena.results.aggregate import aggregate

from arena.app.check import check_one
from arena.errors import ArenaError
from arena.http_client import Client
from arena.plan.parse import parse_experiment
from arena.results.store import Store
from arena.runner import run_experiment
from arena.servers import cgroup
from arena.servers.launch import ServerSpec, start
from arena.subjects.user import app_for, user_app
from tests.conftest import require_server

RACK = """\
class Hello
  def call(env)
    sleep 0.002
    [200, { "content-type" => "text/plain", "server-timing" => "sql.active_record;dur=1.5" }, ["hello from rack"]]
  end
end
run Hello.new
"""

WSGI = """\
import time

def app(environ, start_response):
    time.sleep(0.002)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Server-Timing", "sql.query;dur=1.5")])
    return [b"hello ", b"from wsgi"]

def make():
    return app
"""

ASGI = """\
import asyncio

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await asyncio.sleep(0.002)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"server-timing", b"sql.query;dur=1.5")]})
    await send({"type": "http.response.body", "body": b"hello from asgi"})
"""


@pytest.fixture
def apps(tmp_path) -> Path:
    (tmp_path / "rackapp").mkdir()
    (tmp_path / "rackapp" / "config.ru").write_text(RACK)
    (tmp_path / "pyapp").mkdir()
    (tmp_path / "pyapp" / "hello_wsgi.py").write_text(WSGI)
    (tmp_path / "pyapp" / "hello_asgi.py").write_text(ASGI)
    (tmp_path / "pyapp" / "broken.py").write_text("raise RuntimeError('the app cannot start: no settings')\n")
    # imports alone, fails where a server runs it (the wrapper binds it): the server's log tells why
    (tmp_path / "pyapp" / "served.py").write_text(
        "import os\nif os.environ.get('ARENA_USER_INTERFACE'):\n    raise RuntimeError('the app cannot start: no settings')\n"
        "def app(environ, start_response):\n    start_response('200 OK', [])\n    return [b'ok']\n")
    return tmp_path


def timing(reply) -> dict[str, float]:
    out = {}
    for part in reply.headers["server-timing"].split(","):
        name, _, rest = part.strip().partition(";")
        out[name] = float(rest.removeprefix("dur="))
    return out


def assert_gone(running) -> None:
    assert cgroup.survivors(running.procset.name) == [] and not running.workdir.exists()


CASES = [("puma", "rackapp/config.ru", None, "sql.active_record", b"hello from rack"),
         ("gunicorn-gthread", "hello_wsgi:app", None, "sql.query", b"hello from wsgi"),
         ("gunicorn-gthread", "hello_wsgi:make()", None, "sql.query", b"hello from wsgi"),
         ("uvicorn", "hello_asgi:app", None, "sql.query", b"hello from asgi"),
         ("granian", "hello_asgi:app", "asgi", "sql.query", b"hello from asgi")]


@pytest.mark.integration
@pytest.mark.parametrize("server,source,interface,own,body", CASES)
def test_a_users_app_is_served_with_arenas_timing_around_it_and_its_own_metrics(apps, server, source, interface,
                                                                                own, body):
    require_server(server)
    chdir = None if source.endswith(".ru") else str(apps / "pyapp")
    app = user_app(source, base=apps, chdir=chdir, interface=interface, serves={"puma": ("rack",), "uvicorn": ("asgi",),
                                                                                "granian": ("wsgi", "asgi")}.get(server, ("wsgi",)))
    with start(ServerSpec(server, app, threads=2, strict_knobs=False)) as running:
        with Client(running.host, running.port) as client:
            reply = client.get("/", {"X-Request-Start": f"t={int(time.time() * 1e6)}"})
        t = timing(reply)
        assert reply.status == 200 and reply.body == body
        assert {"queue", "app", "cpu", "cpuwall", own} <= set(t), t
        # the app's own 2 ms sleep: an event loop's timer (uvloop's, libuv's millisecond clock) may end it up
        # to 1 ms early
        least = 2.0 - (1.1 if "asgi" in source else 0.1)
        assert t["app"] >= least and t["cpu"] <= t["cpuwall"] + 0.01 and t["cpu"] < t["app"], t
        assert int(reply.headers["x-arena-pid"]) in running.procset.pids() and reply.headers["x-arena-thread"]
        assert running.cwd == (str(apps / "rackapp") if source.endswith(".ru") else str(apps / "pyapp"))
    assert_gone(running)


@pytest.mark.integration
def test_arena_check_of_a_users_app_passes_and_leaves_nothing(apps):
    require_server("gunicorn-gthread")
    app = app_for("hello_wsgi:app", ("wsgi",), chdir=str(apps / "pyapp"))
    result = check_one("gunicorn-gthread", app, threads=2)
    assert (result.status, result.problems, result.app) == ("pass", [], "hello_wsgi:app")


@pytest.mark.integration
def test_an_experiment_on_a_users_app_stores_its_metrics_and_how_the_server_was_started(apps, tmp_path, monkeypatch):
    require_server("gunicorn-gthread")
    monkeypatch.setenv("GUNICORN_CMD_ARGS", "--workers 7")  # the caller's: must not reach the server
    monkeypatch.setenv("RUBYOPT", "-W0")
    exp = parse_experiment({
        "name": "own", "duration": "1s", "warmup": "200ms", "repetitions": 1, "speed_threshold": 10, "others_threshold": 1,
        "drift_threshold": 10, "load": {"concurrency": [2]},
        "servers": [{"server": "gunicorn-gthread", "threads": 2,
                     "app": {"wsgi": "hello_wsgi:app", "chdir": "pyapp", "health": "/", "warmup": ["/x"]}}],
    }, str(apps / "own.toml"))
    with Store(tmp_path / "s.db") as store:
        counts, run = run_valid(exp, store)
    assert counts.done == 1 and counts.failed == 0 and run.valid, run.flags
    assert run.app == "hello_wsgi:app" and run.label == "gunicorn-gthread[hello_wsgi:app] t=2"
    assert {"app", "cpu", "cpuwall", "sql.query"} <= set(run.load.measured.server_timing)
    assert run.load.measured.server_timing["sql.query"].count == run.load.measured.completed
    env = run.launch["env"]
    assert "GUNICORN_CMD_ARGS" not in env and "RUBYOPT" not in env and env["ARENA_USER_APP"] == "hello_wsgi:app"
    assert run.launch["cwd"] == str(apps / "pyapp") and "arena_wrap:wsgi" in run.launch["argv"]
    assert len(run.load.measured.workers) == 1  # gunicorn's default of one worker, not the caller's 7
    # the report shows the app's own metric beside Arena's parts: 1.5 ms of each request's mean
    (cell,) = aggregate([run])
    assert set(cell.app_metrics) == {"sql.query"} and cell.app_metrics["sql.query"].median == pytest.approx(1.5, abs=0.01)
    table = app_metrics_table([cell])
    assert table.head == ["configuration", "level", "mean response ms", "sql.query ms", "sql.query share"]
    mean_ms = run.load.measured.response_time.mean / 1000
    assert table.rows[0][3] == "1.5" and table.rows[0][4] == f"{100 * 1.5 / mean_ms:.0f}%"


@pytest.mark.integration
def test_the_callers_gunicorn_cmd_args_do_not_change_the_worker_count(monkeypatch):
    require_server("gunicorn-gthread")
    monkeypatch.setenv("GUNICORN_CMD_ARGS", "--workers 7")
    monkeypatch.setenv("WEB_CONCURRENCY", "5")
    with start(ServerSpec("gunicorn-gthread", "wsgi")) as running:
        assert running.knobs["processes"] == 1
        assert len(running.procset.pids()) == 2  # the arbiter and one worker
    assert_gone(running)


@pytest.mark.integration
def test_a_crashing_app_and_a_missing_health_path_are_one_line_errors_with_the_log_tail(apps):
    require_server("gunicorn-gthread")
    crash = user_app("served:app", base=apps, chdir="pyapp", serves=("wsgi",))
    with pytest.raises(ArenaError) as e:
        start(ServerSpec("gunicorn-gthread", crash), ready_timeout=20)
    first, *rest = str(e.value).splitlines()
    assert "gunicorn-gthread (served:app)" in first and "RuntimeError: the app cannot start: no settings (log" in first
    assert any("the app cannot start: no settings" in line for line in rest)
    # an app that does not import, or has no such callable, is refused before a server is given it
    for source, why in (("broken:app", "RuntimeError: the app cannot start: no settings"),
                        ("hello_wsgi:nope", "module 'hello_wsgi' has no attribute 'nope'"),
                        ("hello_wsgi:time", "hello_wsgi:time is not callable")):
        absent = user_app(source, base=apps, chdir="pyapp", serves=("wsgi",))
        with pytest.raises(ArenaError) as e:
            start(ServerSpec("gunicorn-gthread", absent), ready_timeout=20)
        assert str(e.value) == f"--app {source}: does not import from {apps / 'pyapp'}: {why}"
    # a Rack app that answers its health path with 404 is not ready: said once it has answered so four
    # times, long before its ready timeout
    rack = user_app("rackapp", base=apps, health="/nope", ready_timeout_s=30)
    (apps / "rackapp" / "config.ru").write_text("run ->(env) { [404, {}, ['no']] }\n")
    require_server("puma")
    began = time.monotonic()
    with pytest.raises(ArenaError, match=r"^puma \(rackapp\): GET /nope answered 404: give --health PATH"):
        start(ServerSpec("puma", rack))
    assert time.monotonic() - began < 15


def test_bad_app_sources_are_one_line_errors_naming_the_flag(apps):
    with pytest.raises(ArenaError, match=r"^--app: .*missing/config.ru does not exist"):
        user_app("missing/config.ru", base=apps)
    with pytest.raises(ArenaError, match=r"^--app: 'nonsense' is not a built-in app \(wsgi, .*\), a config.ru or module:callable"):
        user_app("nonsense", base=apps)
    with pytest.raises(ArenaError, match=r"^--chdir: .*nowhere is not a directory"):
        user_app("pkg:app", base=apps, chdir="nowhere", serves=("wsgi",))
    with pytest.raises(ArenaError, match=r"^--interface: pkg:app needs a WSGI or ASGI server: the servers serve neither"):
        user_app("pkg:app", base=apps, serves=("rack",))
    with pytest.raises(ArenaError, match=r"^--venv: .* is not a Python environment"):
        user_app("pkg:app", base=apps, venv="pyapp", serves=("wsgi",))
    with pytest.raises(ArenaError, match=r"^--health: must be a path starting with /, got 'health'"):
        user_app("pkg:app", base=apps, health="health", serves=("wsgi",))
    with pytest.raises(ArenaError, match=r"^--chdir: applies to a user's app"):
        app_for("rack", ("rack",), chdir="x")
    assert app_for(None, ("rack",)) is None and app_for("rack", ("rack",)) == "rack"


def test_arena_check_pairs_a_users_app_with_the_servers_of_its_interface(apps):
    from arena.app.check import plan

    user = {"chdir": str(apps / "pyapp")}
    pairs = plan(["puma", "gunicorn-gthread", "waitress"], ["hello_wsgi:app"], user)
    assert [(s, a.name) for s, a in pairs] == [("gunicorn-gthread", "hello_wsgi:app"), ("waitress", "hello_wsgi:app")]
    # without --interface where the servers serve both: the app's own, found by importing it
    assert [s for s, _ in plan(["gunicorn-gthread", "uvicorn"], ["hello_wsgi:app"], user)] == ["gunicorn-gthread"]
    asgi = plan(["gunicorn-gthread", "uvicorn"], ["hello_asgi:app"], {**user, "interface": "asgi"})
    assert [s for s, _ in asgi] == ["uvicorn"]


def test_arena_check_says_which_asked_servers_it_left_out_and_why(apps):
    """`arena check uvicorn gunicorn-sync --app mysite.wsgi:application` silently left uvicorn out
    (3 passed, 0 failed, 0 skipped of 4 asked): each server asked by name that serves none of the
    apps is now a skip with why, told before the checks start."""
    from arena.app.check import planned

    user = {"chdir": str(apps / "pyapp")}
    pairs, left = planned(["uvicorn", "gunicorn-sync"], ["hello_wsgi:app"], user)
    assert [s for s, _ in pairs] == ["gunicorn-sync"]
    assert [(r.server, r.app, r.status, r.problems) for r in left] == [
        ("uvicorn", "hello_wsgi:app", "skip", ["left out: uvicorn serves asgi apps, and hello_wsgi:app is a wsgi app"])]
    assert planned(["puma", "gunicorn-sync"], ["rack"])[1][0].problems == [
        "left out: gunicorn-sync does not serve rack (its apps: wsgi, flask)"]
    assert planned(None, ["hello_wsgi:app"], user)[1] == []  # all servers: only those that can serve it, as before


def test_a_rack_apps_rackup_puts_arenas_timing_first(apps):
    app = user_app("rackapp", base=apps)
    assert app.interface == "rack" and app.name == "rackapp" and app.user.chdir == str(apps / "rackapp")
    text = app.user.rackup()
    assert text.index("use ArenaTiming") < text.index(f"run ArenaTiming.rackup({str(apps / 'rackapp' / 'config.ru')!r})")


def test_an_experiments_app_table_is_checked_with_the_file_and_key(apps):
    def parse(app, server="gunicorn-gthread"):
        return parse_experiment({"name": "e", "load": {"concurrency": [1]}, "servers": [{"server": server, "app": app}]},
                                str(apps / "e.toml"))

    exp = parse({"wsgi": "hello_wsgi:app", "chdir": "pyapp", "name": "hello"})
    assert exp.servers[0].app == "hello" and exp.servers[0].user_app.user.chdir == str(apps / "pyapp")
    with pytest.raises(ArenaError, match=r"e.toml: servers\[0\].app = .*: a table names one of rack"):
        parse({"chdir": "pyapp"})
    with pytest.raises(ArenaError, match=r"e.toml: servers\[0\].app.warmup = 3: must be a list of paths"):
        parse({"wsgi": "hello_wsgi:app", "warmup": 3})
    with pytest.raises(ArenaError, match=r"e.toml: servers\[0\].app = .*puma cannot serve it \(a wsgi app"):
        parse({"wsgi": "hello_wsgi:app", "chdir": "pyapp"}, server="puma")
    with pytest.raises(ArenaError, match=r"e.toml: servers\[0\].app = \"nonsense\": 'nonsense' is not a built-in app"):
        parse("nonsense")


@pytest.fixture
def other_venv(tmp_path) -> Path:
    """A Python environment of the user's holding only uvicorn, whose metadata says 0.30.6 (its code is
    Arena's copy, reached through a .pth file: no download in a test)."""
    import subprocess
    import sys

    import uvicorn

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "arena-servers.pth").write_text(str(Path(uvicorn.__file__).parents[1]) + "\n")
    info = site / "uvicorn-0.30.6.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: uvicorn\nVersion: 0.30.6\n")
    script = venv / "bin" / "uvicorn"
    script.write_text(f"#!{venv}/bin/python\nfrom uvicorn.main import main\nmain()\n")
    script.chmod(0o755)
    return venv


@pytest.mark.integration
def test_a_server_run_from_the_users_venv_is_recorded_with_that_venvs_version(apps, other_venv, tmp_path):
    from arena.app.check import plan
    from arena.servers import catalog

    require_server("uvicorn")
    assert catalog.version("uvicorn") != "0.30.6"
    user = {"chdir": str(apps / "pyapp"), "venv": str(other_venv), "interface": "asgi"}
    # check --venv lists the servers that environment holds, not Arena's
    assert [s for s, _ in plan(None, ["hello_asgi:app"], user)] == ["uvicorn"]
    app = app_for("hello_asgi:app", ("asgi",), **user)
    result = check_one("uvicorn", app)
    assert (result.status, result.version) == ("pass", "0.30.6"), result.problems
    skipped = check_one("hypercorn", app)
    assert (skipped.status, skipped.problems) == ("skip", [f"not installed in {other_venv}"])
    exp = parse_experiment({
        "name": "venv", "duration": "1s", "warmup": "200ms", "repetitions": 1, "speed_threshold": 10, "others_threshold": 1,
        "load": {"concurrency": [1]},
        "servers": [{"server": "uvicorn", "app": {"asgi": "hello_asgi:app", "chdir": "pyapp", "venv": str(other_venv)}}],
    }, str(apps / "venv.toml"))
    with Store(tmp_path / "s.db") as store:
        run_experiment(exp, store)
        (run,) = store.runs("venv")
    assert run.launch["version"] == "0.30.6" and run.launch["version_from"] == str(other_venv)
    assert run.launch["argv"][0] == str(other_venv / "bin" / "uvicorn")
    assert run.environment.servers == {f"uvicorn ({other_venv})": "0.30.6"}


SINATRA = """\
require "sinatra/base"
class Hello < Sinatra::Base
  get("/") { "hello from a bundle" }
end
run Hello
"""


@pytest.mark.integration
def test_a_rack_app_with_its_own_bundle_runs_under_bundle_exec_with_the_bundles_server(tmp_path):
    import subprocess

    from arena.servers.bundle import bundle_of

    require_server("puma")
    app_dir = tmp_path / "sinatra"
    app_dir.mkdir()
    (app_dir / "config.ru").write_text(SINATRA)
    (app_dir / "Gemfile").write_text('source "https://rubygems.org"\ngem "sinatra"\n')
    with pytest.raises(ArenaError, match=r"^--app: .*/Gemfile has no Gemfile.lock .*bundle lock --local"):
        bundle_of(app_dir)
    subprocess.run(["bundle", "lock", "--local"], cwd=app_dir, check=True, capture_output=True)
    with pytest.raises(ArenaError, match=r'^--app: .*/Gemfile.lock does not list puma: .*add gem "puma"'):
        bundle_of(app_dir).version("puma")
    (app_dir / "Gemfile").write_text('source "https://rubygems.org"\ngem "sinatra"\ngem "puma"\n')
    subprocess.run(["bundle", "lock", "--local"], cwd=app_dir, check=True, capture_output=True)
    before = {p.name: p.read_bytes() for p in app_dir.iterdir()}
    app = user_app(str(app_dir), base=tmp_path)
    with start(ServerSpec("puma", app, threads=2, strict_knobs=False)) as running:
        with Client(running.host, running.port) as client:
            reply = client.get("/")
        assert reply.status == 200 and reply.body == b"hello from a bundle" and "app" in timing(reply)
        described = running.described()
    assert described["argv"][:3] == ["bundle", "exec", "puma"]
    assert described["version_from"] == str(app_dir / "Gemfile.lock") and described["version"] == catalog_puma()
    assert described["env"]["BUNDLE_FROZEN"] == "true"
    assert {p.name: p.read_bytes() for p in app_dir.iterdir()} == before  # nothing written into the app's dir
    assert_gone(running)
    # gems the lock names that are not installed: refused before the server starts
    (app_dir / "Gemfile.lock").write_text(before["Gemfile.lock"].decode().replace("sinatra (3.", "sinatra (9."))
    with pytest.raises(ArenaError, match=r"^--app: .*/Gemfile.lock: its gems are not all installed \(bundle check: "
                                         r"The following gems are missing \* sinatra \(9\."):
        start(ServerSpec("puma", app))


def catalog_puma() -> str:
    from arena.servers import catalog

    return catalog.version("puma")


@pytest.mark.integration
def test_a_failed_start_is_stored_with_its_reason_and_counted_as_left_out(apps, tmp_path):
    from arena.app.analysis import analyses
    from arena.app.storage import export
    from arena.report.answer_view import answer_lines

    require_server("gunicorn-gthread")
    exp = parse_experiment({
        "name": "fails", "duration": "1s", "warmup": "200ms", "repetitions": 1, "speed_threshold": 10, "others_threshold": 1,
        "load": {"concurrency": [1, 2]},
        "servers": [{"server": "gunicorn-gthread", "app": {"wsgi": "hello_wsgi:app", "chdir": "pyapp"}},
                    {"server": "gunicorn-sync", "app": {"wsgi": "served:app", "chdir": "pyapp"}}],
    }, str(apps / "fails.toml"))
    store_path = tmp_path / "s.db"
    with Store(store_path) as store:
        counts = run_experiment(exp, store)
        failures = store.failures("fails")
    assert (counts.done, counts.failed) == (2, 2)
    assert [(f.server, f.level, f.stage) for f in sorted(failures, key=lambda f: f.level)] == [
        ("gunicorn-sync", 1.0, "start"), ("gunicorn-sync", 2.0, "start")]
    f = failures[0]
    assert f.reason.startswith("the server did not start: gunicorn-sync (served:app) exited with code")
    assert "RuntimeError: the app cannot start: no settings (log " in f.reason and "\n" not in f.reason
    # the log's tail is kept with it (its last lines: gunicorn's own closing lines after the traceback)
    assert f.log_tail and Path(f.log_path).is_file() and f.log_tail.splitlines()[-1] in Path(f.log_path).read_text()
    (found,) = analyses(str(store_path), "fails")
    left = [line for line in answer_lines(found.answers[0], False) if line.startswith("Left out (not run)")]
    assert left == [f"Left out (not run): 2 runs, {f.reason}"]
    rows = export(str(store_path), "fails", "csv").splitlines()
    assert len(rows) == 1 + 4 and sum(",0," in r and "the app cannot start" in r for r in rows) == 2
    import json

    failed = [d for d in json.loads(export(str(store_path), "fails", "json")) if d.get("failed")]
    assert [d["stage"] for d in failed] == ["start", "start"] and failed[0]["log_tail"]
    # fixed, the next run makes them, and they are no longer left out
    (apps / "pyapp" / "served.py").write_text(WSGI)
    with Store(store_path) as store:
        assert run_experiment(exp, store).done == 2 and store.failures("fails") == []
    (found,) = analyses(str(store_path), "fails")
    # (a run of theirs may still be invalid, as any run on a noisy machine: left out as such, not as not run)
    assert found.answers[0].failed == {}
    assert not any(line.startswith("Left out (not run)") for line in answer_lines(found.answers[0], False))


def test_the_exception_a_log_ends_in_is_read_as_one_line():
    from arena.servers.launch import raised

    python = ("[2026-11-25 12:00:00 +0000] [12] [ERROR] Exception in worker process\nTraceback (most recent call last):\n"
              '  File "/x.py", line 3, in <module>\n    import httpbin\nImportError: first\n\nDuring handling of the '
              "above exception, another exception occurred:\n\nTraceback (most recent call last):\n"
              "ModuleNotFoundError: No module named 'httpbin'\n[2026-11-25 12:00:00 +0000] [12] [INFO] Worker exiting\n")
    assert raised(python) == "ModuleNotFoundError: No module named 'httpbin'"
    ruby = ("/app/config.ru:1:in `block in <main>': undefined local variable or method `nope' for main (NameError)\n"
            "\tfrom /usr/lib/ruby/vendor_ruby/rack/builder.rb:116:in `eval'\n")
    assert raised(ruby) == "NameError: undefined local variable or method `nope' for main"
    assert raised("hypercorn.utils.NoAppError: Cannot load application from 'x:y'") == \
        "hypercorn.utils.NoAppError: Cannot load application from 'x:y'"
    assert raised("starting\nFATAL: could not bind\n") == "FATAL: could not bind"
    assert raised("all is well\n") is None


def test_a_folder_named_like_the_apps_module_without_init_is_warned_about(apps):
    (apps / "pyapp" / "hello_wsgi_pkg").mkdir()
    app = user_app("hello_wsgi_pkg.web:app", base=apps, chdir="pyapp", serves=("wsgi",))
    (warning,) = app.user.warnings
    assert warning.startswith(f"--app hello_wsgi_pkg.web:app: {apps / 'pyapp' / 'hello_wsgi_pkg'} is a folder "
                              "without __init__.py named like the app's module")
    (apps / "pyapp" / "hello_wsgi_pkg" / "__init__.py").write_text("")  # a package: what the user meant
    assert user_app("hello_wsgi_pkg.web:app", base=apps, chdir="pyapp", serves=("wsgi",)).user.warnings == ()
    assert user_app("hello_wsgi:app", base=apps, chdir="pyapp", serves=("wsgi",)).user.warnings == ()


POOLED = """\
import asyncio
import time


def burn(ms):
    end = time.thread_time() + ms / 1000
    while time.thread_time() < end:
        pass


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await asyncio.get_running_loop().run_in_executor(None, burn, 3)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"pooled"})
"""


def run_valid(exp, store):
    """The experiment's one run, and the counts of its first making: a run a busy machine made invalid
    (a neighbour's time, a drift) is taken again, up to twice, as --retake-invalid does (a cell's
    figures are its valid runs')."""
    counts = run_experiment(exp, store)
    for _ in range(2):
        if store.runs(exp.name)[-1].valid:
            break
        run_experiment(exp, store, retake_invalid=True)
    return counts, store.runs(exp.name)[-1]


@pytest.mark.integration
def test_cpu_an_async_app_spends_in_its_thread_pool_is_shown_as_cpu_outside_the_request_thread(apps, tmp_path):
    require_server("uvicorn")
    (apps / "pyapp" / "pooled.py").write_text(POOLED)
    exp = parse_experiment({
        "name": "pooled", "duration": "1500ms", "warmup": "300ms", "repetitions": 1, "speed_threshold": 10, "others_threshold": 1,
        "drift_threshold": 10, "load": {"concurrency": [2]},
        "servers": [{"server": "uvicorn", "app": {"asgi": "pooled:app", "chdir": "pyapp"}}],
    }, str(apps / "pooled.toml"))
    with Store(tmp_path / "s.db") as store:
        _, run = run_valid(exp, store)
    assert run.valid, run.flags
    (cell,) = aggregate([run])
    parts = cell.decomposition
    # the coroutine's own CPU is a small part; the 3 ms burnt in the pool is found by the cgroup
    assert parts["CPU"] < 0.5 and 2.5 <= parts["CPU outside the request thread"] <= 4.5, parts


def test_a_file_that_is_not_a_rack_app_is_refused_when_named(tmp_path):
    (tmp_path / "notes.ru").write_text("just some notes\n")
    (tmp_path / "empty.ru").write_text("")
    (tmp_path / "broken.ru").write_text("run ->(env) { [200, {}, ['x']]\n")
    for name, why in (("notes.ru", "is not a Rack app: it has no run or map statement"),
                      ("empty.ru", "is not a Rack app: it has no run or map statement"),
                      ("broken.ru", "does not parse as Ruby: ")):
        with pytest.raises(ArenaError) as e:
            user_app(name, base=tmp_path)
        assert str(e.value).startswith(f"--app: {tmp_path / name} {why}") and "\n" not in str(e.value)


def test_a_python_apps_interface_is_found_by_importing_it_when_not_given(tmp_path):
    """Where the servers serve both interfaces and none is given: an async callable (a function, or an
    object whose __call__ is one: Starlette, FastAPI) is ASGI, any other callable WSGI; an app that does
    not import says why in one line, before anything asks for an interface."""
    (tmp_path / "a.py").write_text("async def app(scope, receive, send):\n    pass\n"
                                   "class App:\n    async def __call__(self, scope, receive, send):\n        pass\n"
                                   "obj = App()\n")
    (tmp_path / "w.py").write_text("def app(environ, start_response):\n    return []\n"
                                   "class App:\n    def __call__(self, environ, start_response):\n        return []\n"
                                   "obj = App()\n")
    both = ("wsgi", "asgi")
    for source, interface in (("a:app", "asgi"), ("a:obj", "asgi"), ("w:app", "wsgi"), ("w:obj", "wsgi")):
        assert user_app(source, base=tmp_path, serves=both).interface == interface, source
    assert user_app("w:app", base=tmp_path, serves=both, interface="asgi").interface == "asgi"  # given: kept
    with pytest.raises(ArenaError, match=rf"^--app nosuch:app: does not import from {tmp_path}: ModuleNotFoundError: "
                                         "No module named 'nosuch'$"):
        user_app("nosuch:app", base=tmp_path, serves=both)
    with pytest.raises(ArenaError, match=r"^--app a:nope: does not import from .*: module 'a' has no attribute 'nope'"):
        user_app("a:nope", base=tmp_path, serves=both)


REFUSING = """\
def app(environ, start_response):
    if environ["PATH_INFO"] == "/posts":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"posts"]
    if environ["PATH_INFO"] == "/broken":
        start_response("500 Internal Server Error", [("Content-Type", "text/html")])
        return [b"<html>\\n<head><title>We're sorry, but something went wrong (500)</title></head></html>"]
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"no route"]
"""
RAILS_LIKE = """\
run ->(env) {
  if ENV["RAILS_LOG_TO_STDOUT"]  # as Rails' production.rb: the app's log on standard output
    $stdout.puts 'F, [2026-11-28T10:00:00.000000 #1] FATAL -- : [4f1c] ActiveRecord::NoDatabaseError (database "blog" does not exist):'
    $stdout.flush
  end
  [500, {"content-type" => "text/html"}, ["<h1>We're sorry, but something went wrong.</h1>"]]
}
"""


@pytest.mark.integration
def test_an_app_that_answers_its_health_path_with_an_error_ends_the_wait_in_seconds(tmp_path):
    """The app is up and says no: four answers of 400 or more in a row from its own process end the
    start with the status and what to give, not the ready timeout (30 s) later."""
    require_server("gunicorn-sync")
    (tmp_path / "refusing.py").write_text(REFUSING)
    for health, said in ((None, "GET / answered 404: give --health PATH"),
                         ("/broken", "GET /broken answered 500: We're sorry, but something went wrong (500)")):
        app = user_app("refusing:app", base=tmp_path, health=health, serves=("wsgi",))
        began = time.monotonic()
        with pytest.raises(ArenaError, match=r"^gunicorn-sync \(refusing:app\)") as e:
            start(ServerSpec("gunicorn-sync", app))
        assert said in str(e.value).splitlines()[0] and time.monotonic() - began < 10, str(e.value)
    # without --health, an experiment's user app is ready when it answers what is measured
    exp = parse_experiment({"name": "h", "workload": {"path": "/posts"}, "load": {"concurrency": [1]},
                            "servers": [{"server": "gunicorn-sync", "app": {"wsgi": "refusing:app", "chdir": "."}}]},
                           str(tmp_path / "h.toml"))
    assert exp.servers[0].user_app.health == "/posts"
    with start(ServerSpec("gunicorn-sync", exp.servers[0].user_app)) as running:
        with Client(running.host, running.port) as client:
            assert client.get("/posts").status == 200
    given = parse_experiment({"name": "h", "workload": {"path": "/posts"}, "load": {"concurrency": [1]},
                              "servers": [{"server": "gunicorn-sync",
                                           "app": {"wsgi": "refusing:app", "chdir": ".", "health": "/"}}]},
                             str(tmp_path / "h.toml"))
    assert given.servers[0].user_app.health == "/"  # given: kept


@pytest.mark.integration
def test_a_rack_apps_failed_health_names_the_exception_its_rails_log_ends_in(tmp_path):
    require_server("puma")
    (tmp_path / "blog").mkdir()
    (tmp_path / "blog" / "config.ru").write_text(RAILS_LIKE)
    app = user_app("blog", base=tmp_path)
    with pytest.raises(ArenaError) as e:
        start(ServerSpec("puma", app, strict_knobs=False))
    first = str(e.value).splitlines()[0]
    assert first.startswith("puma (blog): GET / answered 500: We're sorry, but something went wrong.: "
                            "ActiveRecord::NoDatabaseError: database \"blog\" does not exist"), first


BLOCKING_ASGI = """\
import time

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    time.sleep(0.02)  # a blocking call inside the event loop
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"blocked"})
"""


@pytest.mark.integration
def test_a_users_asgi_app_that_blocks_its_loop_is_timed_with_the_wait_it_caused(apps):
    """Four clients at once on a user's ASGI app under one uvicorn process: where the app blocks its
    event loop 20 ms a request, those waiting behind it carry Server-Timing `loop` (their wait, not
    their own block); where it awaits its wait, none does."""
    from concurrent.futures import ThreadPoolExecutor

    require_server("uvicorn")
    (apps / "pyapp" / "blocking.py").write_text(BLOCKING_ASGI)

    def waits(source: str) -> list[float]:
        app = user_app(source, base=apps, chdir=str(apps / "pyapp"), serves=("asgi",))
        with start(ServerSpec("uvicorn", app, strict_knobs=False)) as running:
            def ask(_):
                with Client(running.host, running.port) as client:
                    return [timing(client.get("/", {"X-Request-Start": f"t={int(time.time() * 1e6)}"})).get("loop", 0.0)
                            for _ in range(10)]
            with ThreadPoolExecutor(4) as pool:
                return [w for got in pool.map(ask, range(4)) for w in got]

    blocked, awaited = waits("blocking:app"), waits("hello_asgi:app")
    assert sum(w >= 15 for w in blocked) >= 10, blocked  # about one in two waits one block or more
    # typically one or two of the three others' 20 ms blocks ahead of it (time the machine did not run
    # the server, shared with this test's clients, counts too: no exact bound)
    assert 15 <= sorted(blocked)[len(blocked) // 2] <= 65, blocked
    # none waits a block; a machine's rare late wake-up (a few ms, in a VM) is not a block
    assert max(awaited) < 15 and sorted(awaited)[len(awaited) // 2] == 0.0, awaited
