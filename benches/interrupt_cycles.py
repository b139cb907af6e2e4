"""Start and stop Arena 20 times with a clustered Puma, each time ended by a random SIGINT (one,
or several 20-80 ms apart) or SIGKILL at a random moment, each start followed by the next; then
count what is left: processes, cgroups, work dirs and load generators' temp dirs of any of those
Arena processes, and whether the ports they used are free.

    .venv/bin/python benches/interrupt_cycles.py [--cycles 20] [--seed 1]

A SIGKILLed Arena cannot clean up: the next start reaps what it left (and says so); after the last
cycle `arena reap` does, as a user would. The figure is the count of leftovers after that.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arena.servers import cgroup  # noqa: E402

EXPERIMENT = """
name = "cycles"
duration = "3s"
warmup = "0s"
repetitions = 5
[workload]
path = "/work?cpu_ms=2&io_ms=2"
[load]
concurrency = [4]
[[servers]]
server = "puma"
processes = 2
threads = 4
"""


def leftovers(pids: list[int]) -> list[str]:
    roots = set(cgroup.v1_roots().values()) | ({cgroup.v2_root()} - {None})
    found = []
    for pid in pids:
        mark = f"{cgroup.PREFIX}{pid}-"
        found += [str(d) for r in roots for d in r.glob(f"{mark}*")]
        found += [str(d) for d in Path(tempfile.gettempdir()).glob(f"{mark}*")]
        found += [f"pid {p}" for p in cgroup.tagged_pids(f"{cgroup.ProcessTree.TAG}={mark}".encode())]
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="interrupt-cycles-"))
    (work / "e.toml").write_text(EXPERIMENT)
    pids, kinds, reaped_lines = [], {"SIGINT": 0, "SIGINT x4-6": 0, "SIGKILL": 0}, 0
    for i in range(args.cycles):
        proc = subprocess.Popen([sys.executable, "-m", "arena", "run", str(work / "e.toml"), "--store", str(work / "s.db")],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                cwd=ROOT)
        pids.append(proc.pid)
        time.sleep(rnd.uniform(0.1, 6.0))  # anywhere: starting, reaping, starting the server, under load
        kind = rnd.choice(list(kinds))
        kinds[kind] += 1
        if kind == "SIGKILL":
            os.kill(proc.pid, signal.SIGKILL)  # Arena only: what it started is orphaned
        else:
            for _ in range(1 if kind == "SIGINT" else rnd.randint(4, 6)):
                os.killpg(proc.pid, signal.SIGINT)
                time.sleep(rnd.uniform(0.02, 0.08))
        out, _ = proc.communicate(timeout=120)
        reaped_lines += len(re.findall(r"^reaped ", out, re.M))
        print(f"cycle {i + 1:2}: {kind:11} exit {proc.returncode:4}  leftovers now: {len(leftovers(pids))}", flush=True)
    final = subprocess.run([sys.executable, "-m", "arena", "reap"], capture_output=True, text=True, cwd=ROOT)
    left = leftovers(pids)
    print(f"\n{args.cycles} cycles ({', '.join(f'{k}: {v}' for k, v in kinds.items())}); the starts reaped "
          f"{reaped_lines} leftovers of killed ones; final `arena reap`: {final.stdout.strip().splitlines()[-1]}")
    print(f"left after the last cycle: {len(left)}" + (f": {left}" if left else " (no process, cgroup or dir)"))
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
