"""Linear (k = 1) trend filtering on unevenly spaced, weighted points: exact solutions on a
lambda grid.

For sorted distinct abscissae ``x_0 < ... < x_{n-1}``, targets ``y`` and weights ``w > 0``::

    beta(lam) = argmin_b  1/2 sum_k w_k (b_k - y_k)^2  +  lam * sum_i |(D b)_i|,
    (D b)_i   = (b_{i+2} - b_{i+1}) / (x_{i+2} - x_{i+1}) - (b_{i+1} - b_i) / (x_{i+1} - x_i),

i.e. ``(D b)_i`` is the change of slope at ``x_{i+1}`` (Kim, Koh, Boyd & Gorinevsky 2009). The
solution is a continuous piecewise-linear function of x whose kinks ("knots") lie at data points.

The structure every solver below uses:

* For a fixed knot set ``A`` with slope-change signs ``s``, the KKT conditions make ``beta`` the
  weighted least-squares linear spline with knots ``A`` plus a linear penalty term:
  ``G c = h - lam T's`` in the hat-function basis, with ``G = B'WB`` tridiagonal of size
  ``|A| + 2``. One O(|A|) solve gives the exact solution for that knot set.
* The dual vector ``nu`` (``D'nu = W (y - beta)``, ``|nu| <= lam``, ``nu_A = lam s``) is the double
  cumulative sum of the residuals, ``nu_i = sum_{k <= i+1} r_k (x_{i+1} - x_k)``: one recursion.
* A knot set is optimal iff every free ``|nu_i| <= lam`` and every knot's slope change has the
  sign of its ``nu``.

Solver (``trend_filter_path``): from ``lam_max = max |nu(line)|`` (the smallest lambda whose
solution is the weighted least-squares line) down the grid, each grid value is reached from the
previous solution (warm start) by a primal-dual active-set method (PDAS, a semismooth Newton
method on the KKT conditions): solve the knot set exactly, drop knots whose slope change has the
wrong sign, add one knot at the peak of every run of dual violators, repeat until nothing changes.
PDAS can cycle on long steps; the step is then shortened geometrically, and a step shorter than
0.1 % that still fails is walked exactly by the homotopy in lambda (the dual path algorithm of
Tibshirani & Taylor 2011 specialised to this D: between events the solution and ``nu`` are affine
in lambda, events are found in closed form), so the method always terminates with the exact
solution. Each active-set iteration is accelerated by block moments: a block of ``BLOCK`` points
inside one spline segment adds its Gram share and crosses the dual recursion in O(1), and blocks
whose dual bound stays below the threshold are not scanned, so an iteration costs
O(n / BLOCK + |A| BLOCK) rather than O(n). The Gram sums of each spline segment are kept for
the whole path (a segment's sums depend only on its two breakpoints), so an iteration
recomputes only the segments its knot changes created.

Stopping rule and accuracy: PDAS stops when an iteration changes nothing, i.e. when the KKT
conditions hold with dual feasibility ``|nu_i| <= lam (1 + 1e-9)`` and slope-change signs exact up
to a rounding allowance (``1e-9`` times the fitted values' size over the adjacent gaps; smaller
slope changes are treated as zero, which also resolves degenerate stretches that are fitted
exactly). The solution is then the exact minimiser of the problem (up to floating-point
rounding); each returned solution carries its relative KKT residual. Against an independent
bounded-least-squares oracle (scipy ``lsq_linear``, BVLS, on the dual) the fitted values agree to
about 1e-10.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from mlcal._solvers.detmath import (det_exp, det_exp_array, det_log, det_log1p,
                                    log1p_in_unit, log_in_unit)
from mlcal._solvers.exact import floor_divide_exact_array

EVENT_TOL = 1e-9          # relative KKT tolerance (dual feasibility, event times; see above)
PDAS_MAX_ITER = 30        # active-set iterations before a grid step is shortened
BLOCK = 32                # points per block in the accelerated active-set iterations
DEGENERATE_TOL = 1e-13    # lam_max below this (relative) is rounding: the data lie on a line
_MAX_EVENTS_PER_POINT = 50  # hard cap on path events, a guard against an (unobserved) cycle


# ---------------------------------------------------------------------------------------------
# preprocessing
# ---------------------------------------------------------------------------------------------
def thin(x: np.ndarray, y: np.ndarray, w: np.ndarray, tol: float):
    """Merge sorted distinct points that share a grid cell ``floor(x / tol)``.

    Each occupied cell becomes one point at the weighted mean abscissa (clamped into the cell's
    own [min, max], so merged abscissae stay strictly increasing), with the weighted mean target
    and the summed weight. This is ELiTE's ``thinningLocal`` (bin width 1e-5) applied after
    sorting, so it does not depend on the input order. ``tol <= 0`` returns the input unchanged.

    Parameters
    ----------
    x : ndarray of shape (n,)
        Strictly increasing abscissae.
    y, w : ndarray of shape (n,)
        Targets and positive weights.
    tol : float
        Cell width.

    Returns
    -------
    x, y, w : ndarrays of shape (n_thinned,)
    """
    if tol <= 0 or x.size < 2:
        return x, y, w
    cell = floor_divide_exact_array(x, float(tol))   # exact floor of x / tol
    starts = np.concatenate(([0], np.flatnonzero(cell[1:] != cell[:-1]) + 1))
    if starts.size == x.size:
        return x, y, w
    wsum = np.add.reduceat(w, starts)
    xm = np.add.reduceat(w * x, starts) / wsum
    ym = np.add.reduceat(w * y, starts) / wsum
    ends = np.append(starts[1:], x.size) - 1
    xm = np.clip(xm, x[starts], x[ends])
    return xm, ym, wsum


# ---------------------------------------------------------------------------------------------
# the knot set's tridiagonal system, shared by the homotopy and the active-set method
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True, inline="always")
def _gram(x, y, w, bs, mom, bp, k2, dg, od, h):
    """Tridiagonal Gram matrix ``G = B'WB`` (diagonal ``dg``, off-diagonal ``od``) and ``h = B'Wy``
    of the hat basis on the breakpoints ``bp[:k2]``.

    With ``bs > 0`` every whole aligned block of ``bs`` points inside one segment is added in O(1)
    from its moments ``mom`` (see :func:`_block_moments`); ``bs = 0`` adds point by point.
    """
    for j in range(k2):
        dg[j] = 0.0
        od[j] = 0.0
        h[j] = 0.0
    sums = np.empty(5)
    for j in range(k2 - 1):
        a = bp[j]
        e = bp[j + 1]
        _segment_sums(x, y, w, bs, mom, a, e, e + 1 if j == k2 - 2 else e, sums)
        dg[j] += sums[0]
        dg[j + 1] += sums[1]
        od[j] = sums[2]
        h[j] += sums[3]
        h[j + 1] += sums[4]


@njit(cache=True, nogil=True, inline="always")
def _subtract_penalty(x, bp, sg, k2, lam, r):
    """``r -= lam T's``: T maps breakpoint values to the slope changes at the knots ``bp[1:k2-1]``
    and ``s`` holds their signs ``sg``. ``lam = -1`` adds ``T's`` itself (negation is exact)."""
    for q in range(1, k2 - 1):
        ls = lam * sg[q]
        im = 1.0 / (x[bp[q]] - x[bp[q - 1]])
        ip = 1.0 / (x[bp[q + 1]] - x[bp[q]])
        r[q - 1] -= ls * im
        r[q] += ls * (im + ip)
        r[q + 1] -= ls * ip


