"""Log-space dynamic programs over all contiguous binnings of sorted weighted points (SBB / ABB).

Setting (Naeini, Cooper & Hauskrecht, SDM 2015, Eq. 2.4-2.7). ``N`` sorted points ``i = 0..N-1``
carry (weighted) class counts ``pos[i]``, ``neg[i]``; consecutive points are separated by
normalised gaps ``t[i] = gap_i / range`` (``i < N-1``). A binning splits the points into
contiguous runs; the bin ``[l, u]`` (inclusive) has the log score::

    s(l, u) = lnG(n0 + 1) + lnG(n1 + 1) - lnG(n + 2)          Beta(1, 1) marginal likelihood
              + lb(u) - lam * (T[u] - T[l])                     boundary prior

with ``lb(u) = log(1 - exp(-lam * t[u]))`` for ``u < N-1`` and ``lb(N-1) = 0`` (the paper's
Prior(N) = 1), and ``T`` the prefix sums of ``t``. The factors ``exp(-lam * t[k])`` are the prior
probabilities of *no* boundary in the gaps inside the bin, so the prior over binnings is a proper
distribution: every gap independently holds a boundary with probability ``1 - exp(-lam * t)``. A
binning's log score is the sum of its bins' scores; its exponential is P(M) P(D | M).

Three programs, all O(N^2) time and O(N) memory (O(K N) for K values of ``lam``):

* :func:`backward_log_sums` / :func:`log_evidence` -- ``log Z(lam) = log sum_M P(M) P(D | M)``
  (backward sum-product, several values of ``lam`` in one pass);
* :func:`sbb_binning` -- the maximum-score binning (max-product with back-pointers);
* :func:`abb_point_means` -- the exact Bayesian model average of the bin estimate
  ``(n1 + 1) / (n + 2)`` at every point, over all ``2**(N-1)`` binnings (forward-backward).

Counts that are whole numbers (the usual case: unit or integer weights, pre-aggregated groups)
use a table of ``lnG`` up to the total count, O(total) memory and several times faster than
calling ``lgamma``, which fractional weights use instead. The sums of exponentials use a
vectorised exp accurate to about 1 ulp (see the note above the kernels). Tests compare every
program with brute force over all binnings (N <= 13) and with a dense scipy forward-backward
(N = 400): agreement is ~1e-15 relative in the log scores and ~1e-13 absolute in the averages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from mlcal._solvers.detmath import (det_exp, det_expm1_array, det_lgamma, det_lgamma_array,
                                     det_log, det_log_array)

# largest total count for which the lnG table is built (8 bytes per entry: 128 MiB at the cap)
_TABLE_MAX = 1 << 24


@dataclass(frozen=True)
class BinningProblem:
    """Prefix sums describing N sorted weighted points for the dynamic programs.

    Build it with :func:`make_problem`; the fields are read-only inputs of the numba kernels.
    """

    cum_pos: np.ndarray      # (N+1,) prefix sums of positive counts
    cum_neg: np.ndarray      # (N+1,) prefix sums of negative counts
    int_pos: np.ndarray      # (N+1,) the same as int64 when the counts are whole, else empty
    int_neg: np.ndarray
    lgamma_table: np.ndarray  # lnG(k) for k = 0..total+2 when the counts are whole, else empty
    cum_gap: np.ndarray      # (N,) T[k] = sum of normalised gaps before point k (T[0] = 0)
    gaps: np.ndarray         # (N-1,) normalised gaps t[k]

    @property
    def n_points(self) -> int:
        return int(self.cum_gap.shape[0])

    @property
    def use_table(self) -> bool:
        return self.lgamma_table.shape[0] > 0


def make_problem(pos: np.ndarray, neg: np.ndarray, gaps: np.ndarray) -> BinningProblem:
    """Prepare sorted points for the dynamic programs.

    Parameters
    ----------
    pos, neg : ndarray of shape (N,)
        Non-negative (weighted) counts of class 1 and class 0 at each point, in score order.
        Counts within 1e-9 (relative) of a whole number are treated as whole numbers.
    gaps : ndarray of shape (N-1,)
        Strictly positive gaps between consecutive points divided by the full score range, so
        ``gaps.sum() <= 1`` (equal to 1 when the points are the unique scores themselves).

    Returns
    -------
    BinningProblem
    """
    pos = np.asarray(pos, dtype=np.float64).reshape(-1)
    neg = np.asarray(neg, dtype=np.float64).reshape(-1)
    gaps = np.asarray(gaps, dtype=np.float64).reshape(-1)
    n = pos.shape[0]
    if n == 0 or neg.shape[0] != n or gaps.shape[0] != n - 1:
        raise ValueError(f"need N >= 1 points with N-1 gaps; got {pos.shape[0]} positive counts, "
                         f"{neg.shape[0]} negative counts and {gaps.shape[0]} gaps")
    if not (np.isfinite(pos).all() and np.isfinite(neg).all()) or (pos < 0).any() \
            or (neg < 0).any():
        raise ValueError("counts must be finite and non-negative")
    if not np.isfinite(gaps).all() or (gaps <= 0).any():
        raise ValueError("gaps must be finite and strictly positive (collapse tied scores first)")
    rp, rn = np.rint(pos), np.rint(neg)
    whole = bool(np.all(np.abs(pos - rp) <= 1e-9 * np.maximum(1.0, rp))
                 and np.all(np.abs(neg - rn) <= 1e-9 * np.maximum(1.0, rn)))
    total = float(rp.sum() + rn.sum()) if whole else float(pos.sum() + neg.sum())
    empty_i = np.empty(0, dtype=np.int64)
    if whole and total + 3 <= _TABLE_MAX:
        pos, neg = rp, rn
        int_pos = np.concatenate(([0], np.cumsum(rp.astype(np.int64))))
        int_neg = np.concatenate(([0], np.cumsum(rn.astype(np.int64))))
        table = det_lgamma_array(np.arange(int(total) + 3, dtype=np.float64))
    else:
        int_pos, int_neg, table = empty_i, empty_i, np.empty(0)
    return BinningProblem(
        cum_pos=np.concatenate(([0.0], np.cumsum(pos))),
        cum_neg=np.concatenate(([0.0], np.cumsum(neg))),
        int_pos=int_pos, int_neg=int_neg, lgamma_table=table,
        cum_gap=np.concatenate(([0.0], np.cumsum(gaps))),
        gaps=gaps)


def _check_lam(lam: float) -> float:
    lam = float(lam)
    if not (np.isfinite(lam) and lam > 0):
        raise ValueError(f"lam must be a positive finite number, got {lam!r}")
    return lam


def log_boundary_prior(gaps: np.ndarray, lam: float) -> np.ndarray:
    """``lb[u] = log(1 - exp(-lam * t[u]))`` for ``u < N-1`` and ``lb[N-1] = 0``.

    ``log(-expm1(-x))`` keeps full precision for small gaps; a gap whose ``lam * t`` underflows
    (a boundary there is impossible) gets ``-1e300`` instead of ``-inf`` so that the kernels
    only ever see finite numbers.
    """
    with np.errstate(divide="ignore"):
        inner = np.maximum(det_log_array(-det_expm1_array(-lam * gaps)), _LOG_FLOOR)
    return np.concatenate((inner, [0.0]))


# -- kernels -----------------------------------------------------------------------------------
#
# Each step of a sum-product recursion is a log-sum-exp over up to N terms, so the N^2/2 calls
# of exp dominate. libm's exp is scalar; _exp_fill below is a branch-free exp (Cody-Waite range
# reduction, degree-13 Taylor polynomial on |r| <= ln2/2, exponent bits written directly) that
# LLVM vectorises, accurate to about 1 ulp. Arguments below -708 are clamped there.
#
# The log-sum-exp of a row also needs a stabiliser >= every term. Rather than a separate pass for
# the maximum, the previous row's log-sum-exp is used: adding a point to a bin multiplies its
# marginal likelihood by a posterior predictive probability <= 1, so every term of a row is at
# most the matching term of the previous row (plus one new term, added to the bound). When that
# bound is loose by more than ~575 nats (the row sum falls below _MIN_SUM), the row is redone
# with its exact maximum. Clamped terms are then < e^-133 relative to the row sum: no effect.

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01   # ln 2 split so that k * _LN2_HI is exact for |k| < 2^21
_LN2_LO = 1.90821492927058770002e-10
_EXP_FLOOR = -708.0
_MIN_SUM = 1e-250
# No fastmath anywhere: with "reassoc" LLVM vectorises a reduction with the host's vector width
# (AVX-512 vs AVX2 sums in another order) and "contract" fuses to FMA only where the CPU has it,
# so results, and the calibrator JSON, would depend on the CPU. The sums below instead keep
# _LANES explicit partial sums combined in a fixed order: the same association on every CPU,
# and independent lanes that LLVM may still pack into vector registers.
_LANES = 8
# a lower bound for log boundary priors keeps every quantity finite (exp of it is exactly 0)
_LOG_FLOOR = -1e300


@njit(cache=True, nogil=True, inline="always")
def _ml(l, u, cpos, cneg, ipos, ineg, tab, use_tab):
    """Log Beta(1,1) marginal likelihood of the bin [l, u]: lnG(n0+1) + lnG(n1+1) - lnG(n+2)."""
    if use_tab:
        a = ipos[u + 1] - ipos[l]
        b = ineg[u + 1] - ineg[l]
        return tab[a + 1] + tab[b + 1] - tab[a + b + 2]
    n1 = max(cpos[u + 1] - cpos[l], 0.0)
    n0 = max(cneg[u + 1] - cneg[l], 0.0)
    return det_lgamma(n1 + 1.0) + det_lgamma(n0 + 1.0) - det_lgamma(n1 + n0 + 2.0)


@njit(cache=True, nogil=True)
def _exp_fill(base, ml, cnt, m, mant, expo):
    """Set ``mant[i] * expo.view(float64)[i] = exp(base[i] + ml[i] - m)`` for ``i < cnt``."""
    for i in range(cnt):
        d = max(base[i] + ml[i] - m, _EXP_FLOOR)
        kf = math.floor(d * _LOG2E + 0.5)
        r = (d - kf * _LN2_HI) - kf * _LN2_LO
        p = 1.0 / 6227020800.0
        p = p * r + 1.0 / 479001600.0
        p = p * r + 1.0 / 39916800.0
        p = p * r + 1.0 / 3628800.0
        p = p * r + 1.0 / 362880.0
        p = p * r + 1.0 / 40320.0
        p = p * r + 1.0 / 5040.0
        p = p * r + 1.0 / 720.0
        p = p * r + 1.0 / 120.0
        p = p * r + 1.0 / 24.0
        p = p * r + 1.0 / 6.0
        p = p * r + 0.5
        p = p * r + 1.0
        p = p * r + 1.0
        mant[i] = p
        expo[i] = (np.int64(kf) + 1023) << 52


@njit(cache=True, nogil=True, inline="always")
def _fixed_order_sum(terms, cnt):
    """Sum of ``terms[:cnt]`` as _LANES interleaved partial sums added in a fixed tree."""
    acc = np.zeros(_LANES)
    full = cnt - cnt % _LANES
    for i in range(0, full, _LANES):
        for j in range(_LANES):
            acc[j] += terms[i + j]
    for i in range(full, cnt):
        acc[i - full] += terms[i]
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))


@njit(cache=True, nogil=True)
def _sum_exp(base, ml, cnt, m, mant, expo):
    """``sum(exp(base[:cnt] + ml[:cnt] - m))``; leaves the terms in ``mant[:cnt]``.
    (Every array is read from index 0: offsets defeat LLVM's vectoriser here.)"""
    _exp_fill(base, ml, cnt, m, mant, expo)
    scale = expo.view(np.float64)
    for i in range(cnt):
        mant[i] = mant[i] * scale[i]      # scale is a power of two
    return _fixed_order_sum(mant, cnt)


@njit(cache=True, nogil=True)
def _row_sum_exp(base, ml, cnt, bound, mant, expo):
    """``(m, s)`` with ``s = sum(exp(base[:cnt] + ml[:cnt] - m))`` and ``m`` the upper ``bound``
    of the terms when it is tight enough, else their exact maximum (see above)."""
    s = _sum_exp(base, ml, cnt, bound, mant, expo)
    if s >= _MIN_SUM:
        return bound, s
    m = base[0] + ml[0]
    for i in range(1, cnt):
        m = max(m, base[i] + ml[i])
    return m, _sum_exp(base, ml, cnt, m, mant, expo)


@njit(cache=True, nogil=True)
def _backward_kernel(cpos, cneg, ipos, ineg, tab, use_tab, cgap, lb, lams):
    """Backward sum-product for K values of lam at once (the marginal likelihoods are shared):
    ``g[k, l]`` = log sum over binnings of points l..N-1, so ``g[k, 0]`` is the log evidence."""
    k_count = lams.shape[0]
    n = cgap.shape[0]
    g = np.zeros((k_count, n + 1))
    # rb[k, i] = lb[k, u] - lam_k * T[u] + g[k, u+1] for u = N-1-i: stored from the end so that
    # row l (u = l..N-1) is rb[k, :N-l], read from index 0 like mlr (much faster vector code)
    rb = np.empty((k_count, n))
    lse = np.full(k_count, -np.inf)      # log-sum-exp of the previous row (a bound, see above)
    mlr = np.empty(n)                    # mlr[i] = ml(l, N-1-i)
    mant = np.empty(n)
    expo = np.empty(n, dtype=np.int64)
    for l in range(n - 1, -1, -1):
        cnt = n - l
        for i in range(cnt):
            mlr[i] = _ml(l, n - 1 - i, cpos, cneg, ipos, ineg, tab, use_tab)
        for k in range(k_count):
            rk = rb[k]
            rk[cnt - 1] = lb[k, l] - lams[k] * cgap[l] + g[k, l + 1]
            m, s = _row_sum_exp(rk, mlr, cnt, max(lse[k], rk[cnt - 1] + mlr[cnt - 1]),
                                mant, expo)
            lse[k] = m + det_log(s)
            g[k, l] = lse[k] + lams[k] * cgap[l]
    return g


@njit(cache=True, nogil=True)
def _sbb_kernel(cpos, cneg, ipos, ineg, tab, use_tab, cgap, lb, lam):
    """Max-product forward pass with back-pointers; returns (best log score, bin starts)."""
    n = cgap.shape[0]
    v = np.zeros(n + 1)                  # v[j]: best log score of a binning of points 0..j-1
    a = np.empty(n)                      # a[l] = v[l] + lam * T[l]
    back = np.empty(n, dtype=np.int64)   # back[u]: first point of the last bin of the best prefix
    ml = np.empty(n)
    for u in range(n):
        a[u] = v[u] + lam * cgap[u]
        for l in range(u + 1):           # a separate gather loop: more loads in flight
            ml[l] = _ml(l, u, cpos, cneg, ipos, ineg, tab, use_tab)
        best = -np.inf
        arg = 0
        for l in range(u + 1):
            x = a[l] + ml[l]
            if x > best:               # strict: the earliest start (largest last bin) wins ties
                best = x
                arg = l
        v[u + 1] = best + lb[u] - lam * cgap[u]
        back[u] = arg
    starts = np.empty(n, dtype=np.int64)
    nb = 0
    u = n - 1
    while u >= 0:
        starts[nb] = back[u]
        nb += 1
        u = back[u] - 1
    return v[n], starts[:nb][::-1].copy()


@njit(cache=True, nogil=True)
def _accumulate_bins(u, terms, scale, cpos, cneg, start_num, start_den, q_buf, pi_buf):
    """Add pi(l, u) * p(l, u) and pi(l, u) at every start l <= u; return their sums over l."""
    n1u = cpos[u + 1]
    ntu = cpos[u + 1] + cneg[u + 1]
    for l in range(u + 1):
        pi = terms[l] * scale
        q = pi * ((n1u - cpos[l] + 1.0) / (ntu - cpos[l] - cneg[l] + 2.0))
        start_num[l] += q
        start_den[l] += pi
        q_buf[l] = q
        pi_buf[l] = pi
    return _fixed_order_sum(q_buf, u + 1), _fixed_order_sum(pi_buf, u + 1)


@njit(cache=True, nogil=True)
def _abb_kernel(cpos, cneg, ipos, ineg, tab, use_tab, cgap, lb, lam, g):
    """Exact forward-backward model average of the bin estimate at every point.

    ``g`` is the backward pass (:func:`_backward_kernel`): g[l] = log sum over binnings of
    points l..N-1, log Z = g[0]. The forward pass computes f[u+1] = log sum over binnings of
    points 0..u and, on the way, the posterior probability of every bin,
    pi(l, u) = exp(f[l] + s(l, u) + g[u+1] - log Z), spread with a difference array:
    + pi * p(l, u) at l, - pi * p(l, u) after u. The posterior coverage of each point (1 in exact
    arithmetic) is accumulated the same way and divided out, so rounding in log Z cannot bias
    the averages.
    """
    n = cgap.shape[0]
    log_z = g[0]
    ml = np.empty(n)
    mant = np.empty(n)
    expo = np.empty(n, dtype=np.int64)
    f = np.zeros(n + 1)
    a = np.empty(n)                      # a[l] = f[l] + lam * T[l]
    start_num = np.zeros(n)
    start_den = np.zeros(n)
    end_num = np.zeros(n)
    end_den = np.zeros(n)
    q_buf = np.empty(n)
    pi_buf = np.empty(n)
    lse = -np.inf
    for u in range(n):
        a[u] = f[u] + lam * cgap[u]
        cu = lb[u] - lam * cgap[u]
        for l in range(u + 1):
            ml[l] = _ml(l, u, cpos, cneg, ipos, ineg, tab, use_tab)
        m, s = _row_sum_exp(a, ml, u + 1, max(lse, a[u] + ml[u]), mant, expo)
        lse = m + det_log(s)
        f[u + 1] = lse + cu
        # pi(l, u) = exp(a[l] + ml[l] - m) * scale; every pi <= 1 and the row sum s >= _MIN_SUM keep
        # scale below e^575: no overflow
        scale = det_exp(m + cu + g[u + 1] - log_z)
        end_num[u], end_den[u] = _accumulate_bins(u, mant, scale, cpos, cneg,
                                                  start_num, start_den, q_buf, pi_buf)
    values = np.empty(n)
    run_num = 0.0
    run_den = 0.0
    expected_bins = 0.0
    for j in range(n):
        run_num += start_num[j]
        run_den += start_den[j]
        if j > 0:
            run_num -= end_num[j - 1]
            run_den -= end_den[j - 1]
        values[j] = run_num / run_den
        expected_bins += end_den[j]
    return values, f[n], expected_bins


# -- public wrappers ---------------------------------------------------------------------------

def _args(problem: BinningProblem):
    return (problem.cum_pos, problem.cum_neg, problem.int_pos, problem.int_neg,
            problem.lgamma_table, problem.use_table, problem.cum_gap)


def _lams_and_priors(problem: BinningProblem, lams):
    lams = np.array([_check_lam(v) for v in np.atleast_1d(lams)], dtype=np.float64)
    return lams, np.stack([log_boundary_prior(problem.gaps, v) for v in lams])


def backward_log_sums(problem: BinningProblem, lams) -> np.ndarray:
    """``g[k, l] = log sum over binnings M of points l..N-1 of P(M | lam_k) P(D | M)``.

    One backward sum-product pass, O(N^2) time, shared by all values of ``lams`` (O(K N)
    memory). ``g[:, 0]`` is the log evidence of each ``lam``; a row of ``g`` can be handed to
    :func:`abb_point_means` to skip its own backward pass.
    """
    lams, lb = _lams_and_priors(problem, lams)
    return _backward_kernel(*_args(problem), lb, lams)


def log_evidence(problem: BinningProblem, lams) -> np.ndarray:
    """Log marginal likelihood ``log sum_M P(M | lam) P(D | M)`` for each ``lam`` in ``lams``."""
    return backward_log_sums(problem, lams)[:, 0].copy()


def sbb_binning(problem: BinningProblem, lam: float) -> tuple[np.ndarray, float]:
    """The maximum a-posteriori binning (SBB) by dynamic programming with back-pointers.

    Returns
    -------
    starts : int64 ndarray of shape (B,)
        Index of the first point of each bin (``starts[0] == 0``).
    log_score : float
        ``log P(M) P(D | M)`` of that binning. On exact ties the binning whose last bin starts
        earliest (recursively) is returned.
    """
    lam = _check_lam(lam)
    log_score, starts = _sbb_kernel(*_args(problem), log_boundary_prior(problem.gaps, lam), lam)
    return starts, float(log_score)


def abb_point_means(problem: BinningProblem, lam: float,
                    backward: np.ndarray | None = None) -> tuple[np.ndarray, float, float]:
    """Exact Bayesian model average (ABB) of the bin estimate at every point.

    ``E[i] = sum_M P(M | D) (n1_b + 1) / (n_b + 2)`` with ``b`` the bin of ``M`` holding point
    ``i``, summed over all ``2**(N-1)`` binnings by forward-backward in O(N^2) time, O(N) memory.

    Parameters
    ----------
    problem : BinningProblem
    lam : float
    backward : ndarray of shape (N+1,), optional
        The row of :func:`backward_log_sums` for this ``lam``, if already computed.

    Returns
    -------
    values : ndarray of shape (N,)
    log_z : float
        ``log sum_M P(M) P(D | M)`` (the log evidence of ``lam``).
    expected_n_bins : float
        Posterior mean number of bins.
    """
    lam = _check_lam(lam)
    if backward is None:
        backward = backward_log_sums(problem, [lam])[0]
    backward = np.ascontiguousarray(backward, dtype=np.float64)
    if backward.shape != (problem.n_points + 1,):
        raise ValueError(f"backward must have shape ({problem.n_points + 1},), "
                         f"got {backward.shape}")
    values, _log_z_fwd, n_bins = _abb_kernel(
        *_args(problem), log_boundary_prior(problem.gaps, lam), lam, backward)
    return values, float(backward[0]), float(n_bins)
