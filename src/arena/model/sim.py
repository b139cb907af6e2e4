"""A discrete-event simulator of fleets behind a balancer: the tails a mean-value model misses.

Pure and seeded (numbers in, numbers out). A fleet is ``instances`` copies of a server that each
serve ``slots`` requests at a time (a single-threaded dyno: 1) in arrival order; a balancer hands
every arrival to one instance by its policy, HAProxy's (topology.POLICIES: roundrobin, leastconn,
random, random(2), the power of two choices), or holds it in its own queue until any slot of any
instance is free (``central``: HAProxy with ``maxconn = slots``, Rap Genius's "intelligent"
router). Least connections counts what an instance holds, waiting and in service, so with one slot
it is the join-the-shortest-queue policy.

Each instance's slots are a FIFO multi-server queue, so a request's start is the later of its
arrival and its instance's earliest free slot: the simulation needs no event list beyond a heap of
free times per instance (and, for the policies that look at the instances, a heap of the
completions still ahead of each arrival; least connections looks at every instance, so it costs
O(instances) per request). Checked against M/M/c (Erlang C) and M/G/1 (Pollaczek-Khinchine) in the
tests.

One instance (model/instance_sim.py) is an event simulation of processes, threads, GILs and cores.
Statistics over replications (summarize) use arena.stats' rules: nearest-rank percentiles and
Student's t intervals of the mean.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from arena import stats
from arena.errors import ArenaError
from arena.topology import POLICIES

FLEET_POLICIES = (*POLICIES, "central")


# ---------------------------------------------------------------------- service times


@dataclass(frozen=True)
class Dist:
    """A service-time distribution in seconds, clipped to [lo, hi].

    kind: "fixed" (a), "exp" (mean a), "lognormal" (mean a, sigma b), "weibull" (shape a, median b)."""

    kind: str
    a: float
    b: float = 0.0
    lo: float = 0.0
    hi: float = math.inf

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            x = np.full(n, self.a)
        elif self.kind == "exp":
            x = rng.exponential(self.a, n)
        elif self.kind == "lognormal":  # mean a: mu = ln a - sigma^2 / 2
            x = rng.lognormal(math.log(self.a) - self.b**2 / 2, self.b, n)
        elif self.kind == "weibull":  # median b = scale * ln(2)^(1/shape)
            x = self.b / math.log(2) ** (1 / self.a) * rng.weibull(self.a, n)
        else:
            raise ValueError(self.kind)
        return np.clip(x, self.lo, self.hi)

    @property
    def text(self) -> str:
        ms = lambda s: f"{s * 1e3:g} ms"  # noqa: E731
        body = {"fixed": lambda: ms(self.a), "exp": lambda: f"exponential, mean {ms(self.a)}",
                "lognormal": lambda: f"lognormal, mean {ms(self.a)}, sigma {self.b:g}",
                "weibull": lambda: f"Weibull, shape {self.a:g}, median {ms(self.b)}"}[self.kind]()
        clip = f", clipped to {ms(self.lo)} .. {ms(self.hi)}" if self.lo > 0 or self.hi < math.inf else ""
        return body + clip




@dataclass(frozen=True)
class Empirical:
    """A measured distribution in seconds, as its quantile function: (probability, value) points,
    linear between them (a stored run's Server-Timing percentiles, its minimum at 0 and maximum at
    1), shifted by ``shift`` and scaled by ``scale``."""

    points: tuple[tuple[float, float], ...]
    shift: float = 0.0
    scale: float = 1.0

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        qs, vs = zip(*self.points)
        return np.maximum(0.0, np.interp(rng.random(n), qs, vs) * self.scale + self.shift)

    @property
    def mean(self) -> float:
        qs, vs = np.array(self.points).T
        return float(np.sum(np.diff(qs) * (vs[1:] + vs[:-1]) / 2)) * self.scale + self.shift

    def with_mean(self, mean: float) -> "Empirical":
        """The same shape moved to ``mean``: shifted where that adds (a constant part of it, such as
        the server's own CPU besides the app's), scaled down where it takes away."""
        base = Empirical(self.points)
        have = base.mean
        if have <= 0:
            return Empirical(((0.0, mean), (1.0, mean)))
        return Empirical(self.points, shift=mean - have) if mean >= have else Empirical(self.points, scale=mean / have)


Sampler = Dist | Empirical  # what a simulated phase draws its times from


DIST_FORM = ('"fixed:20ms", "exp:mean=20ms", "lognormal:mean=50ms,sigma=1.5" or "weibull:shape=0.46,median=50ms", '
             'optionally ",min=10ms,max=30s"')


def parse_dist(text: str) -> Dist:
    """A distribution as written on the command line (DIST_FORM); ArenaError naming what is wrong."""
    from arena.plan.reader import parse_duration

    bad = ArenaError(f"must be a distribution such as {DIST_FORM}, got '{text}'")
    kind, _, rest = text.partition(":")
    params: dict[str, str] = {}
    for part in filter(None, rest.split(",")):
        key, eq, value = part.partition("=")
        if not eq:
            key, value = "value", key
        params[key.strip()] = value.strip()
    times = {k: parse_duration(v) for k, v in params.items() if k in ("value", "mean", "median", "min", "max")}
    if any(v is None for v in times.values()):
        raise bad
    lo, hi = times.pop("min", 0.0), times.pop("max", math.inf)
    try:
        if kind == "fixed" and set(params) - {"min", "max"} == {"value"}:
            d = Dist("fixed", times["value"], lo=lo, hi=hi)
        elif kind == "exp" and set(params) - {"min", "max"} == {"mean"}:
            d = Dist("exp", times["mean"], lo=lo, hi=hi)
        elif kind == "lognormal" and set(params) - {"min", "max"} == {"mean", "sigma"}:
            d = Dist("lognormal", times["mean"], float(params["sigma"]), lo, hi)
        elif kind == "weibull" and set(params) - {"min", "max"} == {"shape", "median"}:
            d = Dist("weibull", float(params["shape"]), times["median"], lo, hi)
        else:
            raise bad
    except ValueError:
        raise bad from None
    if d.a <= 0 or d.b < 0 or (d.kind in ("lognormal", "weibull") and d.b <= 0) or lo > hi:
        raise bad
    return d


# ---------------------------------------------------------------------- the fleet


@dataclass(frozen=True)
class SimRun:
    """One replication: per request, when it arrived, how long it queued and its response time."""

    arrivals: np.ndarray
    waits: np.ndarray
    responses: np.ndarray
    served: np.ndarray  # requests per instance

    @property
    def throughput(self) -> float:
        done = self.arrivals + self.responses
        return len(done) / (done.max() - self.arrivals.min()) if len(done) > 1 else 0.0


def simulate_fleet(instances: int, policy: str, rate: float, service: Sampler, requests: int, *,
                   slots: int = 1, seed: int = 1, arrival: str = "poisson") -> SimRun:
    """``requests`` arrivals at ``rate`` per second (``arrival``: "poisson", or "constant" spacing
    as arena-load's open model sends by default), each served for a draw of ``service`` by the
    instance the policy picks (or, for ``central``, by the first free slot of any)."""
    if policy not in FLEET_POLICIES:
        raise ArenaError(f"policy: must be one of {', '.join(FLEET_POLICIES)}, got '{policy}'")
    rng = np.random.default_rng(seed)
    arrivals = (np.arange(1, requests + 1) / rate if arrival == "constant"
                else np.cumsum(rng.exponential(1 / rate, requests)))
    work = service.draw(rng, requests)
    picks = rng.integers(0, instances, size=(requests, 2))  # drawn up front: one stream per use
    waits = np.empty(requests)
    where = np.empty(requests, dtype=np.int64)  # the instance that served each
    if policy == "central":
        free = [(0.0, j) for j in range(instances * slots)]  # one FIFO queue before every slot of the fleet
        for i in range(requests):
            at, j = free[0]
            start = max(arrivals[i], at)
            heapq.heapreplace(free, (start + work[i], j))
            waits[i], where[i] = start - arrivals[i], j // slots
        return SimRun(arrivals, waits, waits + work, np.bincount(where, minlength=instances))
    slots_free = [[0.0] * slots for _ in range(instances)]  # each a heap of its slots' free times
    ahead: list[list[float]] = [[] for _ in range(instances)]  # each a heap of its completions still to come

    def holding(k: int, now: float) -> int:
        h = ahead[k]
        while h and h[0] <= now:
            heapq.heappop(h)
        return len(h)

    for i in range(requests):
        now = arrivals[i]
        if policy == "random":
            k = int(picks[i, 0])
        elif policy == "roundrobin":
            k = i % instances
        elif policy == "random(2)":
            a, b = int(picks[i, 0]), int(picks[i, 1])
            k = a if holding(a, now) <= holding(b, now) else b
        else:  # leastconn: the fewest held, the lowest index among equals (HAProxy's order)
            k = min(range(instances), key=lambda j: (holding(j, now), j))
        start = max(now, slots_free[k][0])
        done = start + work[i]
        heapq.heapreplace(slots_free[k], done)
        heapq.heappush(ahead[k], done)
        waits[i], where[i] = start - now, k
    return SimRun(arrivals, waits, waits + work, np.bincount(where, minlength=instances))


# ---------------------------------------------------------------------- replications


@dataclass(frozen=True)
class Mean:
    """A statistic over replications: their mean and its 95% confidence interval (Student's t)."""

    mean: float
    interval: stats.Interval

    @property
    def lo(self) -> float:
        return self.interval.lo

    @property
    def hi(self) -> float:
        return self.interval.hi

    @staticmethod
    def of(values: list[float]) -> "Mean":
        m, lo, hi = stats.mean_interval(values)
        return Mean(m, stats.Interval(lo, hi, "Student's t", 0.95))


QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999))


