"""The model under a CPU quota against a measured quota sweep: gunicorn-sync with 1, 2 and 4 workers
under cpu_limit 0.5, 1 and 1.5 over both CPUs, at 2 and 8 clients of 8 ms of CPU and 4 ms of I/O a
request.

Runs two experiments (about 7 minutes; each run the store already holds is skipped): a calibration
without a quota (1 and 2 workers at 1 and 2 clients), and the sweep, held out: the model never sees
it. Each cell of the sweep is then predicted as `arena predict --experiment quota-check-calibration
--cpu-limit Q` predicts it (the simulator with CFS periods: model/instance_sim.py's _Cores), and printed
beside what the cgroup measured: the throttled time (ms a second of window, summed over the CPUs
held back, as cpu.stat counts it) and the p99. Then the errors against their targets (within 20%):
the p99's mean absolute error over every cell, the throttled time's over the cells held back (and
the cells where only one of the two says so), and the sweep's throttled time in all.

    .venv/bin/python benches/quota_check.py [--store /tmp/arena-quota-check.db]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arena.app.predict import Load, prediction  # noqa: E402
from arena.app.storage import results  # noqa: E402
from arena.results.store import Store  # noqa: E402

CPU_MS, IO_MS = 8.0, 4.0


def experiment(name: str, description: str, concurrency: list[int], servers: str) -> str:
    """One of the bench's two experiments: the same workload, layout and run length."""
    return f"""name = "{name}"
description = "{description}"
duration = "5s"
warmup = "1s"
repetitions = 1
seed = 1
[workload]
path = "/work?cpu_ms={CPU_MS:g}&io_ms={IO_MS:g}"
[layout]
server_cpus = "0,1"
load_cpus = "0,1"
share = true
[load]
model = "closed"
concurrency = {concurrency}
[[servers]]
server = "gunicorn-sync"
{servers}
"""


CALIBRATION = experiment("quota-check-calibration", "gunicorn-sync without a quota: what the model of the quota sweep "
                         "is calibrated from", [1, 2], "processes = [1, 2]")
SWEEP = experiment("quota-check", "gunicorn-sync under CPU quotas over both CPUs: the model's held-out sweep", [2, 8],
                   "processes = [1, 2, 4]\ncpu_limit = [0.5, 1, 1.5]")
TARGET = 0.20  # a CFS period model's: throttled share and p99 within 20%


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default="/tmp/arena-quota-check.db")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="arena-quota-check-") as tmp:
        for name, text in (("calibration", CALIBRATION), ("sweep", SWEEP)):
            exp = Path(tmp) / f"{name}.toml"
            exp.write_text(text)
            ran = subprocess.run([str(ROOT / ".venv" / "bin" / "arena"), "run", str(exp), "--store", args.store],
                                 capture_output=True, text=True)
            if ran.returncode not in (0, 1):  # 1: some run invalid, said below
                sys.exit(f"benchmark: arena run failed: {ran.stderr.strip().splitlines()[-1:]}")
    with Store(args.store) as s:
        res = results(s, "quota-check")
    print(f"{'configuration':<34} {'level':>5} | {'throttled ms/s':>14} {'model':>6} | {'p99 ms':>8} {'model':>8} {'error':>7}")
    p99_errors, throttled = [], []
    for c in sorted(res.cells, key=lambda c: (c.config, c.level)):
        if c.p99_us.median is None:
            print(f"{c.label:<34} {c.level_label:>5} | no valid run: {'; '.join(c.flags)}")
            continue
        sim = prediction("gunicorn-sync", c.processes, None, [Load("closed", c.level)], store_path=args.store,
                         experiment="quota-check-calibration", cores=2.0,
                         quota=c.runs[0].launched.limits.cpu).rows[0].simulated
        p99 = c.p99_us.median / 1000
        err = (sim.prediction.p99_ms - p99) / p99
        p99_errors.append(abs(err))
        held, model = c.throttled_ms_per_s.median or 0.0, sim.throttled_ms_per_s
        throttled.append((held, model))
        print(f"{c.label:<34} {c.level_label:>5} | {held:>14.1f} {model:>6.1f} | {p99:>8.1f} {sim.prediction.p99_ms:>8.1f} "
              f"{100 * err:>+6.0f}%")
    if not p99_errors:
        sys.exit("benchmark: no valid cell to compare")
    held = [(h, m) for h, m in throttled if h > 0]
    share = statistics.mean(abs(m - h) / h for h, m in held) if held else 0.0
    alone = sum(1 for h, m in throttled if (h > 0) != (m > 0))
    total = sum(h for h, _ in throttled)
    met = lambda e: "met" if e <= TARGET else "missed"  # noqa: E731
    p99_mape = statistics.mean(p99_errors)
    print(f"\np99: mean absolute error {100 * p99_mape:.0f}% over {len(p99_errors)} cells "
          f"(target {100 * TARGET:.0f}%: {met(p99_mape)})")
    print(f"throttled time: mean absolute error {100 * share:.0f}% over the {len(held)} cells held back "
          f"(target {100 * TARGET:.0f}%: {met(share)}); {alone} cell(s) throttled by only one of cgroup and model; "
          f"the sweep's in all: {sum(m for _, m in throttled):.0f} ms/s predicted, {total:.0f} measured")
    return 0


if __name__ == "__main__":
    sys.exit(main())
