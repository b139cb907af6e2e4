"""Queueing models. Pure: numbers in, numbers out; no I/O.

References
- [RL80] M. Reiser, S. S. Lavenberg, "Mean-Value Analysis of Closed Multichain Queuing Networks",
  J. ACM 27(2), 1980.
- [QSP] E. D. Lazowska, J. Zahorjan, G. S. Graham, K. C. Sevcik, *Quantitative System
  Performance*, Prentice-Hall 1984: ch. 6 (exact MVA), ch. 8 (flow-equivalent servers),
  ch. 20 (load-dependent MVA with marginal queue-length probabilities).
- [Rei79] M. Reiser, "A Queueing Network Analysis of Computer Communication Networks with Window
  Flow Control", IEEE Trans. Commun. 27(8), 1979: FCFS stations with non-exponential service in
  MVA, the request in service having (1 + cs^2) / 2 of a service time left.
- [BCMP75] F. Baskett, K. M. Chandy, R. R. Muntz, F. G. Palacios, "Open, Closed, and Mixed
  Networks of Queues with Different Classes of Customers", J. ACM 22(2), 1975: product form with
  processor-sharing and delay stations whatever their service time's distribution.
- [Kle75] L. Kleinrock, *Queueing Systems, Vol. 1*, Wiley 1975: birth-death processes, M/M/c
  (Erlang C), the machine-repairman model M/M/1//N.
- [AC90] A. O. Allen, *Probability, Statistics and Queueing Theory*, 2nd ed., Academic Press
  1990, §6: the Allen-Cunneen approximation for G/G/c.
- [NR] W. H. Press et al., *Numerical Recipes*, 3rd ed., §6.2: the incomplete gamma function.
- [Whi83] W. Whitt, "The Queueing Network Analyzer", Bell System Technical Journal 62(9), 1983:
  the variability of a G/G/m station's departures.
- [HB13] M. Harchol-Balter, *Performance Modeling and Design of Computer Systems*, Cambridge
  2013, §§23-24: a response time as the waiting time plus the request's own service time,
  independent of it in FCFS queues: its distribution is the convolution of the two.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

from arena.model.solve import root

# ---------------------------------------------------------------------- exact MVA


@dataclass(frozen=True)
class Station:
    """A service center of a closed network.

    kind "queue": one server, FCFS (load independent); "delay": infinite servers (a pure delay);
    "ld": load dependent, serving at ``alpha[j-1]`` times the rate of one server when j
    customers are present (``alpha`` continues with its last value). ``demand``: seconds of service
    per request at one server (visits x service time). ``cv2``: the squared coefficient of variation
    of a "queue" station's service time (1: exponential, exact MVA; otherwise [Rei79]'s
    approximation)."""

    name: str
    demand: float
    kind: str = "queue"
    alpha: tuple[float, ...] = (1.0,)
    cv2: float = 1.0

    def rate_multiplier(self, j: int) -> float:
        return self.alpha[min(j, len(self.alpha)) - 1]


@dataclass(frozen=True)
class MvaPoint:
    n: int
    throughput: float  # requests per second
    response: float  # seconds, the stations' residence times summed (think time excluded)
    residence: dict[str, float]
    queue: dict[str, float]  # mean number present
    marginals: dict[str, list[float]]  # load-dependent stations: P(j present), j = 0..n


def mva(stations: Sequence[Station], customers: int, think: float = 0.0) -> list[MvaPoint]:
    """Exact single-class MVA for 1..``customers`` customers [RL80]; load-dependent stations by
    their marginal queue-length probabilities [QSP ch. 20]. ``think``: the customers' own delay."""
    if customers < 1:
        raise ValueError("customers must be at least 1")
    q = {s.name: 0.0 for s in stations}
    x = 0.0  # throughput with one customer fewer
    queues = [s for s in stations if s.kind == "queue" and s.demand > 0]
    bottleneck = max(queues, key=lambda s: s.demand) if queues else None
    cap = 1 / bottleneck.demand if bottleneck else math.inf
    p = {s.name: [1.0] for s in stations if s.kind == "ld"}  # P(j present | n-1 customers)
    out = []
    for n in range(1, customers + 1):
        r = {}
        for s in stations:
            if s.kind == "delay":
                r[s.name] = s.demand
            elif s.kind == "queue":
                # the one in service (busy with probability U = X D) has (1 + cv2)/2 of a service left
                busy = min(1.0, x * s.demand)
                r[s.name] = s.demand * (1 + q[s.name] - busy * (1 - s.cv2) / 2)
            else:
                r[s.name] = sum(j * s.demand / s.rate_multiplier(j) * p[s.name][j - 1] for j in range(1, n + 1))
        total = sum(r.values())
        x = n / (think + total) if think + total > 0 else math.inf
        if x > cap:  # [Rei79]'s correction can overshoot the bottleneck: hold X at 1/D_max, the rest queues there
            x = cap
            r[bottleneck.name] += n / x - think - total
            total = n / x - think
        for s in stations:
            q[s.name] = x * r[s.name]
            if s.kind == "ld":
                prev = p[s.name]
                new = [0.0] * (n + 1)
                for j in range(1, n + 1):
                    new[j] = x * s.demand / s.rate_multiplier(j) * prev[j - 1]
                new[0] = max(0.0, 1.0 - sum(new[1:]))  # rounding can push it a hair below 0
                p[s.name] = new
        out.append(MvaPoint(n, x, total, dict(r), dict(q), {k: list(v) for k, v in p.items()}))
    return out


