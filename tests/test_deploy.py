"""The files arena tune writes (servers/deploy.py), read by the servers' own loaders, and served."""

import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from arena.servers import catalog, cgroup, deploy
from arena.subjects import APPS


def test_the_written_gunicorn_conf_is_read_by_gunicorns_own_loader(tmp_path):
    files = deploy.files(deploy.Deployment("gunicorn-gthread", APPS["wsgi"], 2, 4), ["capacity 100 req/s"])
    (tmp_path / "gunicorn.conf.py").write_text(files["gunicorn.conf.py"])
    gunicorn = Path(sys.executable).parent / "gunicorn"
    got = subprocess.run([str(gunicorn), "--print-config", "-c", "gunicorn.conf.py", "arena.subjects.python.wsgi:app"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    conf = {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in got.stdout.splitlines())}
    assert (conf["workers"], conf["threads"], conf["worker_class"]) == ("2", "4", "gthread")
    assert files["arena.env"].splitlines()[-1] == "WEB_CONCURRENCY=2"


@pytest.mark.skipif(shutil.which("ruby") is None, reason="ruby is not installed (make install)")
def test_the_written_puma_rb_is_valid_ruby_with_the_chosen_knobs(tmp_path):
    files = deploy.files(deploy.Deployment("puma", APPS["rack"], 3, 6), ["capacity 100 req/s"])
    (tmp_path / "puma.rb").write_text(files["puma.rb"])
    ok = subprocess.run(["ruby", "-c", str(tmp_path / "puma.rb")], capture_output=True, text=True)
    assert ok.returncode == 0 and "Syntax OK" in ok.stdout, ok.stderr
    assert "workers 3\n" in files["puma.rb"] and "threads 6, 6\n" in files["puma.rb"]
    assert set(files["arena.env"].splitlines()[-2:]) == {"WEB_CONCURRENCY=3", "RAILS_MAX_THREADS=6"}


def test_under_a_containers_limits_a_kubernetes_deployment_and_a_docker_run_are_written_that_hold_them(tmp_path):
    """kubernetes.yaml: a Deployment valid by Kubernetes' own schemas (strict), its container's
    requests and limits the limits measured, its convention variables the chosen knobs, each after a
    comment; docker-run.sh: valid sh, docker run with the same limits and variables. Without limits,
    neither is written."""
    import kubernetes_validate
    import yaml
    from kubernetes_validate.utils import latest_version

    from arena.limits import Limits

    d = deploy.Deployment("puma", APPS["rack"], 2, 4, limits=Limits(cpu=0.5, memory_mib=512), directory="ops/arena")
    files = deploy.files(d, ["capacity 100 req/s"])
    doc = yaml.safe_load(files["kubernetes.yaml"])
    kubernetes_validate.validate(doc, latest_version(), strict=True)  # raises ValidationError
    (c,) = doc["spec"]["template"]["spec"]["containers"]
    assert c["resources"] == {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}}
    assert c["env"] == [{"name": "WEB_CONCURRENCY", "value": "2"}, {"name": "RAILS_MAX_THREADS", "value": "4"}]
    assert c["command"] == ["sh", "ops/arena/run.sh"] and c["ports"] == [{"containerPort": 9292}]
    assert "# WEB_CONCURRENCY=2: the processes measured" in files["kubernetes.yaml"]
    assert "# RAILS_MAX_THREADS=4: the threads measured" in files["kubernetes.yaml"]
    (tmp_path / "docker-run.sh").write_text(files["docker-run.sh"])
    assert subprocess.run(["sh", "-n", str(tmp_path / "docker-run.sh")]).returncode == 0
    assert files["docker-run.sh"].splitlines()[-1] == (
        'exec docker run --rm --cpus 0.5 --memory 512m --memory-swap 512m -e WEB_CONCURRENCY=2 -e RAILS_MAX_THREADS=4 '
        '-p 9292:9292 "$image" sh ops/arena/run.sh')
    odd = deploy.files(deploy.Deployment("gunicorn-sync", APPS["wsgi"], 3, None,
                                         limits=Limits(cpu=1.5, cpu_period_s=0.05)), [])
    assert "--cpu-period 50000 --cpu-quota 75000" in odd["docker-run.sh"] and "--memory" not in odd["docker-run.sh"]
    assert yaml.safe_load(odd["kubernetes.yaml"])["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1500m"}, "limits": {"cpu": "1500m"}}
    assert "a 50 ms period" in odd["kubernetes.yaml"]
    assert not {"kubernetes.yaml", "docker-run.sh"} & set(deploy.files(deploy.Deployment("puma", APPS["rack"], 2, 4), []))


