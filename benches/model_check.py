"""The model against a measured processes x threads grid (scenarios/model-check.toml, or the held-out
sweep with ``--experiment scenarios/model-heldout.toml``).

Runs the sweep (about 4 minutes; the held-out one about 17; skipped when the store already holds it), calibrates each server
from its concurrency-1 runs only, predicts every other point, and prints predicted against measured
with the mean absolute percentage error (MAPE) of throughput, per server and overall; then the p99
of every point measured, by the mean-value model and by the simulator (each server's accept
discipline, the calibration's Server-Timing distributions), with each one's p99 MAPE per server. Then the
model-guided search: for each server at the highest load, run only the model's top third of the
grid (here: look those runs up) and compare the best of them with the best of the whole grid.

    .venv/bin/python benches/model_check.py [--store /tmp/model-check.db] [--experiment FILE]

The targets a held-out sweep is held to (a variable service time, cells the model was not fitted
to): p99 MAPE at most 15% for the mean-value model and 10% for the simulator, throughput MAPE at
most 3% for both; each figure is printed beside its target.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arena.app.storage import results  # noqa: E402
from arena.model import simulated  # noqa: E402
from arena.model.calibrate import Discipline  # noqa: E402
from arena.model.recommend import candidates  # noqa: E402
from arena.model.verify import compare, mape, p99_mape  # noqa: E402
from arena.results.answer import Goal  # noqa: E402
from arena.plan.parse import load_experiment  # noqa: E402
from arena.results.store import Store  # noqa: E402

sys.path.insert(0, str(ROOT))
from tests.doubles import guided_choice  # noqa: E402

EXPERIMENT = ROOT / "scenarios" / "model-check.toml"
TARGETS = {"p99 model": 15.0, "p99 simulated": 10.0, "throughput model": 3.0, "throughput simulated": 3.0}  # MAPE, %


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default="/tmp/arena-model-check.db")
    ap.add_argument("--experiment", type=Path, default=EXPERIMENT, help="the sweep (default: scenarios/model-check.toml)")
    ap.add_argument("--no-run", action="store_true", help="only compute, from what the store holds")
    args = ap.parse_args()
    if not args.no_run:
        done = subprocess.run([str(ROOT / ".venv" / "bin" / "arena"), "run", str(args.experiment), "--store", args.store])
        if done.returncode not in (0, 1):  # 1: some runs are invalid; they are left out of the figures below
            return done.returncode
    with Store(args.store) as store:
        res = results(store, load_experiment(args.experiment).name)
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
    def figures(mine: list) -> dict[str, float | None]:
        return {"p99 model": p99_mape(mine, False), "p99 simulated": p99_mape(mine, True),
                "throughput model": mape(mine),
                "throughput simulated": mape([replace(p, predicted=p.simulated.prediction) for p in mine])}

    print(f"\n{'MAPE (target)':22} " + " ".join(f"{k + f' ({v:g}%)':>24}" for k, v in TARGETS.items()))
    for server in [*dict.fromkeys(p.server for p in points), None]:
        got = figures([p for p in points if server is None or p.server == server])
        print(f"{server or 'all':22} " + " ".join(
            f"{pct(got[k]) + ('' if got[k] is None else ' ok' if got[k] <= v else ' MISS'):>24}" for k, v in TARGETS.items()))
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
        ranked = candidates(cal, "closed", top, Goal())
        threaded = any(c.threads for c in ranked)  # a server without a thread knob: its grid's threads are None
        measured = {}
        for p in points:
            if p.server == server[0] and p.level == top:
                measured[(p.processes, p.threads if threaded else None)] = p.measured
        if not measured:
            continue
        budget = max(1, len(measured) // 3)
        choice, ran = guided_choice(ranked, measured, budget)
        best = max(measured, key=measured.get)
        if choice is None:
            print(f"{server[0]} at c={top:g}: none of the model's grid was measured")
            continue
        gap = (measured[best] - measured[choice]) / measured[best]
        print(f"{server[0]} at c={top:g}: grid best p={best[0]} t={best[1]} {measured[best]:.1f} req/s; "
              f"model-guided ({len(ran)} of {len(measured)} runs: {ran}) best p={choice[0]} t={choice[1]} "
              f"{measured[choice]:.1f} req/s: {100 * gap:.1f}% below the grid's best")
    return 0


if __name__ == "__main__":
    sys.exit(main())