@njit(cache=True, nogil=True, inline="always")
def _ldl_factor(dg, od, k2):
    """In-place LDL' factorisation of the SPD tridiagonal matrix (no pivoting needed): ``dg``
    becomes D; the multipliers ``od[j-1] / dg[j-1]`` are recomputed by :func:`_ldl_solve`."""
    for j in range(1, k2):
        lj = od[j - 1] / dg[j - 1]
        dg[j] -= lj * od[j - 1]


@njit(cache=True, nogil=True, inline="always")
def _ldl_solve(dg, od, r, c, k2):
    """Solve ``G c = r`` with G factorised by :func:`_ldl_factor` (``r`` is overwritten)."""
    for j in range(1, k2):
        r[j] -= od[j - 1] / dg[j - 1] * r[j - 1]
    c[k2 - 1] = r[k2 - 1] / dg[k2 - 1]
    for j in range(k2 - 2, -1, -1):
        c[j] = (r[j] - od[j] * c[j + 1]) / dg[j]


# ---------------------------------------------------------------------------------------------
# O(n) kernels for a knot set with both lambda-affine parts: lambda_max (the line's duals) and
# the exact homotopy used as the fallback of the active-set method
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _breakpoints(state, n, bp, sg):
    """Breakpoints (first point, knots, last point) and their signs from the knot state."""
    k2 = 1
    bp[0] = 0
    sg[0] = 0.0
    for i in range(n - 2):
        if state[i] != 0:
            bp[k2] = i + 1
            sg[k2] = state[i]
            k2 += 1
    bp[k2] = n - 1
    sg[k2] = 0.0
    return k2 + 1


@njit(cache=True, nogil=True)
def _segment(x, y, w, bp, sg, k2, c0, c1, dg, od, h, p):
    """Solve ``G c0 = h`` and ``G c1 = T's`` for the knot set (hat basis on ``bp[:k2]``).

    ``c(lam) = c0 - lam * c1`` are the spline's values at the breakpoints.
    """
    _gram(x, y, w, 0, np.empty((0, 11)), bp, k2, dg, od, h)   # point by point (no blocks)
    for j in range(k2):
        p[j] = 0.0
    _subtract_penalty(x, bp, sg, k2, -1.0, p)   # p = T's (T: slope changes at the knots)
    _ldl_factor(dg, od, k2)
    _ldl_solve(dg, od, h, c0, k2)
    _ldl_solve(dg, od, p, c1, k2)


@njit(cache=True, nogil=True)
def _duals(x, y, w, bp, k2, c0, c1, nu0, nu1):
    """Dual vectors of the segment: ``nu(lam) = nu0 + lam * nu1`` (double cumulative residual
    sums of ``r(lam) = W (y - beta(lam))``)."""
    n = x.shape[0]
    f0 = 0.0
    f1 = 0.0
    s0 = 0.0
    s1 = 0.0
    for j in range(k2 - 1):
        a = bp[j]
        b = bp[j + 1]
        xa = x[a]
        inv = 1.0 / (x[b] - xa)
        end = b + 1 if j == k2 - 2 else b
        for k in range(a, end):
            if k > 0:
                dx = x[k] - x[k - 1]
                f0 += dx * s0
                f1 += dx * s1
                if k < n - 1:
                    nu0[k - 1] = f0
                    nu1[k - 1] = f1
            t = (x[k] - xa) * inv
            u = 1.0 - t
            s0 += w[k] * (y[k] - (c0[j] * u + c0[j + 1] * t))
            s1 += w[k] * (c1[j] * u + c1[j + 1] * t)


@njit(cache=True, nogil=True)
def _slope_changes(x, bp, k2, c, out, scl):
    """Slope change at each knot, and ``1/L- + 1/L+`` (the size of a slope change caused by a
    unit jump of the values), which scales the rounding noise of that slope change."""
    for q in range(1, k2 - 1):
        im = 1.0 / (x[bp[q]] - x[bp[q - 1]])
        ip = 1.0 / (x[bp[q + 1]] - x[bp[q]])
        out[q - 1] = (c[q + 1] - c[q]) * ip - (c[q] - c[q - 1]) * im
        scl[q - 1] = im + ip