def test_a_factory_is_called_by_each_servers_own_means_and_refused_where_it_has_none(tmp_path):
    from arena.subjects.user import user_app

    (tmp_path / "main.py").write_text("def make():\n    return lambda environ, start_response: []\n")
    app = user_app("main:make()", base=tmp_path, interface="wsgi", serves=("wsgi",))
    last = {s: deploy.files(deploy.Deployment(s, app, 1, 1), [])["run.sh"].splitlines()[-1]
            for s in ("waitress", "granian", "hypercorn")}
    assert last["waitress"].endswith("--call main:make") and last["granian"].endswith("--factory main:make")
    assert last["hypercorn"].endswith("'main:make()'")  # its own syntax calls it
    assert "gunicorn.conf.py main:make()" in deploy.files(deploy.Deployment("gunicorn-sync", app, 1, None), [])[
        "run.sh"].replace("'", "")
    with pytest.raises(ValueError, match=r"^uwsgi: its module option names a callable, not a factory"):
        deploy.files(deploy.Deployment("uwsgi", app, 1, 1), [])


def test_the_written_files_bind_the_platforms_port_else_the_usual_one():
    """run.sh bound 8000 whatever $PORT said; the platforms (Heroku, Cloud Run, Render, Fly) give the
    port there. Now run.sh sets PORT=${PORT:-usual} and every server's command or config reads it:
    no written file holds the usual port but that default (the serving tests below bind $PORT)."""
    for server, kind in (("uvicorn", "asgi"), ("waitress", "wsgi"), ("gunicorn-gthread", "wsgi"), ("uwsgi", "wsgi"),
                         ("wsgiref", "wsgi"), ("puma", "rack"), ("unicorn", "rack"), ("thin", "rack")):
        files = deploy.files(deploy.Deployment(server, APPS[kind], 2, 2), [])
        usual = deploy.PORTS[catalog.get_server(server).language]
        lines = files["run.sh"].splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("export PORT="))
        assert lines[at].startswith(f'export PORT="${{PORT:-{usual}}}"') and at < len(lines) - 1, lines
        written = "".join(t for n, t in files.items() if n != "run.sh") + "\n".join(lines[at + 1:])
        own = {"puma": f'ENV.fetch("PORT", "{usual}")', "unicorn": f'ENV.fetch("PORT", "{usual}")',
               "gunicorn-gthread": f'os.environ.get("PORT", "{usual}")'}.get(server)
        if own:  # its own config reads it, with the same default for a start without run.sh
            assert own in written and written.count(str(usual)) == 1, (server, written)
        else:
            assert '"$PORT"' in written or "$(PORT)" in written, (server, written)
            assert str(usual) not in written, (server, written)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(argv: list[str], cwd: Path, port: int):
    """The server started from the written files, in its own session, on the port its config reads
    from $PORT, until that port answers; the master process. Stopped (its session) after."""
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, "PORT": str(port)})
    try:
        for _ in range(400):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None, f"{argv[0]} exited {proc.returncode}"
                time.sleep(0.05)
        yield psutil.Process(proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)


def children(master: psutil.Process, n: int) -> list[psutil.Process]:
    """The master's worker processes, once there are ``n`` (a pre-forking master forks them after it binds)."""
    for _ in range(100):
        found = master.children()
        if len(found) >= n:
            return found
        time.sleep(0.05)
    return master.children()


