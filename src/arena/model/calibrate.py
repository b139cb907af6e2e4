"""Calibration: the model's parameters estimated from stored runs, with their uncertainty. Pure
(stored runs in, estimates out).

Per server and workload, from its valid runs at the lowest load level only (a concurrency-1 run:
no contention in the figures, and every higher level stays a prediction, not a fit):
- CPU per request: the server's processes' CPU time (cgroup accounting over the run's window), less
  what the server burns idle (probed for 1 s at its first start), divided by the requests answered
  in the window: the app's CPU *and* the server's own (parsing, framework);
- the app's own figures from its Server-Timing (means per run): CPU, I/O, GIL/CPU wait
  (cpuwall - cpu), and the rest of the app (app - cpuwall - io);
- outside the server's threads: the lowest-load runs' mean response time minus the app's time and
  the queue before it (network, kernel, the client);
- the variability of the CPU per request: the squared coefficient of variation of the app's own
  CPU figures (1, exponential, when the app does not report them);
- memory: PSS = base + per process x P + per thread x P x T, least squares over its
  configurations' medians at every level (per thread 0 when threads do not vary).
Each estimate is the median over runs with an interval of that median (stats.median_interval).
The figures come in as typed observations (one per valid run: :class:`Observation`, made from
stored runs by model/observe.py), never as storage keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from collections.abc import Callable, Iterable, Iterator, Mapping

import numpy as np

from arena import stats
from arena.limits import PERIOD_S
from arena.model.fit import Fit, fit
from arena.model.queueing import SERVICE_AT, SERVICE_WEIGHT
from arena.model.server import Config, Demand
from arena.model.sim import Dist, Empirical, Sampler
from arena.model.instance_sim import Work
from arena.model.solve import nonnegative_lstsq
from arena.results.aggregate import Figure
from arena.servers import catalog



@dataclass(frozen=True)
class Observation:
    """What one valid run tells the model (times in ms, memory in MiB)."""

    server: str
    workload: str
    processes: int | None
    threads: int | None
    level: float
    cores: float  # the server's CPUs
    cpu_ms: float | None  # the server's CPU per request, less its idle CPU; None without CPU accounting
    timing_ms: dict[str, float]  # the app's mean Server-Timing figures by metric
    cpu_cv2: float | None  # squared coefficient of variation of the app's own CPU per request
    response_ms: float | None  # mean response time
    pss_mib: float | None
    blocking_io: bool  # the workload's I/O holds its process (from the workload's definition)
    db_cpu_ms: float | None = None  # the database's CPU per request (its cgroup), where one ran
    db_cores: float | None = None  # the database's own CPUs; None: it shares the server's
    pool: int | None = None  # database connections per process (None: the server's default)
    db_max_connections: int | None = None
    phases_ms: Mapping[str, Quantiles] = field(default_factory=dict)  # the app's Server-Timing distributions
    keep_alive: bool = True  # the connections reaching the server stayed open (results/runs.Run.kept_alive)


Quantiles = tuple[tuple[float, float], ...]  # a distribution's quantile function: (probability, value) points


class Lazy(Mapping[str, Quantiles]):
    """Quantile functions by name, each made by ``make(name)`` when it is first asked for: reading a
    stored histogram is the costly part, and the simulator asks for a few phases of the lowest load."""

    def __init__(self, names: Iterable[str], make: Callable[[str], Quantiles]):
        self._names, self._make, self._made = tuple(dict.fromkeys(names)), make, {}

    def __getitem__(self, name: str) -> Quantiles:
        return self.made(name)

    def made(self, name: str):
        """The function ``name`` as ``make`` made it (the first time it is asked for)."""
        if name not in self._names:
            raise KeyError(name)
        if name not in self._made:
            self._made[name] = self._make(name)
        return self._made[name]

    def __contains__(self, name: object) -> bool:
        return name in self._names  # without making it, as Mapping's would

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __reduce__(self):
        """Pickled (to a process pool) as the plain dict it stands for."""
        return dict, (dict(self.items()),)


# where a run's phase's quantile function is read (model/observe.py): evenly to the 99th percentile,
# then closer in the tail; as a sorted array without its repeated 0.99, and where each point is in it
QUANTILE_GRID = (*(i / 400 for i in range(397)), *(0.99 + i / 1000 for i in range(10)), 0.9995, 0.9999, 1.0)
_GRID, _GRID_AT = np.unique(np.array(QUANTILE_GRID), return_index=True)


class OnGrid(Lazy):
    """Quantile functions each made as its values at QUANTILE_GRID in an array (3 KB, where the pairs
    as tuples took 36 KB: 450 MB over the 10,000 runs of a report), kept so, and given as the pairs
    each time one is asked for."""

    def __getitem__(self, name: str) -> Quantiles:
        return _pairs(self.made(name))


def _pairs(f: Quantiles | np.ndarray) -> Quantiles:
    """A quantile function as (probability, value) pairs: an array of values at QUANTILE_GRID, or
    the pairs as they are."""
    return tuple(zip(QUANTILE_GRID, f.tolist())) if isinstance(f, np.ndarray) else f


def pooled(functions: list[Quantiles | np.ndarray]) -> Quantiles:
    """Runs' quantile functions averaged at every probability any of them has (Vincentization). A
    function may be an array of its values at QUANTILE_GRID (OnGrid's): where all are, their mean
    is taken as it stands, the same values as read at each point (at 10,000 runs, the pairs made and
    read again took 3 s of a report)."""
    if all(isinstance(f, np.ndarray) for f in functions):
        values = np.array(functions).mean(axis=0)[_GRID_AT]
        return tuple((float(q), float(v)) for q, v in zip(_GRID, values))
    functions = [_pairs(f) for f in functions]
    qs = np.array(sorted({q for f in functions for q, _ in f}))
    # a row per function, each read at every probability in one call
    values = np.array([np.interp(qs, *zip(*f)) for f in functions]).mean(axis=0)
    return tuple((float(q), float(v)) for q, v in zip(qs, values))


def estimate(values: list[float]) -> Figure | None:
    """The median of the finite ``values`` with its interval (None without any)."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    return Figure.of(values) if values else None


@dataclass(frozen=True)
class Discipline:
    """How a server with processes of their own hands kept-alive connections to its threads (for
    the simulator): which process a connection stays with, "race" (whichever accepts it first) or
    "least-busy" (the one with the most free threads), and how many requests a thread serves in a
    row on one connection while others wait (``inline``: Puma's max_fast_inline). ``source``: the
    server's catalog entry, or the measured level it was learned from (model.simulated.learn)."""

    accept: str
    inline: int = 0
    source: str = "catalog"
    learned_at: float | None = None  # the closed level (clients) it was learned from

    @property
    def short(self) -> str:
        return self.accept + (f"+inline {self.inline}" if self.inline else "")

    @classmethod
    def of_catalog(cls, server: str) -> "Discipline | None":
        s = catalog.get_server(server)
        return None if s.accept is None else cls(s.accept, s.inline_requests)


MEASURED_PHASES = ("cpu", "io", "db")  # the Server-Timing phases a request's service time is drawn from
SERVICE_DRAWS = 200_000  # Calibration.service's: its p99 to about 0.5% of an exponential's


@dataclass(frozen=True)
class Calibration:
    server: str
    workload: str
    cores: float
    cpu_ms: Figure  # per request, server processes' CPU
    io_ms: Figure
    outside_ms: Figure
    app_cpu_ms: Figure | None
    gil_wait_ms: Figure | None  # at the lowest load
    app_other_ms: Figure | None
    blocking_io: bool
    cpu_cv2: Figure | None  # squared coefficient of variation of the app's CPU per request
    memory_base_mib: float | None
    memory_per_process_mib: float | None
    memory_per_thread_mib: float | None
    db_ms: Figure | None = None  # holding a pooled connection (the query), per request
    db_cpu_ms: Figure | None = None  # the database's CPU per request (its cgroup)
    pool_wait_ms: Figure | None = None  # at the lowest load
    db_cores: float | None = None  # the database's own CPUs; None: it shares the server's
    db_max_connections: int | None = None
    phases_ms: Mapping[str, Quantiles] = field(default_factory=dict)  # the lowest load's Server-Timing, pooled
    keep_alive: bool = True  # at the lowest load; a configuration's own: Observation.keep_alive
    discipline: Discipline | None = None  # learned from a measured level (None: the catalog's)
    quota: float | None = None  # a container's CPU quota over the cores, in cores a period (None: none)
    period_s: float = PERIOD_S  # its CFS period

    @property
    def usable_cores(self) -> float:
        """The CPU the server gets on average: its cores, or the quota over them where it is fewer
        (the mean-value model's cores; the simulator adds the quota's periods)."""
        return self.cores if self.quota is None else min(self.cores, self.quota)

    def workload_model(self) -> Demand:
        return Demand(self.cpu_ms.median, self.io_ms.median, self.outside_ms.median, self.blocking_io,
                      self.cpu_cv2.median if self.cpu_cv2 is not None else 1.0,
                      self.db_ms.median if self.db_ms else 0.0, self.db_cpu_ms.median if self.db_cpu_ms else 0.0,
                      self.service)

    def work(self) -> Work:
        """The calibrated demands of one request, as the simulator draws them: the server's CPU per
        request with the shape of the app's own CPU (its Server-Timing distribution, else a
        lognormal of the measured variability), the I/O and the query's other time with the shapes of
        theirs (else fixed), each at its calibrated mean; the database's CPU exponential."""
        cv2 = self.cpu_cv2.median if self.cpu_cv2 is not None else 1.0
        cpu_s = self.cpu_ms.median / 1000
        shaped = (Dist("fixed", cpu_s) if cv2 < 1e-4 else Dist("exp", cpu_s) if abs(cv2 - 1) < 1e-6
                  else Dist("lognormal", cpu_s, math.sqrt(math.log1p(cv2))))
        io_ms = self.io_ms.median
        db_ms = self.db_ms.median if self.db_ms else 0.0
        db_cpu_ms = min(self.db_cpu_ms.median, db_ms) if self.db_ms and self.db_cpu_ms else 0.0
        return Work(cpu=self._phase("cpu", self.cpu_ms.median, shaped),
                    io=self._phase("io", io_ms, Dist("fixed", io_ms / 1000)),
                    outside=self.outside_ms.median / 1000,
                    db=self._phase("db", db_ms - db_cpu_ms, Dist("fixed", (db_ms - db_cpu_ms) / 1000)) if db_ms else None,
                    db_cpu=Dist("exp", db_cpu_ms / 1000) if db_cpu_ms > 0 else None)

    def _phase(self, name: str, mean_ms: float, fallback: Sampler) -> Sampler:
        """A phase's measured shape at the calibrated mean, else ``fallback``."""
        q = self.phases_ms.get(name)
        if q is None or mean_ms <= 0:
            return fallback
        return Empirical(tuple((p, v / 1000) for p, v in q)).with_mean(mean_ms / 1000)

    @cached_property
    def service(self) -> tuple[float, ...]:
        """A request's own time in the server when alone (CPU, database, I/O: the mean-value model's
        floor) as a distribution: its quantiles at queueing.SERVICE_AT, moved to the floor's mean
        exactly. The app's whole time where it measured that (its Server-Timing "app": the parts
        together, with what their own figures miss, such as a CPU section preempted: 6.7 ms at the
        p99 for 4.07 ms of CPU, in tests/fixtures/service's runs), else SERVICE_DRAWS seeded draws of
        work()'s phases summed. Empty where the app measured none of them (the model keeps the floor)."""
        floor = (self.cpu_ms.median + self.io_ms.median + (self.db_ms.median if self.db_ms else 0.0)) / 1000
        if "app" in self.phases_ms:
            qs, vs = zip(*self.phases_ms["app"])
            values = np.interp(SERVICE_AT, qs, np.array(vs) / 1000)
        elif any(name in self.phases_ms for name in MEASURED_PHASES):
            w, rng = self.work(), np.random.default_rng(0)
            values = np.quantile(sum(p.draw(rng, SERVICE_DRAWS) for p in (w.cpu, w.db_cpu, w.db, w.io)
                                     if p is not None), SERVICE_AT)
        else:
            return ()
        return tuple(np.maximum(0.0, values + floor - values @ np.array(SERVICE_WEIGHT)).tolist())

    @cached_property
    def service_fits(self) -> list[Fit]:
        """The service distribution (``service``) fitted to each shape of model/fit.py, best first:
        what shape it has and how well that describes it. The model itself keeps the measured
        quantiles. Empty where there is no distribution, or it does not spread (a fixed time)."""
        return fit(self.service, SERVICE_AT, SERVICE_WEIGHT) if self.service else []

    def config(self, processes: int | None, threads: int | None, pool: int | None = None) -> Config:
        """The model's configuration of this server on these cores and this database, serving
        requests in a row on a kept-alive connection where its discipline does (learned, else the
        catalog's) and the connections stayed open at the calibration."""
        c = server_config(self.server, processes, threads, self.usable_cores, pool, self.db_cores)
        if self.usable_cores < self.cores:
            c = replace(c, cpus=self.cores)  # a quota over them
        d = self.discipline or Discipline.of_catalog(self.server)
        kept = self.keep_alive and c.routing == "per-process"
        return replace(c, inline=d.inline) if d is not None and d.inline and kept else c

    def memory_mib(self, processes: int, threads: int | None) -> float | None:
        if self.memory_per_process_mib is None:
            return None
        return (self.memory_base_mib or 0) + processes * self.memory_per_process_mib + processes * (threads or 1) * (
            self.memory_per_thread_mib or 0)


def server_config(server: str, processes: int | None, threads: int | None, cores: float, pool: int | None = None,
                  db_cores: float | None = None) -> Config:
    """A catalog server's knobs -> the model's configuration (defaults where a knob is not set; a
    pool not set is the server's default, catalog.default_pool)."""
    s = catalog.get_server(server)
    p = processes or (s.knobs["processes"].default if "processes" in s.knobs else 1) or 1
    if s.model == "async":
        t = None  # an event loop: as many requests in service as connections
    elif s.model in ("thread", "hybrid"):
        # a thread pool, or a thread per connection where there is no pool to size (WEBrick)
        t = (threads or s.knobs["threads"].default or 1) if "threads" in s.knobs else None
    else:
        t = 1  # process-per-request servers, and Thin's reactor with a blocking app
    if pool is None:
        pool = catalog.default_pool(s, {"threads": t})
    return Config(p, t, cores, gil=s.language in ("python", "ruby"), routing=s.routing, pool=pool, db_cores=db_cores)


def calibrate(observations: list[Observation], server: str, workload: str | None = None) -> Calibration:
    """Estimates for ``server`` (and ``workload``, default: the first observed) from its observations."""
    mine = [o for o in observations if o.server == server and (workload is None or o.workload == workload)]
    if not mine:
        raise ValueError(f"no valid runs of {server}" + (f" with workload {workload}" if workload else ""))
    workload = mine[0].workload
    mine = [o for o in mine if o.workload == workload]
    low = min(o.level for o in mine)
    lowest = [o for o in mine if o.level == low]
    timing = [o.timing_ms for o in lowest]
    cpu = estimate([o.cpu_ms for o in lowest])
    if cpu is None:
        raise ValueError(f"{server}: no CPU accounting in its runs (the probe's backend could not account CPU)")
    io = estimate([_io_ms(t) for t in timing]) or Figure.given(0.0)
    db = estimate([t["db"] for t in timing if "db" in t])
    db_cpu = estimate([o.db_cpu_ms for o in lowest]) if db else None
    db_cores = lowest[0].db_cores
    outside = estimate([_outside_ms(o.response_ms, o.timing_ms, cpu.median, io.median) for o in lowest]) or Figure.given(0.0)
    io, db, outside = _without_overlap(lowest, cpu, io, db, db_cpu, outside)
    app_cpu = estimate([t.get("cpu") for t in timing])
    gil = estimate([t["cpuwall"] - t["cpu"] for t in timing if "cpuwall" in t and "cpu" in t])
    other = estimate([t["app"] - t.get("cpuwall", 0) - t.get("io", _io_ms(t)) for t in timing if "app" in t])
    cv2 = estimate([o.cpu_cv2 for o in lowest])
    base, per_p, per_t = memory_fit(mine)
    limit = min((o.db_max_connections for o in mine if o.db_max_connections), default=None)
    phases = Lazy((n for o in lowest for n in o.phases_ms),
                  lambda name: pooled([o.phases_ms.made(name) if isinstance(o.phases_ms, Lazy) else o.phases_ms[name]
                                       for o in lowest if name in o.phases_ms]))
    return Calibration(server, workload, lowest[0].cores, cpu, io, outside, app_cpu, gil,
                       other, lowest[0].blocking_io, cv2, base, per_p, per_t, db, db_cpu,
                       estimate([t["pool"] for t in timing if "pool" in t]), db_cores, limit, phases,
                       all(o.keep_alive for o in lowest))


def _io_ms(timing: dict[str, float]) -> float:
    """A request's I/O wait at one client: the subject's I/O phase less the database's part of it
    (waiting for a connection, the query); for a user's app, which reports no I/O phase, its time in
    the app off its CPU sections (app - cpuwall: an awaited call, a blocking read), which at one client
    no other request's GIL or core holds up. A mix whose fifth of requests awaits 20 ms was calibrated
    as "I/O 0.00 ms" before, the wait left in "other in app", which the model does not carry."""
    if "io" in timing:
        return max(0.0, timing["io"] - timing.get("pool", 0.0) - timing.get("db", 0.0))
    if "app" in timing and "cpuwall" in timing:
        return max(0.0, timing["app"] - timing["cpuwall"])
    return 0.0


def _without_overlap(lowest: list[Observation], cpu: Figure, io: Figure, db: Figure | None,
                     db_cpu: Figure | None, outside: Figure) -> tuple[Figure, Figure | None, Figure]:
    """The waits with the CPU inside them taken out. The CPU accounting holds work done inside the
    waits the app reports (a driver encoding a query and decoding its rows, inside "db") and
    outside the app (the server parsing a request, inside "outside"); the database's CPU is inside
    "db" too. Where CPU and waits add up to more than the lowest load's mean response time, the
    waits' parts that are not the database's CPU are scaled down together until they fit, so the
    model does not count that CPU twice."""
    response = estimate([o.response_ms for o in lowest])
    if response is None:
        return io, db, outside
    db_cpu_ms = min(db_cpu.median, db.median) if db and db_cpu else 0.0
    waits = io.median + outside.median + (db.median - db_cpu_ms if db else 0.0)
    room = response.median - cpu.median - db_cpu_ms
    if waits <= 0 or waits <= room:
        return io, db, outside
    k = max(0.0, room) / waits
    if db:
        db = Figure(db_cpu_ms + (db.median - db_cpu_ms) * k, None, db.n)
    return io.times(k), db, outside.times(k)


def _outside_ms(response_ms: float | None, timing: dict[str, float], cpu_ms: float, io_ms: float) -> float | None:
    """Time outside the server's threads: the mean response time minus the app and the queue before it
    where the app reports them (so a busy lowest level does not count its queueing), else minus
    CPU and I/O per request."""
    if response_ms is None:
        return None
    if "app" in timing:
        return max(0.0, response_ms - timing["app"] - timing.get("queue", 0.0))
    return max(0.0, response_ms - cpu_ms - io_ms)


def memory_fit(observations: list[Observation]) -> tuple[float | None, float | None, float | None]:
    """(base, per process, per thread) MiB from the configurations' median PSS, by least squares with
    every term at least 0 (solve.nonnegative_lstsq): memory a process set cannot have less of
    than nothing. An unconstrained fit gave uvicorn "-15 MiB + 54.3 MiB/process", its two workers
    coming with a supervisor process that one worker has not."""
    per_config: dict[tuple[int, int], list[float]] = {}
    for o in observations:
        if o.pss_mib:
            c = server_config(o.server, o.processes, o.threads, 1)
            per_config.setdefault((c.processes, c.threads or 1), []).append(o.pss_mib)
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
    coef = nonnegative_lstsq(a, np.array([m for _, _, m in pts]))
    full = dict(zip(use, coef.tolist()))
    if len(procs) == 1:  # one process count: its memory is the base's and the processes' together
        p = next(iter(procs))
        return 0.0, full.get(0, 0.0) / p, full.get(2, 0.0)
    return full.get(0, 0.0), full.get(1, 0.0), full.get(2, 0.0)
