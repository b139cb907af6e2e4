"""Does the reported tail survive a server stall? The truth, computed from the schedule, beside
what arena-load's open model reports and what a closed model reports.

A subject server (uvicorn, raw ASGI, one process on CPU 1) gets constant arrivals from arena-load
(CPU 0). Partway through, the server's whole cgroup is frozen for exactly --stall seconds, then
thawed. The truth is computed from the schedule, not from what any tool measured: request i is
due at started_at + i/rate. Two versions bracket it, because the order in which a server works off
its backlog after the thaw is its own business:
- lower bound: a request due while frozen waits until the thaw, then takes the normal response
  time (the run's unstalled median); nothing else is slowed;
- FIFO drain: the server is one FIFO queue serving a request in 1/capacity seconds (capacity
  measured in the same run at saturation) that does nothing while frozen (Lindley's recursion),
  so the backlog drains in arrival order.
The p99 is set by the wait for the thaw, which both share; p90 depends on the drain order.

A closed model with the same connections over the same stall shows why closed-loop tools miss it:
its few connections wait out the stall once each, and everything else is fast.

    python benches/stall_truth.py [--rate 1000] [--duration 10] [--stall 1]
"""

import argparse
import json
import threading
import time

from harness import ARENA_LOAD, need_arena_load, run_pinned
from arena.servers.launch import ServerSpec, start
from arena import stats

SERVER_CPU, LOAD_CPU = 1, 0


def stalled_run(server, argv, stall_at: float, stall: float):
    """Run arena-load; freeze the server ``stall_at`` s after launch for ``stall`` s. Returns the
    result document and the freeze/thaw epoch times."""
    times = {}

    def stall_it():
        time.sleep(stall_at)
        server.procset.freeze()
        times["freeze"] = time.time()
        time.sleep(stall)
        times["thaw"] = time.time()
        server.procset.thaw()

    t = threading.Thread(target=stall_it)
    t.start()
    u = run_pinned(argv, LOAD_CPU)
    t.join()
    return json.loads(u.out), times["freeze"], times["thaw"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=1000)
    p.add_argument("--duration", type=float, default=10)
    p.add_argument("--stall", type=float, default=1.0)
    p.add_argument("--connections", type=int, default=50)
    args = p.parse_args()
    need_arena_load()
    with start(ServerSpec("uvicorn", "asgi", cpus=[SERVER_CPU])) as server:
        url = f"{server.url}/work?cpu_ms=0.1"
        open_argv = [str(ARENA_LOAD), url, "-r", str(args.rate), "-d", f"{args.duration}s", "-c", "1000",
                     "--timeout", "10s"]
        doc, freeze, thaw = stalled_run(server, open_argv, args.duration * 0.4, args.stall)
        m = doc["measured"]
        normal_us = m["latency"]["response_time"]["percentiles"]["50"]
        cap = json.loads(run_pinned([str(ARENA_LOAD), url, "-c", str(args.connections), "-d", "2s"], LOAD_CPU).out)
        capacity = cap["measured"]["rate"]["achieved_rps"]
        service = 1.0 / capacity
        outside = max(normal_us / 1e6 - service, 0.0)
        start_s, issued = doc["started_at"], m["requests"]["issued"]
        lower, fifo, free_at = [], [], 0.0
        for i in range(issued):
            due = start_s + i / args.rate
            lower.append(((thaw - due if freeze <= due < thaw else 0.0) + normal_us / 1e6) * 1e6)
            begin = max(due, free_at)
            if freeze <= begin < thaw:
                begin = thaw  # frozen: nothing is served until the thaw
            free_at = begin + service
            fifo.append((free_at - due + outside) * 1e6)
        reported = m["latency"]["response_time"]["percentiles"]

        closed_argv = [str(ARENA_LOAD), url, "-c", str(args.connections), "-d", f"{args.duration}s", "--timeout", "10s"]
        cdoc, _, _ = stalled_run(server, closed_argv, args.duration * 0.4, args.stall)
        closed = cdoc["measured"]["latency"]["response_time"]["percentiles"]

    print(f"open model {args.rate:g} req/s for {args.duration:g} s, server frozen {thaw - freeze:.3f} s "
          f"(cgroup freezer), {issued} requests, {m['requests']['completed']} answered, {m['requests']['errors']} errors; "
          f"server capacity {capacity:.0f} req/s")
    print(f"{'':28} {'p50':>10} {'p90':>10} {'p99':>10} {'p99.9':>10}")
    row = lambda name, vals: print(f"{name:28} " + " ".join(f"{v / 1000:9.1f}ms" for v in vals))  # noqa: E731
    qs = (0.5, 0.9, 0.99, 0.999)
    low = [stats.quantile(lower, q) for q in qs]
    high = [stats.quantile(fifo, q) for q in qs]
    row("truth: lower bound", low)
    row("truth: FIFO drain", high)
    got = [reported[k] for k in ("50", "90", "99", "99.9")]
    row("arena-load open model", got)
    row(f"closed model, c={args.connections}", [closed[k] for k in ("50", "90", "99", "99.9")])
    print(f"\narena-load open-model p99 vs truth: {(got[2] - low[2]) / low[2]:+.1%} vs the lower bound, "
          f"{(got[2] - high[2]) / high[2]:+.1%} vs FIFO drain (target: within 5%)")
    if not (0.95 * min(low[2], high[2]) <= got[2] <= 1.05 * max(low[2], high[2])):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
