"""Damped Newton's method for a smooth convex objective with an exact Hessian, deterministic.

Each iteration solves ``H d = -g`` by a Cholesky factorisation in plain sequential IEEE
arithmetic (no LAPACK/BLAS, whose summation order depends on the CPU); a Hessian that is
singular or indefinite to rounding (a direction the objective is flat in, or probabilities
rounded to 0/1) gets the smallest ridge ``tau * max(diag H)``, ``tau = 1e-14, 1e-12, ...``, that
factorises. The step is ``d`` times the first of 1, 1/2, 1/4, ... that meets the Armijo rule.

Stopping rule: the Newton decrement ``lam2 = -g.d = g^T H^-1 g`` is twice the decrease the
quadratic model predicts, and equals ``2 (f - f*)`` on a quadratic; near the optimum Newton's
method converges quadratically, so once ``lam2 / 2 <= DECREMENT_TOL * max(1, |f|)`` (the gap
is at the rounding level of the objective) one more full step is taken, if it does not increase
``f``, and the run stops as converged. It also stops as converged when no backtracked step can
decrease ``f`` while ``lam2 / 2 <= STALL_TOL * max(1, |f|)`` (rounding noise dominates the
predicted decrease); otherwise a failed line search or ``max_iter`` iterations report failure.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: predicted gap to the optimum, relative to max(1, |f|), below which the run finishes
DECREMENT_TOL = 1e-14
#: a line search that finds no decrease is accepted as the optimum below this predicted gap
STALL_TOL = 1e-9
_ARMIJO = 1e-4


@njit(cache=True, nogil=True)
def _cholesky(H, tau):
    """Lower Cholesky factor of ``H + tau * max(diag H) I``; ``ok`` False if not positive."""
    P = H.shape[0]
    scale = 0.0
    for a in range(P):
        if H[a, a] > scale:
            scale = H[a, a]
    ridge = tau * scale
    L = np.zeros((P, P))
    for j in range(P):
        acc = H[j, j] + ridge
        for k in range(j):
            acc -= L[j, k] * L[j, k]
        if not acc > 0.0:
            return L, False
        ljj = np.sqrt(acc)   # IEEE sqrt is correctly rounded on every CPU
        L[j, j] = ljj
        for i in range(j + 1, P):
            acc = H[i, j]
            for k in range(j):
                acc -= L[i, k] * L[j, k]
            L[i, j] = acc / ljj
    return L, True


@njit(cache=True, nogil=True)
def _solve_factored(L, g):
    """``-(L L^T)^-1 g`` by forward and back substitution."""
    P = g.shape[0]
    u = np.empty(P)
    for i in range(P):
        acc = g[i]
        for k in range(i):
            acc -= L[i, k] * u[k]
        u[i] = acc / L[i, i]
    d = np.empty(P)
    for i in range(P - 1, -1, -1):
        acc = u[i]
        for k in range(i + 1, P):
            acc -= L[k, i] * d[k]
        d[i] = acc / L[i, i]
    return -d


def newton_direction(H: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The Newton step ``-H^-1 g``, with the smallest ridge that makes ``H`` factorise."""
    tau = 0.0
    while True:
        L, ok = _cholesky(H, tau)
        if ok:
            return _solve_factored(L, g)
        if tau >= 1.0 or not np.all(np.isfinite(H)):
            raise FloatingPointError("Newton: the Hessian is not finite or not positive "
                                     "semi-definite")
        tau = 1e-14 if tau == 0.0 else tau * 100.0


def hessian_factor(H: np.ndarray) -> np.ndarray | None:
    """Cholesky factor of ``H`` with the smallest ridge that factorises (as in
    :func:`newton_direction`), or None if ``H`` is not finite or no ridge up to
    ``max(diag H)`` works."""
    if not np.all(np.isfinite(H)):
        return None
    tau = 0.0
    while tau < 1.0:
        L, ok = _cholesky(H, tau)
        if ok:
            return L
        tau = 1e-14 if tau == 0.0 else tau * 100.0
    return None


def solve_factored(L: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``-(L L^T)^-1 g`` for a factor from :func:`hessian_factor`."""
    return _solve_factored(L, np.ascontiguousarray(g, dtype=np.float64))


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sum(a * b))   # numpy's own summation: no BLAS


def newton(evaluate, theta0: np.ndarray, *, max_iter: int = 200,
           unchecked_last_step: float | None = None) -> tuple[np.ndarray, int, bool]:
    """Minimise a convex ``evaluate(theta, hessian) -> (f, g, H)`` (``H`` needed only when
    ``hessian`` is True). Returns ``(theta, iterations, converged)``; the stopping rule is in
    the module docstring.

    ``unchecked_last_step``: once the predicted gap ``lam2 / 2`` is at most this, relative to
    ``max(1, |f|)``, return ``theta + d`` without evaluating it (one pass fewer). Near the
    optimum the gap after a Newton step is about the square of the one before, so a bound of
    ``sqrt(DECREMENT_TOL)`` leaves the result as close to the optimum as the default rule's
    checked last step; meant for objectives where an evaluation is expensive and the
    step's value is not needed (a pre-step whose parameter is used, not its objective)."""
    theta = np.array(theta0, dtype=np.float64)
    f, g, H = evaluate(theta, True)
    for it in range(1, max_iter + 1):
        d = newton_direction(H, g)
        lam2 = -_dot(g, d)
        scale = max(1.0, abs(f))
        if not lam2 > 0.0:   # g is zero to rounding (or H^-1 lost it): nothing left to gain
            return theta, it - 1, True
        if unchecked_last_step is not None and 0.5 * lam2 <= unchecked_last_step * scale:
            return theta + d, it, True
        finishing = 0.5 * lam2 <= DECREMENT_TOL * scale
        step = 1.0
        for _ in range(60):
            cand = theta + step * d
            f_new, g_new, H_new = evaluate(cand, step == 1.0 and not finishing)
            if f_new <= f - _ARMIJO * step * lam2 or (finishing and f_new <= f):
                break
            step *= 0.5
            if finishing:   # the last full step did not help: already at the optimum
                return theta, it - 1, True
        else:
            return theta, it, 0.5 * lam2 <= STALL_TOL * scale
        theta = cand
        if finishing:
            return theta, it, True
        if step == 1.0:
            f, g, H = f_new, g_new, H_new
        else:
            f, g, H = evaluate(theta, True)
    return theta, max_iter, False
