"""Does the machine check flag the runs it should, and only those? Real runs of one configuration
(Puma 1x4 on CPU 1, arena-load on CPU 0, 1 s each), first on the idle machine, then with a CPU hog
(a busy loop pinned to the server's CPU, not Arena's) for the first half of each measured window.

For each, the share of runs Arena flags (any machine rule: others on the run's CPUs, or both speed
checks slow against the experiment's median), and beside it the rule it replaced: the slower of the
checks before and after the run against the fastest check of the experiment, 30% threshold.
Goals: idle at most 1% flagged, the hog's runs at least 95%.

    .venv/bin/python benches/speed_check.py [--runs 100] [--hog-runs 40]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

from harness import ARENA_LOAD, ROOT  # noqa: F401  (harness puts src/ on the path)
from arena import speed
from arena.plan.parse import parse_experiment
from arena.results.store import Store
from arena.runner import Seams, run_experiment

SERVER_CPU, LOAD_CPU = 1, 0
HOG = "while True: pass"


def experiment(name: str, runs: int):
    return parse_experiment({
        "name": name, "duration": "1s", "warmup": "300ms", "repetitions": runs, "seed": 3,
        "workload": {"path": "/work?cpu_ms=2"}, "load": {"concurrency": [4]},
        "servers": [{"server": "puma", "processes": 1, "threads": 4}],
        "layout": {"server_cpus": str(SERVER_CPU), "load_cpus": str(LOAD_CPU)},
    }, str(ROOT / "benches" / "speed_check.py"))


def hogging(driver, warmup_s: float, hog_s: float):
    """The driver, with a busy loop pinned to the server's CPU from the end of the warm-up for
    ``hog_s`` seconds (ended by its own PID, bounded by the timer)."""
    def run(spec, cpus, live=None):
        hog: list[subprocess.Popen] = []

        def start() -> None:
            hog.append(subprocess.Popen(["taskset", "-c", str(SERVER_CPU), sys.executable, "-c", HOG]))
            stop = threading.Timer(hog_s, lambda: hog[0].kill())
            stop.start()
            hog.append(stop)

        begin = threading.Timer(warmup_s, start)
        begin.start()
        try:
            return driver(spec, cpus=cpus, live=live)
        finally:
            begin.cancel()
            if hog:
                hog[1].join()
                hog[0].wait()

    return run


def old_rule(pairs: list[tuple[float, float]], threshold: float = 0.3) -> int:
    """Runs flagged by the replaced rule: the slower check against the fastest so far."""
    fastest, flagged = None, 0
    for before, after in pairs:
        fastest = min(x for x in (fastest, before, after) if x is not None)
        flagged += max(before, after) / fastest - 1 > threshold
    return flagged


def measure(name: str, runs: int, store_path: str, hog: bool) -> tuple[int, int, int, list[float]]:
    checks: list[float] = []

    def check(cpus):
        checks.append(speed.check_ms(cpus))
        return checks[-1]

    seams = Seams(speed=check)
    if hog:
        exp = experiment(name, runs)
        seams = replace(seams, drivers={**seams.drivers, "arena-load": hogging(seams.drivers["arena-load"],
                                                                              exp.warmup_s, exp.duration_s / 2)})
    exp = experiment(name, runs)
    with Store(store_path) as store:
        run_experiment(exp, store, seams=seams)
        stored = store.runs(name)
    machine = [r for r in stored if any("other processes took" in f or "slower than usual" in f for f in r.flags)]
    pairs = list(zip(checks[0::2], checks[1::2]))
    fine = [r.throughput for r in stored if r not in machine and r.throughput]
    slow = [r.throughput for r in machine if r.throughput]
    ratio = statistics.median(slow) / statistics.median(fine) if slow and fine else None
    return len(stored), len(machine), old_rule(pairs), [r.others_cores for r in stored if r.others_cores is not None], ratio


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100, help="runs on the idle machine")
    ap.add_argument("--hog-runs", type=int, default=40, help="runs with the hog")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "speed.db")
        print(f"{'':>6} {'runs':>5} {'flagged':>8} {'(old rule)':>11} {'others cores: median':>21} {'max':>6} "
              f"{'req/s flagged/not':>18}")
        for name, n, hog in (("idle", args.runs, False), ("hog", args.hog_runs, True)):
            total, flagged, old, others, ratio = measure(name, n, db, hog)
            others.sort()
            print(f"{name:>6} {total:>5} {100 * flagged / total:>7.1f}% {100 * old / total:>10.1f}% "
                  f"{others[len(others) // 2] if others else float('nan'):>21.3f} {max(others, default=float('nan')):>6.3f} "
                  f"{'-' if ratio is None else f'{ratio:.3f}':>18}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
