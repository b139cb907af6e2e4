"""The cost of Arena's timing around a user's app (subjects/wrap): a hello-world app served bare and
wrapped, by the same server on the same pinned CPU, in one run, alternated; per request, the CPU the
server spends (its group's CPU time / requests) and the mean latency at one connection.

    .venv/bin/python benches/wrap_overhead.py [--seconds 3] [--rounds 3]

A WSGI app under gunicorn gthread (1 x 1) and a Rack app under Puma (1 x 1). The bare app sends its
own X-Arena-Pid (the launcher's readiness check reads it); the wrapped one gets it from the wrapper.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arena.drivers import native  # noqa: E402
from arena.drivers.spec import LoadSpec  # noqa: E402
from arena.probe import Probe  # noqa: E402
from arena.servers.launch import ServerSpec, start  # noqa: E402
from arena.subjects import App  # noqa: E402
from arena.subjects.user import user_app  # noqa: E402

WSGI = """\
import os

def bare(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "5")])
    return [b"hello"]

def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "5"), ("X-Arena-Pid", str(os.getpid()))])
    return [b"hello"]
"""
RACK_BARE = 'run ->(env) { [200, { "content-type" => "text/plain", "x-arena-pid" => Process.pid.to_s }, ["hello"]] }\n'
RACK_WRAPPED = 'run ->(env) { [200, { "content-type" => "text/plain" }, ["hello"]] }\n'
SERVER_CPU, LOAD_CPU = 1, 0


def measure(spec: ServerSpec, seconds: float) -> tuple[float, float]:
    """(server CPU µs per request at 8 connections, mean latency µs at 1 connection)."""
    with start(replace(spec, cpus=[SERVER_CPU])) as running:
        figures = []
        for connections in (8, 1):
            probe = Probe(running.procset, interval=0.5).start()
            result = native.run(LoadSpec(url=running.url + "/", connections=connections, duration_s=seconds,
                                         warmup_s=0.5), cpus=[LOAD_CPU])
            used = probe.stop()
            m = result.measured
            figures.append(used.cpu_s / m.completed * 1e6 if connections == 8 else m.response_time.mean)
    return figures[0], figures[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "hello.py").write_text(WSGI)
        (d / "bare").mkdir()
        (d / "bare" / "config.ru").write_text(RACK_BARE)
        (d / "wrapped").mkdir()
        (d / "wrapped" / "config.ru").write_text(RACK_WRAPPED)
        wsgi_bare = App("hello", "python", "wsgi", "hello:app", "bare hello")
        pairs = {
            "gunicorn-gthread, WSGI": (
                ServerSpec("gunicorn-gthread", wsgi_bare, processes=1, threads=1, env={"PYTHONPATH": str(d)}),
                ServerSpec("gunicorn-gthread", user_app("hello:bare", base=d, serves=("wsgi",)), processes=1,
                           threads=1)),
            "puma, Rack": (
                ServerSpec("puma", App("hello", "ruby", "rack", str(d / "bare" / "config.ru"), "bare hello"),
                           processes=1, threads=1),
                ServerSpec("puma", user_app("wrapped", base=d), processes=1, threads=1)),
        }
        print(f"{'server, interface':24} {'CPU/req bare':>13} {'wrapped':>9} {'+µs':>7} "
              f"{'latency bare':>13} {'wrapped':>9} {'+µs':>7}   (medians of {args.rounds} alternated rounds)")
        for name, (bare, wrapped) in pairs.items():
            b, w = [], []
            for _ in range(args.rounds):
                b.append(measure(bare, args.seconds))
                w.append(measure(wrapped, args.seconds))
            bc, bl = (statistics.median(x[i] for x in b) for i in (0, 1))
            wc, wl = (statistics.median(x[i] for x in w) for i in (0, 1))
            print(f"{name:24} {bc:11.1f}µs {wc:7.1f}µs {wc - bc:+7.1f} {bl:11.1f}µs {wl:7.1f}µs {wl - bl:+7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
