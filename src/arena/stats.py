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

import functools
import math
from dataclasses import dataclass
from typing import Iterator


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
    held = np.flatnonzero(counts != 0)  # a third of nonzero's time on the 23,552 counts of a run's histogram
    cumulative = np.cumsum(counts[held])
    if not len(held):
        return [0] * len(qs)
    total = int(cumulative[-1])
    wanted = np.asarray(qs, dtype=np.float64)
    if not ((wanted >= 0) & (wanted <= 1)).all():
        rank(float(wanted[(wanted < 0) | (wanted > 1) | np.isnan(wanted)][0]), total)  # its error
    ranks = np.maximum(1, np.ceil(wanted * total))  # rank() of each, at once
    lowest, highest = _hdr_bucket_values(h, held[np.searchsorted(cumulative, ranks)])
    return np.where(wanted == 0, lowest, highest).tolist()


def _hdr_bucket_values(h, index):
    """The lowest and highest value equivalent to each of the counts' ``index`` (numpy) of an hdrh
    HdrHistogram: its get_value_from_index, get_lowest_equivalent_value and
    get_highest_equivalent_value, the same integer steps over an array at once (a quantile
    function of 409 points read a run's histogram in 7 ms, call by call; tests check them equal to
    hdrh's at every index)."""
    import numpy as np

    half, unit = h.sub_bucket_half_count, h.unit_magnitude
    bucket = (index >> h.sub_bucket_half_count_magnitude) - 1
    sub = (index & (half - 1)) + half
    first = bucket < 0
    sub, bucket = np.where(first, sub - half, sub), np.where(first, 0, bucket)
    value = sub << (bucket + unit)  # get_value_from_index: the bucket's lowest value
    # _get_bucket_index of that value: its power-of-two ceiling (bit length) less the magnitudes
    bits = np.frexp((value | h.sub_bucket_mask).astype(np.float64))[1]
    bucket = bits - unit - (h.sub_bucket_half_count_magnitude + 1)
    sub = value >> (bucket + unit)
    lowest = sub << (bucket + unit)
    size = np.left_shift(1, unit + np.where(sub >= h.sub_bucket_count, bucket + 1, bucket))
    return lowest, lowest + size - 1


def median(values: list[float]) -> float:
    """The middle value (the mean of the two middle ones for an even count)."""
    if not values:
        raise ValueError("median of no values")
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def _mean_var(values: list[float]) -> tuple[float, float]:
    """The mean and the sample variance (n - 1 in the denominator) of two or more values."""
    m = sum(values) / len(values)
    return m, sum((v - m) ** 2 for v in values) / (len(values) - 1)


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function [NR 6.4], by Lentz's method."""
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (tiny if abs(d) < tiny else d)
    h = d
    for m in range(1, 10000):
        for aa in (m * (b - m) * x / ((a - 1 + 2 * m) * (a + 2 * m)),
                   -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1 + 2 * m))):
            d = 1 + aa * d
            d = 1 / (tiny if abs(d) < tiny else d)
            c = 1 + aa / c
            c = tiny if abs(c) < tiny else c
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h


def beta_i(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) for 0 <= x <= 1 [NR 6.4]."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1 - front * _beta_fraction(b, a, 1 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student's t distribution function at ``t`` with ``df`` degrees of freedom."""
    tail = 0.5 * beta_i(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t > 0 else tail


def t_quantile(q: float, df: float) -> float:
    """Student's t at quantile ``q`` (0 < q < 1) and ``df`` degrees of freedom (any real df > 0, as
    Welch's are): the root of t_cdf, by Newton's method kept within a bracket. What scipy's stdtrit
    gives (a test checks them equal to 1e-9 over df 1 to 100,000), without importing scipy.special:
    0.35 s, a third of `arena show` of 1,000 runs."""
    if not 0 < q < 1:
        raise ValueError(f"quantile must be in (0, 1), got {q}")
    if q < 0.5:
        return -t_quantile(1 - q, df)
    if q == 0.5:
        return 0.0
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < q:
        lo, hi = hi, hi * 2
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)  # of the density
    t = (lo + hi) / 2
    for _ in range(200):
        f = t_cdf(t, df) - q
        if f == 0:
            return t
        lo, hi = (lo, t) if f > 0 else (t, hi)
        step = t - f / math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))
        step = step if lo < step < hi else (lo + hi) / 2
        if abs(step - t) <= 1e-14 * t:
            return step
        t = step
    return t


@functools.lru_cache(maxsize=1024)
def t975(df: float) -> float:
    """Student's t, 97.5th percentile, at ``df`` degrees of freedom (the two-sided 95% factor); kept
    for each df asked (the repetitions-needed estimate asks for the same ones again and again)."""
    return t_quantile(0.975, df)


