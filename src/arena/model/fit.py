"""A service time's measured distribution fitted to a named shape, with its goodness of fit.

The model carries the measured distribution itself (calibrate.Calibration.service: its quantiles at
queueing.SERVICE_AT); a fit says what shape it has, in figures a reader knows (an exponential wait
above a floor, a lognormal's median and sigma), and how well the shape describes it. Each shape is
fitted by least squares on its CDF at the measured quantiles (scipy.optimize.least_squares, every
quantile weighted by its probability cell: SERVICE_WEIGHT, so the tail's finer cells count for their
share, not their number), and judged by the Kolmogorov-Smirnov distance: the largest gap between
the fitted CDF and the measured one. A shape within GOOD of it describes the distribution; none
may. Shapes: a shifted exponential (an I/O wait above the CPU's floor), a shifted lognormal (a
multiplicative spread) and a shifted gamma (between the two); scipy.stats' parametrisations."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

SHAPES = ("exponential", "lognormal", "gamma")
GOOD = 0.05  # the largest CDF gap at which a shape is said to describe the distribution


@dataclass(frozen=True)
class Fit:
    shape: str  # of SHAPES
    shift: float  # seconds: the floor below which no request is served
    params: tuple[tuple[str, float], ...]  # the shape's own: scale (s), or sigma and median (s), or shape k
    distance: float  # Kolmogorov-Smirnov: the largest gap between the CDFs at the measured quantiles

    @property
    def good(self) -> bool:
        return self.distance <= GOOD

    @property
    def text(self) -> str:
        """"lognormal above 8.0 ms: median 30.1 ms, sigma 0.50 (KS distance 0.004)"."""
        shown = ", ".join(f"{k} {v * 1000:.3g} ms" if k in ("mean", "median") else f"{k} {v:.3g}" for k, v in self.params)
        return f"{self.shape} above {self.shift * 1000:.3g} ms: {shown} (KS distance {self.distance:.3f})"

    def json(self) -> dict:
        return {"shape": self.shape, "shift_s": self.shift, **{k: v for k, v in self.params}, "ks_distance": self.distance,
                "good": self.good}


def _frozen(shape: str, x: Sequence[float]):
    """scipy.stats' distribution for a shape's parameter vector (shift, then the shape's own)."""
    from scipy import stats

    if shape == "exponential":
        return stats.expon(loc=x[0], scale=x[1])
    if shape == "lognormal":
        return stats.lognorm(x[2], loc=x[0], scale=x[1])
    return stats.gamma(x[2], loc=x[0], scale=x[1])


def fit(values: Sequence[float], at: Sequence[float], weights: Sequence[float]) -> list[Fit]:
    """Each shape fitted to a distribution given as its quantiles ``values`` (seconds, ascending) at
    probabilities ``at`` (each standing for ``weights`` of probability), best first. Empty where the
    values spread too little to fit (a fixed time: every quantile within a microsecond)."""
    from scipy.optimize import least_squares

    v, q, w = np.asarray(values, float), np.asarray(at, float), np.sqrt(np.asarray(weights, float))
    spread = v[-1] - v[0]
    if len(v) < 3 or spread < 1e-6:
        return []
    low, mean = v[0], float(np.average(v, weights=w ** 2))
    out = []
    for shape in SHAPES:
        # start: the floor just below the fastest, the rest from the mean above it
        above = max(mean - low, spread / 100)
        start = {"exponential": [low - above / 100, above],
                 "lognormal": [low - above / 100, above, 0.5],
                 "gamma": [low - above / 100, above / 2, 2.0]}[shape]
        bounds = ([low - 10 * spread] + [1e-9] * (len(start) - 1), [low] + [np.inf] * (len(start) - 1))

        def gaps(x, shape=shape):
            return w * (_frozen(shape, x).cdf(v) - q)

        found = least_squares(gaps, start, bounds=bounds, x_scale="jac")
        x = found.x
        distance = float(np.max(np.abs(_frozen(shape, x).cdf(v) - q)))
        params = ((("mean", x[1]),) if shape == "exponential" else (("median", x[1]), ("sigma", x[2]))
                  if shape == "lognormal" else (("k", x[2]), ("mean", x[1] * x[2])))
        if all(math.isfinite(p) for _, p in params):
            out.append(Fit(shape, float(x[0]), tuple((k, float(p)) for k, p in params), distance))
    return sorted(out, key=lambda f: f.distance)
