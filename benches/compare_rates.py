"""How often Arena's comparison tells two configurations apart: falsely (A/A: both drawn from one
distribution) and rightly (A/B: one 10% faster), at 2 to 10 repetitions, beside the rule it replaced
(a difference wherever the two min-max ranges do not overlap).

Each configuration's repetitions are drawn log-normal with the given spread (--cv, default 5%: the
run-to-run spread of throughput on this machine is 1-5%, of p99 more). A/A pairs should be told apart
at most 5% of the time (the comparison's 95% level); the power is the share of A/B pairs called
"better". Pure computation, no server: about half a minute.

    .venv/bin/python benches/compare_rates.py [--cv 0.05] [--pairs 2000] [--effect 0.10]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from arena import stats  # noqa: E402


def draw(rng: random.Random, n: int, cv: float, factor: float = 1.0) -> list[float]:
    return [factor * rng.lognormvariate(0, cv) for _ in range(n)]


def ranges_apart(a: list[float], b: list[float]) -> bool:
    return max(a) < min(b) or max(b) < min(a)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cv", type=float, default=0.05, help="run-to-run spread (sd of the log values)")
    ap.add_argument("--pairs", type=int, default=2000, help="pairs drawn per repetition count")
    ap.add_argument("--effect", type=float, default=0.10, help="the real difference of the A/B pairs")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    print(f"spread {100 * args.cv:g}%, {args.pairs} pairs each, A/B difference {100 * args.effect:g}%, "
          f"threshold {100 * stats.THRESHOLD:g}%")
    print(f"{'runs':>4}  {'A/A told apart':>15} {'(ranges)':>9}  {'A/A same':>8} {'undecided':>9}  "
          f"{'A/B better':>10} {'(ranges)':>9}")
    for n in (2, 3, 4, 5, 6, 8, 10):
        aa = [(draw(rng, n, args.cv), draw(rng, n, args.cv)) for _ in range(args.pairs)]
        ab = [(draw(rng, n, args.cv, 1 + args.effect), draw(rng, n, args.cv)) for _ in range(args.pairs)]
        v_aa = [stats.compare(a, b).verdict for a, b in aa]
        v_ab = [stats.compare(a, b).verdict for a, b in ab]
        share = lambda xs, *ks: 100 * sum(x in ks for x in xs) / len(xs)  # noqa: E731
        print(f"{n:>4}  {share(v_aa, stats.BETTER, stats.WORSE):>14.1f}% "
              f"{100 * sum(ranges_apart(a, b) for a, b in aa) / len(aa):>8.1f}%  "
              f"{share(v_aa, stats.SAME):>7.1f}% {share(v_aa, stats.UNDECIDED):>8.1f}%  "
              f"{share(v_ab, stats.BETTER):>9.1f}% {100 * sum(ranges_apart(a, b) for a, b in ab) / len(ab):>8.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
