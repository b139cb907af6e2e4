"""What the benchmarks share: a static nginx pinned to one CPU, and running a command pinned to
another CPU while reading its own CPU time and peak RSS from wait4 (no sampling, no guessing)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARENA_LOAD = Path(os.environ.get("ARENA_LOAD_BIN", ROOT / "target" / "release" / "arena-load"))  # as the native driver
sys.path.insert(0, str(ROOT / "src"))

from arena.http_client import free_port, port_free  # noqa: E402

NGINX_CONF = """
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 100000000;
    keepalive_timeout 60s;
    # a client asking for gzip gets a compressed, chunked answer (no Content-Length): the chunked path
    gzip on;
    gzip_min_length 1;
    server {{
        listen {host}:{port};
        root {dir}/www;
        # the headers a subject app sends, so the generator's full recording path runs
        add_header Server-Timing "app;dur=0.120, cpu;dur=0.080, cpuwall;dur=0.090, io;dur=0.000" always;
        add_header X-Arena-Pid 4242 always;
    }}
}}
"""


@dataclass
class Usage:
    out: str
    err: str
    cpu_s: float
    max_rss_kib: int
    wall_s: float
    code: int


def run_pinned(argv: list[str], cpu: int, timeout: float = 600) -> Usage:
    """Run ``argv`` on CPU ``cpu``; its own user+system CPU and peak RSS come from wait4."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
        deadline = time.monotonic() + timeout
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                pid, status, ru = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Usage(out.read().decode(), err.read().decode(), ru.ru_utime + ru.ru_stime, ru.ru_maxrss,
                     time.monotonic() - t0, proc.returncode)


@contextlib.contextmanager
def nginx(cpu: int, host: str = "127.0.0.1"):
    """A static nginx (one worker) on CPU ``cpu``, listening on ``host``; yields its URL."""
    if shutil.which("nginx") is None:
        sys.exit("benchmark: nginx is not installed (apt-get install -y nginx)")
    d = Path(tempfile.mkdtemp(prefix="arena-bench-nginx-"))
    d.chmod(0o755)  # nginx's workers run as www-data: they must be able to read the page
    (d / "www").mkdir()
    (d / "www" / "index.html").write_text("<html><body>arena static page for load generator benchmarks</body></html>\n")
    port = free_port(host)
    (d / "nginx.conf").write_text(NGINX_CONF.format(dir=d, port=port, host=host))
    proc = subprocess.Popen(["nginx", "-c", str(d / "nginx.conf"), "-p", str(d)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while port_free(host, port):
            if proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"benchmark: nginx did not start: {(d / 'error.log').read_text()}")
            time.sleep(0.05)
        yield f"http://{host}:{port}/index.html"
    finally:
        proc.send_signal(signal.SIGQUIT)  # nginx: graceful stop of master and worker
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(d, ignore_errors=True)


def need_arena_load() -> None:
    if not ARENA_LOAD.exists():
        sys.exit(f"benchmark: {ARENA_LOAD} is missing: run `make build` first")


def median(xs: list[float]) -> float:
    s = sorted(xs)
    return (s[(len(s) - 1) // 2] + s[len(s) // 2]) / 2
