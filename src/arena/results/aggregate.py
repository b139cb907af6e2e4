"""The one aggregation of stored runs: ``aggregate(runs) -> cells``, one cell per configuration x
workload x load level. Pure (typed runs in, cells out).

A cell holds the repetitions of its configuration at its level and, over the *valid* ones only, the
median of each figure with an interval of that median (stats.median_interval: order statistics, or
the range of the repetitions when they are too few for a 95% interval), the mean latency split into
its parts (queue, GIL/CPU wait, CPU, I/O, the rest of the app, outside the app), and how the
requests spread over the worker processes. Invalid repetitions are counted and their reasons kept,
never mixed into a figure. Tables, charts, the ranking, the model's comparison and
``recommend --verify`` all read cells.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from arena import stats
from arena.limits import MiB  # one definition, re-exported to the figures' readers
from arena.results.runs import Database, Placement, Run


@dataclass(frozen=True)
class Figure:
    """The median over a cell's valid repetitions and an interval of that median."""

    median: float | None
    interval: stats.Interval | None
    n: int  # repetitions it is the median of

    @classmethod
    def of(cls, values: list) -> "Figure":
        values = [v for v in values if v is not None]
        return cls(_median(values), stats.median_interval(values), len(values))

    def scaled(self, k: float) -> "Figure":
        """The same figure in another unit (divided by ``k``)."""
        return self._map(lambda v: v / k)

    def times(self, k: float) -> "Figure":
        """The figure and its interval multiplied by ``k`` (>= 0)."""
        return self._map(lambda v: v * k)

    def _map(self, f: Callable[[float], float]) -> "Figure":
        iv = self.interval
        return Figure(None if self.median is None else f(self.median),
                      None if iv is None else stats.Interval(f(iv.lo), f(iv.hi), iv.method, iv.coverage), self.n)

    @classmethod
    def given(cls, value: float) -> "Figure":
        """A figure given by the user, not measured: no repetitions, no interval."""
        return cls(value, None, 0)

    def __str__(self) -> str:
        iv = self.interval
        if self.median is None:
            return "-"
        if iv is None:
            return f"{self.median:.3g}"
        what = "range" if iv.is_range else "95% CI of the median"
        return f"{self.median:.3g} ({what} {iv.lo:.3g}..{iv.hi:.3g}, {self.n} runs)"

    def overlaps(self, other: "Figure") -> bool:
        """Whether two figures' intervals overlap (then their difference is not shown to be real). A
        figure without an interval overlaps everything: nothing can be told apart without repetitions."""
        a, b = self.interval, other.interval
        return a is None or b is None or not (a.hi < b.lo or b.hi < a.lo)


OUTSIDE_THREAD = "CPU outside the request thread"
QUOTA_WAIT = "CPU quota wait"
DECOMPOSITION = ("queue", QUOTA_WAIT, "GIL/CPU wait", "CPU", OUTSIDE_THREAD, "pool wait", "database", "downstream API",
                 "I/O", "other in app", "outside the app")
# The request thread's CPU (the timing's cpu) and the server's whole CPU per request (its cgroup) are
# told apart beyond this ratio: an app that hands work to a thread pool waits for CPU the timing
# around its request thread does not see.
CPU_CHECK_RATIO = 1.2
# the parts of the I/O phase an app reports apart (spec.md: /db, /api) -> their Server-Timing names
IO_PARTS = (("pool wait", "pool"), ("database", "db"), ("downstream API", "api"))
# Server-Timing names with a meaning in Arena (the subject contract and the timing around a user's
# app); any other a response carries is the app's own (a Rails app's sql.active_record)
ARENA_METRICS = ("queue", "app", "cpu", "cpuwall", "io", "gc", "loop", "throttled", *(metric for _, metric in IO_PARTS))