@njit(cache=True, nogil=True)
def _next_event(state, nu0, nu1, sc0, sc1, scl, vscale, lam, tabu, tabu_lam, tol):
    """Largest lam' <= lam at which the knot set must change, and which index changes.

    ``nu1`` is dimensionless (d nu / d lam), so a free coordinate moves towards its bound only
    if its rate exceeds ``tol``; a knot's slope change is negligible below
    ``tol * vscale * scl`` (``vscale`` = size of the fitted values). Below these rates the
    coordinate is degenerate (e.g. an exactly fitted stretch, where nu = -lam identically) and
    never triggers an event, which keeps the walk from cycling.

    Returns (lam_event, index, new_state); index = -1 when no event occurs for lam' > 0.
    """
    m = state.shape[0]
    best = -1.0
    best_i = -1
    best_s = 0
    q = 0
    for i in range(m):
        s = state[i]
        ev = -1.0
        new = 0
        if s == 0:
            v = nu0[i] + lam * nu1[i]
            a = 1.0 - nu1[i]       # lam - nu(lam) = a lam - nu0 falls to 0 as lam decreases
            if a > tol:
                ev = nu0[i] / a
                new = 1
            b = 1.0 + nu1[i]       # lam + nu(lam) = b lam + nu0
            if b > tol:
                e2 = -nu0[i] / b
                if e2 > ev:
                    ev = e2
                    new = -1
            if v > lam * (1.0 + tol):      # infeasible beyond tolerance: repair now
                ev = lam
                new = 1
            elif v < -lam * (1.0 + tol):
                ev = lam
                new = -1
        else:
            noise = tol * vscale * scl[q]
            g1 = s * sc1[q]        # s * sc(lam) = s sc0 - lam s sc1 falls to 0 if s sc1 < 0
            if g1 * lam < -noise:
                ev = sc0[q] / sc1[q]
            if s * sc0[q] - lam * g1 < -noise:
                ev = lam
            q += 1
        if ev <= 0.0:
            continue
        if ev > lam:
            ev = lam
        if i == tabu and ev >= tabu_lam * (1.0 - tol):
            continue
        if ev > best:
            best = ev
            best_i = i
            best_s = new
    return best, best_i, best_s


@njit(cache=True, nogil=True)
def _value_scale(c0, c1, k2, lam):
    a = 0.0
    b = 0.0
    for j in range(k2):
        if abs(c0[j]) > a:
            a = abs(c0[j])
        if abs(c1[j]) > b:
            b = abs(c1[j])
    return a + lam * b


# ---------------------------------------------------------------------------------------------
# block-accelerated primal-dual active set (PDAS)
# ---------------------------------------------------------------------------------------------
# Points are grouped into aligned blocks of BLOCK points. Per block we keep its weighted moments
# about both of its ends, so that (i) a block lying inside one spline segment adds its share of
# the tridiagonal Gram matrix in O(1), and (ii) the dual recursion crosses it in O(1). The dual
# of a block is bounded from its entry values and its residual mass; a block whose bound stays
# below the violation threshold cannot hold a violator and is not scanned. An active-set
# iteration then costs O(n / BLOCK + K * BLOCK + scanned points) instead of O(n).
_W, _MU1, _MU2, _MV1, _MV2, _MUV, _Y, _YU, _YV, _YMIN, _YMAX = range(11)


@njit(cache=True, nogil=True)
def _block_moments(x, y, w, bs):
    """Per block: sum w, w u, w u^2, w v, w v^2, w u v, w y, w y u, w y v, min y, max y, with
    u = x - (first x of the block) and v = (last x of the block) - x, both >= 0."""
    n = x.shape[0]
    nb = (n + bs - 1) // bs
    mom = np.zeros((nb, 11))
    for B in range(nb):
        a = B * bs
        e = min(n, a + bs) - 1
        x0 = x[a]
        x1 = x[e]
        ymin = y[a]
        ymax = y[a]
        for k in range(a, e + 1):
            u = x[k] - x0
            v = x1 - x[k]
            wk = w[k]
            wy = wk * y[k]
            mom[B, _W] += wk
            mom[B, _MU1] += wk * u
            mom[B, _MU2] += wk * u * u
            mom[B, _MV1] += wk * v
            mom[B, _MV2] += wk * v * v
            mom[B, _MUV] += wk * u * v
            mom[B, _Y] += wy
            mom[B, _YU] += wy * u
            mom[B, _YV] += wy * v
            ymin = min(ymin, y[k])
            ymax = max(ymax, y[k])
        mom[B, _YMIN] = ymin
        mom[B, _YMAX] = ymax
    return mom


