"""Calibration: the model's parameters estimated from stored runs, with their uncertainty. Pure
(stored runs in, estimates out).

Per server and workload, from its valid runs at the lowest load level only (a concurrency-1 run:
no contention in the figures, and every higher level stays a prediction, not a fit):
- CPU per request: the server's processes' CPU time (cgroup accounting over the run's window), less
  what the server burns idle (measured for 1 s after each start), divided by the requests answered
  in the window: the app's CPU *and* the server's own (parsing, framework);
- the app's own figures from its Server-Timing (means per run): CPU, I/O, GIL/CPU wait
  (cpuwall - cpu), and the rest of the app (app - cpuwall - io);
- outside the server's threads: the lowest-load runs' mean response time minus the app's time and
  the queue before it (network, kernel, the client);
- the variability of the CPU per request: the squared coefficient of variation of the app's own
  CPU figures (1, exponential, when the app does not report them);
- memory: PSS = base + per process x P + per thread x P x T, least squares over its
  configurations' medians at every level (per thread 0 when threads do not vary).
Each estimate is the median over runs with a 95% t-interval of the mean where there are 2+ runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from arena import stats
from arena.drivers.result import from_dict
from arena.model.server import Config, Workload
from arena.servers import catalog
from arena.servers.cgroup import cpu_list
from arena.store import StoredRun

MiB = 1024 * 1024


@dataclass(frozen=True)
class Estimate:
    value: float
    ci: tuple[float, float] | None
    runs: int

    def __str__(self) -> str:
        if self.ci is None:
            return f"{self.value:.3g}"
        return f"{self.value:.3g} (95% CI {self.ci[0]:.3g}..{self.ci[1]:.3g}, {self.runs} runs)"


def estimate(values: list[float]) -> Estimate | None:
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return None
    return Estimate(stats.median(values), stats.ci95(values), len(values))


@dataclass(frozen=True)
class Calibration:
    server: str
    workload: str
    cores: float
    cpu_ms: Estimate  # per request, server processes' CPU
    io_ms: Estimate
    outside_ms: Estimate
    app_cpu_ms: Estimate | None
    gil_wait_ms: Estimate | None  # at the lowest load
    app_other_ms: Estimate | None
    blocking_io: bool
    cpu_cv2: Estimate | None  # squared coefficient of variation of the app's CPU per request
    memory_base_mib: float | None
    memory_per_process_mib: float | None
    memory_per_thread_mib: float | None

    def workload_model(self) -> Workload:
        return Workload(self.cpu_ms.value, self.io_ms.value, self.outside_ms.value, self.blocking_io,
                        self.cpu_cv2.value if self.cpu_cv2 is not None else 1.0)

    def memory_mib(self, processes: int, threads: int | None) -> float | None:
        if self.memory_per_process_mib is None:
            return None
        return (self.memory_base_mib or 0) + processes * self.memory_per_process_mib + processes * (threads or 1) * (
            self.memory_per_thread_mib or 0)


def server_config(server: str, processes: int | None, threads: int | None, cores: float) -> Config:
    """A catalog server's knobs -> the model's configuration (defaults where a knob is not set)."""
    s = catalog.get_server(server)
    p = processes or (s.knobs["processes"].default if "processes" in s.knobs else 1) or 1
    if s.model == "async":
        t = None  # an event loop: as many requests in service as connections
    elif s.model in ("thread", "hybrid"):
        # a thread pool, or a thread per connection where there is no pool to size (WEBrick)
        t = (threads or s.knobs["threads"].default or 1) if "threads" in s.knobs else None
    else:
        t = 1  # process-per-request servers, and Thin's reactor with a blocking app
    return Config(p, t, cores, gil=s.language in ("python", "ruby"), routing=s.routing)


def cores_of(run: StoredRun) -> float:
    """The server's CPU count from the run's environment (stored as a CPU list such as "1" or "2-3")."""
    return float(len(cpu_list(str(run.json("environment").get("server_cpus", "1")), "server_cpus")))


def cpu_per_request_ms(run: StoredRun) -> float | None:
    """The server's CPU per request over the run's window, less what the server burns idle (its
    timers and reactors, measured before the run's start where the store has it)."""
    res = run.json("resources")
    if res.get("cpu_user_s") is None:
        return None
    cpu = res["cpu_user_s"] + res["cpu_system_s"] - (res.get("idle_cpu_cores") or 0.0) * res.get("window_s", 0)
    answered = run.throughput * res.get("window_s", 0)
    return max(cpu, 0.0) / answered * 1000 if answered > 0 else None


def calibrate(runs: list[StoredRun], server: str, workload: str | None = None) -> Calibration:
    """Estimates for ``server`` (and ``workload``, default: the runs' first) from its valid runs."""
    mine = [r for r in runs if r.server == server and r.valid and (workload is None or r.workload == workload)]
    if not mine:
        raise ValueError(f"no valid runs of {server}" + (f" with workload {workload}" if workload else ""))
    workload = mine[0].workload
    mine = [r for r in mine if r.workload == workload]
    low = min(r.level for r in mine)
    lowest = [from_dict(r.json("load")) for r in mine if r.level == low]  # each run's result, read once
    timing = [{k: h.mean / 1000 for k, h in m.measured.server_timing.items() if h.mean is not None} for m in lowest]
    cpu = estimate([cpu_per_request_ms(r) for r in mine if r.level == low])
    if cpu is None:
        raise ValueError(f"{server}: no CPU accounting in its runs (the probe's backend could not account CPU)")
    io = estimate([t.get("io", 0.0) for t in timing]) or Estimate(0.0, None, 0)
    outside = estimate([_outside_ms(m.measured.response_time.mean, t, cpu.value, io.value)
                        for m, t in zip(lowest, timing)])
    app_cpu = estimate([t.get("cpu") for t in timing])
    gil = estimate([t["cpuwall"] - t["cpu"] for t in timing if "cpuwall" in t and "cpu" in t])
    other = estimate([t["app"] - t.get("cpuwall", 0) - t.get("io", 0) for t in timing if "app" in t])
    cv2 = estimate([(h.stdev / h.mean) ** 2 for h in (m.measured.server_timing.get("cpu") for m in lowest)
                    if h is not None and h.mean and h.stdev is not None])
    base, per_p, per_t = memory_fit(mine)
    return Calibration(server, workload, cores_of(mine[0]), cpu, io, outside or Estimate(0.0, None, 0), app_cpu, gil,
                       other, "io=block" in lowest[0].url, cv2, base, per_p, per_t)


def _outside_ms(response_us: float | None, timing: dict[str, float], cpu_ms: float, io_ms: float) -> float | None:
    """Time outside the server's threads: the mean response time minus the app and the queue before it
    where the app reports them (so a busy lowest level does not count its queueing), else minus
    CPU and I/O per request."""
    if response_us is None:
        return None
    if "app" in timing:
        return max(0.0, response_us / 1000 - timing["app"] - timing.get("queue", 0.0))
    return max(0.0, response_us / 1000 - cpu_ms - io_ms)


def memory_fit(runs: list[StoredRun]) -> tuple[float | None, float | None, float | None]:
    """(base, per process, per thread) MiB from the configurations' median PSS, by least squares."""
    per_config: dict[tuple[int, int], list[float]] = {}
    for r in runs:
        if r.pss_bytes:
            c = server_config(r.server, r.processes, r.threads, 1)
            per_config.setdefault((c.processes, c.threads or 1), []).append(r.pss_bytes / MiB)
    if not per_config:
        return None, None, None
    pts = [(p, t, stats.median(v)) for (p, t), v in per_config.items()]
    procs = {p for p, _, _ in pts}
    threads = {t for _, t, _ in pts}
    if len(pts) == 1 or len(procs) == 1 and len(threads) == 1:
        p, t, m = pts[0]
        return 0.0, m / p, 0.0
    cols = [[1.0, p, p * t] for p, t, _ in pts]
    use = [0, 1] + ([2] if len(threads) > 1 else [])
    if len(procs) == 1:
        use = [0, 2] if len(threads) > 1 else [0]
    a = np.array(cols)[:, use]
    coef, *_ = np.linalg.lstsq(a, np.array([m for _, _, m in pts]), rcond=None)
    full = dict(zip(use, coef.tolist()))
    if len(procs) == 1:  # one process count: its memory is the base's and the processes' together
        p = next(iter(procs))
        return 0.0, full.get(0, 0.0) / p, full.get(2, 0.0)
    return full.get(0, 0.0), full.get(1, 0.0), full.get(2, 0.0)
