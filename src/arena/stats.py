"""Pure statistics. One quantile definition and one interval of the median for all of Arena,
documented here.

**Quantile** (nearest rank): the value at quantile q of N values is the smallest value v such that
at least ceil(q * N) of the values (and at least one) are <= v. On an HDR histogram the answer is
the highest value equivalent to v at the histogram's precision. This is exactly what arena-load's
histogram library computes (hdrhistogram crate, ``value_at_quantile``), so percentiles that
arena-load precomputes and percentiles Arena computes from decoded or merged histograms agree.
(Python's hdrh ``get_value_at_percentile`` rounds q * N instead of taking its ceiling: at N = 471
its p99 is the 466th value where nearest rank gives the 467th; Arena does not use it.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def rank(q: float, n: int) -> int:
    """1-based rank of the value at quantile ``q`` (0..1) among ``n`` values (nearest rank)."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    return max(1, math.ceil(q * n))


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile of plain values."""
    if not values:
        raise ValueError("quantile of no values")
    return sorted(values)[rank(q, len(values)) - 1]


def hdr_value_at_quantile(h, q: float) -> int:
    """Nearest-rank quantile of an hdrh HdrHistogram (0 when it is empty)."""
    return hdr_quantiles(h, [q])[0]


def hdr_quantiles(h, qs: list[float]) -> list[int]:
    """Nearest-rank quantiles of an hdrh HdrHistogram at each of ``qs``, in one pass over its
    counts: the highest value equivalent to the bucket that holds each rank (the lowest for q = 0);
    0 for each when it is empty."""
    import numpy as np

    counts = np.ctypeslib.as_array(h.counts)[: h.counts_len]
    held = np.nonzero(counts)[0]
    cumulative = np.cumsum(counts[held])
    if not len(held):
        return [0] * len(qs)
    total = int(cumulative[-1])
    out = []
    for q in qs:
        value = h.get_value_from_index(int(held[np.searchsorted(cumulative, rank(q, total))]))
        out.append(h.get_lowest_equivalent_value(value) if q == 0 else h.get_highest_equivalent_value(value))
    return out


def median(values: list[float]) -> float:
    """The middle value (the mean of the two middle ones for an even count)."""
    if not values:
        raise ValueError("median of no values")
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


# Student's t, 97.5th percentile, for 1..30 degrees of freedom: R's qt(0.975, df) (the USL fit's
# parameter intervals, the simulator's replications); beyond 30, the 30th (within 2% of 1.96).
T975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
        2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
        2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272)


def mean_interval(values: list[float]) -> tuple[float, float, float]:
    """The mean of ``values`` and its 95% confidence interval by Student's t (T975): (mean, lo, hi);
    one value alone: (v, v, v)."""
    n = len(values)
    if n == 0:
        raise ValueError("mean of no values")
    m = sum(values) / n
    if n < 2:
        return m, m, m
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    half = T975[min(n - 1, len(T975)) - 1] * sd / math.sqrt(n)
    return m, m - half, m + half


@dataclass(frozen=True)
class Interval:
    """An interval of a statistic: ``lo`` .. ``hi`` and how it was made.

    ``method`` is "order statistics" (a distribution-free confidence interval of the median with at
    least ``coverage``), or "range" (too few values for a 95% interval: the smallest and largest
    value, which is no confidence interval and is labelled as such)."""

    lo: float
    hi: float
    method: str
    coverage: float | None  # the interval's exact coverage; None for a range

    @property
    def is_range(self) -> bool:
        return self.method == "range"


def _binom_cdf_half(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(0, k + 1)) / 2 ** n


def median_interval(values: list[float], level: float = 0.95) -> Interval | None:
    """A distribution-free confidence interval of the median (order statistics; Conover,
    *Practical Nonparametric Statistics*, 3rd ed., section 3.2): the k-th smallest and k-th largest
    of n values, with k the largest rank for which P(Binomial(n, 1/2) <= k - 1) <= (1 - level) / 2.
    Its coverage, 1 - 2 P(Binomial(n, 1/2) <= k - 1), is at least ``level``.

    A 95% interval needs 6 or more values (with 5, even the smallest and largest cover only 93.75%):
    with 2 to 5 values this returns their range (``method`` "range"); with fewer than 2, None."""
    n = len(values)
    if n < 2:
        return None
    s = sorted(values)
    tail = (1 - level) / 2
    k = 0
    while _binom_cdf_half(k, n) <= tail:  # ranks 1..k+1 are still allowed as the lower end
        k += 1
    if k == 0:
        return Interval(s[0], s[-1], "range", None)
    return Interval(s[k - 1], s[n - k], "order statistics", 1 - 2 * _binom_cdf_half(k - 1, n))


def geometric_error(pairs: list[tuple[float, float]]) -> float:
    """How far (predicted, measured) pairs (both > 0) are apart as a factor: exp of the mean
    |ln(predicted / measured)| (1: exact; 2: off by a factor of two on average, either way)."""
    logs = [abs(math.log(p / m)) for p, m in pairs if p > 0 and m > 0 and math.isfinite(p)]
    return math.exp(sum(logs) / len(logs)) if logs else math.inf


def mape(pairs: list[tuple[float, float]]) -> float | None:
    """Mean absolute percentage error, in percent, of (predicted, measured) pairs (measured > 0)."""
    errors = [abs(p - m) / m for p, m in pairs if m]
    return 100 * sum(errors) / len(errors) if errors else None
