"""What merging several load hosts' results costs (results/combine.py), beside recording the same
samples into one histogram: the time to merge N hosts' response-time histograms exactly (decode,
add, summarise), for N = 2 .. 64, each host with the given samples.

    .venv/bin/python benches/cluster_merge.py [--samples 100000]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from arena.drivers.external import histogram  # noqa: E402
from arena.results.combine import histograms  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=100_000, help="samples per host")
    args = ap.parse_args()
    rng = random.Random(1)
    print(f"{'hosts':>5} {'merge ms':>9} {'one histogram of all samples ms':>32} {'ratio':>6}  same percentiles")
    for n in (2, 4, 8, 16, 32, 64):
        samples = [[int(rng.lognormvariate(8, 1)) for _ in range(args.samples)] for _ in range(n)]
        hosts = [histogram(s) for s in samples]
        t0 = time.perf_counter()
        merged = histograms(hosts)
        merge_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        whole = histogram([v for s in samples for v in s])
        whole_s = time.perf_counter() - t0
        print(f"{n:>5} {merge_s * 1000:>9.1f} {whole_s * 1000:>32.1f} {merge_s / whole_s:>6.3f}  "
              f"{merged.percentiles == whole.percentiles and merged.count == whole.count}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