def mean_interval(values: list[float]) -> tuple[float, float, float]:
    """The mean of ``values`` and its 95% confidence interval by Student's t: (mean, lo, hi); one
    value alone: (v, v, v)."""
    n = len(values)
    if n == 0:
        raise ValueError("mean of no values")
    if n < 2:
        return values[0], values[0], values[0]
    m, var = _mean_var(values)
    half = t975(n - 1) * math.sqrt(var / n)
    return m, m - half, m + half


def slope(xs: list[float], ys: list[float]) -> float:
    """The least-squares slope of ``ys`` on ``xs``: how much y grows per x. Two distinct xs at least
    (ValueError otherwise)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if n != len(ys) or sxx == 0:
        raise ValueError("a slope needs two distinct xs")
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx


def slope_interval(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """The least-squares slope of ``ys`` on ``xs`` and its 95% confidence interval by Student's t on
    n - 2 degrees of freedom: (slope, lo, hi), what scipy.stats.linregress's slope and stderr give.
    At least three points with two distinct xs (ValueError otherwise)."""
    n = len(xs)
    if n != len(ys) or n < 3:
        raise ValueError("a slope's interval needs three points or more")
    b = slope(xs, ys)
    mx, my = sum(xs) / n, sum(ys) / n
    residual = sum((y - my - b * (x - mx)) ** 2 for x, y in zip(xs, ys))
    half = t975(n - 2) * math.sqrt(residual / (n - 2) / sum((x - mx) ** 2 for x in xs))
    return b, b - half, b + half


@dataclass(frozen=True)
class Interval:
    """An interval of a statistic: ``lo`` .. ``hi`` and how it was made.

    ``method`` is "order statistics" (a distribution-free confidence interval of the median with at
    least ``coverage``), "range" (too few values for a 95% interval: the smallest and largest
    value, which is no confidence interval and is labelled as such), "Student's t" (of a mean), or
    Ratio.METHOD (of a ratio of geometric means)."""

    lo: float
    hi: float
    method: str
    coverage: float | None  # the interval's exact coverage; None for a range

    @property
    def is_range(self) -> bool:
        return self.method == "range"


def _binom_cdfs_half(n: int) -> Iterator[float]:
    """P(X <= k) for X ~ Binomial(n, 1/2), for k = 0, 1, ...: the running sums of the binomial
    coefficients over 2^n, in exact integers, as far as the caller reads (scipy.stats.binom gives
    the same to the last bit; importing it alone takes longer than a reading command may)."""
    coefficient, total, whole = 1, 0, 1 << n
    for k in range(n + 1):
        total += coefficient
        yield total / whole
        coefficient = coefficient * (n - k) // (k + 1)


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
    below = 0.0  # P(X <= k - 1): ranks 1..k are allowed as the lower end while it is within the tail
    for k, p in enumerate(_binom_cdfs_half(n)):
        if p > tail:
            break
        below = p
    if k == 0:
        return Interval(s[0], s[-1], "range", None)
    return Interval(s[k - 1], s[n - k], "order statistics", 1 - 2 * below)


def geometric_error(pairs: list[tuple[float, float]]) -> float:
    """How far (predicted, measured) pairs (both > 0) are apart as a factor: exp of the mean
    |ln(predicted / measured)| (1: exact; 2: off by a factor of two on average, either way)."""
    logs = [abs(math.log(p / m)) for p, m in pairs if p > 0 and m > 0 and math.isfinite(p)]
    return math.exp(sum(logs) / len(logs)) if logs else math.inf


def mape(pairs: list[tuple[float, float]]) -> float | None:
    """Mean absolute percentage error, in percent, of (predicted, measured) pairs (measured > 0)."""
    errors = [abs(p - m) / m for p, m in pairs if m]
    return 100 * sum(errors) / len(errors) if errors else None


# ---------------------------------------------------------------------- comparing two configurations

SAME, BETTER, WORSE, UNDECIDED = "same", "better", "worse", "undecided"
THRESHOLD = 0.03  # a difference smaller than this share is of no practical consequence (default)
MAX_MORE = 50  # "more repetitions" beyond this is said as "many"


@dataclass(frozen=True)
class Ratio:
    """``a / b`` of a figure as the ratio of the two configurations' geometric means, with its 95%
    confidence interval (None: fewer than two values on a side, no interval can be made).

    Method: Welch's t-interval of the difference of the mean log values (what scipy.stats.ttest_ind
    with equal_var=False gives), exponentiated. Why it holds for 2 to 10 repetitions: run-to-run variation of
    throughput and of a tail latency is multiplicative (a slower machine moment slows everything by a
    factor), so their logarithms are close to normal, and for normal values Student's t is exact at
    any sample size; what few runs cost is width, not coverage (at two runs a side the factor is
    t(0.975, 1) = 12.7). Welch's form does not assume the two spreads are equal. A bootstrap, by
    contrast, undercovers badly below about ten values, which is why it is not used here."""

    value: float
    interval: Interval | None
    n: tuple[int, int]

    METHOD = "Welch's t on log values"

    @property
    def lo(self) -> float | None:
        return None if self.interval is None else self.interval.lo

    @property
    def hi(self) -> float | None:
        return None if self.interval is None else self.interval.hi

    def __str__(self) -> str:
        if self.interval is None:
            return f"{self.value:.3f}x (no interval)"
        return f"{self.value:.3f}x [{self.lo:.3f}, {self.hi:.3f}]"


@dataclass(frozen=True)
class Comparison:
    """How configuration ``a`` compares with ``b`` on one figure: the ratio a / b with its interval and
    the verdict from a's side (``better`` means a is better, whichever way is better for the figure).

    ``more``: for an undecided verdict, the repetitions more per configuration that would likely
    decide it, were the spread and the ratio to stay as measured (None: not undecided, or beyond
    MAX_MORE)."""

    ratio: Ratio
    verdict: str
    more: int | None
    why: str


def _log_samples(values: list[float]) -> list[float]:
    return [math.log(v) for v in values if v is not None and v > 0]


def ratio(a: list[float], b: list[float], level: float = 0.95) -> Ratio:
    """The ratio of geometric means a / b with its ``level`` interval (Ratio: Welch's t on logs,
    the interval scipy.stats.ttest_ind(equal_var=False).confidence_interval gives, by its formula:
    the standard error sqrt(va/na + vb/nb) and the Welch-Satterthwaite degrees of freedom)."""
    la, lb = _log_samples(a), _log_samples(b)
    if not la or not lb:
        raise ValueError("a ratio needs a positive value on each side")
    point = math.exp(sum(la) / len(la) - sum(lb) / len(lb))
    n = (len(la), len(lb))
    if len(la) < 2 or len(lb) < 2:
        return Ratio(point, None, n)
    (ma, va), (mb, vb) = _mean_var(la), _mean_var(lb)
    sa, sb = va / len(la), vb / len(lb)
    if sa + sb == 0:  # no spread at all: the ratio is what it is
        return Ratio(point, Interval(point, point, Ratio.METHOD, level), n)
    df = (sa + sb) ** 2 / (sa ** 2 / (len(la) - 1) + sb ** 2 / (len(lb) - 1))
    half = t_quantile((1 + level) / 2, df) * math.sqrt(sa + sb)
    return Ratio(point, Interval(math.exp(ma - mb - half), math.exp(ma - mb + half), Ratio.METHOD, level), n)


def compare(a: list[float], b: list[float], higher_is_better: bool = True, threshold: float = THRESHOLD) -> Comparison:
    """The verdict of ``a`` against ``b`` (each configuration's values of one figure, one per valid
    repetition). A difference is declared only when the 95% interval of the ratio excludes 1 *and*
    the ratio itself is beyond ``threshold`` (3%: a smaller gain is not worth a deployment change);
    "same" when the interval lies within the threshold either way, or excludes 1 by an effect inside
    it; "undecided" when the interval holds 1 and reaches beyond the threshold (more runs would tell),
    or when a side has fewer than two values (no interval)."""
    r = ratio(a, b)
    edge = math.log1p(threshold)
    effect = math.log(r.value)
    if r.lo is None:
        return Comparison(r, UNDECIDED, None, f"too few valid repetitions for an interval ({r.n[0]} and {r.n[1]}; 2 each needed)")
    lo, hi = math.log(r.lo), math.log(r.hi)
    if (lo > 0 or hi < 0) and abs(effect) > edge:
        up = effect > 0
        return Comparison(r, BETTER if up == higher_is_better else WORSE, None,
                          f"the interval excludes 1 and the difference is above {100 * threshold:g}%")
    if -edge <= lo and hi <= edge:
        return Comparison(r, SAME, None, f"the interval lies within {100 * threshold:g}% either way")
    if lo > 0 or hi < 0:
        return Comparison(r, SAME, None, f"a real difference, but below {100 * threshold:g}%")
    return Comparison(r, UNDECIDED, _more(_log_samples(a), _log_samples(b), effect, edge),
                      f"the interval holds 1 and reaches beyond {100 * threshold:g}%")


def _more(la: list[float], lb: list[float], effect: float, edge: float) -> int | None:
    """Repetitions more per configuration after which, with the same spread (pooled variance of the
    logs) and the same ratio, the interval would decide: exclude 1 (an effect beyond the threshold)
    or fit within the threshold (an effect inside it)."""
    s2 = (_mean_var(la)[1] * (len(la) - 1) + _mean_var(lb)[1] * (len(lb) - 1)) / (len(la) + len(lb) - 2)
    room = abs(effect) if abs(effect) > edge else edge - abs(effect)
    have = max(len(la), len(lb))
    for n in range(have + 1, have + MAX_MORE + 1):
        if t975(2 * n - 2) * math.sqrt(2 * s2 / n) < room:
            return n - have
    return None
