"""The files arena tune writes (servers/deploy.py), read by the servers' own loaders, and served."""

import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from arena.servers import deploy
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(argv: list[str], cwd: Path, port: int):
    """The server started from the written files, in its own session, until its port answers; the
    master process. Stopped (its session) after."""
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
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


def test_the_written_gunicorn_conf_served_runs_the_chosen_processes_and_threads(tmp_path):
    files = deploy.files(deploy.Deployment("gunicorn-gthread", APPS["wsgi"], 2, 3), [])
    port = _free_port()
    conf = files["gunicorn.conf.py"].replace(f'"{deploy.HOST}:8000"', f'"127.0.0.1:{port}"')  # loopback only here
    (tmp_path / "gunicorn.conf.py").write_text(conf)
    gunicorn = Path(sys.executable).parent / "gunicorn"
    with serving([str(gunicorn), "-c", "gunicorn.conf.py", "arena.subjects.python.wsgi:app"], tmp_path, port) as master:
        workers = children(master, 2)
        assert len(workers) == 2
        threads = []
        for _ in range(20):  # gthread starts a worker's pool lazily: send requests until both have
            for _ in range(8):
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/work?cpu_ms=1&io_ms=20")
                c.getresponse().read()
                c.close()
            threads = [w.num_threads() for w in workers]
            if all(n >= 3 for n in threads):
                break
        # gunicorn's gthread worker: its main thread and a pool of ``threads``
        assert all(3 <= n <= 3 + 2 for n in threads), threads


@pytest.mark.skipif(shutil.which("puma") is None, reason="puma is not installed (make install)")
def test_the_written_puma_rb_served_runs_the_chosen_workers_and_threads(tmp_path):
    files = deploy.files(deploy.Deployment("puma", APPS["rack"], 2, 3), [])
    port = _free_port()
    (tmp_path / "puma.rb").write_text(files["puma.rb"].replace(f'"tcp://{deploy.HOST}:9292"', f'"tcp://127.0.0.1:{port}"'))
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
