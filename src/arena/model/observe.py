"""Stored runs -> the model's typed observations (model/calibrate.py Observation). The one place
that knows where in a stored run the model's figures are."""

from __future__ import annotations

import numpy as np

from arena import stats
from arena.results.load_result import Histogram
from arena.model.calibrate import QUANTILE_GRID, Lazy, Observation, OnGrid, Quantiles
from arena.plan.experiment import Workload
from arena.results.aggregate import MiB, cpu_per_request_ms, mean_timing_ms
from arena.results.runs import Run
from arena.cpus import cpu_list


def cores(run: Run) -> float:
    """The server's CPU count, from the CPU list the run's environment recorded ("1", "2-3")."""
    return float(len(cpu_list(str(run.environment.server_cpus or "1"), "server_cpus")))


def database_cores(run: Run) -> float | None:
    """The database's own CPU count; None where it shares the server's CPUs (the default layout)."""
    env = run.environment
    if env.service_cpus is None:
        return None
    mine, server = (set(cpu_list(str(x), k)) for x, k in ((env.service_cpus, "service_cpus"),
                                                          (env.server_cpus or "1", "server_cpus")))
    return None if mine & server else float(len(mine))


def database_cpu_per_request_ms(run: Run) -> float | None:
    """The database's CPU per request over the run's window (its cgroup), where one ran."""
    res = run.services.get("postgres")
    if res is None or res.cpu_s is None or not run.throughput:
        return None
    return res.cpu_s / (run.throughput * res.window_s) * 1000


def phases(histograms: dict[str, Histogram]) -> Lazy:
    """A run's Server-Timing phases that hold values, each read (_read_ms) when first asked for."""
    held = {k: h for k, h in histograms.items() if h.count and h.min is not None and h.max is not None}
    return OnGrid(held, lambda name: _read_ms(held[name]))


def _read_ms(h: Histogram) -> np.ndarray | Quantiles:
    """A stored histogram (microseconds, not empty) as its quantile function in ms: its values at
    QUANTILE_GRID, read from its HDR encoding where it has one (nearest rank, arena.stats), else its
    minimum at 0, its stored percentiles and its maximum at 1."""
    full = h.decode()
    if full is not None:
        return np.array(stats.hdr_quantiles(full, QUANTILE_GRID), dtype=np.float64) / 1000
    points = {0.0: h.min, **{float(q) / 100: v for q, v in h.percentiles.items()}, 1.0: h.max}
    return tuple((q, v / 1000) for q, v in sorted(points.items()))


def observation(run: Run, workload: Workload | None) -> Observation:
    m = run.load.measured
    app_cpu = m.server_timing.get("cpu")
    cv2 = (app_cpu.stdev / app_cpu.mean) ** 2 if app_cpu and app_cpu.mean and app_cpu.stdev is not None else None
    rt = m.response_time
    return Observation(run.server, run.workload, run.processes, run.threads, run.level, cores(run),
                       cpu_per_request_ms(run), mean_timing_ms(run), cv2,
                       rt.mean / 1000 if rt and rt.mean is not None else None,
                       run.pss_bytes / MiB if run.pss_bytes else None,
                       workload.blocking_io if workload is not None else False,
                       database_cpu_per_request_ms(run), database_cores(run), run.pool, run.db_max_connections,
                       phases(m.server_timing),
                       run.kept_alive)


def observations(runs: list[Run], workloads: dict[str, Workload]) -> list[Observation]:
    """One observation per valid run; ``workloads`` (by name, from the experiment's definition) say
    whether a workload's I/O blocks."""
    return [observation(r, workloads.get(r.workload)) for r in runs if r.valid and r.load is not None]
