"""What several load hosts cost and give, measured across network namespaces on this machine
(tests/netns.py: a bridge, a Dask scheduler on it, a load worker in each of two namespaces, all
on CPU 0; nginx static on CPU 1, listening on the bridge), in one run:

- the generator's CPU per request (arena-load's own figure), so the requests/s one load core
  sustains: 1e6 / that;
- a closed load (50 connections) from 1 and from 2 hosts: the throughput and its ratio. Both
  hosts share CPU 0 here, so this shows the merge is exact and costs nothing, not N x the rate: on
  hosts of their own, each host brings its own cores;
- an open load (its rate split over the hosts) from 1 and 2 hosts: the rate achieved of the rate asked;
- coordination: how late each host started after the common start and the spread between hosts,
  the clock offsets, and the wall time of a 2 s run from the cluster beside the same run by a local
  arena-load (`arena load` without --cluster).

    .venv/bin/python benches/cluster_scale.py [--rounds 3]   (as root: it creates namespaces)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from harness import nginx  # noqa: E402
from netns import Namespaces, end  # noqa: E402


def arena_load(url: str, args: list[str], cluster: str | None) -> tuple[dict, float]:
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        t0 = time.monotonic()
        argv = [sys.executable, "-m", "arena", "load", url, *args, "--json", f.name, "--allow-remote"]
        argv += ["--cluster", cluster] if cluster else ["--cpus", "0"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        wall = time.monotonic() - t0
        if done.returncode not in (0, 1):
            sys.exit(f"benchmark: arena load exited {done.returncode}: {done.stderr.strip()}")
        return json.loads(Path(f.name).read_text()), wall


def measured(doc: dict) -> dict:
    """The merged result's measured phase, from either document shape (local or from the cluster)."""
    if "merged" in doc:
        m = doc["merged"]["measured"]
        return {"rps": m["achieved_rps"], "completed": m["completed"], "cpu_us": doc["merged"]["cpu_per_request_us"]}
    m = doc["measured"]
    return {"rps": m["rate"]["achieved_rps"], "completed": m["requests"]["completed"],
            "cpu_us": doc["generator"]["cpu_per_request_us"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    spaces = Namespaces()
    spaces.create()
    try:
        address, workers = spaces.cluster()
        with nginx(1, host=spaces.host_ip) as url:
            rows: dict[str, list[float]] = {}

            def keep(name: str, value: float) -> None:
                rows.setdefault(name, []).append(value)

            for hosts in (2, 1):
                if hosts == 1:
                    end(workers[1])  # one host left: the scheduler drops the other
                    time.sleep(2)
                for _ in range(args.rounds):
                    doc, wall = arena_load(url, ["-c", "50", "-d", "3s"], address)
                    keep(f"closed c=50 from {hosts} host(s): req/s", measured(doc)["rps"])
                    keep(f"arena-load CPU per request from {hosts} host(s): us", measured(doc)["cpu_us"])
                    doc, wall = arena_load(url, ["-r", "4000", "-d", "2s"], address)
                    keep(f"open 4000 req/s from {hosts} host(s): achieved share", measured(doc)["rps"] / 4000)
                    keep(f"a 2 s run from {hosts} host(s): wall s", wall)
                    late = [h["late_ms"] for h in doc["hosts"]]
                    keep(f"start after the common start, {hosts} host(s): ms", max(late))
                    if hosts > 1:
                        keep("start spread between the hosts: ms", max(late) - min(late))
                    keep("clock offset to the coordinator (largest): ms", max(abs(h["offset_ms"]) for h in doc["hosts"]))
            for _ in range(args.rounds):
                doc, wall = arena_load(url, ["-r", "4000", "-d", "2s"], None)
                keep("a 2 s run by a local arena-load: wall s", wall)
                keep("closed c=50, local arena-load: req/s", measured(arena_load(url, ["-c", "50", "-d", "3s"], None)[0])["rps"])
    finally:
        spaces.close()
    width = max(map(len, rows))
    print(f"{'':<{width}}  {'median':>10}  {'rounds':>6}")
    for name, values in rows.items():
        print(f"{name:<{width}}  {statistics.median(values):>10.3f}  {len(values):>6}")
    two, one = (statistics.median(rows[f"closed c=50 from {n} host(s): req/s"]) for n in (2, 1))
    cpu = statistics.median(rows["arena-load CPU per request from 1 host(s): us"])
    print(f"\nclosed throughput, 2 hosts / 1 host (sharing one core here): {two / one:.2f}; "
          f"one load core sustains about {1e6 / cpu:,.0f} req/s at {cpu:.1f} us of CPU a request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