@njit(cache=True, nogil=True, inline="always")
def _segment_sums(x, y, w, bs, mom, a, e, end, out):
    """One segment's share of :func:`_gram`: ``out[:5] = d0, d1, o, h0, h1`` for the points
    ``a .. end - 1`` of the segment from breakpoint ``a`` to ``e`` (what :func:`_gram` adds per
    segment, and :func:`_gram_cached` keeps)."""
    n = x.shape[0]
    xa = x[a]
    xe = x[e]
    inv = 1.0 / (xe - xa)
    inv2 = inv * inv
    d0 = 0.0
    d1 = 0.0
    o = 0.0
    h0 = 0.0
    h1 = 0.0
    k = a
    while k < end:
        blen = min(bs, n - k)
        if bs > 0 and k % bs == 0 and k + blen <= end:   # a whole block: its moments
            B = k // bs
            du = x[k] - xa
            dv = xe - x[k + blen - 1]
            W = mom[B, _W]
            d1 += (mom[B, _MU2] + du * (2.0 * mom[B, _MU1] + du * W)) * inv2
            d0 += (mom[B, _MV2] + dv * (2.0 * mom[B, _MV1] + dv * W)) * inv2
            o += (mom[B, _MUV] + dv * mom[B, _MU1] + du * mom[B, _MV1] + du * dv * W) * inv2
            h1 += (mom[B, _YU] + du * mom[B, _Y]) * inv
            h0 += (mom[B, _YV] + dv * mom[B, _Y]) * inv
            k += blen
            continue
        # point by point up to the next block boundary (the order of the sums as one point at
        # a time; no division per point)
        stop = end if bs <= 0 else min(end, (k // bs + 1) * bs)
        while k < stop:
            t = (x[k] - xa) * inv
            u = 1.0 - t
            wu = w[k] * u
            wt = w[k] * t
            d0 += wu * u
            o += wu * t
            d1 += wt * t
            h0 += wu * y[k]
            h1 += wt * y[k]
            k += 1
    out[0] = d0
    out[1] = d1
    out[2] = o
    out[3] = h0
    out[4] = h1


@njit(cache=True, nogil=True, inline="always")
def _gram_cached(x, y, w, bs, mom, bp, k2, dg, od, h, seg_end, seg_sums):
    """:func:`_gram` with every segment's sums kept between calls: ``seg_end[a] == e`` means
    ``seg_sums[a]`` holds the sums of the segment from breakpoint ``a`` to ``e`` (a segment
    ending at the last point is the last one, which also holds that point). The sums of a
    segment depend only on its two ends (and the fixed data and blocks), so a kept one is the
    value :func:`_gram` computes, and the assembly is :func:`_gram`'s: the same bits."""
    for j in range(k2):
        dg[j] = 0.0
        od[j] = 0.0
        h[j] = 0.0
    for j in range(k2 - 1):
        a = bp[j]
        e = bp[j + 1]
        if seg_end[a] != e:
            _segment_sums(x, y, w, bs, mom, a, e, e + 1 if j == k2 - 2 else e, seg_sums[a])
            seg_end[a] = e
        dg[j] += seg_sums[a, 0]
        dg[j + 1] += seg_sums[a, 1]
        od[j] = seg_sums[a, 2]
        h[j] += seg_sums[a, 3]
        h[j + 1] += seg_sums[a, 4]


@njit(cache=True, nogil=True)
def _fit_at(x, y, w, bs, mom, bp, sg, k2, lam, c, dg, od, h, seg_end, seg_sums):
    """Values ``c`` at the breakpoints of the knot set's solution at ``lam``: G c = h - lam T's
    (the Gram sums of unchanged segments reused, :func:`_gram_cached`)."""
    _gram_cached(x, y, w, bs, mom, bp, k2, dg, od, h, seg_end, seg_sums)
    _subtract_penalty(x, bp, sg, k2, lam, h)
    _ldl_factor(dg, od, k2)
    _ldl_solve(dg, od, h, c, k2)


@njit(cache=True, nogil=True)
def _scan(x, y, w, bs, mom, bp, k2, c, lam, state, thr, add_i, add_s):
    """Dual recursion at ``lam`` with block skipping; emits one knot per run of violators.

    A run is a maximal set of consecutive free indices whose dual exceeds ``thr`` in absolute
    value with one sign; its peak index and sign are written to ``add_i``/``add_s``. Returns
    (number of runs, max over scanned free indices of |nu| / lam).
    """
    n = x.shape[0]
    nadd = 0
    worst = 0.0
    run_s = 0
    run_i = -1
    run_v = 0.0
    F = 0.0
    S = 0.0
    j = 0
    xa = x[bp[0]]
    slope = (c[1] - c[0]) / (x[bp[1]] - xa)
    k = 0
    while k < n:
        # current segment: bp[j] <= k < bp[j+1] (the last segment also holds the last point)
        while j < k2 - 2 and k >= bp[j + 1]:
            j += 1
            xa = x[bp[j]]
            slope = (c[j + 1] - c[j]) / (x[bp[j + 1]] - xa)
        blen = min(bs, n - k)
        kend = k + blen - 1
        if (k % bs == 0 and k > bp[j] and kend <= n - 2
                and (j == k2 - 2 or kend < bp[j + 1])):
            B = k // bs
            x0 = x[k]
            x1 = x[kend]
            b0 = c[j] + slope * (x0 - xa)
            b1 = b0 + slope * (x1 - x0)
            bmin = min(b0, b1)
            bmax = max(b0, b1)
            dev = max(mom[B, _YMAX] - bmin, bmax - mom[B, _YMIN], 0.0)
            Fl = F + (x0 - x[k - 1]) * S
            Fr = F + (x1 - x[k - 1]) * S
            bound = max(abs(Fl), abs(Fr)) + (x1 - x0) * mom[B, _W] * dev
            if bound <= thr:
                if run_s != 0:
                    add_i[nadd] = run_i
                    add_s[nadd] = run_s
                    nadd += 1
                    run_s = 0
                W = mom[B, _W]
                F = Fr + mom[B, _YV] - b0 * mom[B, _MV1] - slope * mom[B, _MUV]
                S += mom[B, _Y] - b0 * W - slope * mom[B, _MU1]
                k += blen
                continue
        # point-by-point through this block
        while k <= kend:
            while j < k2 - 2 and k >= bp[j + 1]:
                j += 1
                xa = x[bp[j]]
                slope = (c[j + 1] - c[j]) / (x[bp[j + 1]] - xa)
            if k > 0:
                F += (x[k] - x[k - 1]) * S
                if k < n - 1:
                    i = k - 1
                    if state[i] != 0:
                        if run_s != 0:
                            add_i[nadd] = run_i
                            add_s[nadd] = run_s
                            nadd += 1
                            run_s = 0
                    else:
                        a = abs(F)
                        if a > worst:
                            worst = a
                        if a > thr:
                            s = 1 if F > 0 else -1
                            if s != run_s:
                                if run_s != 0:
                                    add_i[nadd] = run_i
                                    add_s[nadd] = run_s
                                    nadd += 1
                                run_s = s
                                run_i = i
                                run_v = a
                            elif a > run_v:
                                run_i = i
                                run_v = a
                        elif run_s != 0:
                            add_i[nadd] = run_i
                            add_s[nadd] = run_s
                            nadd += 1
                            run_s = 0
            S += w[k] * (y[k] - (c[j] + slope * (x[k] - xa)))
            k += 1
    if run_s != 0:
        add_i[nadd] = run_i
        add_s[nadd] = run_s
        nadd += 1
    return nadd, worst / lam


@njit(cache=True, nogil=True)
def _pdas_iterations(x, y, w, bs, mom, lam, kn, ks, K, state, tol, max_iter, pw,
                     keep_flat=False):
    """Primal-dual active-set iterations at ``lam`` from the knots ``kn[:K]`` (signs ``ks``).

    Each iteration solves the exact KKT system of the current knot set, removes every knot whose
    slope change has the wrong sign (or is negligible) and, for every run of consecutive free
    indices whose dual exceeds ``lam (1 + tol)`` with one sign, adds one knot at the run's peak.
    When nothing changes the KKT conditions hold: the solution is exact.

    ``keep_flat=True`` keeps knots whose slope change is negligible (within the rounding
    allowance either side of 0), removing only those of clearly wrong sign: the homotopy's rule.
    Used to re-solve the homotopy's knot set, whose degenerate knots (an exactly fitted stretch,
    where ``nu = -lam`` on every index) the default rule would remove and re-add forever.

    Returns (iterations, or minus the iterations spent when it gives up, after ``max_iter``
    iterations or when a knot set repeats, i.e. the update cycles; new K; relative dual
    infeasibility; number of knots with a non-negligible slope change). ``kn``, ``ks`` and
    ``state`` are updated in place; the breakpoints and values of the solution are left in
    ``pw[0]`` (bp) and ``pw[2]`` (c).
    """
    bp, sg, c, dg, od, h, add_i, add_s, nk, nks, seg_end, seg_sums = pw
    n = x.shape[0]
    thr = lam * (1.0 + tol)
    seen = np.zeros(8, dtype=np.uint64)  # hashes of recent knot sets: a repeat is a cycle
    for it in range(1, max_iter + 1):
        bp[0] = 0
        sg[0] = 0.0
        for q in range(K):
            bp[q + 1] = kn[q] + 1
            sg[q + 1] = ks[q]
        bp[K + 1] = n - 1
        sg[K + 1] = 0.0
        k2 = K + 2
        _fit_at(x, y, w, bs, mom, bp, sg, k2, lam, c, dg, od, h, seg_end, seg_sums)
        vscale = 0.0
        for q in range(k2):
            vscale = max(vscale, abs(c[q]))
        # sign check of the knots (marks removals with state 2 * s, still a run barrier)
        nrem = 0
        kinks = 0
        wrong = 0.0
        for q in range(1, k2 - 1):
            im = 1.0 / (x[bp[q]] - x[bp[q - 1]])
            ip = 1.0 / (x[bp[q + 1]] - x[bp[q]])
            g = sg[q] * ((c[q + 1] - c[q]) * ip - (c[q] - c[q - 1]) * im)
            noise = tol * vscale * (im + ip)
            if g <= noise and not (keep_flat and g >= -noise):
                state[kn[q - 1]] = 2 * ks[q - 1]
                nrem += 1
                if g < 0.0:
                    wrong = max(wrong, -g / (vscale * (im + ip)))
            elif g > noise:
                kinks += 1
        nadd, worst = _scan(x, y, w, bs, mom, bp, k2, c, lam, state, thr, add_i, add_s)
        if nrem == 0 and nadd == 0:
            return it, K, max(worst - 1.0, wrong, 0.0), kinks
        # merge: surviving knots and new ones (both sorted)
        nn = 0
        a = 0
        for q in range(K):
            i = kn[q]
            while a < nadd and add_i[a] < i:
                nk[nn] = add_i[a]
                nks[nn] = add_s[a]
                state[add_i[a]] = add_s[a]
                nn += 1
                a += 1
            if state[i] == 2 or state[i] == -2:
                state[i] = 0
            else:
                nk[nn] = i
                nks[nn] = ks[q]
                nn += 1
        while a < nadd:
            nk[nn] = add_i[a]
            nks[nn] = add_s[a]
            state[add_i[a]] = add_s[a]
            nn += 1
            a += 1
        K = nn
        kn[:K] = nk[:K]
        ks[:K] = nks[:K]
        hsh = np.uint64(1469598103934665603)
        for q in range(K):
            hsh = (hsh ^ np.uint64(2 * kn[q] + (ks[q] > 0))) * np.uint64(1099511628211)
        for r in range(8):
            if seen[r] == hsh:
                return -it, K, 0.0, 0
        seen[it % 8] = hsh
    return -max_iter, K, 0.0, 0


@njit(cache=True, nogil=True)
def _pdas_on_copy(x, y, w, bs, mom, lam, kn, ks, K, state, tkn, tks, tstate, tol, max_iter, pw,
                  keep_flat):
    """:func:`_pdas_iterations` from copies ``tkn, tks, tstate`` of the knot set ``kn[:K]``,
    ``ks[:K]``, ``state`` (which stay as they are, for a retry after a failure)."""
    tkn[:K] = kn[:K]
    tks[:K] = ks[:K]
    tstate[:] = state
    return _pdas_iterations(x, y, w, bs, mom, lam, tkn, tks, K, tstate, tol, max_iter, pw,
                            keep_flat)


# ---------------------------------------------------------------------------------------------
# exact homotopy (fallback for the rare steps where PDAS cycles)
# ---------------------------------------------------------------------------------------------
def _workspace(n):
    m = max(n - 2, 0)
    return (np.empty(n, dtype=np.int64), np.empty(n), np.empty(n), np.empty(n), np.empty(n),
            np.empty(n), np.empty(n), np.empty(n), np.zeros(m), np.zeros(m), np.empty(n),
            np.empty(n), np.empty(n))


@njit(cache=True, nogil=True)
def _solve_state(x, y, w, state, lam, ws):
    """Spline fit, duals and knot slope changes for the knot set ``state`` (all affine in lam).

    Returns (k2, vscale): the number of breakpoints and the size of the fitted values at lam.
    """
    bp, sg, c0, c1, dg, od, h, p, nu0, nu1, sc0, sc1, scl = ws
    k2 = _breakpoints(state, x.shape[0], bp, sg)
    _segment(x, y, w, bp, sg, k2, c0, c1, dg, od, h, p)
    _duals(x, y, w, bp, k2, c0, c1, nu0, nu1)
    _slope_changes(x, bp, k2, c0, sc0, scl)
    _slope_changes(x, bp, k2, c1, sc1, scl)
    return k2, _value_scale(c0, c1, k2, lam)


@njit(cache=True, nogil=True)
def _walk(x, y, w, state, lam, goal, ws, tol, max_events):
    """Exact homotopy from the solution at ``lam`` (knot set ``state``) down to ``goal``,
    one event at a time (O(n) each). Returns the number of events, or -1 past ``max_events``."""
    bp, sg, c0, c1, dg, od, h, p, nu0, nu1, sc0, sc1, scl = ws
    tabu = -1
    tabu_lam = 0.0
    events = 0
    while True:
        k2, vscale = _solve_state(x, y, w, state, lam, ws)
        lam_ev, idx, new = _next_event(state, nu0, nu1, sc0, sc1, scl, vscale, lam, tabu,
                                       tabu_lam, tol)
        if idx < 0 or lam_ev < goal:
            return events
        state[idx] = new if state[idx] == 0 else 0
        tabu = idx
        tabu_lam = lam_ev
        lam = lam_ev
        events += 1
        if events > max_events:
            return -1


# ---------------------------------------------------------------------------------------------
# the path (lam_max in Python, then the grid loop in one compiled call)
# ---------------------------------------------------------------------------------------------
def _path(x, y, w, ratios, tol, bs, pdas_iter, max_events):
    """Exact solutions at ``lam_max * ratios`` (ratios non-increasing, in (0, 1]).

    Each grid value is reached from the previous solution by PDAS. If PDAS does not converge
    within ``pdas_iter`` iterations (or cycles) the step is shortened geometrically and retried;
    a step shorter than 0.1 % that still fails is walked exactly by the homotopy. Returns
    lam_max, the breakpoint indices and values of every solution, kink counts, KKT residuals and
    the work done [pdas iterations, shortened steps, homotopy events].
    """
    n = x.shape[0]
    m = n - 2
    G = ratios.shape[0]
    stats = [0, 0, 0]
    ws = _workspace(n)
    state = np.zeros(m, dtype=np.int8)
    _solve_state(x, y, w, state, 0.0, ws)
    lam_max = float(np.abs(ws[8]).max())
    # a rounding-level lam_max means the targets lie on a line: report 0 (degenerate)
    scale = float(w.sum()) * (x[-1] - x[0]) * max(1.0, float(np.abs(y).max()))
    if lam_max <= DEGENERATE_TOL * scale:
        return 0.0, [], [], None, None, stats

    mom = _block_moments(x, y, w, bs)
    idx_flat, val_flat, offsets, kinks, kkt, st = _grid_loop(
        x, y, w, ratios, tol, bs, pdas_iter, max_events, lam_max, mom, ws, state)
    if st[3] == 1:  # pragma: no cover - guard, never observed
        raise RuntimeError("trend-filtering path did not terminate: the abscissae "
                           "are too close together for double precision")
    if st[3] == 2:  # pragma: no cover - guard, never observed
        raise RuntimeError("trend-filtering path: the homotopy's knot set does "
                           "not re-solve")
    stats[:] = [int(v) for v in st[:3]]
    idx = [idx_flat[offsets[g]:offsets[g + 1]].copy() for g in range(G)]
    val = [val_flat[offsets[g]:offsets[g + 1]].copy() for g in range(G)]
    return lam_max, idx, val, kinks, kkt, stats


@njit(cache=True, nogil=True)
def _grid_loop(x, y, w, ratios, tol, bs, pdas_iter, max_events, lam_max, mom, ws, state):
    """The grid loop of :func:`_path` in one compiled call (the same operations and decisions
    as the former Python loop): breakpoints and values of every solution, flat with
    ``offsets``, kink counts, KKT residuals and ``[pdas iterations, shortened steps, homotopy
    events, failure]`` (failure 1: the homotopy did not terminate, 2: its knot set did not
    re-solve; the caller raises)."""
    n = x.shape[0]
    m = n - 2
    G = ratios.shape[0]
    st = np.zeros(4, dtype=np.int64)
    pw = (np.empty(n, dtype=np.int64), np.empty(n), np.empty(n), np.empty(n), np.empty(n),
          np.empty(n), np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int8),
          np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int8),
          np.full(n, -1, dtype=np.int64), np.empty((n, 5)))   # Gram sums per segment
    kn = np.empty(m, dtype=np.int64)
    ks = np.empty(m, dtype=np.int8)
    tkn = np.empty(m, dtype=np.int64)
    tks = np.empty(m, dtype=np.int8)
    tstate = np.empty(m, dtype=np.int8)
    K = 0
    cur = lam_max
    cap = max(4 * n, 64)
    idx_flat = np.empty(cap, dtype=np.int64)
    val_flat = np.empty(cap)
    offsets = np.zeros(G + 1, dtype=np.int64)
    kinks = np.zeros(G, dtype=np.int64)
    kkt = np.zeros(G)
    r_kkt = 0.0
    r_kinks = 0
    for gi in range(G):
        goal = lam_max * ratios[gi]
        step = np.inf  # log-length of the attempted step: first the whole grid step
        while True:
            t = max(goal, cur * det_exp(-step))
            # PDAS on copies of the knot set (the copies made in the same compiled call)
            it, tK, r_kkt, r_kinks = _pdas_on_copy(x, y, w, bs, mom, t, kn, ks, K, state, tkn,
                                                   tks, tstate, tol, pdas_iter, pw, False)
            if it < 0:
                st[0] -= it
                if t < cur * (1.0 - 1e-3):
                    st[1] += 1
                    step = 0.5 * det_log(cur / t)
                    continue
                # a step this short that PDAS still cannot take is walked exactly
                ev = _walk(x, y, w, state, cur, t, ws, tol, max_events)
                if ev < 0:
                    st[3] = 1
                    return idx_flat, val_flat, offsets, kinks, kkt, st
                st[2] += ev
                K = 0
                for i in range(m):
                    if state[i] != 0:
                        kn[K] = i
                        ks[K] = state[i]
                        K += 1
                # re-solve at t from the exact knot set (converges at once) for the record
                it, tK, r_kkt, r_kinks = _pdas_on_copy(x, y, w, bs, mom, t, kn, ks, K, state,
                                                       tkn, tks, tstate, tol,
                                                       max(pdas_iter, 30), pw, True)
                if it < 0:
                    st[3] = 2
                    return idx_flat, val_flat, offsets, kinks, kkt, st
            st[0] += it
            # adopt the copies; the former arrays are the next attempt's copies
            K = tK
            kn, tkn = tkn, kn
            ks, tks = tks, ks
            state, tstate = tstate, state
            if t > goal:
                step = 2.0 * det_log(cur / t)
            cur = t
            if t <= goal:
                break
        at = offsets[gi]
        if at + K + 2 > idx_flat.shape[0]:
            cap = 2 * (at + K + 2)
            grown_i = np.empty(cap, dtype=np.int64)
            grown_v = np.empty(cap)
            grown_i[:at] = idx_flat[:at]
            grown_v[:at] = val_flat[:at]
            idx_flat = grown_i
            val_flat = grown_v
        idx_flat[at:at + K + 2] = pw[0][:K + 2]
        val_flat[at:at + K + 2] = pw[2][:K + 2]
        offsets[gi + 1] = at + K + 2
        kinks[gi] = r_kinks
        kkt[gi] = r_kkt
    return idx_flat, val_flat, offsets, kinks, kkt, st


