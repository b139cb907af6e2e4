"""A soak's memory over requests, per worker (pure: a stored run in, figures out).

A soak ([load] soak) is one long run whose probe kept each process's PSS at every sample
(ResourceResult.pss_series) while arena-load counted each interval's completions per server process
(SeriesPoint.workers). At each sample, a worker had served the requests of the intervals before it
(the one it falls in prorated); its PSS against those requests is a line whose slope is its growth,
in MiB per 1,000 requests, with a 95% interval (stats.slope_interval). The processes that joined
after the first sample (a worker restarted: max_requests, an OOM kill) and those gone by the last
are counted. What the growth comes to at the run's memory limit is said where it has one.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate

from arena import stats
from arena.limits import MiB
from arena.results.runs import Run

PER = 1000  # growth is said per this many requests
LEAST_SAMPLES = 3  # a worker's line needs this many samples


@dataclass(frozen=True)
class Worker:
    """One process that served requests: (requests served by then, PSS in MiB) at each sample, and
    its growth in MiB per 1,000 requests with a 95% interval (None: too few samples or requests)."""

    pid: int
    points: tuple[tuple[float, float], ...]
    growth: tuple[float, float, float] | None  # (MiB per PER requests, lo, hi)

    @property
    def requests(self) -> float:
        return self.points[-1][0] if self.points else 0.0


@dataclass(frozen=True)
class Soak:
    """A soak run's workers and what its process set did over the window."""

    label: str
    server: str
    level: str
    window_s: float
    workers: tuple[Worker, ...]
    started: int  # processes that joined after the first sample
    gone: int  # processes of the first sample not in the last
    first_mib: float  # the whole set's PSS at the first sample and at the last
    last_mib: float
    limit_mib: float | None  # the run's memory limit
    flag: str | None = None  # why the run is invalid (its first cause), where it is

    @property
    def growth(self) -> float | None:
        """The median worker's growth, MiB per 1,000 requests (None: no worker's could be told)."""
        told = [w.growth[0] for w in self.workers if w.growth is not None]
        return stats.median(told) if told else None

    def requests_to_limit(self) -> float | None:
        """Requests (over every worker) until the set's PSS reaches its memory limit at this growth,
        from the last sample; None without a limit or a growth above zero."""
        g = self.growth
        if self.limit_mib is None or g is None or g <= 0:
            return None
        return max(0.0, (self.limit_mib - self.last_mib) / g * PER)

    def max_requests(self, spare: float = 0.1) -> int | None:
        """Requests each worker may serve before it is restarted so that every worker at that count
        keeps the set within its limit, ``spare`` of it left: (limit x (1 - spare) - what the set took
        with no growth) / (workers x growth per request); None where that cannot be told."""
        g = self.growth
        served = sum(w.requests for w in self.workers)
        if self.limit_mib is None or g is None or g <= 0 or not self.workers:
            return None
        base = self.last_mib - g * served / PER  # the set as it would be with no request served
        room = self.limit_mib * (1 - spare) - base
        return int(room / (len(self.workers) * g / PER)) if room > 0 else 0


def soak_of(run: Run) -> Soak | None:
    """The soak of a run that kept each process's memory over its window (None: not a soak)."""
    res = run.resources
    series = res.pss_series if res is not None else None
    if not series or run.load is None:
        return None
    points, step = run.load.series, run.load.settings.interval_s
    starts = [p.t for p in points]
    serving = sorted({pid for p in points for pid in (p.workers or {})})
    before = {pid: list(accumulate(((p.workers or {}).get(pid, 0) for p in points), initial=0)) for pid in serving}

    def served(pid: int, t: float) -> float:
        """Requests ``pid`` had served by ``t`` seconds into the window: the intervals before the one
        ``t`` falls in, and that one prorated."""
        i = bisect_right(starts, t) - 1
        if i < 0:
            return 0.0
        whole = before[pid]
        return whole[i] + (whole[i + 1] - whole[i]) * min(1.0, (t - starts[i]) / step)

    samples = [(t, {int(pid): pss for pid, pss in by.items()}) for t, by in series]
    workers = []
    for pid in serving:
        line = tuple((served(pid, t), by[pid] / MiB) for t, by in samples if pid in by)
        fit = None
        if len(line) >= LEAST_SAMPLES and len({x for x, _ in line}) > 1:
            slope, lo, hi = stats.slope_interval([x for x, _ in line], [y for _, y in line])
            fit = (slope * PER, lo * PER, hi * PER)
        workers.append(Worker(pid, line, fit))
    first, last = set(samples[0][1]), set(samples[-1][1])
    joined = {pid for _, by in samples[1:] for pid in by} - first
    limit = run.launched.limits.memory_mib
    return Soak(run.label, run.server, run.level_label, res.window_s, tuple(workers), len(joined), len(first - last),
                sum(samples[0][1].values()) / MiB, sum(samples[-1][1].values()) / MiB, limit,
                None if run.valid else (run.flags[0] if run.flags else "invalid"))
