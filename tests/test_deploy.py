"""The files arena tune writes (servers/deploy.py), read by the servers' own loaders, and served."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
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


def test_the_written_gunicorn_conf_served_runs_the_chosen_processes_and_threads(tmp_path):
    files = deploy.files(deploy.Deployment("gunicorn-gthread", APPS["wsgi"], 2, 3), [])
    port = _free_port()
    conf = files["gunicorn.conf.py"].replace(f'"{deploy.HOST}:8000"', f'"127.0.0.1:{port}"')  # loopback only here
    (tmp_path / "gunicorn.conf.py").write_text(conf)
    gunicorn = Path(sys.executable).parent / "gunicorn"
    proc = subprocess.Popen([str(gunicorn), "-c", "gunicorn.conf.py", "arena.subjects.python.wsgi:app"], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        master = psutil.Process(proc.pid)
        workers = []
        for _ in range(200):  # until both workers have started their thread pools (a request each)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            except OSError:
                time.sleep(0.05)
                continue
            workers = master.children()
            if len(workers) == 2:
                break
            time.sleep(0.05)
        assert len(workers) == 2
        import http.client

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
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
