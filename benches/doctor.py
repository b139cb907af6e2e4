"""Every detector of results/why against a reproduction of its pathology and a healthy control, then
the quick demo's cells (no finding expected) and what the detectors cost.

Per detector, one experiment with two configurations, run for real: the reproduction must be found,
the control must not be (examples/why/). Nagle x delayed ACK: a two-message ASGI app under uvicorn on
asyncio and h11, 2 workers against 1. CPU throttling: Puma 2x4 on one CPU at 4 clients of 5 ms CPU,
under a 0.5-core quota against none. OOM kills: gunicorn-sync 2 workers retaining 1 MiB a request
(/leak) at 50 requests a second, under a 120 MiB limit against 512 MiB (about 200 MiB kept).
Worker restarts: a 1.5 s request under gunicorn's --timeout 1 against 30. Connection churn:
gunicorn gthread with a keep-alive of 0 against its 2 s. Listen-queue overflow: one gunicorn sync
worker at 32 reconnecting clients with a backlog of 1 against 2048. GC pauses: a WSGI app whose
lists reach the old generation against one that makes bytes the collector does not track.
Event-loop blocking: Arena's ASGI subject under one uvicorn process at 4 clients, a 20 ms wait that
holds the loop (io=block) against one that yields (io=sleep): one configuration, two workloads.
Keep-alive unfairness: Puma 1x8 at 200 kept-alive clients against gunicorn gthread 1x8. Threads
pinned by streams: a 230 ms stream held 6 at once on gunicorn gthread 1x2 against uvicorn. Then the detectors over the demo's store (``--demo-store``, default
arena.db where `make demo` left it: skipped where there is none), and their cost: diagnose() over
each store against the runs' measured seconds, and one read of the sockets (sockets.nodelay) per run.

    .venv/bin/python benches/doctor.py [--demo-store arena.db]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arena.app.storage import results  # noqa: E402
from arena.results.store import Store  # noqa: E402
from arena.results.why.diagnose import diagnose  # noqa: E402

EXAMPLES = ROOT / "examples" / "why"  # each detector's reproduction beside its control (docs/why.md)
CASES = {  # detector: (experiment file, the configuration that has it, the control; or the workload's too)
    "nagle": ("nagle.toml", "uvicorn[twomsg:app] p=2 loop=asyncio http=h11", "uvicorn[twomsg:app] p=1 loop=asyncio http=h11"),
    "throttling": ("quota.toml", "puma[rack] p=2 t=4 cpu=0.5", "puma[rack] p=2 t=4"),
    "oom": ("leak.toml", "gunicorn-sync[wsgi] p=2 mem=120MiB", "gunicorn-sync[wsgi] p=2 mem=512MiB"),
    "restarts": ("timeout.toml", "gunicorn-sync[wsgi] p=2 worker_timeout=1", "gunicorn-sync[wsgi] p=2 worker_timeout=30"),
    "backlog": ("backlog.toml", "gunicorn-sync[wsgi] p=1 options='--backlog 1'",
                "gunicorn-sync[wsgi] p=1 options='--backlog 2048'"),
    "gc": ("gc.toml", "gunicorn-gthread[gcapp:heavy] p=1 t=2", "gunicorn-gthread[gcapp:light] p=1 t=2"),
    "churn": ("churn.toml", "gunicorn-gthread[wsgi] p=1 t=4 keepalive_timeout=0",
              "gunicorn-gthread[wsgi] p=1 t=4 keepalive_timeout=2"),
    "loop": ("loop.toml", "uvicorn[asgi] p=1 block", "uvicorn[asgi] p=1 yield"),
    "keepalive": ("keepalive.toml", "puma[rack] p=1 t=8", "gunicorn-gthread[wsgi] p=1 t=8"),
    "pinned": ("pinned.toml", "gunicorn-gthread[wsgi] p=1 t=2", "uvicorn[asgi] p=1"),
}


def at(finding) -> tuple[str, str]:
    """Where a finding is, as CASES names it: its configuration, or its configuration and workload."""
    return finding.label, f"{finding.label} {finding.workload}"


def cost(store: Store, name: str) -> tuple[float, float]:
    """(seconds diagnose() takes over the experiment's cells, best of 5; its runs' measured seconds)."""
    res = results(store, name)
    took = []
    for _ in range(5):
        t0 = time.perf_counter()
        diagnose(res.cells)
        took.append(time.perf_counter() - t0)
    return min(took), sum(r.resources.window_s for r in res.runs if r.resources)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demo-store", default=str(ROOT / "arena.db"))
    args = ap.parse_args()
    ok = True
    spent = measured = 0.0
    w = max(len(label) for _, sick, healthy in CASES.values() for label in (sick, healthy))
    print(f"{'detector':<11} {'reproduction':<{w}} {'found':>6} | {'control':<{w}} {'clean':>6}")
    with tempfile.TemporaryDirectory(prefix="arena-doctor-") as tmp:
        store_path = str(Path(tmp) / "doctor.db")
        for key, (file, sick, healthy) in CASES.items():
            exp = EXAMPLES / file
            ran = subprocess.run([str(ROOT / ".venv" / "bin" / "arena"), "run", str(exp), "--store", store_path],
                                 cwd=tmp, capture_output=True, text=True)
            if ran.returncode not in (0, 1):  # 1: a run invalid (the OOM case's is)
                sys.exit(f"benchmark: arena run {file} failed: {ran.stderr.strip().splitlines()[-1:]}")
            name = tomllib.loads(exp.read_text())["name"]
            with Store(store_path) as store:
                found = diagnose(results(store, name).cells).found
                took, window = cost(store, name)
            spent, measured = spent + took, measured + window
            hit = any(f.key == key and sick in at(f) for f in found)
            false = [f for f in found if healthy in at(f) or f.key != key]
            ok = ok and hit and not false
            print(f"{key:<11} {sick:<{w}} {'yes' if hit else 'MISSED':>6} | {healthy:<{w}} "
                  f"{'yes' if not false else 'NO: ' + ', '.join(f.key for f in false):>6}")
    demo = Path(args.demo_store)
    if demo.is_file():
        with Store(str(demo)) as store:
            names = [e["name"] for e in store.experiments()]
            found = [f for n in names for f in diagnose(results(store, n).cells).found]
            for n in names:
                took, window = cost(store, n)
                spent, measured = spent + took, measured + window
        ok = ok and not found
        print(f"\nthe demo's store ({demo}, {len(names)} experiment(s)): "
              + ("no finding" if not found else f"{len(found)} finding(s): " + "; ".join(f.line for f in found)))
    else:
        print(f"\nthe demo's store: {demo} is not there (make demo writes it); not checked")
    per_read = socket_read_s()
    runs = 2 * len(CASES)
    share = (spent + runs * per_read) / measured if measured else 0.0
    print(f"cost: diagnose() {1000 * spent:.1f} ms and {runs} socket reads of {1000 * per_read:.2f} ms each, over "
          f"{measured:.0f} s of measured runs: {100 * share:.3f}% (goal under 1%)")
    return 0 if ok and share < 0.01 else 1


def socket_read_s(connections: int = 64) -> float:
    """What one read of the server's sockets (sockets.nodelay) takes, with ``connections`` accepted
    connections held by this process (best of 5)."""
    import os
    import socket

    from arena.sockets import nodelay

    with socket.create_server(("127.0.0.1", 0)) as srv:
        port = srv.getsockname()[1]
        pairs = []
        for _ in range(connections):
            pairs.append(socket.create_connection(("127.0.0.1", port)))
            pairs.append(srv.accept()[0])
        took = []
        for _ in range(5):
            t0 = time.perf_counter()
            got = nodelay([os.getpid()], port)
            took.append(time.perf_counter() - t0)
        for s in pairs:
            s.close()
    if got.checked != connections:
        sys.exit(f"benchmark: the socket read saw {got.checked} of {connections} connections ({got.unchecked})")
    return min(took)


if __name__ == "__main__":
    sys.exit(main())
