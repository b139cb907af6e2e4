"""The Universal Scalability Law. Pure.

X(N) = lambda N / (1 + sigma (N - 1) + kappa N (N - 1)): sigma the contention (serial fraction),
kappa the coherency (crosstalk) cost, lambda the throughput of one [Gun07]. The fit minimizes the
squared throughput residuals (nonlinear least squares, as the R package usl's "nlxb" method
[Moe20]) under sigma, kappa >= 0 and lambda > 0, by Levenberg-Marquardt started from the classic
linearization N / C(N) - 1 = sigma (N - 1) + kappa N (N - 1) [Gun07 ch. 5]. Standard errors come from
the Jacobian at the optimum, intervals from Student's t with n - 3 degrees of freedom.

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

    def throughput(self, n: float) -> float:
        return usl(n, self.sigma, self.kappa, self.lam)

    @property
    def peak_n(self) -> float:
        """Concurrency of the highest throughput: sqrt((1 - sigma) / kappa); infinite without kappa."""
        return math.sqrt((1 - self.sigma) / self.kappa) if self.kappa > 0 and self.sigma < 1 else math.inf

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
    theta = np.array([s0, k0, lam0])

    def residuals(t):
        return usl(n, t[0], t[1], t[2]) - x

    def jacobian(t):
        s, k, lam = t
        d = 1 + s * (n - 1) + k * n * (n - 1)
        return np.column_stack([-lam * n * (n - 1) / d ** 2, -lam * n * n * (n - 1) / d ** 2, n / d])

    mu = 1e-3
    r = residuals(theta)
    rss = float(r @ r)
    for _ in range(500):
        j = jacobian(theta)
        g = j.T @ r
        h = j.T @ j
        step = np.linalg.solve(h + mu * np.diag(np.diag(h) + 1e-12), -g)
        cand = theta + step
        cand[:2] = np.maximum(cand[:2], 0.0)  # sigma, kappa >= 0: projected
        cand[2] = max(cand[2], 1e-12)
        rc = residuals(cand)
        rss_c = float(rc @ rc)
        if rss_c < rss:
            done = rss - rss_c < 1e-15 * max(rss, 1e-300)
            theta, r, rss, mu = cand, rc, rss_c, mu / 3
            if done:
                break
        else:
            mu *= 4
            if mu > 1e12:
                break
    dof = len(n) - 3
    j = jacobian(theta)
    s2 = rss / dof if dof > 0 else math.nan
    try:
        cov = np.linalg.inv(j.T @ j) * s2
        se = tuple(float(math.sqrt(max(v, 0.0))) for v in np.diag(cov))
    except np.linalg.LinAlgError:
        se = (math.nan,) * 3
    t = stats.t975(dof) if dof > 0 else math.nan
    ci = tuple((max(0.0, v - t * e) if i < 2 else v - t * e, v + t * e) for i, (v, e) in enumerate(zip(theta, se)))
    return UslFit(float(theta[0]), float(theta[1]), float(theta[2]), se, ci, rss, len(n))