@dataclass(frozen=True)
class Summary:
    throughput: Mean
    wait_mean: Mean
    response: dict[str, Mean]  # by QUANTILES' names
    wait: dict[str, Mean]
    replications: int


def _percentiles(values: np.ndarray) -> dict[str, float]:
    """QUANTILES of ``values`` by nearest rank (stats.rank), sorted once."""
    ordered = np.sort(values)
    return {name: float(ordered[stats.rank(q, len(ordered)) - 1]) for name, q in QUANTILES}


def summarize(runs: list[SimRun], warmup: float = 0.1) -> Summary:
    """Statistics over replications, each without its first ``warmup`` share of requests (the
    system starting empty)."""
    kept = [(r, int(len(r.waits) * warmup)) for r in runs]
    responses = [_percentiles(r.responses[skip:]) for r, skip in kept]
    waits = [_percentiles(r.waits[skip:]) for r, skip in kept]

    return Summary(
        throughput=Mean.of([r.throughput for r in runs]),
        wait_mean=Mean.of([float(r.waits[skip:].mean()) for r, skip in kept]),
        response={name: Mean.of([p[name] for p in responses]) for name, _ in QUANTILES},
        wait={name: Mean.of([p[name] for p in waits]) for name, _ in QUANTILES},
        replications=len(runs))


def fleet(instances: int, policy: str, rate: float, service: Sampler, requests: int, *, slots: int = 1,
          replications: int = 5, seed: int = 1, arrival: str = "poisson") -> Summary:
    """``replications`` independent runs (seeds seed, seed + 1, ...), summarized."""
    return summarize([simulate_fleet(instances, policy, rate, service, requests, slots=slots, seed=seed + r,
                                     arrival=arrival)
                      for r in range(replications)])


def instances_for(target_wait_s: float, policy: str, rate: float, service: Sampler, requests: int, *,
                  slots: int = 1, replications: int = 3, seed: int = 1, arrival: str = "poisson", lo: int = 1,
                  hi: int = 100_000) -> int | None:
    """The fewest instances whose mean queue time under ``policy`` is at most ``target_wait_s``
    (bisection; the mean wait falls as instances are added), or None beyond ``hi``."""
    def ok(n: int) -> bool:
        return fleet(n, policy, rate, service, requests, slots=slots, replications=replications,
                     seed=seed, arrival=arrival).wait_mean.mean <= target_wait_s

    if not ok(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo
