"""CPU throttling: a container's CPU quota (CFS bandwidth control) holding the server back.

The runnable threads spend the period's quota in parallel; once it is spent, every one of them
waits for the next period, however idle the CPUs are. The cgroup's cpu.stat counts the time (summed
over the CPUs held back): found where it held the server back at least ``least_ms_per_s`` a second.
Its cost: the decomposition's wait for the quota (ms a request), and where the same configuration
ran without the quota at the same load, the p99 and throughput beside it. The share of requests that
met it comes from the timing around each request (Server-Timing ``throttled``: the group's throttled
time while the request was in flight, on the requests that met some), where the app reports it."""

from __future__ import annotations

from typing import Sequence

from arena.results.aggregate import QUOTA_WAIT, Cell
from arena.results.why.finding import Evidence, Finding

KEY, NAME = "throttling", "CPU throttling by the container's CPU quota"
SHOWN_IN = "Latency decomposition: CPU quota wait"  # where the report shows its evidence
THRESHOLDS = {"least_ms_per_s": 10.0}  # throttled time a second of window below this is no finding
REFERENCE = "https://docs.kernel.org/scheduler/sched-bwc.html"


def _unlimited(cell: Cell, cells: Sequence[Cell]) -> Cell | None:
    """The same configuration at the same load without a CPU quota, where it ran."""
    return next((c for c in cells if c.server == cell.server and c.workload == cell.workload and c.model == cell.model
                 and c.level == cell.level and c.processes == cell.processes and c.threads == cell.threads
                 and c.pool == cell.pool and c.valid_runs and c.valid_runs[0].launched.limits.cpu is None
                 and c.p99_us.median is not None), None)


def detect(cell: Cell, cells: Sequence[Cell]) -> Finding | None:
    held = cell.throttled_ms_per_s.median
    runs = cell.valid_runs
    if not runs or held is None or held < THRESHOLDS["least_ms_per_s"]:
        return None
    limits = runs[0].launched.limits
    periods = sum(r.resources.cpu_periods or 0 for r in runs if r.resources)
    throttled = sum(r.resources.cpu_throttled_periods or 0 for r in runs if r.resources)
    evidence = [Evidence("throttled", held, "ms a second"), Evidence("quota", limits.cpu or 0, "cores")]
    if periods:
        evidence.append(Evidence("periods throttled", 100 * throttled / periods, "%"))
    if cell.cpu_cores.median is not None:
        evidence.append(Evidence("CPU used", cell.cpu_cores.median, "cores on average"))
    met = [(h, r.figures.completed) for r in runs if r.figures and r.figures.completed
           and (h := r.load.measured.server_timing.get("throttled")) is not None]
    if met:
        evidence.append(Evidence("requests that met it", 100 * sum(h.count for h, _ in met) / sum(n for _, n in met), "%"))
        evidence.append(Evidence("their time held back p99", max(h.p("99") or 0 for h, _ in met) / 1000, "ms"))
    wait = (cell.decomposition or {}).get(QUOTA_WAIT)
    free = _unlimited(cell, cells)
    p99 = lost = None
    if free is not None and cell.p99_us.median is not None:
        p99 = (cell.p99_us.median - free.p99_us.median) / 1000
        if free.throughput.median and cell.throughput.median is not None:
            lost = max(0.0, free.throughput.median - cell.throughput.median)
        evidence.append(Evidence("p99 without the quota", free.p99_us.median / 1000, "ms"))
    fix = (f"give the container more quota than its bursts take (cpu_limit above {limits.cpu:g}: it used "
           f"{cell.cpu_cores.median or 0:.2f} cores on average, in bursts of every runnable thread at once), or run "
           "fewer processes, so fewer threads spend each period's quota at once")
    return Finding(KEY, NAME, cell.label, cell.workload, cell.level_label, tuple(evidence), wait, p99, lost,
                   "measured: the cgroup's cpu.stat", REFERENCE, fix)