@njit(cache=True, nogil=True)
def _line_values(x, y, w):
    """Weighted least-squares line evaluated at the first and last abscissa."""
    sw = 0.0
    sx = 0.0
    sy = 0.0
    for k in range(x.shape[0]):
        sw += w[k]
        sx += w[k] * x[k]
        sy += w[k] * y[k]
    mx = sx / sw
    my = sy / sw
    sxx = 0.0
    sxy = 0.0
    for k in range(x.shape[0]):
        dx = x[k] - mx
        sxx += w[k] * dx * dx
        sxy += w[k] * dx * (y[k] - my)
    slope = sxy / sxx if sxx > 0.0 else 0.0
    return my + slope * (x[0] - mx), my + slope * (x[-1] - mx)


@njit(cache=True, nogil=True, inline="always")
def _clipped_prediction(x, k, idx, val, lo, nb, j, zk, floor):
    """Point ``k``'s prediction of the model with breakpoints ``idx[lo:lo + nb]`` and values
    ``val[lo:lo + nb]`` (``j``: the segment reached so far, the points visited in order),
    clipped to ``[floor, 1 - floor]``: ``(p, j, impossible)``, ``impossible`` 1 when the clip
    calls the observed label ``zk`` impossible."""
    if nb == 1:
        p = val[lo]
    else:
        while j < nb - 2 and k >= idx[lo + j + 1]:
            j += 1
        a = idx[lo + j]
        b = idx[lo + j + 1]
        t = (x[k] - x[a]) / (x[b] - x[a])
        p = val[lo + j] * (1.0 - t) + val[lo + j + 1] * t
    if p <= floor:
        return floor, j, 1 if zk > 0.0 else 0
    if p >= 1.0 - floor:
        return 1.0 - floor, j, 1 if zk < 1.0 else 0
    return p, j, 0


