"""Offered vs achieved rate, and how late requests left, at 1k and 10k req/s and at the highest
rate this machine sustains (open model, constant arrivals; static nginx on CPU 1, arena-load on
CPU 0). A rate is sustained when at least 99% of it is achieved, send-lag p99 stays under 1 ms and
arena-load does not call itself saturated.

    python benches/rate_accuracy.py [--duration 5]
"""

import argparse
import json

from harness import ARENA_LOAD, need_arena_load, nginx, run_pinned

SERVER_CPU, LOAD_CPU = 1, 0
FIXED = (1_000, 10_000)
RAMP = (20_000, 30_000, 40_000, 50_000, 60_000, 70_000, 80_000, 90_000, 100_000)


def measure(url: str, rate: int, seconds: float) -> dict:
    u = run_pinned([str(ARENA_LOAD), url, "-r", str(rate), "-d", f"{seconds}s", "-c", "1000", "--warmup", "1s"], LOAD_CPU)
    doc = json.loads(u.out)
    m, g = doc["measured"], doc["generator"]
    achieved = m["rate"]["achieved_rps"]
    return {
        "rate": rate, "achieved": achieved, "ratio": achieved / rate,
        "send_lag_p99": m["latency"]["send_lag"]["percentiles"].get("99", 0),
        "sched_lag_p99": g["schedule_lag"]["percentiles"].get("99", 0),
        "errors": m["requests"]["errors"], "unsent": m["requests"]["unsent"],
        "util": g["utilization"], "saturated": g["saturated"],
    }


def sustained(r: dict) -> bool:
    return r["ratio"] >= 0.99 and r["send_lag_p99"] < 1000 and not r["saturated"] and r["errors"] == 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=5)
    args = p.parse_args()
    need_arena_load()
    rows = []
    with nginx(SERVER_CPU) as url:
        for rate in FIXED:
            rows.append(measure(url, rate, args.duration))
        best = None
        for rate in RAMP:
            r = measure(url, rate, args.duration)
            rows.append(r)
            if not sustained(r):
                break
            best = r
    print(f"{'offered':>9} {'achieved':>10} {'ratio':>8} {'send lag p99':>13} {'schedule lag p99':>17} {'gen CPU':>8} "
          f"{'errors':>7} {'unsent':>7}  sustained")
    for r in rows:
        print(f"{r['rate']:9d} {r['achieved']:10.1f} {r['ratio']:8.4f} {r['send_lag_p99']:11d}us {r['sched_lag_p99']:15d}us "
              f"{r['util']:7.0%} {r['errors']:7d} {r['unsent']:7d}  {'yes' if sustained(r) else 'no'}")
    print(f"\nhighest sustained rate here: {best['rate'] if best else 'below 20000'} req/s "
          f"(achieved within 1% at 1k: {'yes' if abs(rows[0]['ratio'] - 1) <= 0.01 else 'NO'}, "
          f"at 10k: {'yes' if abs(rows[1]['ratio'] - 1) <= 0.01 else 'NO'})")


if __name__ == "__main__":
    main()
