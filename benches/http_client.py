"""Arena's own HTTP requests (readiness, conformance, a front's check) go through http_client.py, a
thin layer over the standard library's http.client; httpx is the library the issue names. This
prints, in one run, what each costs where Arena pays it:

- import: the CLI pays it on every command that starts a server (fresh interpreters, median of 7);
- a request on a kept-alive connection to a local server (medians of 5 rounds of 2000 GETs), the
  readiness poll's and the conformance checks' cost.

Both clients run against the same local server (Python's http.server, HTTP/1.1, in this process),
pinned to one CPU each where there are two.

    .venv/bin/python benches/http_client.py [--requests 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import http.server
import os
import statistics
import subprocess
import sys
import threading
import time

from harness import ROOT  # noqa: F401  (puts src/ on the path)
from arena.http_client import Client


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms wait for the delayed ACK

    def do_GET(self):  # noqa: N802 (the standard library's name)
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Server-Timing", "app;dur=0.1")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def import_ms(module: str) -> float:
    times = []
    for _ in range(7):
        code = f"import time; t = time.perf_counter(); import {module}; print((time.perf_counter() - t) * 1000)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
        times.append(float(out.stdout))
    return statistics.median(times)


def per_request_us(get, n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        get()
    return (time.perf_counter() - t) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    import httpx

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    if len(os.sched_getaffinity(0)) >= 2:
        os.sched_setaffinity(0, {0, 1})
    ours, theirs = [], []
    with Client("127.0.0.1", port) as c, httpx.Client(base_url=f"http://127.0.0.1:{port}") as h:
        assert c.get("/").status == 200 and h.get("/").status_code == 200
        assert c.get("/").timing() == {"app": 0.1} and h.get("/").headers["server-timing"] == "app;dur=0.1"
        for _ in range(args.rounds):  # alternated, so drift hits both alike
            ours.append(per_request_us(lambda: c.get("/"), args.requests))
            theirs.append(per_request_us(lambda: h.get("/"), args.requests))
    server.shutdown()
    imp_ours, imp_theirs = import_ms("arena.http_client"), import_ms("httpx")
    print(f"{'':28} {'http_client':>12} {'httpx':>10} {'httpx/ours':>11}")
    print(f"{'import, ms (median of 7)':28} {imp_ours:12.1f} {imp_theirs:10.1f} {imp_theirs / imp_ours:11.2f}")
    o, t = statistics.median(ours), statistics.median(theirs)
    print(f"{'GET, us a request (median)':28} {o:12.1f} {t:10.1f} {t / o:11.2f}")


if __name__ == "__main__":
    main()
