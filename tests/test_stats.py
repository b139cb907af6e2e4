"""The one quantile definition (nearest rank), the intervals and the comparison, against known values."""

import math
import random

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


def test_hdr_quantiles_in_one_pass_give_the_same_answers():
    h = HdrHistogram(1, 3_600_000_000, 3)
    for v in range(1, 472):
        h.record_value(v)
    h.record_value(1_000_000, 5)  # 476 values: the median is the 238th
    qs = [0.0, 0.25, 0.5, 0.9, 0.99, 0.995, 1.0]
    assert stats.hdr_quantiles(h, qs) == [stats.hdr_value_at_quantile(h, q) for q in qs]
    assert stats.hdr_quantiles(h, [0.5, 0.99]) == [238, big := h.get_highest_equivalent_value(1_000_000)] and big > 1e6
    assert stats.hdr_quantiles(HdrHistogram(1, 100, 3), [0.5, 1.0]) == [0, 0]


def test_median():
    assert stats.median([3, 1, 2]) == 2 and stats.median([4, 1, 3, 2]) == 2.5


def test_median_interval_by_order_statistics():
    # Conover's table of the median's confidence interval: n = 10 -> the 2nd and 9th values, coverage
    # 1 - 2 * 11/1024 (R: 1 - 2 * pbinom(1, 10, 0.5) = 0.9785156); n = 20 -> 6th and 15th,
    # 1 - 2 * pbinom(5, 20, 0.5) = 0.9586105; n = 6 -> 1st and 6th, 1 - 2/64 = 0.96875.
    iv = stats.median_interval(list(range(10, 0, -1)))
    assert (iv.lo, iv.hi, iv.method) == (2, 9, "order statistics") and round(iv.coverage, 7) == 0.9785156
    iv = stats.median_interval([float(v) for v in range(1, 21)])
    assert (iv.lo, iv.hi) == (6, 15) and round(iv.coverage, 7) == 0.9586105
    iv = stats.median_interval([5, 1, 4, 2, 6, 3])
    assert (iv.lo, iv.hi) == (1, 6) and iv.coverage == 0.96875


def test_too_few_values_give_their_range_and_say_so():
    # 5 values: even min..max covers only 1 - 2/32 = 93.75% < 95%: a range, not an interval
    iv = stats.median_interval([10, 12, 11, 13, 9])
    assert (iv.lo, iv.hi, iv.method, iv.coverage) == (9, 13, "range", None) and iv.is_range
    assert stats.median_interval([104, 100]) == stats.Interval(100, 104, "range", None)
    assert stats.median_interval([5]) is None and stats.median_interval([]) is None


def test_mape():
    assert stats.mape([(110, 100), (90, 100), (50, 50)]) == pytest.approx(100 * (0.1 + 0.1 + 0) / 3)
    assert stats.mape([]) is None


def test_geometric_error():
    # twice too high and half too low are equally wrong: a factor of 2 either way
    assert stats.geometric_error([(2, 1), (1, 2)]) == pytest.approx(2.0)
    assert stats.geometric_error([(3, 3)]) == 1.0
    assert stats.geometric_error([(4, 1), (1, 1)]) == pytest.approx(2.0)  # exp(mean(ln 4, 0))
    assert stats.geometric_error([]) == math.inf


def test_t_quantile_is_students():
    # R: qt(0.975, c(1, 2, 30, 100)) = 12.706205 4.302653 2.042272 1.983972
    assert [round(stats.t975(df), 6) for df in (1, 2, 30, 100)] == [12.706205, 4.302653, 2.042272, 1.983972]


def test_t_quantile_is_scipys_at_any_degrees_of_freedom():
    # Welch's degrees of freedom are fractional; the tails and df 1 (a Cauchy) are the hard cases
    from scipy.special import stdtr, stdtrit

    rng = random.Random(52)
    for df in [1, 1.5, 2, 2.7, 3, 5, 30, 1000, 1e5] + [rng.uniform(1, 60) for _ in range(100)]:
        for q in (0.001, 0.3, 0.6, 0.9, 0.975, 0.995, 0.999):
            assert stats.t_quantile(q, df) == pytest.approx(float(stdtrit(df, q)), rel=1e-9)
        assert stats.t_cdf(1.7, df) == pytest.approx(float(stdtr(df, 1.7)), rel=1e-9)
    assert stats.t_quantile(0.5, 4) == 0.0
    with pytest.raises(ValueError):
        stats.t_quantile(1.0, 4)


def test_ratio_is_welchs_interval_on_log_values():
    # logs a = (0, 2), b = (1, 3): difference -1, each variance 2, se sqrt(2/2 + 2/2), Welch df 2
    # (R: t.test(c(0, 2), c(1, 3))$conf.int = -1 -+ 4.302653 * sqrt(2) = -7.084870 .. 5.084870)
    r = stats.ratio([1, math.e ** 2], [math.e, math.e ** 3])
    assert r.value == pytest.approx(math.exp(-1))
    assert (math.log(r.lo), math.log(r.hi)) == pytest.approx((-7.084870, 5.084870), abs=1e-6)
    assert r.n == (2, 2)


