"""What several load hosts cost and give, measured across network namespaces on this machine
(tests/netns.py: a bridge, a Dask scheduler on it, a load worker in each of two namespaces, all
on CPU 0; nginx static on CPU 1, listening on the bridge), in one run:

- the generator's CPU per request (arena-load's own figure), so the requests/s one load core
  sustains: 1e6 / that;
- a closed load (50 connections) from 1 and from 2 hosts: the throughput and its ratio. Both
  hosts share CPU 0 here, so this shows the merge is exact and costs nothing, not N x the rate: on
  hosts of their own, each host brings its own cores;
- the same with each load host held to its own share of a core (``--quota``, 0.25 by default: a
  CPU cgroup of its own, as a host of its own has its own cores), so that the load hosts, not
  nginx, are the limit: how throughput scales with the hosts (the goal: 2 hosts >= 0.9 x 2);
- an open load (its rate split over the hosts) from 1 and 2 hosts: the rate achieved of the rate asked;
- coordination: how late each host started after the common start and the spread between hosts,
  the clock offsets, and the wall time of a 2 s run from the cluster beside the same run by a local
  arena-load (`arena load` without --cluster).

    .venv/bin/python benches/cluster_scale.py [--rounds 3]   (as root: it creates namespaces)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import psutil  # noqa: E402
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


@contextlib.contextmanager
def cpu_quota(pids: list[int], share: float, tag: str):
    """Each process of ``pids`` (and what it starts) in a CPU cgroup of its own held to ``share`` of
    a core (cgroup v2 cpu.max, else v1 cpu.cfs_quota_us); removed after."""
    v2 = Path("/sys/fs/cgroup/cgroup.controllers").exists()
    root = Path("/sys/fs/cgroup") if v2 else Path("/sys/fs/cgroup/cpu")
    made = []
    try:
        for i, pid in enumerate(pids):
            g = root / f"arena-bench-{os.getpid()}-{tag}{i}"
            g.mkdir()
            made.append(g)
            if v2:
                (g / "cpu.max").write_text(f"{int(share * 100000)} 100000")
            else:
                (g / "cpu.cfs_period_us").write_text("100000")
                (g / "cpu.cfs_quota_us").write_text(str(int(share * 100000)))
            for p in [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]:
                (g / "cgroup.procs").write_text(str(p))
        yield
    finally:
        for g in made:  # back to the root group, then the group removed
            for p in (g / "cgroup.procs").read_text().split():
                try:
                    (root / "cgroup.procs").write_text(p)
                except OSError:
                    pass
            g.rmdir()


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
    ap.add_argument("--quota", type=float, default=0.25, help="each load host's share of a core in the scaling rounds")
    args = ap.parse_args()
    spaces = Namespaces()
    spaces.create()
    try:
        address, workers = spaces.cluster()
        with nginx(1, host=spaces.host_ip) as url:
            rows: dict[str, list[float]] = {}

            def keep(name: str, value: float) -> None:
                rows.setdefault(name, []).append(value)

            quota = f"closed c=50 from {{}} host(s) of {args.quota:g} core each: req/s"
            for hosts in (2, 1):
                if hosts == 1:
                    end(workers[1])  # one host left: the scheduler drops the other
                    time.sleep(2)
                for _ in range(args.rounds):
                    doc, wall = arena_load(url, ["-c", "50", "-d", "3s"], address)
                    keep(f"closed c=50 from {hosts} host(s): req/s", measured(doc)["rps"])
                    keep(f"arena-load CPU per request from {hosts} host(s): us", measured(doc)["cpu_us"])
                    with cpu_quota([w.pid for w in workers[:hosts]], args.quota, "load"):
                        keep(quota.format(hosts), measured(arena_load(url, ["-c", "50", "-d", "3s"], address)[0])["rps"])
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
    held = [statistics.median(rows[f"closed c=50 from {n} host(s) of {args.quota:g} core each: req/s"]) for n in (2, 1)]
    print(f"\nclosed throughput, 2 hosts / 1 host, each held to {args.quota:g} core: {held[0] / held[1]:.2f} "
          f"(goal >= 0.9 x 2 = 1.8)")
    print(f"closed throughput, 2 hosts / 1 host (sharing one core here): {two / one:.2f}; "
          f"one load core sustains about {1e6 / cpu:,.0f} req/s at {cpu:.1f} us of CPU a request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
