"""The numerics of segmented calibration: per-segment logit offsets and slopes by (penalised)
maximum likelihood, and their empirical-Bayes shrinkage (derivation in
:mod:`mlcal.calibrators.segmented` and docs/segments.md).

Every segment is solved at once: the per-segment sums are ``np.bincount`` over the rows'
segment codes, so one Newton iteration costs a few passes over the rows whatever the number of
segments.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize_scalar

from mlcal._solvers.detmath import det_expit_array

_MAX_ITER = 200
#: a Newton step moves an offset by at most this much (the search is also bracketed)
_MAX_STEP = 8.0
_TOL = 2.0 ** -45


def segment_offsets(logits: np.ndarray, y: np.ndarray, w: np.ndarray, codes: np.ndarray,
                    n_segments: int, prior_precision: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per segment ``g`` the offset ``d_g`` maximising
    ``sum_{i in g} w_i [y_i (l_i + d) - log(1 + exp(l_i + d))] - prior_precision_g d^2 / 2``
    and its variance ``1 / (sum w p (1 - p) + prior_precision_g)`` at the optimum.

    The objective is strictly concave when the segment has both classes or a positive
    ``prior_precision``; a segment without information (no row, or one class and no prior)
    gets ``d = 0`` and an infinite variance. Safeguarded Newton: each segment keeps a bracket
    ``[lo, hi]`` of its root (the gradient is decreasing in ``d``), steps are capped at
    ``_MAX_STEP`` and a step leaving the bracket bisects it.
    """
    d = np.zeros(n_segments)
    lo = np.full(n_segments, -np.inf)
    hi = np.full(n_segments, np.inf)
    info = np.bincount(codes, weights=w, minlength=n_segments)
    pos = np.bincount(codes, weights=w * y, minlength=n_segments)
    # a unique finite optimum needs both classes, or a prior
    solvable = ((pos > 0) & (pos < info)) | (prior_precision > 0)
    active = solvable.copy()
    h = np.zeros(n_segments)
    for _ in range(_MAX_ITER):
        if not active.any():
            break
        p = det_expit_array(np.ascontiguousarray(logits + d[codes]))
        g = np.bincount(codes, weights=w * (y - p), minlength=n_segments) - prior_precision * d
        h = np.bincount(codes, weights=w * (p * (1.0 - p)), minlength=n_segments) \
            + prior_precision
        lo = np.where(active & (g > 0), np.maximum(lo, d), lo)
        hi = np.where(active & (g < 0), np.minimum(hi, d), hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.clip(g / h, -_MAX_STEP, _MAX_STEP)
        new = d + np.where(np.isfinite(step), step, 0.0)
        outside = (new <= lo) | (new >= hi)
        mid = np.where(np.isfinite(lo) & np.isfinite(hi), 0.5 * (lo + hi), new)
        new = np.where(outside, mid, new)
        done = (g == 0) | (np.abs(new - d) <= _TOL * np.maximum(1.0, np.abs(d)))
        d = np.where(active, new, d)
        active &= ~done
    p = det_expit_array(np.ascontiguousarray(logits + d[codes]))
    h = np.bincount(codes, weights=w * (p * (1.0 - p)), minlength=n_segments) + prior_precision
    with np.errstate(divide="ignore"):
        var = np.where(solvable & (h > 0), 1.0 / h, np.inf)
    return np.where(solvable, d, 0.0), var


def segment_slopes(logits: np.ndarray, y: np.ndarray, w: np.ndarray, codes: np.ndarray,
                   segments: np.ndarray, start: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each segment in ``segments`` (all with both classes): the maximum-likelihood
    ``(a, b)`` of ``logit p = a l + b``, by damped Newton from ``(1, start)``, and the variance
    of ``a`` (the first diagonal entry of the inverse Fisher information).

    Returns ``(a, b, var_a)``, one entry per segment of ``segments``.
    """
    a_out, b_out, v_out = [], [], []
    for g in segments:
        rows = codes == g
        li, yi, wi = logits[rows], y[rows], w[rows]
        theta = np.array([1.0, float(start[g])])
        x = np.column_stack([li, np.ones_like(li)])

        def loglik(t):
            z = x @ t
            return float(np.sum(wi * (yi * z - np.logaddexp(0.0, z))))

        cur = loglik(theta)
        for _ in range(100):
            p = det_expit_array(np.ascontiguousarray(x @ theta))
            grad = x.T @ (wi * (yi - p))
            hess = (x * (wi * p * (1.0 - p))[:, None]).T @ x
            try:
                step = np.linalg.solve(hess, grad)
            except np.linalg.LinAlgError:
                break
            t = 1.0
            while t > 1e-10:
                cand = theta + t * step
                new = loglik(cand)
                if new >= cur:
                    break
                t *= 0.5
            else:
                break
            moved = np.max(np.abs(cand - theta))
            theta, cur = cand, new
            if moved <= 1e-12 * max(1.0, float(np.max(np.abs(theta)))):
                break
        p = det_expit_array(np.ascontiguousarray(x @ theta))
        hess = (x * (wi * p * (1.0 - p))[:, None]).T @ x
        try:
            cov = np.linalg.inv(hess)
            var_a = float(cov[0, 0]) if cov[0, 0] > 0 else np.inf
        except np.linalg.LinAlgError:
            var_a = np.inf
        a_out.append(theta[0])
        b_out.append(theta[1])
        v_out.append(var_a)
    return np.array(a_out), np.array(b_out), np.array(v_out)


def reml_prior(estimates: np.ndarray, variances: np.ndarray) -> tuple[float, float]:
    """``(mu, tau2)`` of the normal prior ``theta_g ~ N(mu, tau2)`` behind estimates
    ``theta_hat_g ~ N(theta_g, v_g)``, by restricted maximum likelihood (REML).

    Marginally ``theta_hat_g ~ N(mu, tau2 + v_g)``; for a given ``tau2`` the best ``mu`` is
    the precision-weighted mean, and REML maximises over ``tau2 >= 0``::

        -1/2 [ sum log(tau2 + v_g) + log sum 1/(tau2 + v_g)
               + sum (theta_hat_g - mu(tau2))^2 / (tau2 + v_g) ]

    (the middle term accounts for ``mu`` being estimated from the same segments; plain maximum
    likelihood leaves it out and underestimates ``tau2`` with few segments). Segments with an
    infinite variance carry no information and are left out. With fewer than two informative
    segments ``tau2`` is not identified: ``(their estimate or 0, 0)``.
    """
    keep = np.isfinite(variances)
    t, v = estimates[keep], variances[keep]
    if t.size == 0:
        return 0.0, 0.0
    if t.size == 1:
        return float(t[0]), 0.0

    def mu_of(tau2: float) -> float:
        prec = 1.0 / (tau2 + v)
        return float(np.sum(prec * t) / np.sum(prec))

    def neg_restricted(tau: float) -> float:
        tau2 = tau * tau
        s = tau2 + v
        mu = mu_of(tau2)
        return 0.5 * float(np.sum(np.log(s)) + np.log(np.sum(1.0 / s))
                           + np.sum((t - mu) ** 2 / s))

    spread = float(np.max(t) - np.min(t))
    upper = max(4.0 * spread, 1e-6)
    res = minimize_scalar(neg_restricted, bounds=(0.0, upper), method="bounded",
                          options={"xatol": 1e-10 * max(1.0, upper)})
    tau = float(res.x)
    if neg_restricted(0.0) <= neg_restricted(tau):   # the boundary optimum tau2 = 0
        tau = 0.0
    return mu_of(tau * tau), tau * tau


def shrink(estimates: np.ndarray, variances: np.ndarray, mu: float, tau2: float
           ) -> tuple[np.ndarray, np.ndarray]:
    """Posterior means ``mu + tau2 / (tau2 + v_g) (theta_hat_g - mu)`` and the shrinkage
    factors ``tau2 / (tau2 + v_g)`` (0 for an infinite variance or ``tau2 = 0``)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        factor = np.where(np.isfinite(variances) & (tau2 > 0), tau2 / (tau2 + variances), 0.0)
    return mu + factor * (estimates - mu), factor
