"""The model against a measured processes x threads grid of two servers (scenarios/model-check.toml).

Runs the sweep (about 4 minutes; skipped when the store already holds it), calibrates each server
from its concurrency-1 runs only, predicts every other point, and prints predicted against measured
with the mean absolute percentage error (MAPE) of throughput, per server and overall; then the p99
of every point measured, by the mean-value model and by the simulator (each server's accept
discipline, the calibration's Server-Timing distributions), with each one's p99 MAPE per server. Then the
model-guided search: for each server at the highest load, run only the model's top third of the
grid (here: look those runs up) and compare the best of them with the best of the whole grid.

    .venv/bin/python benches/model_check.py [--store /tmp/model-check.db]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arena.app.store import results  # noqa: E402
from arena.model import simulated  # noqa: E402
from arena.model.calibrate import Discipline  # noqa: E402
from arena.model.recommend import candidates  # noqa: E402
from arena.model.verify import compare, mape, p99_mape  # noqa: E402
from arena.results.store import Store  # noqa: E402

sys.path.insert(0, str(ROOT))
from tests.doubles import guided_choice  # noqa: E402

EXPERIMENT = ROOT / "scenarios" / "model-check.toml"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default="/tmp/arena-model-check.db")
    ap.add_argument("--no-run", action="store_true", help="only compute, from what the store holds")
    args = ap.parse_args()
    if not args.no_run:
        done = subprocess.run([str(ROOT / ".venv" / "bin" / "arena"), "run", str(EXPERIMENT), "--store", args.store])
        if done.returncode not in (0, 1):  # 1: some runs are invalid; they are left out of the figures below
            return done.returncode
    with Store(args.store) as store:
        res = results(store, "model-check")
    runs = res.runs
    points, calibrations = compare(res.cells, res.observations(), simulate_too=True)
    for (server, workload), cal in calibrations.items():
        print(f"{server}: " + (cal if isinstance(cal, str) else
                               f"CPU {cal.cpu_ms} ms, I/O {cal.io_ms} ms, outside {cal.outside_ms} ms per request"))
    print(f"\n{'configuration':34} {'load':>6} {'measured':>9} {'predicted':>9} {'error':>7}  binds (model)")
    for p in points:
        err = "calib." if p.calibration_run else f"{100 * p.error:+.1f}%"
        print(f"{p.label:34} {'c=%d' % p.level:>6} {p.measured:9.1f} {p.predicted.throughput:9.1f} {err:>7}  "
              f"{p.predicted.binding}")
    print()
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.1f}%"

    for server in dict.fromkeys(p.server for p in points):
        print(f"MAPE {server}: {pct(mape([p for p in points if p.server == server]))}")
    print(f"MAPE overall: {pct(mape(points))} over {sum(not p.calibration_run for p in points)} predicted points\n")

    print(f"{'configuration':34} {'load':>6} {'p99 measured':>12} {'model':>9} {'simulated':>9}  (ms)")
    for p in points:
        sim = p.simulated.prediction
        print(f"{p.label:34} {'c=%d' % p.level:>6} {p.measured_p99_ms or 0:12.1f} {p.predicted.p99_ms:9.1f} "
              f"{sim.p99_ms:9.1f}" + ("  (calibration)" if p.calibration_run else ""))
    for server in dict.fromkeys(p.server for p in points):
        mine = [p for p in points if p.server == server]
        sim_x = mape([replace(p, predicted=p.simulated.prediction) for p in mine])
        print(f"{server}: p99 MAPE simulated {pct(p99_mape(mine, True))}, mean-value model {pct(p99_mape(mine, False))}; "
              f"throughput MAPE simulated {pct(sim_x)}, mean-value model {pct(mape(mine))}")
    print()

    # the discipline learned from the highest level, as for a server the catalog knows nothing of
    learned_points, learned = compare(res.cells, res.observations(), simulate_too=True, learn=True)
    for (server, _), cal in learned.items():
        if isinstance(cal, str) or cal.discipline is None:
            continue
        catalog = Discipline.of_catalog(server)
        mine = [p for p in learned_points if p.server == server]
        print(f"{server}: learned {simulated.discipline(simulated.instance(cal, 2, 2, keep_alive=True), cal.discipline.source)}"
              f"; the catalog's: {catalog and (catalog.accept, catalog.inline)}; p99 MAPE simulated at the other levels "
              f"{pct(p99_mape(mine, True))}")
    print()

    for server, cal in calibrations.items():
        if isinstance(cal, str):
            continue
        top = max(r.level for r in runs if r.server == server[0])
        measured = {}
        for p in points:
            if p.server == server[0] and p.level == top:
                measured[(p.processes, p.threads)] = p.measured
        if not measured:
            continue
        ranked = candidates(cal, "closed", top, None, None)
        budget = max(1, len(measured) // 3)
        choice, ran = guided_choice(ranked, measured, budget)
        best = max(measured, key=measured.get)
        gap = (measured[best] - measured[choice]) / measured[best]
        print(f"{server[0]} at c={top:g}: grid best p={best[0]} t={best[1]} {measured[best]:.1f} req/s; "
              f"model-guided ({len(ran)} of {len(measured)} runs: {ran}) best p={choice[0]} t={choice[1]} "
              f"{measured[choice]:.1f} req/s: {100 * gap:.1f}% below the grid's best")
    return 0


if __name__ == "__main__":
    sys.exit(main())
