"""Pure statistics. One quantile definition for all of Arena, documented here.

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
    total = h.get_total_count()
    if total == 0:
        return 0
    target = rank(q, total)
    seen = 0
    for index in range(h.counts_len):
        seen += h.get_count_at_index(index)
        if seen >= target:
            value = h.get_value_from_index(index)
            return h.get_lowest_equivalent_value(value) if q == 0 else h.get_highest_equivalent_value(value)
    return 0


def median(values: list[float]) -> float:
    """The middle value (the mean of the two middle ones for an even count)."""
    if not values:
        raise ValueError("median of no values")
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


# Student's t, 97.5th percentile, for 1..30 degrees of freedom: R's qt(0.975, df).
T975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
        2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
        2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272)


def ci95(values: list[float]) -> tuple[float, float] | None:
    """95% confidence interval of the mean (Student's t; repetitions are few). None for fewer than 2."""
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    t = T975[n - 2] if n - 1 <= len(T975) else 1.959964
    half = t * sd / math.sqrt(n)
    return mean - half, mean + half