@njit(cache=True, nogil=True)
def _clipped_loglik(x, bpi, bpv, z, w, floor):
    """Bernoulli log-likelihood of one model clipped to [floor, 1 - floor] at every point.

    ``0 log 0`` is taken as 0 (its limit): a term is dropped only when its label mass is zero, so
    a stretch of equal labels fitted exactly costs nothing. Also returns the number of points
    whose observed label the model calls impossible (prediction within ``floor`` of 0 with
    positives there, or of 1 with negatives), each of which costs ``log(floor)`` per instance.
    """
    ll = 0.0
    floored = 0
    j = 0
    nb = bpi.shape[0]
    for k in range(x.shape[0]):
        zk = z[k]
        p, j, impossible = _clipped_prediction(x, k, bpi, bpv, 0, nb, j, zk, floor)
        floored += impossible
        term = 0.0
        if zk > 0.0:
            term += zk * det_log(p)
        if zk < 1.0:
            term += (1.0 - zk) * det_log1p(-p)
        ll += w[k] * term
    return ll, floored


@njit(cache=True, nogil=True)
def _unit_logs(p, lp, lq):
    """``lp = log p`` and ``lq = log(1 - p)`` (``det_log(p)``, ``det_log1p(-p)``) for ``p`` in
    ``[2**-53, 1 - 2**-53]``, in two plain loops (the first vectorises: no per-point branch)."""
    for k in range(p.shape[0]):
        lp[k] = log_in_unit(p[k])
    for k in range(p.shape[0]):
        lq[k] = log1p_in_unit(-p[k])