@pytest.mark.integration
def test_the_written_gunicorn_conf_served_runs_the_chosen_processes_and_threads(tmp_path):
    files = deploy.files(deploy.Deployment("gunicorn-gthread", APPS["wsgi"], 2, 3), [])
    port = _free_port()
    conf = files["gunicorn.conf.py"].replace(f'"{deploy.HOST}:"', '"127.0.0.1:"')  # loopback only here
    (tmp_path / "gunicorn.conf.py").write_text(conf)
    gunicorn = Path(sys.executable).parent / "gunicorn"
    with serving([str(gunicorn), "-c", "gunicorn.conf.py", "arena.subjects.python.wsgi:app"], tmp_path, port) as master:
        workers = children(master, 2)
        assert len(workers) == 2
        def get(_: int) -> None:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/work?io_ms=50")
            c.getresponse().read()
            c.close()

        # gthread grows a worker's pool only when a request finds no idle thread: requests one after
        # another may all be served by its first, so 12 at once, until both workers have been busy
        threads = []
        with ThreadPoolExecutor(12) as clients:
            for _ in range(20):
                list(clients.map(get, range(12)))
                threads = [w.num_threads() for w in workers]
                if all(n >= 3 for n in threads):
                    break
        # gunicorn's gthread worker: its main thread and a pool of ``threads``
        assert all(3 <= n <= 3 + 2 for n in threads), threads


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("puma") is None, reason="puma is not installed (make install)")
def test_the_written_puma_rb_served_runs_the_chosen_workers_and_threads(tmp_path):
    files = deploy.files(deploy.Deployment("puma", APPS["rack"], 2, 3), [])
    port = _free_port()
    (tmp_path / "puma.rb").write_text(files["puma.rb"].replace(f'"tcp://{deploy.HOST}:', '"tcp://127.0.0.1:'))
    with serving(["puma", "-C", "puma.rb", APPS["rack"].target], tmp_path, port) as master:
        workers = children(master, 2)
        assert len(workers) == 2
        # Puma names its pool's threads "puma srv tp 001", ... (the kernel's comm of each task); a worker
        # starts its pool once it has booted, after the master already answers on the port
        pools: list[int] = []
        for _ in range(200):
            pools = [sum(t.read_text().startswith("puma srv tp") for t in Path(f"/proc/{w.pid}/task").glob("*/comm"))
                     for w in workers]
            if pools == [3, 3]:
                break
            time.sleep(0.05)
        assert pools == [3, 3], pools


# ---------------------------------------------------------------------- a user's app, deployed as written

ASGI = """\
async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        await receive()
        await send({"type": "lifespan.startup.complete"})
        await receive()
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"users asgi"})
"""
WSGI = """\
def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"users wsgi"]
"""
RACK = 'run ->(env) { [200, {"content-type" => "text/plain"}, ["users rack"]] }\n'
# (server, the app's kind, chosen processes, threads): every server kind of the user-app matrix
DEPLOYED = [("uvicorn", "asgi", 2, None), ("granian", "asgi", 2, None), ("hypercorn", "asgi", 1, None),
            ("gunicorn-uvicorn", "asgi", 2, None), ("daphne", "asgi", None, None),
            ("gunicorn-gthread", "wsgi", 2, 2), ("waitress", "wsgi", None, 3), ("uwsgi", "wsgi", 2, 2),
            ("granian", "wsgi", 1, 2), ("bjoern", "wsgi", None, None), ("wsgiref", "wsgi", None, None),
            ("puma", "rack", 2, 2), ("unicorn", "rack", 2, None), ("thin", "rack", None, None),
            ("webrick", "rack", None, None), ("passenger", "rack", 1, None)]


def _venv_with(tmp_path: Path, server: str) -> Path:
    """A Python environment of the user's holding the server (its code is Arena's copy, reached through
    a .pth file: nothing downloaded in a test), with the server's script in its bin/."""
    import sysconfig

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "arena-servers.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    exe = catalog.resolve_executable(catalog.get_server(server))
    if exe and Path(exe).parent == Path(sys.executable).parent and Path(exe).name != "python":
        script, target = Path(exe).read_bytes(), venv / "bin" / Path(exe).name
        if script.startswith(b"#!"):  # a console script: the same, run by the venv's interpreter
            target.write_bytes(f"#!{venv}/bin/python\n".encode() + script.split(b"\n", 1)[1])
            target.chmod(0o755)
        else:  # a program (uwsgi): its Python is the venv's through its home
            target.symlink_to(exe)
    return venv


def _path_of(server: str, tmp_path: Path) -> str:
    """PATH without Arena: the system's, and for a Python server outside a venv its own executable alone
    (as a user's installation would put it there)."""
    only = tmp_path / "server-bin"
    only.mkdir(exist_ok=True)
    exe = catalog.resolve_executable(catalog.get_server(server))
    if exe and Path(exe).parent == Path(sys.executable).parent:
        if Path(exe).name == "python":  # a server run by a launcher (serve.py): python3 with the server's package
            (only / "python3").write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
            (only / "python3").chmod(0o755)
        else:
            (only / Path(exe).name).symlink_to(exe)
    return f"{only}:/usr/local/bin:/usr/bin:/bin"