def decomposition(server_timing: dict[str, float], response_ms: float,
                  cgroup_cpu_ms: float | None = None, quota_ms: float | None = None) -> dict[str, float | None]:
    """Mean response time split into parts, from mean Server-Timing figures (ms).

    queue: the request's wait before the app (X-Request-Start to the app's start); GIL/CPU wait:
    cpuwall - cpu (the wall time of the app's CPU sections beyond their CPU time: waiting for the
    GIL/GVL or for a core); CPU; of the I/O phase, what the app reports apart (pool wait: waiting for
    a pooled database connection; database: the query; downstream API: the call) and the rest of it
    (I/O); other in app: app - cpuwall - io; outside the app: the response time minus queue and app
    (network, the server's own work, parsing). The parts add up to the response time.

    ``cgroup_cpu_ms``, the server's whole CPU per request, cross-checks the request thread's: beyond
    CPU_CHECK_RATIO times it, the difference is CPU the request waited for in other threads (an
    async app's thread pool), taken out of "other in app" as CPU outside the request thread (at most
    all of "other in app": the rest is the server's own work, outside the app).

    ``quota_ms``, under a CPU quota the time its cgroup was throttled per request (the kernel's
    throttled time, summed over the CPUs it held back, over the requests answered), is the wait for
    the quota's next period: taken out of the GIL/CPU wait, where a request thread runnable but held
    back waits (at most all of it). Each CPU-second held back kept at least the one runnable thread
    there waiting, so it is the least the quota cost a request."""
    g = server_timing.get
    app, cpu, cpuwall, io = g("app"), g("cpu"), g("cpuwall"), g("io")
    queue = g("queue")
    parts: dict[str, float | None] = dict.fromkeys(DECOMPOSITION)
    parts["queue"] = queue
    if cpu is not None and cpuwall is not None:
        parts["GIL/CPU wait"] = max(0.0, cpuwall - cpu)
        parts["CPU"] = cpu
        if quota_ms is not None:
            parts[QUOTA_WAIT] = min(quota_ms, parts["GIL/CPU wait"])
            parts["GIL/CPU wait"] -= parts[QUOTA_WAIT]
    apart = {part: g(metric) for part, metric in IO_PARTS if g(metric) is not None}
    parts.update(apart)
    parts["I/O"] = None if io is None else max(0.0, io - sum(apart.values()))
    if app is not None:
        parts["other in app"] = max(0.0, app - (cpuwall or 0) - (io or 0))
        parts["outside the app"] = max(0.0, response_ms - app - (queue or 0))
        if cpu is not None and cgroup_cpu_ms is not None and cgroup_cpu_ms > CPU_CHECK_RATIO * cpu:
            moved = min(cgroup_cpu_ms - cpu, parts["other in app"])
            parts[OUTSIDE_THREAD], parts["other in app"] = moved, parts["other in app"] - moved
    return parts


def mean_timing_ms(run: Run) -> dict[str, float]:
    """A run's mean Server-Timing figures per request, ms, by metric name (results/load_result.py
    LoadFigures); {} where it has none."""
    return dict(run.figures.timing_ms or {}) if run.figures else {}


def mean_response_ms(run: Run) -> float | None:
    return run.figures.response_ms if run.figures else None


def cpu_per_request_ms(run: Run) -> float | None:
    """The server's CPU per request over the run's window, less what the server burns idle (its
    timers and reactors, measured after the server's start where the store has it)."""
    res = run.resources
    if res is None or res.cpu_s is None:
        return None
    cpu = res.cpu_s - (res.idle_cpu_cores or 0.0) * res.window_s
    answered = (run.throughput or 0) * res.window_s
    return max(cpu, 0.0) / answered * 1000 if answered > 0 else None


def error_pct(run: Run) -> float | None:
    """A run's errors (transport errors and unexpected statuses) as a share of its requests, %."""
    f = run.figures
    answered = f.completed + f.errors if f else 0
    return 100 * f.errors / answered if answered else None


def run_decomposition(run: Run) -> dict[str, float | None] | None:
    """One run's mean latency in parts (None when its app reported no Server-Timing), its request
    thread's CPU cross-checked with its server's (cpu_per_request_ms)."""
    mean = mean_response_ms(run)
    if mean is None or run.figures.timing_ms is None:
        return None
    throttled, answered = run.throttled_ms, run.figures.completed
    quota = throttled / answered if throttled and answered else None  # a quota that held it back
    return decomposition(mean_timing_ms(run), mean, cpu_per_request_ms(run), quota)