@njit(cache=True, nogil=True)
def _clipped_logliks(x, idx, val, offsets, z, w, floor):
    """:func:`_clipped_loglik` of every model ``(idx, val)[offsets[j]:offsets[j + 1]]`` in one
    call, for a screened ``floor`` (``2**-53 <= floor < 0.5``): each model's clipped
    predictions first, then their logarithms for every point (:func:`_unit_logs`), then the
    same sum ``ll += w[k] * term`` in the same order with the same terms (``0 log 0 = 0``):
    the same values as :func:`_clipped_loglik`."""
    n = x.shape[0]
    L = offsets.shape[0] - 1
    lls = np.empty(L)
    counts = np.empty(L, dtype=np.int64)
    p = np.empty(n)
    lp = np.empty(n)
    lq = np.empty(n)
    for m in range(L):
        lo = offsets[m]
        nb = offsets[m + 1] - lo
        floored = 0
        j = 0
        for k in range(n):
            p[k], j, impossible = _clipped_prediction(x, k, idx, val, lo, nb, j, z[k], floor)
            floored += impossible
        _unit_logs(p, lp, lq)
        ll = 0.0
        for k in range(n):
            zk = z[k]
            term = 0.0
            if zk > 0.0:
                term += zk * lp[k]
            if zk < 1.0:
                term += (1.0 - zk) * lq[k]
            ll += w[k] * term
        lls[m] = ll
        counts[m] = floored
    return lls, counts