def birth_death(up: Sequence[float], down: Sequence[float]) -> list[float]:
    """Stationary distribution of a finite birth-death chain on 0..K [Kle75 §3]: ``up[j]`` the rate
    from j to j+1 (j < K), ``down[j]`` the rate from j+1 to j."""
    weights = [1.0]
    for u, d in zip(up, down):
        weights.append(weights[-1] * u / d)
    total = sum(weights)
    return [w / total for w in weights]


# ---------------------------------------------------------------------- open queues


def erlang_b(servers: int, load: float) -> float:
    """Erlang B blocking probability for ``load`` = lambda/mu Erlangs (stable recurrence)."""
    b = 1.0
    for k in range(1, servers + 1):
        b = load * b / (k + load * b)
    return b


def erlang_c(servers: int, load: float) -> float:
    """Erlang C: probability that an arrival waits in M/M/c [Kle75 §3.5]; 1 when overloaded."""
    if load >= servers:
        return 1.0
    b = erlang_b(servers, load)
    return b / (1 - (load / servers) * (1 - b))


@dataclass(frozen=True)
class OpenResult:
    overloaded: bool
    utilization: float  # per server
    p_wait: float
    wait_mean: float  # seconds in queue (inf when overloaded)
    response_mean: float

    def wait_quantile(self, q: float) -> float:
        """Waiting-time quantile: the wait of those who wait is exponential with mean
        wait_mean / p_wait (exact for M/M/c, the usual approximation for G/G/c)."""
        if self.overloaded:
            return math.inf
        if self.p_wait <= 1 - q or self.wait_mean == 0:
            return 0.0
        return self.wait_mean / self.p_wait * math.log(self.p_wait / (1 - q))


def allen_cunneen(arrival_rate: float, service_s: float, servers: int, ca2: float, cs2: float) -> OpenResult:
    """G/G/c by Allen-Cunneen [AC90]: Wq = Erlang-C wait of M/M/c x (ca^2 + cs^2) / 2, with ca^2 and
    cs^2 the squared coefficients of variation of interarrival and service times."""
    load = arrival_rate * service_s
    util = load / servers
    if util >= 1:
        return OpenResult(True, util, 1.0, math.inf, math.inf)
    c = erlang_c(servers, load)
    wq = c * service_s / (servers - load) * (ca2 + cs2) / 2
    return OpenResult(False, util, c, wq, wq + service_s)


# ---------------------------------------------------------------------- distributions


def gamma_p(a: float, x: float) -> float:
    """Regularized lower incomplete gamma P(a, x): scipy.special's gammainc, a third of the time the
    series and continued fraction it replaced took [NR 6.2] (60,000 calls in a report of 1,000
    cells). Imported where asked."""
    return float(_gammainc()(a, x)) if x > 0 else 0.0


@functools.cache
def _gammainc():
    from scipy.special import gammainc  # once: importing a name from scipy.special costs 20 us a time

    return gammainc


@dataclass(frozen=True)
class ShiftedGamma:
    """shift + Gamma(shape, scale): a two-moment fit of a positive delay above a fixed floor."""

    shift: float
    mean: float  # of the gamma part
    var: float

    def cdf(self, t: float) -> float:
        x = t - self.shift
        if x < 0:
            return 0.0
        if self.mean <= 0:
            return 1.0
        if self.var <= 0:
            return 1.0 if x >= self.mean else 0.0
        shape, scale = self.mean ** 2 / self.var, self.var / self.mean
        return gamma_p(shape, x / scale)


def mixture_quantile(parts: Sequence[tuple[float, ShiftedGamma]], q: float) -> float:
    """The q-quantile of a mixture (weight, distribution): the root of its CDF less q, by Brent's
    method (solve.root) to a nanosecond.
    Bisection took a median of 25 evaluations of the CDF, each a regularized gamma function per
    part, Brent's method takes 13 (the 4,000 quantiles of a report of 1,000 cells); where a part is
    a step, it bisects."""
    total = sum(w for w, _ in parts)
    if total <= 0:
        return math.nan

    def below(t: float) -> float:
        return sum(w * d.cdf(t) for w, d in parts) / total - q

    hi = max(d.shift + d.mean + 10 * math.sqrt(max(d.var, 0)) + 1e-9 for _, d in parts)
    while below(hi) < 0:
        hi *= 2
    if below(0.0) >= 0:
        return 0.0
    return root(below, 0.0, hi, xtol=1e-9, rtol=1e-9)


