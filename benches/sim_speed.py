"""The simulator's speed: simulated requests per second on one instance, and the wall time of a
recommendation by simulation (arena recommend --sim's search: every processes x threads point of
the grid, 104 here, at 3 load levels, spread over this machine's CPUs), beside the mean-value
model's search over the same grid (the peer: the ratio says what the tails cost).

    .venv/bin/python benches/sim_speed.py
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arena.app.predict import given_calibration  # noqa: E402
from arena.model import simulated  # noqa: E402
from arena.model.recommend import SIM_REQUESTS, candidates, grid  # noqa: E402
from arena.model.instance_sim import simulate_instance  # noqa: E402
from arena.results.answer import Goal  # noqa: E402

LEVELS = (8, 32, 128)


def main() -> int:
    cal = given_calibration("puma", 2.0, cpu_ms=5.0, io_ms=15.0, outside_ms=0.3)
    for p, t, c in ((1, 2, 12), (4, 8, 64), (8, 32, 128)):
        inst, work = simulated.instance(cal, p, t), cal.work()
        t0 = time.perf_counter()
        simulate_instance(inst, work, clients=c, requests=50_000)
        dt = time.perf_counter() - t0
        print(f"one instance, {p} x {t}, {c} clients: {50_000 / dt:,.0f} simulated requests/s (one CPU)")
    points = len(grid("puma", cal.cores))
    t0 = time.perf_counter()
    for level in LEVELS:
        candidates(cal, "closed", level, Goal(500))
    mva_s = time.perf_counter() - t0
    cpus = len(os.sched_getaffinity(0))
    t0 = time.perf_counter()
    with ProcessPoolExecutor(cpus) as workers:
        best = [candidates(cal, "closed", level, Goal(500), sim=True, map_fn=partial(workers.map, chunksize=4))[0]
                for level in LEVELS]
    sim_s = time.perf_counter() - t0
    simulated_requests = points * len(LEVELS) * simulated.REPLICATIONS * SIM_REQUESTS
    print(f"recommendation over {points} grid points x {len(LEVELS)} levels ({simulated_requests:,} simulated "
          f"requests, {cpus} CPUs): simulator {sim_s:.1f} s ({simulated_requests / sim_s:,.0f} requests/s), "
          f"mean-value model {mva_s:.2f} s: ratio {sim_s / mva_s:.0f}")
    for level, c in zip(LEVELS, best):
        print(f"  c={level}: {c.name}, {c.predicted.throughput:.1f} req/s, p99 {c.predicted.p99_ms:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