@dataclass(frozen=True)
class Cell(Placement):
    """One configuration's repetitions at one workload and load level, and their figures."""

    runs: tuple[Run, ...] = field(repr=False)  # every repetition, valid or not
    throughput: Figure
    p50_us: Figure
    p90_us: Figure
    p99_us: Figure
    pss_bytes: Figure
    uss_bytes: Figure
    cpu_s: Figure
    flags: tuple[str, ...]  # why the invalid repetitions were left out (each reason once)
    decomposition: dict[str, float | None] | None  # median over valid repetitions of each part, ms
    balance: tuple[float, ...]  # share of requests per worker process, busiest first (summed over valid runs)
    cpu_cores: Figure = Figure(None, None, 0)  # the server's cores busy over the window
    service_cores: dict[str, Figure] = field(default_factory=dict)  # each service's (by kind), over the same window
    database: Database = Database()  # processes x pool, max_connections, refusals summed over every repetition
    app_metrics: dict[str, Figure] = field(default_factory=dict)  # the app's own metrics, mean ms per request
    response_ms: Figure = Figure(None, None, 0)  # the mean response time of each valid run, ms
    front: Front | None = None  # a balancer's figures (None: a bare server or a proxy)
    error_pct: Figure = Figure(None, None, 0)  # errors, % of the requests answered or failed, per valid run
    throttled_ms_per_s: Figure = Figure(None, None, 0)  # under a CPU quota: time throttled per second of window
    # streams of server-sent events (where its runs had any): p99 of the time to the first event, of the
    # gaps between events, and of the other answers' response time (a mix's ordinary requests), ms
    first_event_p99_ms: Figure = Figure(None, None, 0)
    event_gap_p99_ms: Figure = Figure(None, None, 0)
    others_p99_ms: Figure = Figure(None, None, 0)

    @property
    def streams(self) -> bool:
        """Whether its valid runs answered streams of server-sent events."""
        return any(r.figures and r.figures.streams and r.figures.streams.count for r in self.valid_runs)

    @property
    def pool(self) -> int | None:
        """Database connections per process (None: the server's default)."""
        return self.runs[0].pool

    @property
    def valid_runs(self) -> tuple[Run, ...]:
        return tuple(r for r in self.runs if r.valid)

    @property
    def valid(self) -> int:
        return len(self.valid_runs)

    @property
    def total(self) -> int:
        return len(self.runs)


@dataclass(frozen=True)
class Front:
    """A balancer's view of a cell's valid runs (its request log over each run's window)."""

    queue_ms: Figure  # mean time a request waited in the balancer's queue, per run
    queue_p99_ms: Figure
    shares: tuple[float, ...]  # % of the requests each instance served (i0, i1, ...), over the runs


def _front(runs: tuple[Run, ...]) -> Front | None:
    logged = [w for w in (r.window for r in runs) if w is not None]
    if not logged:
        return None
    counts = [sum(w.served[i] for w in logged) for i in range(len(logged[0].served))]
    total = sum(counts)
    return Front(Figure.of([w.queue_ms_mean for w in logged]), Figure.of([w.queue_ms_p99 for w in logged]),
                 tuple(100 * c / total for c in counts) if total else ())


def _median(values: list) -> float | None:
    """The median of the values given (none: None), where no interval is wanted."""
    values = [v for v in values if v is not None]
    return stats.median(values) if values else None


def _balance(runs: tuple[Run, ...]) -> tuple[float, ...]:
    counts: list[int] = []
    for r in runs:
        per = list(r.figures.workers) if r.figures else []
        n = max(len(counts), len(per))
        counts = [a + b for a, b in zip(counts + [0] * (n - len(counts)), per + [0] * (n - len(per)))]
    total = sum(counts)
    return tuple(100 * c / total for c in counts) if total else ()


def _decomposition(runs: tuple[Run, ...]) -> dict[str, float | None] | None:
    parts = [p for p in (run_decomposition(r) for r in runs) if p is not None]
    if not parts:
        return None
    return {k: _median([p[k] for p in parts]) for k in DECOMPOSITION}


def _app_metrics(runs: tuple[Run, ...]) -> dict[str, Figure]:
    """The app's own Server-Timing metrics (not ARENA_METRICS): mean ms per request of each run, as
    figures over the runs."""
    means = [mean_timing_ms(r) for r in runs if r.figures and r.figures.timing_ms is not None]
    names = dict.fromkeys(k for m in means for k in m if k not in ARENA_METRICS)
    return {k: Figure.of([m.get(k, 0.0) for m in means]) for k in names}


def _database(runs: list[Run]) -> Database:
    dbs = [r.database for r in runs]
    counted = [d.refused for d in dbs if d.refused is not None]
    first = next((d.refused_first for d in dbs if d.refused_first), None)
    return Database(dbs[0].connections, dbs[0].max_connections, sum(counted) if counted else None, first)


