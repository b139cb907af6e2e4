"""The one quantile definition (nearest rank) against known values."""

import pytest
from hdrh.histogram import HdrHistogram

from arena import stats


@pytest.mark.parametrize("q, n, r", [(0.5, 4, 2), (0.5, 5, 3), (0.99, 471, 467), (0.99, 100, 99), (1.0, 7, 7),
                                     (0.0, 7, 1), (0.9, 10, 9), (0.901, 10, 10)])
def test_rank(q, n, r):
    assert stats.rank(q, n) == r


def test_quantile_of_values():
    # nearest rank on 1..10: p50 is the 5th value, p90 the 9th, p91 the 10th (as R's quantile(type=1))
    values = list(range(10, 0, -1))
    assert [stats.quantile(values, q) for q in (0.5, 0.9, 0.91, 1.0, 0.0)] == [5, 9, 10, 10, 1]
    with pytest.raises(ValueError):
        stats.quantile([], 0.5)
    with pytest.raises(ValueError):
        stats.rank(1.5, 3)


def test_hdr_quantile_is_nearest_rank_at_the_histograms_precision():
    h = HdrHistogram(1, 3_600_000_000, 3)
    for v in range(1, 472):  # 471 values 1..471: exact below 2048
        h.record_value(v)
    assert stats.hdr_value_at_quantile(h, 0.99) == 467
    assert h.get_value_at_percentile(99) == 466  # hdrh's own rounding differs; Arena does not use it
    assert stats.hdr_value_at_quantile(h, 0.0) == 1 and stats.hdr_value_at_quantile(h, 1.0) == 471
    big = HdrHistogram(1, 3_600_000_000, 3)
    big.record_value(1_000_000)
    assert stats.hdr_value_at_quantile(big, 0.5) == big.get_highest_equivalent_value(1_000_000) != 1_000_000
    assert stats.hdr_value_at_quantile(HdrHistogram(1, 100, 3), 0.5) == 0


def test_median():
    assert stats.median([3, 1, 2]) == 2 and stats.median([4, 1, 3, 2]) == 2.5


def test_ci95_against_r():
    # R: x <- c(10, 12, 11, 13, 9); t.test(x)$conf.int -> 9.036757 12.963243
    lo, hi = stats.ci95([10, 12, 11, 13, 9])
    assert (round(lo, 6), round(hi, 6)) == (9.036757, 12.963243)
    # R: t.test(c(100, 104))$conf.int -> 76.58759 127.41241
    lo, hi = stats.ci95([100, 104])
    assert (round(lo, 5), round(hi, 5)) == (76.58759, 127.41241)
    assert stats.ci95([5]) is None
