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