def _app_dir(tmp_path: Path, kind: str, bundled: bool) -> tuple[Path, str]:
    where = tmp_path / "app"
    where.mkdir()
    if kind == "rack":
        (where / "config.ru").write_text(RACK)
        if bundled:
            (where / "Gemfile").write_text('source "https://rubygems.org"\ngem "rack"\ngem "puma"\n')
            subprocess.run(["bundle", "lock", "--local"], cwd=where, check=True, capture_output=True,
                           env={**os.environ, "HOME": str(tmp_path)})
        return where, str(where / "config.ru")
    (where / "main.py").write_text(ASGI if kind == "asgi" else WSGI)
    return where, "main:app"


def _deployed_files(server: str, app, processes, threads, bundled: bool) -> dict[str, str]:
    written = deploy.files(deploy.Deployment(server, app, processes, threads, bundled=bundled), ["evidence"])
    return {n: t.replace(deploy.HOST, "127.0.0.1") for n, t in written.items()}  # loopback only here


# each Python server with and without the user's --venv; each Ruby server without a Gemfile, and
# puma with the app's own bundle (a Gemfile naming it)
OWN = [(*d, own) for d in DEPLOYED for own in (("venv", "no-venv") if d[1] != "rack" else
                                              ("bundle", "no-bundle") if d[0] == "puma" else ("no-bundle",))]


@pytest.mark.integration
@pytest.mark.parametrize("server,kind,processes,threads,own", OWN)
def test_the_written_run_sh_serves_the_users_own_app_from_its_directory(tmp_path, server, kind, processes, threads,
                                                                         own):
    from arena.subjects.user import user_app
    from tests.conftest import require_server

    require_server(server)
    bundled = own == "bundle"
    where, source = _app_dir(tmp_path, kind, bundled)
    venv = _venv_with(tmp_path, server) if kind != "rack" and own == "venv" else None
    app = user_app(source, base=tmp_path, chdir=str(where) if kind != "rack" else None,
                   venv=str(venv) if venv else None, interface=None if kind == "rack" else kind,
                   serves=catalog.get_server(server).interfaces)
    port = _free_port()
    out = tmp_path / "deploy"
    out.mkdir()
    for name, text in _deployed_files(server, app, processes, threads, bundled).items():
        (out / name).write_text(text)
    run_sh = (out / "run.sh").read_text()
    command = run_sh.splitlines()[-1] + "".join(p.read_text() for p in out.iterdir() if p.suffix in (".ini", ".py"))
    assert "arena_wrap" not in command and "arena." not in command  # the user's app, not Arena's wrapper
    assert (source if kind != "rack" else "config.ru") in command
    if venv:
        assert str(venv / "bin") in run_sh
    if bundled:
        assert run_sh.splitlines()[-1].startswith("exec bundle exec puma")
    # what the server leaves in its temporary directory (Passenger's) goes with the test; a short path:
    # Passenger's watchdog makes Unix sockets three levels down it, and a socket's path has 107 bytes
    # at most (under pytest-xdist's popen-gw0/ the test's own directory left too few)
    tmp = Path(tempfile.mkdtemp())
    env = {"PATH": (f"{venv}/bin:" if venv else "") + _path_of(server, tmp_path), "HOME": str(tmp_path),
           "LANG": "C.UTF-8", "TMPDIR": str(tmp), "PORT": str(port)}  # the platform's port: what it binds
    # in a process set of its own: Passenger's watchdog daemonizes out of any session, not out of it
    procset = cgroup.create(server, None)
    proc = subprocess.Popen(["sh", str(out / "run.sh")], cwd=where, env={**env, **procset.env()},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=procset.preexec())
    try:
        body, deadline = None, time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/")
                reply = c.getresponse()
                body = (reply.status, reply.read())
                c.close()
                break
            except OSError:
                time.sleep(0.1)
        assert proc.poll() is None, proc.stdout.read().decode()[-2000:]
        assert body == (200, f"users {kind}".encode()), body
        if processes and processes > 1:  # the chosen workers, forked or spawned after the first answer
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and len(procset.pids()) < processes + 1:
                time.sleep(0.1)
            assert len(procset.pids()) >= processes + 1, [psutil.Process(p).cmdline() for p in procset.pids()]
    finally:
        procset.kill_all()
        proc.wait(timeout=20)
        procset.remove()
        shutil.rmtree(tmp, ignore_errors=True)
        assert not procset.pids()
