"""The model's two small solvers, a bracketed root and a nonnegative least squares fit, written here
rather than taken from scipy.optimize: importing it costs a third of a second (0.33 s here, after
scipy.special), a fifteenth of a report's budget, for one 1-D root and a fit of at most three
terms. The tests check both against scipy.optimize's brentq and nnls."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import numpy as np


def root(f: Callable[[float], float], lo: float, hi: float, xtol: float, rtol: float, maxiter: int = 100) -> float:
    """The root of ``f`` in [lo, hi], where f(lo) and f(hi) differ in sign, to within xtol + rtol *
    |root|, by Brent's method (R. P. Brent, Algorithms for Minimization without Derivatives, 1973,
    ch. 4, the procedure "zero"): the secant or inverse quadratic interpolation where its step stays
    in the bracket and shrinks it fast enough, else bisection. ValueError where the ends do not
    bracket a root; ArithmeticError where ``maxiter`` evaluations did not find it."""
    a, b = lo, hi
    fa, fb = f(a), f(b)
    if fa == 0:
        return a
    if fb == 0:
        return b
    if (fa > 0) == (fb > 0):
        raise ValueError(f"f({lo:g}) and f({hi:g}) have the same sign: no root bracketed")
    c, fc = a, fa
    d = e = b - a
    for _ in range(maxiter):
        if (fb > 0) == (fc > 0):  # the root lies between b and c: c goes back to the last point on its side
            c, fc = a, fa
            d = e = b - a
        if abs(fc) < abs(fb):  # b is the best estimate so far
            a, b, c = b, c, b
            fa, fb, fc = fb, fc, fb
        tol = (xtol + rtol * abs(b)) / 2
        m = (c - b) / 2
        if abs(m) <= tol or fb == 0:
            return b
        if abs(e) >= tol and abs(fa) > abs(fb):  # try to interpolate
            s = fb / fa
            if a == c:  # two points: the secant
                p, q = 2 * m * s, 1 - s
            else:  # three: inverse quadratic interpolation
                q, r = fa / fc, fb / fc
                p = s * (2 * m * q * (q - r) - (b - a) * (r - 1))
                q = (q - 1) * (r - 1) * (s - 1)
            if p > 0:
                q = -q
            else:
                p = -p
            if 2 * p < min(3 * m * q - abs(tol * q), abs(e * q)):  # in the bracket, and shrinking fast enough
                e, d = d, p / q
            else:
                d = e = m
        else:
            d = e = m
        a, fa = b, fb
        b += d if abs(d) > tol else (tol if m > 0 else -tol)
        fb = f(b)
    raise ArithmeticError(f"no root found in [{lo:g}, {hi:g}] within {maxiter} evaluations")


def nonnegative_lstsq(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x >= 0 minimizing |a x - y|, for a few columns: the least squares fit on every subset of
    the columns (the others held at 0), the best of those whose terms are all at least 0. Exact:
    the optimum is the unconstrained fit on its own nonzero terms (Lawson and Hanson, Solving Least
    Squares Problems, 1974, ch. 23), and it is one of those tried; 2^n fits, for n of three at most
    here."""
    import numpy as np  # here: the root's users (model.server, model.queueing) import no numpy

    n = a.shape[1]
    if n > 8:
        raise ValueError(f"{n} columns: this fit tries every subset of them, meant for a few")
    best, best_norm = np.zeros(n), float(np.linalg.norm(y))
    for k in range(1, n + 1):
        for cols in itertools.combinations(range(n), k):
            part = np.linalg.lstsq(a[:, cols], y, rcond=None)[0]
            if (part < 0).any():
                continue
            x = np.zeros(n)
            x[list(cols)] = part
            norm = float(np.linalg.norm(a @ x - y))
            if norm < best_norm - 1e-12 * max(1.0, best_norm):
                best, best_norm = x, norm
    return best
