"""arena-load vs wrk and ab (and oha when installed) on the same static nginx, in one run.

nginx (one worker) on one CPU, each generator in turn on the other CPU, 50 keep-alive
connections; rounds alternate the generators so drift on a noisy machine hits them alike.
CPU time per request is the figure that compares generators: at these rates the one nginx worker
is the limit, so req/s is about equal. arena-load runs with every recording feature on
(X-Request-Start stamping; nginx returns Server-Timing and X-Arena-Pid, which it parses).

With --baseline, another arena-load build (say, one from before a change) runs in the same rounds,
so a change's cost shows as its ratio to wrk beside the baseline's. With --link, arena-load also
runs with its slow-client emulation on (--delay 1ms --download 1GB/s: every request through the
link's timers and segments), for that path's cost per request. With --chunked, every generator asks
for gzip and nginx answers in chunked transfer coding: the chunked body parser's cost.

    python benches/loadgen_vs_peers.py [--duration 10] [--rounds 3] [--baseline PATH] [--link] [--chunked]
"""

import argparse
import functools
import json
import re
import shutil
from pathlib import Path

from harness import ARENA_LOAD, median, need_arena_load, nginx, run_pinned

SERVER_CPU, LOAD_CPU = 1, 0


LINK = ["--delay", "1ms", "--download", "1GB/s"]
GZIP: list[str] = []  # with --chunked: -H "Accept-Encoding: gzip", and nginx answers chunked


def arena_load(url: str, seconds: int, binary: Path = ARENA_LOAD, extra: tuple[str, ...] = ()):
    u = run_pinned([str(binary), url, "-c", "50", "-d", f"{seconds}s", "--request-start", *extra,
                    *GZIP], LOAD_CPU)
    m = json.loads(u.out)["measured"]
    done = m["requests"]["completed"]
    # the comparison only counts if every answer was a 200 and every recording path ran
    if m["status"] != {"200": done} or m["server_timing"]["cpu"]["count"] != done or m["workers"] != {"4242": done}:
        raise SystemExit(f"benchmark: not every answer was a recorded 200: {m['status']} {m['errors']}")
    return done, m["rate"]["achieved_rps"], u.cpu_s


def wrk(url: str, seconds: int):
    u = run_pinned(["wrk", "-t1", "-c50", f"-d{seconds}s", *GZIP, url], LOAD_CPU)
    done = int(re.search(r"(\d+) requests in", u.out).group(1))
    if "Non-2xx" in u.out:
        raise SystemExit(f"benchmark: wrk saw non-2xx answers:\n{u.out}")
    return done, float(re.search(r"Requests/sec:\s+([\d.]+)", u.out).group(1)), u.cpu_s


def ab(url: str, seconds: int):
    u = run_pinned(["ab", "-q", "-k", "-c", "50", "-t", str(seconds), "-n", "100000000",
                    *GZIP, url], LOAD_CPU)
    done = int(re.search(r"Complete requests:\s+(\d+)", u.out).group(1))
    if "Non-2xx responses" in u.out:
        raise SystemExit(f"benchmark: ab saw non-2xx answers:\n{u.out}")
    return done, float(re.search(r"Requests per second:\s+([\d.]+)", u.out).group(1)), u.cpu_s


def oha(url: str, seconds: int):
    u = run_pinned(["oha", "-c", "50", "-z", f"{seconds}s", "--no-tui", "--output-format", "json",
                    *GZIP, url], LOAD_CPU)
    doc = json.loads(u.out)
    rps = doc["summary"]["requestsPerSec"]
    return round(rps * doc["summary"]["total"]), rps, u.cpu_s


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--baseline", type=Path, help="another arena-load binary to run beside this one")
    p.add_argument("--link", action="store_true", help="also run arena-load with its link emulation on")
    p.add_argument("--chunked", action="store_true", help="ask for gzip: every answer in chunked transfer coding")
    args = p.parse_args()
    if args.chunked:
        GZIP.extend(["-H", "Accept-Encoding: gzip"])
    need_arena_load()
    tools = {"arena-load": arena_load}
    if args.baseline:
        if not args.baseline.is_file():
            raise SystemExit(f"--baseline {args.baseline}: no such file")
        tools["baseline"] = functools.partial(arena_load, binary=args.baseline)
    if args.link:
        tools["arena-load link"] = functools.partial(arena_load, extra=tuple(LINK))
    tools |= {"wrk": wrk, "ab": ab}
    if shutil.which("oha"):
        tools["oha"] = oha
    figures = {name: [] for name in tools}
    with nginx(SERVER_CPU) as url:
        for r in range(args.rounds):
            for name, fn in tools.items():
                done, rps, cpu = fn(url, args.duration)
                figures[name].append((rps, cpu / done * 100_000))
                print(f"round {r + 1} {name:15} {rps:9.0f} req/s  {cpu / done * 100_000:6.3f} CPU-s per 100k requests",
                      flush=True)
    print(f"\nmedians of {args.rounds} rounds, {args.duration} s each, c=50 keep-alive, nginx on CPU {SERVER_CPU}, "
          f"generator on CPU {LOAD_CPU}")
    print(f"{'tool':15} {'req/s':>9} {'CPU-s/100k':>11} {'vs wrk':>7}")
    wrk_cpu = median([c for _, c in figures["wrk"]])
    for name, rows in figures.items():
        cpu = median([c for _, c in rows])
        print(f"{name:15} {median([r for r, _ in rows]):9.0f} {cpu:11.3f} {cpu / wrk_cpu:7.2f}")


if __name__ == "__main__":
    main()