# ---------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrendFilterPath:
    """Solutions of linear trend filtering at a decreasing grid of lambdas.

    Model ``j`` is the continuous piecewise-linear function through
    ``(x[knot_index[j]], knot_value[j])``; its first and last breakpoints are the first and last
    data points, the others are its knots.

    Attributes
    ----------
    x : ndarray
        The abscissae the path was fitted on.
    lambdas : ndarray of shape (L,)
    lambda_max : float
        Smallest lambda whose solution is the weighted least-squares line (0 when the targets lie
        exactly on a line or there are at most two points).
    knot_index, knot_value : list of ndarray
        Breakpoints of each model.
    n_knots : ndarray of int, shape (L,)
        Number of slope changes of each model (its df is ``n_knots + 2``).
    kkt : ndarray of shape (L,)
        Relative KKT residual of each solution (0 = exact optimality certificate).
    n_pdas_iter, n_halvings, n_events : int
        Work done: active-set iterations, step halvings, and homotopy events walked.
    """

    x: np.ndarray
    lambdas: np.ndarray
    lambda_max: float
    knot_index: list
    knot_value: list
    n_knots: np.ndarray
    kkt: np.ndarray
    n_pdas_iter: int
    n_halvings: int
    n_events: int

    def fitted(self, j: int) -> np.ndarray:
        """Fitted values of model ``j`` at every abscissa ``x``."""
        return np.interp(self.x, self.x[self.knot_index[j]], self.knot_value[j])

    def clipped_log_likelihood(self, j: int, z: np.ndarray, w: np.ndarray,
                               floor: float = 1e-12):
        """``(sum w (z log p + (1 - z) log(1 - p)), n_impossible)`` over every point, with model
        ``j`` clipped to ``[floor, 1 - floor]`` and ``0 log 0 = 0``.

        ``n_impossible`` counts the points whose observed labels the unfloored model gives
        probability 0 (within ``floor``); each such instance costs ``log(floor)``, a finite
        stand-in for the exact likelihood's ``-inf`` (so models that all do this stay ordered).
        """
        return _clipped_loglik(self.x, self.knot_index[j], self.knot_value[j],
                               np.ascontiguousarray(z, dtype=np.float64),
                               np.ascontiguousarray(w, dtype=np.float64), float(floor))

    def clipped_log_likelihoods(self, z: np.ndarray, w: np.ndarray, floor: float = 1e-12):
        """:meth:`clipped_log_likelihood` of every model: ``(log-likelihoods, n_impossible)``,
        arrays of shape ``(L,)`` (the same values; one compiled call when
        ``2**-53 <= floor < 0.5``)."""
        z = np.ascontiguousarray(z, dtype=np.float64)
        w = np.ascontiguousarray(w, dtype=np.float64)
        floor = float(floor)
        L = len(self.knot_index)
        if not 2.0**-53 <= floor < 0.5:
            out = [_clipped_loglik(self.x, self.knot_index[j], self.knot_value[j], z, w, floor)
                   for j in range(L)]
            return (np.array([o[0] for o in out], dtype=np.float64),
                    np.array([o[1] for o in out], dtype=np.int64))
        offsets = np.zeros(L + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([a.size for a in self.knot_index])
        return _clipped_logliks(self.x, np.concatenate(self.knot_index),
                                np.concatenate(self.knot_value).astype(np.float64, copy=False),
                                offsets, z, w, floor)

    def evaluate(self, j: int, s: np.ndarray) -> np.ndarray:
        """Model ``j`` at ``s``, extrapolated linearly beyond the data with the end slopes."""
        return piecewise_linear_extrapolate(self.x[self.knot_index[j]], self.knot_value[j], s)


def piecewise_linear_extrapolate(xk: np.ndarray, vk: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Linear interpolation through ``(xk, vk)`` with linear extrapolation by the end slopes.

    A single breakpoint gives a constant.
    """
    s = np.asarray(s, dtype=np.float64)
    out = np.interp(s, xk, vk)
    if xk.size < 2:
        return out
    lo = s < xk[0]
    hi = s > xk[-1]
    if lo.any():
        out[lo] = vk[0] + (vk[1] - vk[0]) / (xk[1] - xk[0]) * (s[lo] - xk[0])
    if hi.any():
        out[hi] = vk[-1] + (vk[-1] - vk[-2]) / (xk[-1] - xk[-2]) * (s[hi] - xk[-1])
    return out


def lambda_grid(n_lambdas: int = 50, lambda_min_ratio: float = 1e-4) -> np.ndarray:
    """Ratios ``lambda / lambda_max``: ``n_lambdas`` values log-spaced from 1 down to
    ``lambda_min_ratio`` (glmgen's grid; ELiTE uses 50 and 1e-4)."""
    if n_lambdas == 1:
        return np.ones(1)
    return det_exp_array(np.linspace(0.0, det_log(float(lambda_min_ratio)), n_lambdas))


def trend_filter_path(x: np.ndarray, y: np.ndarray, w: np.ndarray | None = None, *,
                      n_lambdas: int = 50, lambda_min_ratio: float = 1e-4,
                      ratios: np.ndarray | None = None,
                      pdas_max_iter: int = PDAS_MAX_ITER) -> TrendFilterPath:
    """Exact linear trend-filtering solutions at ``lambda_max * ratios``.

    Parameters
    ----------
    x : ndarray of shape (n,)
        Strictly increasing abscissae (collapse ties first, e.g. with
        :func:`mlcal._solvers.ties.sort_and_collapse`).
    y : ndarray of shape (n,)
        Targets.
    w : ndarray of shape (n,), optional
        Positive weights (default ones).
    n_lambdas, lambda_min_ratio : int, float
        The default grid, see :func:`lambda_grid`.
    ratios : ndarray, optional
        Explicit decreasing ratios in (0, 1] instead of the default grid.
    pdas_max_iter : int
        Active-set iterations before a step is shortened (tests set 1 to exercise the step
        shortening and the exact homotopy fallback).

    Returns
    -------
    TrendFilterPath
        With n <= 2 points, or targets exactly on a line (``lambda_max == 0``), every model is
        the weighted least-squares line (a constant for one point) and ``lambdas`` are 0.
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    n = x.size
    w = np.ones(n) if w is None else np.ascontiguousarray(w, dtype=np.float64)
    if y.size != n or w.size != n or n == 0:
        raise ValueError("x, y and w must be non-empty and of equal length")
    if n > 1 and not (np.diff(x) > 0).all():
        raise ValueError("x must be strictly increasing (collapse tied abscissae first)")
    if not (w > 0).all():
        raise ValueError("weights must be positive")
    if ratios is None:
        ratios = lambda_grid(n_lambdas, lambda_min_ratio)
    ratios = np.ascontiguousarray(ratios, dtype=np.float64)
    if ratios.size == 0 or (np.diff(ratios) > 0).any() or ratios[0] > 1 or ratios[-1] <= 0:
        raise ValueError("ratios must be non-empty, non-increasing and in (0, 1]")
    L = ratios.size

    lam_max = 0.0
    if n >= 3:
        lam_max, idx, val, kinks, kkt, stats = _path(
            x, y, w, ratios, EVENT_TOL, BLOCK, int(pdas_max_iter),
            _MAX_EVENTS_PER_POINT * n + 1000)
        if lam_max > 0.0:
            return TrendFilterPath(x, lam_max * ratios, lam_max, idx, val, kinks, kkt,
                                   *map(int, stats))
    # degenerate: the least-squares line (or the single point's value) for every lambda
    if n == 1:
        bpi, bpv = np.zeros(1, dtype=np.int64), y.copy()
    else:
        v0, v1 = _line_values(x, y, w)
        bpi, bpv = np.array([0, n - 1], dtype=np.int64), np.array([v0, v1])
    return TrendFilterPath(x, np.zeros(L), lam_max, [bpi.copy() for _ in range(L)],
                           [bpv.copy() for _ in range(L)], np.zeros(L, dtype=np.int64),
                           np.zeros(L), 0, 0, 0)