def test_ratio_interval_is_scipys_welch_interval():
    # The formula against scipy.stats itself, on samples of unequal sizes and spreads (where Welch's
    # degrees of freedom are fractional) and at other levels than 95%.
    from scipy.stats import ttest_ind

    rng = random.Random(51)
    for _ in range(200):
        la = [rng.gauss(0, rng.uniform(0.001, 0.5)) for _ in range(rng.randint(2, 12))]
        lb = [rng.gauss(0.1, rng.uniform(0.001, 0.5)) for _ in range(rng.randint(2, 12))]
        level = rng.choice([0.8, 0.9, 0.95, 0.99])
        r = stats.ratio([math.exp(v) for v in la], [math.exp(v) for v in lb], level)
        ci = ttest_ind(la, lb, equal_var=False).confidence_interval(level)
        assert (math.log(r.lo), math.log(r.hi)) == pytest.approx((ci.low, ci.high), rel=1e-9, abs=1e-12)


def test_ratio_without_an_interval_or_a_spread():
    assert stats.ratio([110], [100, 100]).lo is None  # one value: no interval, the point still given
    r = stats.ratio([110, 110], [100, 100])
    assert (r.lo, r.value, r.hi) == pytest.approx((1.1, 1.1, 1.1))


@pytest.mark.parametrize("a, b, higher, verdict", [
    ([120, 121, 119], [100, 101, 99], True, stats.BETTER),  # 20% more, surely
    ([120, 121, 119], [100, 101, 99], False, stats.WORSE),  # the same 20% of a latency: worse
    ([100, 100.5, 99.7], [100.2, 99.9, 100.1], True, stats.SAME),  # within 3% either way
    ([101, 101.1, 101.05], [100, 100.1, 100.05], True, stats.SAME),  # a real 1%: below the threshold
    ([100, 110], [100, 101], True, stats.UNDECIDED),  # two runs each: the interval is wide
    ([100], [100, 101], True, stats.UNDECIDED),  # one run: no interval
])
def test_verdicts(a, b, higher, verdict):
    assert stats.compare(a, b, higher).verdict == verdict


def test_undecided_says_how_many_more_runs_would_decide():
    c = stats.compare([100, 110], [100, 101])
    assert c.verdict == stats.UNDECIDED and c.more is not None and c.more >= 1
    # with that many more a side, drawn to keep the ratio and the spread, the verdict is reached
    grow = c.more
    a = [100, 110] * (1 + grow // 2) + [100, 110][: grow % 2]
    b = [100, 101] * (1 + grow // 2) + [100, 101][: grow % 2]
    assert stats.compare(a[: 2 + grow], b[: 2 + grow]).verdict != stats.UNDECIDED


def test_identical_configurations_are_rarely_told_apart():
    # A/A: both sides drawn from one log-normal (5% spread); at the 95% level Welch's interval
    # excludes 1 in at most ~5% of pairs, and the 3% threshold removes some of those (benches/
    # compare_rates.py: 2.3% at n = 2, 5.0% at n = 10 over 4000 pairs). 1000 pairs a size: 6.5% is
    # 5% plus two binomial standard errors; range overlap, the rule this replaced, fails at ~33%.
    import random

    rng = random.Random(7)
    for n in (2, 3, 5, 10):
        told = sum(stats.compare([rng.lognormvariate(0, 0.05) for _ in range(n)],
                                 [rng.lognormvariate(0, 0.05) for _ in range(n)]).verdict in (stats.BETTER, stats.WORSE)
                   for _ in range(1000))
        assert told / 1000 <= 0.065, (n, told)


def test_hdr_bucket_values_are_hdrh_own_at_every_index():
    """hdr_quantiles reads buckets over an array at once: the same values hdrh gives index by index."""
    import numpy as np
    from hdrh.histogram import HdrHistogram

    from arena.stats import _hdr_bucket_values

    for digits, highest in ((3, 3_600_000_000), (2, 60_000_000), (3, 10_000)):
        h = HdrHistogram(1, highest, digits)
        index = np.arange(h.counts_len, dtype=np.int64)
        lowest, top = _hdr_bucket_values(h, index)
        for i in range(0, h.counts_len, 7):
            v = h.get_value_from_index(i)
            assert (lowest[i], top[i]) == (h.get_lowest_equivalent_value(v), h.get_highest_equivalent_value(v)), i


def test_a_slopes_interval_is_the_least_squares_fits_with_students_t():
    """slope_interval against scipy's linregress (slope and its standard error) on 200 random lines,
    and a slope known exactly: a straight line's interval is the slope alone."""
    import random

    from scipy import stats as sp

    from arena.stats import slope_interval

    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(3, 60)
        xs = sorted(rng.uniform(0, 5000) for _ in range(n))
        ys = [20 + 0.05 * x + rng.gauss(0, rng.uniform(0.1, 30)) for x in xs]
        slope, lo, hi = slope_interval(xs, ys)
        fit = sp.linregress(xs, ys)
        half = sp.t.ppf(0.975, n - 2) * fit.stderr
        assert slope == pytest.approx(fit.slope, rel=1e-9, abs=1e-12)
        assert (lo, hi) == (pytest.approx(fit.slope - half, rel=1e-7, abs=1e-9), pytest.approx(fit.slope + half, rel=1e-7, abs=1e-9))
    assert slope_interval([0, 1, 2, 3], [1, 3, 5, 7]) == (2.0, 2.0, 2.0)
    with pytest.raises(ValueError):
        slope_interval([1, 1, 1], [1, 2, 3])
