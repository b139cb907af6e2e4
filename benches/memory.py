"""arena-load's peak RSS with 1000 connections, for a short and a long run: it must not grow with
duration or request count (nothing is stored per request; histograms and the per-interval series'
summaries are fixed-size). Static nginx on CPU 1, arena-load on CPU 0, closed model; peak RSS
from wait4 (ru_maxrss).

    python benches/memory.py [--durations 60 300] [--connections 1000]
"""

import argparse
import json

from harness import ARENA_LOAD, need_arena_load, nginx, run_pinned

SERVER_CPU, LOAD_CPU = 1, 0
LIMIT_MIB = 64


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--durations", type=int, nargs="+", default=[60, 300])
    p.add_argument("--connections", type=int, default=1000)
    args = p.parse_args()
    need_arena_load()
    rows = []
    with nginx(SERVER_CPU) as url:
        for seconds in args.durations:
            u = run_pinned([str(ARENA_LOAD), url, "-c", str(args.connections), "-d", f"{seconds}s"], LOAD_CPU,
                           timeout=seconds + 120)
            m = json.loads(u.out)["measured"]
            rows.append((seconds, m["requests"]["completed"], m["requests"]["errors"], u.max_rss_kib / 1024))
            print(f"{seconds:5d} s  {rows[-1][1]:11d} requests  {rows[-1][2]} errors  peak RSS {rows[-1][3]:6.1f} MiB",
                  flush=True)
    peaks = [r[3] for r in rows]
    growth = max(peaks) - min(peaks)
    print(f"\npeak RSS {min(peaks):.1f} to {max(peaks):.1f} MiB over {rows[0][0]} to {rows[-1][0]} s "
          f"({rows[0][1]} to {rows[-1][1]} requests): growth {growth:.1f} MiB; limit {LIMIT_MIB} MiB")
    if max(peaks) > LIMIT_MIB or growth > 2:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
