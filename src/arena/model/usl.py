"""The Universal Scalability Law. Pure.

X(N) = lambda N / (1 + sigma (N - 1) + kappa N (N - 1)): sigma the contention (serial fraction),
kappa the coherency (crosstalk) cost, lambda the throughput of one [Gun07]. The fit minimizes the
squared throughput residuals (nonlinear least squares, as the R package usl's "nlxb" method
[Moe20]) under sigma, kappa >= 0 and lambda > 0, by scipy.optimize.curve_fit (trust-region
reflective, for the bounds) started from the classic linearization N / C(N) - 1 = sigma (N - 1) +
kappa N (N - 1) [Gun07 ch. 5]. Standard errors come from its covariance (the Jacobian at the
optimum), intervals from Student's t with n - 3 degrees of freedom. The peak it implies is a fact
of the data only inside the measured concurrencies (``peak_measured``); beyond them it is an
extrapolation, and is said to be.

- [Gun07] N. J. Gunther, *Guerrilla Capacity Planning*, Springer 2007, ch. 4-6.
- [Moe20] S. Moeding, usl: Analyze System Scalability with the Universal Scalability Law, R package.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from arena import stats


@dataclass(frozen=True)
class UslFit:
    sigma: float
    kappa: float
    lam: float
    stderr: tuple[float, float, float]  # of sigma, kappa, lambda
    ci95: tuple[tuple[float, float], tuple[float, float], tuple[float, float]]
    rss: float
    points: int
    measured: tuple[float, float] = (1.0, math.inf)  # the lowest and highest concurrency fitted

    def throughput(self, n: float) -> float:
        return usl(n, self.sigma, self.kappa, self.lam)

    @property
    def peak_n(self) -> float:
        """Concurrency of the highest throughput: sqrt((1 - sigma) / kappa); infinite without kappa."""
        return math.sqrt((1 - self.sigma) / self.kappa) if self.kappa > 0 and self.sigma < 1 else math.inf

    @property
    def peak_shown(self) -> bool:
        """Whether the data show a peak at all: the crosstalk's 95% interval excludes 0 (else the fit
        cannot tell a peak from a plateau, and none is shown)."""
        return self.ci95[1][0] > 0 and math.isfinite(self.peak_n)

    @property
    def peak_measured(self) -> bool:
        """Whether the peak lies inside the measured concurrencies (else it is extrapolated)."""
        return self.measured[0] <= self.peak_n <= self.measured[1]

    @property
    def peak_throughput(self) -> float:
        n = self.peak_n
        return self.throughput(n) if math.isfinite(n) else self.lam / self.sigma if self.sigma > 0 else math.inf


def usl(n: float, sigma: float, kappa: float, lam: float) -> float:
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


def _linear_start(n: np.ndarray, x: np.ndarray, lam: float) -> tuple[float, float]:
    """sigma, kappa >= 0 of the linearized model by least squares without intercept."""
    y = n / (x / lam) - 1
    a = np.column_stack([n - 1, n * (n - 1)])
    best = (0.0, 0.0, float(np.sum(y ** 2)))
    for cols in ((0, 1), (0,), (1,)):
        coef, *_ = np.linalg.lstsq(a[:, cols], y, rcond=None)
        if np.all(coef >= 0):
            full = np.zeros(2)
            full[list(cols)] = coef
            rss = float(np.sum((a @ full - y) ** 2))
            if rss < best[2]:
                best = (float(full[0]), float(full[1]), rss)
    return best[0], best[1]


def fit(concurrency: Sequence[float], throughput: Sequence[float]) -> UslFit:
    """Fit the USL to measured (N, X) points; at least 4 points with 3 distinct N."""
    n = np.asarray(concurrency, dtype=float)
    x = np.asarray(throughput, dtype=float)
    if len(n) < 4 or len(set(n.tolist())) < 3:
        raise ValueError("a USL fit needs at least 4 points at 3 or more concurrency levels")
    if np.any(n < 1) or np.any(x <= 0):
        raise ValueError("concurrency must be >= 1 and throughput > 0")
    lam0 = float(np.mean(x[n == n.min()] / n.min()))
    s0, k0 = _linear_start(n, x, lam0)
    from scipy.optimize import curve_fit

    theta, cov = curve_fit(usl, n, x, p0=[s0, k0, lam0], bounds=([0.0, 0.0, 1e-12], [np.inf, np.inf, np.inf]),
                           method="trf", x_scale="jac", max_nfev=5000)
    r = usl(n, *theta) - x
    rss = float(r @ r)
    dof = len(n) - 3
    se = tuple(float(math.sqrt(v)) if math.isfinite(v) and v >= 0 else math.nan for v in np.diag(cov))
    t = stats.t975(dof) if dof > 0 else math.nan
    ci = tuple((max(0.0, v - t * e) if i < 2 else v - t * e, v + t * e) for i, (v, e) in enumerate(zip(theta, se)))
    return UslFit(float(theta[0]), float(theta[1]), float(theta[2]), se, ci, rss, len(n),
                  (float(n.min()), float(n.max())))
