"""The numerics of segmented calibration: per-segment logit offsets and slopes by (penalised)
maximum likelihood, and their empirical-Bayes shrinkage (derivation in
:mod:`mlcal.calibrators.segmented` and docs/segments.md).

Every segment is solved at once: the per-segment sums are ``np.bincount`` over the rows'
segment codes, so one Newton iteration costs a few passes over the rows whatever the number of
segments.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from mlcal._solvers.detmath import (det_exp_array, det_expit_array, det_log, det_log1p_array,
                                    det_log_array)
from mlcal._solvers.segment_kernels import loglik_sum, offset_sums, slope_sums

_MAX_ITER = 200
#: a Newton step moves an offset by at most this much (the search is also bracketed)
_MAX_STEP = 8.0
_TOL = 2.0 ** -45


def segment_offsets(logits: np.ndarray, y: np.ndarray, w: np.ndarray, codes: np.ndarray,
                    n_segments: int, prior_precision: np.ndarray,
                    start: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per segment ``g`` the offset ``d_g`` maximising
    ``sum_{i in g} w_i [y_i (l_i + d) - log(1 + exp(l_i + d))] - prior_precision_g d^2 / 2``
    and its variance ``1 / (sum w p (1 - p) + prior_precision_g)`` at the optimum.

    The objective is strictly concave when the segment has both classes or a positive
    ``prior_precision``; a segment without information (no row, or one class and no prior)
    gets ``d = 0`` and an infinite variance. Safeguarded Newton: each segment keeps a bracket
    ``[lo, hi]`` of its root (the gradient is decreasing in ``d``), steps are capped at
    ``_MAX_STEP`` and a step leaving the bracket bisects it. Newton starts from 0, or from
    ``start`` (finite, one value per segment: a nearby solution, such as the offsets for a
    slightly different ``logits``, saves iterations; the optimum is the same to the
    tolerance, not to the last bit). Every sum is sequential (the same bits on every CPU).
    """
    if start is None:
        d = np.zeros(n_segments)
    else:
        d = np.array(start, dtype=np.float64).reshape(n_segments)
        if not np.isfinite(d).all():
            raise ValueError("segment_offsets: start must be finite")
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
        g, h = offset_sums(logits, d, codes, w, y, n_segments)
        g = g - prior_precision * d
        h = h + prior_precision
        lo = np.where(active & (g > 0), np.maximum(lo, d), lo)
        hi = np.where(active & (g < 0), np.minimum(hi, d), hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.clip(g / h, -_MAX_STEP, _MAX_STEP)
        step = np.where(np.isfinite(step), step, 0.0)
        new = d + step
        # a Newton step below the tolerance has converged: near the root the gradient's sign
        # is rounding noise, and the bracket end just set at ``d`` (or a previous iterate on
        # the other side by that noise) must not send it to the bracket's midpoint, far from
        # the root it is at (each such bisection costs a pass over the rows)
        small = np.abs(step) <= _TOL * np.maximum(1.0, np.abs(d))
        outside = ((new <= lo) | (new >= hi)) & ~small
        with np.errstate(invalid="ignore"):   # -inf + inf where a side is open: not used
            mid = np.where(np.isfinite(lo) & np.isfinite(hi), 0.5 * (lo + hi), new)
        new = np.where(outside, mid, new)
        done = (g == 0) | (np.abs(new - d) <= _TOL * np.maximum(1.0, np.abs(d)))
        d = np.where(active, new, d)
        active &= ~done
    h = offset_sums(logits, d, codes, w, y, n_segments)[1] + prior_precision
    with np.errstate(divide="ignore"):
        var = np.where(solvable & (h > 0), 1.0 / h, np.inf)
    return np.where(solvable, d, 0.0), var


def _total(x: np.ndarray) -> float:
    """A sum in row order (``np.bincount`` adds sequentially: the same bits on every CPU,
    unlike numpy's SIMD-dispatched reductions or BLAS)."""
    return float(np.bincount(np.zeros(x.shape[0], dtype=np.int64), weights=x, minlength=1)[0])


def logistic_loglik(z: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """``sum w [y z - log(1 + e^z)]`` with detmath (``log(1 + e^z) = max(z, 0) +
    log1p(e^-|z|)``)."""
    soft = np.maximum(z, 0.0) + det_log1p_array(det_exp_array(np.ascontiguousarray(-np.abs(z))))
    return _total(w * (y * z - soft))


def segment_slopes(logits: np.ndarray, y: np.ndarray, w: np.ndarray, codes: np.ndarray,
                   segments: np.ndarray, start: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each segment in ``segments`` (all with both classes): the maximum-likelihood
    ``(a, b)`` of ``logit p = a l + b``, by Newton from ``(1, start)`` with step halving, and
    the variance of ``a`` (the first diagonal entry of the inverse Fisher information).

    The 2x2 systems are solved in closed form and every sum is sequential, so the result has
    the same bits on every CPU. Returns ``(a, b, var_a)``, one entry per segment of
    ``segments``.
    """
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(int(codes.max(initial=-1)) + 2))
    a_out, b_out, v_out = [], [], []
    for g in segments:
        rows = order[bounds[g]:bounds[g + 1]]
        li, yi, wi = logits[rows], y[rows], w[rows]
        a, b = 1.0, float(start[g])
        cur = logistic_loglik(a * li + b, yi, wi)
        for _ in range(100):
            p = det_expit_array(np.ascontiguousarray(a * li + b))
            r, q = wi * (yi - p), wi * (p * (1.0 - p))
            ga, gb = _total(r * li), _total(r)
            haa, hab, hbb = _total(q * li * li), _total(q * li), _total(q)
            det = haa * hbb - hab * hab
            if not _regular(det, haa, hbb):
                break
            da, db = (hbb * ga - hab * gb) / det, (haa * gb - hab * ga) / det
            t = 1.0
            while t > 1e-10:
                new = logistic_loglik((a + t * da) * li + (b + t * db), yi, wi)
                if new >= cur:
                    break
                t *= 0.5
            else:
                break
            moved = max(abs(t * da), abs(t * db))
            a, b, cur = a + t * da, b + t * db, new
            if moved <= 1e-12 * max(1.0, abs(a), abs(b)):
                break
        p = det_expit_array(np.ascontiguousarray(a * li + b))
        q = wi * (p * (1.0 - p))
        haa, hab, hbb = _total(q * li * li), _total(q * li), _total(q)
        det = haa * hbb - hab * hab
        a_out.append(a)
        b_out.append(b)
        v_out.append(hbb / det if _regular(det, haa, hbb) else np.inf)
    return np.array(a_out), np.array(b_out), np.array(v_out)


#: relative size below which a segment's 2x2 information determinant counts as singular
SINGULAR_RELATIVE_DET = 1e-10


def _regular(det: float, haa: float, hbb: float) -> bool:
    """Whether a segment's information matrix ``[[haa, hab], [hab, hbb]]`` with determinant
    ``det`` is regular. A (nearly) separable segment drives the weights ``p (1 - p)`` onto a
    few rows, where ``det / (haa hbb) = 1 - rho^2`` (``rho``: the weighted correlation of the
    logit with the constant) is rounding noise about 0; judging it against 0 let the last bit
    decide between a finite slope variance and none. Judged against ``1e-10`` relative, far
    above rounding and far below any segment with information on its slope, the decision is
    the same on every CPU."""
    return haa > 0.0 and hbb > 0.0 and det > SINGULAR_RELATIVE_DET * (haa * hbb)


def reml_prior(estimates: np.ndarray, variances: np.ndarray) -> tuple[float, float]:
    """``(mu, tau2)`` of the normal prior ``theta_g ~ N(mu, tau2)`` behind estimates
    ``theta_hat_g ~ N(theta_g, v_g)``, by restricted maximum likelihood (REML).

    Marginally ``theta_hat_g ~ N(mu, tau2 + v_g)``; for a given ``tau2`` the best ``mu`` is
    the precision-weighted mean, and REML maximises over ``tau2 >= 0``::

        -1/2 [ sum log(tau2 + v_g) + log sum 1/(tau2 + v_g)
               + sum (theta_hat_g - mu(tau2))^2 / (tau2 + v_g) ]

    (the middle term accounts for ``mu`` being estimated from the same segments; plain maximum
    likelihood leaves it out and underestimates ``tau2`` with few segments). The maximiser is
    the root of the derivative ``sum (theta_hat_g - mu)^2 / s_g^2 - sum 1/s_g + sum 1/s_g^2 /
    sum 1/s_g`` (``s_g = tau2 + v_g``), bracketed from 0 by doubling and found by Brent's method;
    ``tau2 = 0`` when the derivative at 0 is not positive. Segments with an
    infinite variance carry no information and are left out. With fewer than two informative
    segments ``tau2`` is not identified: ``(their estimate or 0, 0)``.
    """
    keep = np.isfinite(variances)
    t, v = estimates[keep], variances[keep]
    if t.size == 0:
        return 0.0, 0.0
    if t.size == 1:
        return float(t[0]), 0.0

    # exact sums (math.fsum): the same (mu, tau2) bits on every CPU
    def mu_of(tau2: float) -> float:
        prec = 1.0 / (tau2 + v)
        return math.fsum((prec * t).tolist()) / math.fsum(prec.tolist())

    def score(tau2: float) -> float:
        """d/d tau2 of the restricted log-likelihood (times 2)."""
        prec = 1.0 / (tau2 + v)
        mu = mu_of(tau2)
        p2 = (prec * prec).tolist()
        return (math.fsum(((t - mu) ** 2 * (prec * prec)).tolist()) - math.fsum(prec.tolist())
                + math.fsum(p2) / math.fsum(prec.tolist()))

    # the root of the score: a well-conditioned equation (the maximum of the flat likelihood
    # itself is only determined to about the square root of the rounding error)
    if not score(0.0) > 0.0:
        return mu_of(0.0), 0.0
    mean = math.fsum(t.tolist()) / t.size
    hi = max(math.fsum(((t - mean) ** 2).tolist()) / t.size, 1e-8)
    for _ in range(200):
        if score(hi) < 0.0:
            break
        hi *= 2.0
    else:   # pragma: no cover - the score turns negative once tau2 exceeds the spread
        return mu_of(hi), hi
    tau2 = float(brentq(score, 0.0, hi, xtol=1e-300, rtol=8.9e-16, maxiter=1000))
    return mu_of(tau2), tau2


def moments_tau2(estimates: np.ndarray, variances: np.ndarray) -> float:
    """DerSimonian--Laird method-of-moments estimate of ``tau2`` in ``theta_hat_g ~
    N(theta_g, v_g)``, ``theta_g ~ N(mu, tau2)``.

    With weights ``w_g = 1 / v_g``, the fixed-effect mean ``m = sum w theta_hat / sum w`` and
    Cochran's ``Q = sum w (theta_hat - m)^2``, whose expectation is ``(k - 1) + tau2 (sum w -
    sum w^2 / sum w)`` over ``k`` segments, the estimate solves ``Q`` = its expectation,
    truncated at 0::

        tau2 = max(0, (Q - (k - 1)) / (sum w - sum w^2 / sum w))

    Segments with an infinite variance carry no information and are left out; with fewer than
    two informative segments ``tau2`` is not identified and is 0. Sums are exact
    (``math.fsum``), so the result has the same bits on every CPU.
    """
    keep = np.isfinite(variances)
    t, v = np.asarray(estimates, dtype=np.float64)[keep], np.asarray(variances)[keep]
    if t.size < 2:
        return 0.0
    w = 1.0 / v
    sw = math.fsum(w.tolist())
    m = math.fsum((w * t).tolist()) / sw
    q = math.fsum((w * (t - m) ** 2).tolist())
    c = sw - math.fsum((w * w).tolist()) / sw
    if not c > 0.0:      # one segment carries all the weight: the spread is not identified
        return 0.0
    return max(0.0, (q - (t.size - 1)) / c)


def moments_regression_prior(estimates: np.ndarray, variances: np.ndarray,
                             covariate: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Method-of-moments meta-regression prior ``theta_g ~ N(beta (x_g - x_bar), tau2)`` of
    ``theta_hat_g ~ N(theta_g, v_g)``: the centre each estimate is shrunk toward moves with a
    per-segment covariate ``x_g`` instead of being 0.

    With weights ``w_g = 1 / v_g``, ``x_bar = sum w x / sum w`` and the weighted least-squares
    fit of ``theta_hat`` on ``(1, x - x_bar)`` (intercept ``m``, slope ``b``), the residual
    ``Q_E = sum w (theta_hat - m - b (x - x_bar))^2`` has expectation ``(k - 2) + tau2 c`` with
    ``c = sum w - sum w^2 / sum w - sum w^2 (x - x_bar)^2 / sum w (x - x_bar)^2`` (the
    DerSimonian--Laird argument with two regressors), so ``tau2 = max(0, (Q_E - (k - 2)) / c)``.
    The centre's slope ``beta`` is then the random-effects weighted least-squares slope
    (weights ``1 / (tau2 + v_g)``), and the centre is ``beta (x_g - x_bar)``: 0 at the
    information-weighted mean of ``x``, as the plain moments prior is 0 (the shared map is
    calibrated in the large, so the offsets' information-weighted mean is near 0).

    Segments with an infinite variance are left out (centre 0). With fewer than three
    informative segments, or a covariate without spread among them, this is
    :func:`moments_tau2` with centre 0 (``beta = 0``). Sums are exact (``math.fsum``): the
    same bits on every CPU.

    Returns
    -------
    centre : ndarray
        ``beta (x_g - x_bar)`` per segment (0 where the variance is infinite).
    tau2 : float
    beta : float
    """
    t_all = np.asarray(estimates, dtype=np.float64)
    v_all = np.asarray(variances, dtype=np.float64)
    x_all = np.asarray(covariate, dtype=np.float64)
    keep = np.isfinite(v_all)
    centre = np.zeros(t_all.shape[0])
    t, v, x = t_all[keep], v_all[keep], x_all[keep]
    # no spread in the covariate is decided on the inputs themselves (a weighted mean of equal
    # values need not round back to them), never on a rounded sum
    if t.size < 3 or bool(np.all(x == x[0])):
        return centre, moments_tau2(t_all, v_all), 0.0
    w = 1.0 / v
    sw = math.fsum(w.tolist())
    x_bar = math.fsum((w * x).tolist()) / sw
    xc = x - x_bar
    sxx = math.fsum((w * xc * xc).tolist())
    if not sxx > 0.0:      # pragma: no cover - distinct values whose spread underflows
        return centre, moments_tau2(t_all, v_all), 0.0
    m = math.fsum((w * t).tolist()) / sw
    b = math.fsum((w * xc * t).tolist()) / sxx
    r = t - m - b * xc
    q = math.fsum((w * r * r).tolist())
    c = sw - math.fsum((w * w).tolist()) / sw - math.fsum((w * w * xc * xc).tolist()) / sxx
    tau2 = max(0.0, (q - (t.size - 2)) / c) if c > 0.0 else 0.0
    wr = 1.0 / (tau2 + v)
    swr = math.fsum(wr.tolist())
    xr = x - math.fsum((wr * x).tolist()) / swr
    tr = t - math.fsum((wr * t).tolist()) / swr
    beta = math.fsum((wr * xr * tr).tolist()) / math.fsum((wr * xr * xr).tolist())
    centre[keep] = beta * xc
    return centre, float(tau2), float(beta)


def shrink(estimates: np.ndarray, variances: np.ndarray, mu: float, tau2: float
           ) -> tuple[np.ndarray, np.ndarray]:
    """Posterior means ``mu + tau2 / (tau2 + v_g) (theta_hat_g - mu)`` and the shrinkage
    factors ``tau2 / (tau2 + v_g)`` (0 for an infinite variance or ``tau2 = 0``)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        factor = np.where(np.isfinite(variances) & (tau2 > 0), tau2 / (tau2 + variances), 0.0)
    return mu + factor * (estimates - mu), factor


#: scale (in logits) of the half-Cauchy prior on ``tau`` of :func:`tau_posterior`
TAU_PRIOR_SCALE = 1.0
#: at most this many (node, segment) cells per block of :func:`tau_posterior`'s quadrature
_BLOCK_CELLS = 1 << 20


def _row_sums(m: np.ndarray) -> np.ndarray:
    """Sums of each row of ``m`` (sequential ``np.bincount``: the same bits on every CPU)."""
    rows = np.repeat(np.arange(m.shape[0]), m.shape[1])
    return np.bincount(rows, weights=m.ravel(), minlength=m.shape[0])


def tau_nodes(n_segments: int) -> int:
    """Quadrature nodes of :func:`tau_posterior` for ``n_segments`` informative segments:
    the posterior of ``tau`` narrows like ``1 / sqrt(G)``, so the nodes grow like
    ``sqrt(G)`` (at least 8 per posterior standard deviation on the segment counts seen)."""
    return 512 + 16 * math.isqrt(max(n_segments, 0))


def tau_posterior(estimates: np.ndarray, variances: np.ndarray,
                  scale: float = TAU_PRIOR_SCALE
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The posterior of the prior spread ``tau`` as quadrature nodes: ``(tau2_k, mu_k,
    weight_k)``, weights summing to 1.

    Model as in :func:`reml_prior` (``theta_hat_g ~ N(theta_g, v_g)``, ``theta_g ~ N(mu,
    tau^2)``) with a flat prior on ``mu`` and a half-Cauchy prior of scale ``scale`` on
    ``tau`` (Gelman 2006). Integrating ``mu`` out gives the restricted likelihood of
    :func:`reml_prior`, so ``p(tau | data)`` is proportional to that likelihood times the
    prior; ``mu_k`` is ``E[mu | tau_k, data]``, the precision-weighted mean. The integral over
    ``tau`` is a midpoint rule in ``u`` with ``tau = scale u / (1 - u)``, ``u`` in (0, 1)
    (:func:`tau_nodes` nodes), whose Jacobian times the half-Cauchy density is
    ``2 / (pi ((1 - u)^2 + u^2))``: smooth and bounded, and every node is rational
    arithmetic. Logarithms and exponentials are detmath's and the sums sequential, so the
    result has the same bits on every CPU.

    Segments with an infinite variance carry no information and are left out; without any
    informative segment the result is one node ``(0, 0, 1)``.
    """
    keep = np.isfinite(variances)
    t, v = estimates[keep], variances[keep]
    if t.size == 0:
        return np.zeros(1), np.zeros(1), np.ones(1)
    n = tau_nodes(t.size)
    u = (np.arange(n) + 0.5) / n
    tau = scale * u / (1.0 - u)
    tau2 = tau * tau
    log_prior = -det_log_array(np.ascontiguousarray((1.0 - u) ** 2 + u * u))
    mu = np.empty(n)
    loglik = np.empty(n)
    block = max(1, _BLOCK_CELLS // t.size)
    for lo in range(0, n, block):
        s = tau2[lo:lo + block, None] + v[None, :]
        prec = 1.0 / s
        sum_prec = _row_sums(prec)
        m = _row_sums(prec * t[None, :]) / sum_prec
        q = _row_sums((t[None, :] - m[:, None]) ** 2 * prec)
        log_s = det_log_array(np.ascontiguousarray(s.ravel())).reshape(s.shape)
        mu[lo:lo + block] = m
        loglik[lo:lo + block] = -0.5 * (_row_sums(log_s)
                                        + det_log_array(np.ascontiguousarray(sum_prec)) + q)
    log_post = loglik + log_prior
    w = det_exp_array(np.ascontiguousarray(log_post - log_post.max()))
    return tau2, mu, w / _total(w)


def shrink_integrated(estimates: np.ndarray, variances: np.ndarray,
                      posterior: tuple[np.ndarray, np.ndarray, np.ndarray]
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Posterior means of the ``theta_g`` averaged over ``tau`` (``posterior`` from
    :func:`tau_posterior`): ``sum_k weight_k [mu_k + B_gk (theta_hat_g - mu_k)]`` with
    ``B_gk = tau2_k / (tau2_k + v_g)``, and the averaged factors ``sum_k weight_k B_gk``.
    A segment with an infinite variance gets ``sum_k weight_k mu_k`` and factor 0 (as
    :func:`shrink`). Sums are sequential (the same bits on every CPU)."""
    tau2, mu, weight = posterior
    finite = np.isfinite(variances)
    v = np.where(finite, variances, 1.0)
    g = estimates.size
    factor = np.zeros(g)
    means = np.zeros(g)
    block = max(1, _BLOCK_CELLS // max(g, 1))
    # per segment, the sum over nodes in node order (bincount on the segment index)
    cols = None
    for lo in range(0, tau2.size, block):
        t2, m, w = tau2[lo:lo + block, None], mu[lo:lo + block, None], weight[lo:lo + block, None]
        b = np.where(finite[None, :], t2 / (t2 + v[None, :]), 0.0)
        post = m + b * (estimates[None, :] - m)
        if cols is None or cols.size != b.size:
            cols = np.tile(np.arange(g), b.shape[0])
        factor += np.bincount(cols, weights=(w * b).ravel(), minlength=g)
        means += np.bincount(cols, weights=(w * post).ravel(), minlength=g)
    return means, factor


def homogeneity_pvalue(estimates: np.ndarray, variances: np.ndarray) -> float:
    """The p-value of Cochran's test that the ``theta_g`` of ``theta_hat_g ~ N(theta_g, v_g)``
    are all equal (no between-segment spread, ``tau2 = 0``).

    With weights ``w_g = 1 / v_g`` and the fixed-effect mean ``m = sum w theta_hat / sum w``,
    ``Q = sum w (theta_hat - m)^2`` is chi-square with ``k - 1`` degrees of freedom under that
    hypothesis (``k`` informative segments); the p-value is its upper tail at ``Q``. This is the
    statistic whose excess over ``k - 1`` the DerSimonian--Laird moment estimate
    (:func:`moments_tau2`) turns into ``tau2``: the moment estimate is positive whenever
    ``Q > k - 1``, which with no spread at all happens in about half of the samples.
    Segments with an infinite variance are left out; with fewer than two informative segments
    nothing can be tested and the p-value is 1. ``Q`` is summed exactly (``math.fsum``).
    """
    from scipy.special import chdtrc

    keep = np.isfinite(variances)
    t, v = np.asarray(estimates, dtype=np.float64)[keep], np.asarray(variances)[keep]
    if t.size < 2:
        return 1.0
    w = 1.0 / v
    m = math.fsum((w * t).tolist()) / math.fsum(w.tolist())
    q = math.fsum((w * (t - m) ** 2).tolist())
    return float(chdtrc(t.size - 1, q))


def _penalised_objective(a: float, d: np.ndarray, logits, y, w, codes, centre, tau2) -> float:
    # logistic_loglik(a * logits + d[codes], y, w) in one pass (the same bits)
    return loglik_sum(a, logits, d, codes, w, y) \
        - math.fsum(((d - centre) ** 2).tolist()) / (2.0 * tau2)


def common_slope_fit(logits: np.ndarray, y: np.ndarray, w: np.ndarray, codes: np.ndarray,
                     n_segments: int, centre, tau2: float,
                     start: tuple[float, np.ndarray] | None = None
                     ) -> tuple[float, np.ndarray]:
    """The common slope ``a`` and segment intercepts ``d_g`` maximising the penalised
    log-likelihood ``sum_i w_i [y_i z_i - log(1 + e^{z_i})] - sum_g (d_g - c_g)^2 / (2 tau2)``
    with ``z_i = a l_i + d_{g(i)}``: a logistic regression on the shared logit with random
    segment intercepts ``d_g ~ N(c_g, tau2)``, at its posterior mode. Because every segment
    has its own intercept, ``a`` is fitted on the variation of the logit *within* the segments:
    the between-segment part of the miscalibration goes into the ``d_g``, not into ``a``.

    ``centre`` is a scalar or one value per segment; ``tau2`` must be positive. Newton's method
    on the ``1 + G`` parameters, solved through the Schur complement of the diagonal intercept
    block (one pass over the rows per iteration, whatever ``G``), with step halving on the
    (strictly concave) objective until the steps are small (then full Newton steps: the
    objective's rounding could not judge them). A segment without rows keeps ``d_g = c_g``.
    (Where the logit hardly varies within the segments, the prior on the intercepts is what
    identifies ``a``, through the variation between them; the intercepts are free to the
    extent ``tau2`` allows.) When the Schur complement vanishes (every logit 0), ``a`` is not
    identified and ``(1, the intercepts given a = 1)`` is returned. Every sum is sequential
    (one pass over the rows in row order, as ``np.bincount``) or exact: the same bits on every
    CPU.

    Newton starts from ``(1, centre)``, or from ``start = (a, d)`` (a nearby solution, such
    as the one for a slightly different prior: fewer iterations, and the same optimum to the
    tolerance, not to the last bit; should ``a`` not be identified there, the fit starts
    again from ``(1, centre)``).

    Returns
    -------
    a : float
    d : ndarray of shape (n_segments,)
    """
    if not tau2 > 0.0:
        raise ValueError(f"common_slope_fit needs a positive tau2, got {tau2!r}")
    c = np.broadcast_to(np.asarray(centre, dtype=np.float64), (n_segments,)).copy()
    prec = 1.0 / tau2
    if start is None:
        a, d = 1.0, c.copy()
    else:
        a = float(start[0])
        d = np.array(start[1], dtype=np.float64).reshape(n_segments)
        if not (math.isfinite(a) and np.isfinite(d).all()):
            raise ValueError("common_slope_fit: start must be finite")
    # the objective at (a, d), evaluated only when a step is to be judged by it (once the
    # steps are small, full Newton steps are taken without it): None while not evaluated
    cur = None
    identified = True
    stepped = False
    for _ in range(100):
        # sum r l, sum q l l and per segment sum r, sum q l, sum q (r = w (y - p), q = w p
        # (1 - p)) in one pass over the rows
        g_a, g_d, h_aa, h_ad, h_dd = slope_sums(a, logits, d, codes, w, y, n_segments)
        g_d = g_d - prec * (d - c)
        h_dd = h_dd + prec
        schur = h_aa - math.fsum((h_ad * h_ad / h_dd).tolist())
        if not schur > 1e-12 * max(h_aa, 1e-300):
            identified = False
            break
        da = (g_a - math.fsum((h_ad * g_d / h_dd).tolist())) / schur
        dd = (g_d - h_ad * da) / h_dd
        size = max(abs(da), float(np.abs(dd).max(initial=0.0)))
        scale = max(1.0, abs(a), float(np.abs(d).max(initial=0.0)))
        t = 1.0
        if size <= 1e-6 * scale:
            # close to the optimum the objective changes by less than its rounding, so it
            # cannot judge a step; Newton's full step is then quadratically convergent
            new = None
        else:
            if cur is None:
                cur = _penalised_objective(a, d, logits, y, w, codes, c, tau2)
            while t > 1e-10:
                new = _penalised_objective(a + t * da, d + t * dd, logits, y, w, codes, c,
                                           tau2)
                if new >= cur:
                    break
                t *= 0.5
            else:
                break
        moved = max(abs(t * da), float(np.abs(t * dd).max(initial=0.0)))
        a, d, cur = a + t * da, d + t * dd, new
        stepped = True
        if moved <= 1e-12 * max(1.0, abs(a), float(np.abs(d).max(initial=0.0))):
            break
    if not identified and not stepped and start is not None:
        return common_slope_fit(logits, y, w, codes, n_segments, centre, tau2)
    if not identified and a == 1.0:
        # intercepts alone (a = 1): per segment a one-dimensional concave problem
        return 1.0, _intercepts_given_slope(logits, y, w, codes, n_segments, c, prec)
    return float(a), d


def _intercepts_given_slope(logits, y, w, codes, n_segments, c, prec) -> np.ndarray:
    d = c.copy()
    for _ in range(200):
        p = det_expit_array(np.ascontiguousarray(logits + d[codes]))
        g = np.bincount(codes, weights=w * (y - p), minlength=n_segments) - prec * (d - c)
        h = np.bincount(codes, weights=w * (p * (1.0 - p)), minlength=n_segments) + prec
        step = np.clip(g / h, -_MAX_STEP, _MAX_STEP)
        d = d + step
        if float(np.abs(step).max(initial=0.0)) <= _TOL * max(1.0, float(np.abs(d).max(
                initial=0.0))):
            break
    return d
