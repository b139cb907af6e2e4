"""The routing study (scenarios/routing.toml) against the fleet simulator: p99 by policy and rate.

Reads the study's store (run it first: `arena run scenarios/routing.toml --store PATH`), takes the
service time of one request as the app measured it (its Server-Timing `app` phase at the lowest
rate, the runs' percentiles averaged into one quantile function), and simulates the same fleet: 4
single-request instances behind each policy (HAProxy's roundrobin, leastconn, random, random(2),
and maxconn = 1 as one central queue), arrivals evenly spaced as arena-load sends them, for the
study's rates. Prints measured (median of the valid repetitions, each one's figure beside it) and
simulated p99: in the steady state (5 long replications, with the 95% interval of their mean), and
over windows as long as the study's (its warm-up, then its measured seconds: 200 replications, the
median window and the 10th..90th percentile of windows, since a 15-s window of a heavy-tailed
service holds only ten or so requests beyond its p99); and the p99 MAPE per policy of each.

    .venv/bin/python benches/routing_sim.py --store /tmp/routing.db
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arena import stats  # noqa: E402
from arena.app.storage import results  # noqa: E402
from arena.model.calibrate import pooled  # noqa: E402
from arena.model.sim import Empirical, fleet, simulate_fleet  # noqa: E402
from arena.model.observe import quantiles_ms  # noqa: E402
from arena.results.store import Store  # noqa: E402


def policy_of(run) -> str:
    top = run.launch.get("topology") or {}
    return "central" if top.get("maxconn") == 1 else top.get("balance", "roundrobin")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default="/tmp/routing.db")
    ap.add_argument("--requests", type=int, default=40_000)
    args = ap.parse_args()
    with Store(args.store) as store:
        res = results(store, "routing")
    valid = [r for r in res.runs if r.valid and r.load]
    low = min(r.level for r in valid)
    phases = [quantiles_ms(h) for r in valid if r.level == low if (h := r.load.measured.server_timing.get("app"))
              if h.count]
    service = Empirical(tuple((p, v / 1000) for p, v in pooled(phases)))
    instances = (valid[0].launch.get("topology") or {}).get("instances", 4)
    print(f"service time (the app's, {len(phases)} runs at {low:g} req/s): mean {service.mean * 1e3:.1f} ms; "
          f"{instances} instances\n")
    window = float((res.definition.duration or "15s").rstrip("s"))
    warmup = float((res.definition.warmup or "3s").rstrip("s"))
    print(f"{'policy':10} {'rate':>5} {'measured p99 ms (runs)':>30} {'steady state (95% CI)':>24} "
          f"{f'{window:g}-s windows (10..90%)':>26}")
    errors: dict[str, list[tuple[float, float]]] = {}
    windowed: dict[str, list[tuple[float, float]]] = {}
    for policy in ("random", "roundrobin", "leastconn", "random(2)", "central"):
        for rate in sorted({r.level for r in valid}):
            runs = [r.p99_us / 1000 for r in valid if policy_of(r) == policy and r.level == rate and r.p99_us]
            if not runs:
                continue
            s = fleet(instances, policy, rate, service, args.requests, replications=5, arrival="constant")
            p99 = s.response["p99"]
            measured = stats.median(runs)
            errors.setdefault(policy, []).append((p99.mean * 1000, measured))
            per_window = []
            for k in range(200):
                run = simulate_fleet(instances, policy, rate, service, round(rate * (warmup + window)), seed=1000 + k,
                                     arrival="constant")
                kept = run.responses[run.arrivals >= warmup]
                per_window.append(stats.quantile(list(kept), 0.99) * 1000)
            typical = stats.median(per_window)
            windowed.setdefault(policy, []).append((typical, measured))
            shown = ", ".join(f"{v:.0f}" for v in runs)
            print(f"{policy:10} {rate:5g} {measured:12.0f} ({shown:>15}) {p99.mean * 1000:10.0f} "
                  f"({p99.lo * 1000:.0f}..{p99.hi * 1000:.0f}) {typical:10.0f} "
                  f"({stats.quantile(per_window, 0.1):.0f}..{stats.quantile(per_window, 0.9):.0f})")
    print()
    for policy, pairs in errors.items():
        print(f"{policy:10} p99 MAPE: steady state {stats.mape(pairs):.0f}%, {window:g}-s windows "
              f"{stats.mape(windowed[policy]):.0f}%, over {len(pairs)} rates")
    return 0


if __name__ == "__main__":
    sys.exit(main())