# where the waiting part's CDF is evaluated for a convolution: p99s within 0.03% of 2,049 points'
# at a third of the time (0.23 s against 0.79 s for four predictions, one an open load near saturation)
GRID_POINTS = 513


def _cells(*pieces: tuple[float, float, int]) -> tuple[float, ...]:
    """Probability cells' edges: each piece (from, to, cells) split evenly."""
    return (*(a + (b - a) * i / n for a, b, n in pieces for i in range(n)), pieces[-1][1])


# A service time's distribution as the model carries it (server.Demand.service): its quantiles at
# the middles of these probability cells, each standing for its cell's probability: evenly to the
# 90th percentile, then ten times finer to the 99th, to the 99.9th and to the end, so that a p99
# is read to a fiftieth of a percentile point (0.3 ms of an exponential 30 ms), not a tenth.
SERVICE_EDGES = _cells((0.0, 0.9, 450), (0.9, 0.99, 450), (0.99, 0.999, 450), (0.999, 1.0, 200))
SERVICE_AT = tuple((a + b) / 2 for a, b in zip(SERVICE_EDGES, SERVICE_EDGES[1:]))
SERVICE_WEIGHT = tuple(b - a for a, b in zip(SERVICE_EDGES, SERVICE_EDGES[1:]))


def convolved_quantiles(parts: Sequence[tuple[float, ShiftedGamma]], service: Sequence[float],
                        qs: Sequence[float]) -> list[float]:
    """The ``qs``-quantiles of S + W [HB13]: W the mixture ``parts`` (the wait and the others' bursts
    ahead of a request), S its own service time, independent of W, given as its quantiles at
    SERVICE_AT (a measured distribution, not a mean). W's CDF is evaluated once on a grid of
    GRID_POINTS over its range (one regularized gamma function per part and point, in one array),
    then P(S + W <= t) = the sum over S's values s of P(W <= t - s) weighted by the probability each
    stands for (SERVICE_WEIGHT), linear between the grid's points, and each quantile is its root
    (solve.root)."""
    import numpy as np

    values, each = _service_array(service), _weights()
    total = sum(w for w, _ in parts)
    if total <= 0:
        return [math.nan for _ in qs]
    weight = np.array([w for w, _ in parts]) / total
    shift = np.array([d.shift for _, d in parts])
    mean = np.array([max(d.mean, 0.0) for _, d in parts])
    var = np.array([max(d.var, 0.0) for _, d in parts])

    def cdf(t: np.ndarray) -> np.ndarray:  # W's at each t: a row per part, a column per t
        x = t[None, :] - shift[:, None]
        gamma = (mean > 0) & (var > 0)
        shape = np.where(gamma, mean ** 2 / np.where(var > 0, var, 1.0), 1.0)
        scale = np.where(gamma, var / np.where(mean > 0, mean, 1.0), 1.0)
        smooth = _gammainc()(shape[:, None], np.maximum(x, 0.0) / scale[:, None])
        step = (x >= mean[:, None]).astype(float)  # a part without spread: all of it at shift + mean
        return weight @ np.where(gamma[:, None], smooth, step)

    lo = float(shift.min())
    hi = float(np.max(shift + mean + 10 * np.sqrt(var))) + 1e-9
    while cdf(np.array([hi]))[0] < 1 - 1e-9:
        hi = lo + 2 * (hi - lo)
    grid = np.linspace(lo, hi, GRID_POINTS)
    waited = cdf(grid)
    def below(t: float, q: float) -> float:
        return float(np.interp(t - values, grid, waited, left=0.0, right=1.0) @ each) - q

    first, last = lo + float(values.min()), hi + float(values.max())
    return [first if below(first, q) >= 0 else root(lambda t: below(t, q), first, last, xtol=1e-7, rtol=1e-7)
            for q in qs]


def service_cv2(service: tuple[float, ...]) -> float:
    """The squared coefficient of variation of a service time given as its quantiles at SERVICE_AT."""
    values, each = _service_array(service), _weights()
    mean = float(values @ each)
    return float(((values - mean) ** 2) @ each) / mean ** 2 if mean > 0 else 0.0


@functools.lru_cache(maxsize=64)
def _service_array(service: tuple[float, ...]):
    """A service time's quantiles as an array, made once for each (a report predicts a calibration's
    cells by the hundred)."""
    import numpy as np

    if len(service) != len(SERVICE_AT):
        raise ValueError(f"a service distribution is its {len(SERVICE_AT)} quantiles at SERVICE_AT, "
                         f"not {len(service)} values")
    return np.asarray(service, dtype=float)


@functools.cache
def _weights():
    import numpy as np

    return np.asarray(SERVICE_WEIGHT)
