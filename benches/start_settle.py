"""How long must a server's process set stay unchanged before it counts as started? Every server of
the catalog that is installed is started several times, 8 processes (4 threads where it has them),
on CPU 1, without a quota and under a quota of half a CPU (the master forking while its workers
import competes for it); from its first answer its process set is read every 5 ms until 1.5 s past
that answer (or past the server's ready_floor_s), in place of the start's own settle wait
(launch._wait_settled).

For each settle time, the start is ready at the first instant its set has been unchanged that long
since the first answer (and past the server's ready_floor_s, as the start itself); a change after that
instant is a late one: a worker that appeared (or went) after the start was declared done. Printed
per server: the largest gap between two changes of its start-up burst (from the first answer, changes
less than a second apart), and the starts with a late change at the settle time in use
(launch.SETTLE_S) and at the 0.5 s it replaced. Passenger's helpers 2 and 3 s after its launch are
its own (its ready_floor_s covers the first, the second is a helper that comes and goes while a run
warms up) and count the same at both.

    .venv/bin/python benches/start_settle.py [--starts 5]
"""

from __future__ import annotations

import argparse
import time

from harness import ROOT  # noqa: F401  (harness puts src/ on the path)
from arena.limits import Limits
from arena.servers import catalog, launch
from arena.servers.launch import ServerSpec, start

WATCH_S = 1.5  # the set is watched this long past the first answer, or past the floor if later
BEFORE = 0.5  # the settle time this one replaced
BURST_S = 1.0  # changes this close follow each other in one start-up burst


def ready_at(answer: float, changes: list[float], floor: float, settle_s: float) -> float:
    """When the start's settle rule (unchanged ``settle_s`` since the first answer, and past ``floor``)
    declares the set started, given the instants it changed (seconds after launch)."""
    since = answer
    for c in changes:
        if max(since + settle_s, floor) <= c:
            break
        since = c
    return max(since + settle_s, floor)


def observe(spec: ServerSpec) -> tuple[float, list[float], float]:
    """(first answer, the set's changes after it, the floor): seconds after launch."""
    seen: dict = {}

    def watch(running, deadline, name):
        t0 = running.started_at
        seen["answer"] = time.monotonic() - t0
        floor = t0 + running.server.ready_floor_s
        pids, changes, end = sorted(running.procset.pids()), [], max(time.monotonic(), floor) + WATCH_S
        while time.monotonic() < end:
            time.sleep(0.005)
            now = sorted(running.procset.pids())
            if now != pids:
                changes.append(time.monotonic() - t0)
                pids = now
        seen["changes"] = changes

    real, launch._wait_settled = launch._wait_settled, watch
    try:
        start(spec).stop()
    finally:
        launch._wait_settled = real
    return seen["answer"], seen["changes"], catalog.CATALOG[spec.server].ready_floor_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=5, help="starts per server and quota (default 5)")
    args = ap.parse_args()
    print(f"{'server':17} {'quota':>5} {'largest gap':>12} {'late at ' + format(launch.SETTLE_S, 'g') + ' s':>12} "
          f"{'late at ' + format(BEFORE, 'g') + ' s':>12}")
    worst, late_now, late_before, starts = 0.0, 0, 0, 0
    for name, server in catalog.CATALOG.items():
        if not catalog.available(server):
            continue
        knobs = {k: v for k, v in (("processes", 8), ("threads", 4)) if k in server.knobs}
        for quota in (None, 0.5):
            gaps, now, before = [], 0, 0
            for _ in range(args.starts):
                answer, changes, floor = observe(ServerSpec(name, **knobs, cpus=[1], limits=Limits(cpu=quota)))
                steps = [b - a for a, b in zip([answer] + changes, changes)]
                gaps += steps[:next((i for i, g in enumerate(steps) if g > BURST_S), len(steps))]
                now += any(c > ready_at(answer, changes, floor, launch.SETTLE_S) for c in changes)
                before += any(c > ready_at(answer, changes, floor, BEFORE) for c in changes)
            gap = max(gaps, default=0.0)
            print(f"{name:17} {quota or '-':>5} {gap * 1000:9.0f} ms {now:>8}/{args.starts} {before:>8}/{args.starts}")
            if not server.ready_floor_s:  # a floor waits for what comes late (Passenger's helpers)
                worst = max(worst, gap)
            late_now, late_before, starts = late_now + now, late_before + before, starts + args.starts
    print(f"all: largest gap {worst * 1000:.0f} ms (servers without a ready floor); starts with a late change {late_now}/{starts} at "
          f"{launch.SETTLE_S:g} s, {late_before}/{starts} at {BEFORE:g} s")


if __name__ == "__main__":
    main()