def cell(runs: list[Run]) -> Cell:
    """The cell of one configuration's repetitions at one workload and level."""
    first = runs[0]
    ok = tuple(r for r in runs if r.valid)
    return Cell(
        first.config, first.label, first.server, first.app, first.workload, first.processes, first.threads,
        first.connections, first.model, first.level, tuple(runs),
        throughput=Figure.of([r.throughput for r in ok]), p50_us=Figure.of([r.p50_us for r in ok]),
        p90_us=Figure.of([r.p90_us for r in ok]), p99_us=Figure.of([r.p99_us for r in ok]),
        pss_bytes=Figure.of([r.pss_bytes or None for r in ok]), uss_bytes=Figure.of([r.uss_bytes or None for r in ok]),
        cpu_s=Figure.of([r.cpu_s for r in ok]),
        flags=tuple(dict.fromkeys(f for r in runs if not r.valid for f in r.flags)),
        decomposition=_decomposition(ok), balance=_balance(ok),
        cpu_cores=Figure.of([r.resources.cpu_cores for r in ok if r.resources]),
        service_cores={k: Figure.of([r.services[k].cpu_cores for r in ok if k in r.services])
                       for k in dict.fromkeys(k for r in ok for k in r.services)},
        database=_database(runs), app_metrics=_app_metrics(ok),
        response_ms=Figure.of([mean_response_ms(r) for r in ok]), front=_front(ok),
        error_pct=Figure.of([error_pct(r) for r in ok]),
        throttled_ms_per_s=Figure.of([r.throttled_ms / r.resources.window_s for r in ok
                                      if r.throttled_ms is not None and r.resources.window_s > 0]),
        **_streams(ok))


def _streams(runs: tuple[Run, ...]) -> dict[str, Figure]:
    """The stream figures of a cell's valid runs (none where they answered no stream)."""
    figures = [r.figures.streams for r in runs if r.figures and r.figures.streams and r.figures.streams.count]
    if not figures:
        return {}
    return {name: Figure.of([getattr(f, name) for f in figures])
            for name in ("first_event_p99_ms", "event_gap_p99_ms", "others_p99_ms")}


def aggregate(runs: list[Run]) -> list[Cell]:
    """One cell per (configuration, workload, load level): configurations in the order they first
    ran, then workloads in that order, then levels ascending."""
    groups: dict[tuple, list[Run]] = {}
    for r in runs:
        groups.setdefault((r.config, r.label, r.workload, r.model, r.level), []).append(r)
    configs = {k: i for i, k in enumerate(dict.fromkeys((r.config, r.label) for r in runs))}
    order = {w: i for i, w in enumerate(dict.fromkeys(r.workload for r in runs))}
    keys = sorted(groups, key=lambda k: (configs[k[:2]], order[k[2]], k[4]))
    return [cell(sorted(groups[k], key=lambda r: r.repetition)) for k in keys]


# The figures of a cell by the names goals, thresholds and comparisons use for them: (unit, the cell's
# figure in that unit, whether higher is better).
FIGURES: dict[str, tuple[str, Callable[[Cell], Figure], bool]] = {
    "throughput": ("req/s", lambda c: c.throughput, True),
    "p50": ("ms", lambda c: c.p50_us.scaled(1000), False),
    "p90": ("ms", lambda c: c.p90_us.scaled(1000), False),
    "p99": ("ms", lambda c: c.p99_us.scaled(1000), False),
    "memory": ("MiB", lambda c: c.pss_bytes.scaled(MiB), False),
    "errors": ("%", lambda c: c.error_pct, False),
    "first_event_p99": ("ms", lambda c: c.first_event_p99_ms, False),  # streams of server-sent events
    "event_gap_p99": ("ms", lambda c: c.event_gap_p99_ms, False),
}


# ---------------------------------------------------------------------- views of cells


def labels(cells: list[Cell]) -> list[str]:
    return list(dict.fromkeys(c.label for c in cells))


def workloads(cells: list[Cell]) -> list[str]:
    return list(dict.fromkeys(c.workload for c in cells))


def top_level(cells: list[Cell]) -> float:
    """The highest load level with a valid run among ``cells`` (the highest level if none is valid)."""
    return max((c.level for c in cells if c.valid), default=max(c.level for c in cells))
