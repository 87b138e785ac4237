"""Weighted mean negative log-likelihood of the softmax-affine map with its exact gradient and
Hessian, for temperature, vector and matrix scaling, in one fused pass over the rows.

For logits ``z`` of one row with softmax ``p`` and label ``c`` the loss is
``log sum_k exp(z_k) - z_c``; its gradient in ``z`` is ``r = p - e_c`` and its Hessian
``diag(p) - p p^T``; the chain rule through the affine map gives every derivative below.
Per row: one max, one :func:`~mlcal._solvers.detmath.det_exp` per class, one log, and the
gradient/Hessian updates, with no temporary (n, K) array.

The loss is evaluated as ``log1p(sum_{k != c} e_k / e_c)`` (``e_k = exp(z_k - max z)``) when
``e_c`` is representable, so a nearly certain correct prediction keeps its relative precision,
and ``r_c = -(sum_{k != c} e_k) / s`` for the same reason.

Determinism: rows are split into :data:`N_CHUNKS` fixed blocks (bounds depend only on ``n``);
each block's partial sums are a sequential loop over its rows and the blocks are added in block
order, so the result is the same on every CPU. The blocks run one after the other: numba's
``parallel=True`` would use GNU OpenMP here, which aborts a process forked after a parallel
region ran (``multiprocessing`` with fork, prefork servers), a trap a calibration library must
not set for its users; the fixed blocks keep the door open for a fork-safe threading layer. Callers sort the rows first (``softmax_affine.canonical_order``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

from mlcal._solvers.detmath import det_exp, det_log, det_log1p
from mlcal._solvers.softmax_affine import _affine_row, nll_and_gradient_full

#: fixed number of row blocks summed separately (independent of the CPU and thread count)
N_CHUNKS = 16
#: ``z_c - max z`` above which ``e_c`` is far from underflow and the log1p form is used
_LOG1P_RANGE = -600.0


@njit(cache=True, nogil=True, inline="always")
def _row_loss(z, c, e):
    """``e[k] = exp(z[k] - max z)``; returns ``(loss, s, other)`` with ``s = sum e`` and
    ``other = s - e[c]`` summed directly."""
    K = z.shape[0]
    m = z[0]
    for k in range(1, K):
        if z[k] > m:
            m = z[k]
    s = 0.0
    other = 0.0
    for k in range(K):
        e[k] = det_exp(z[k] - m)
        s += e[k]
        if k != c:
            other += e[k]
    if z[c] - m > _LOG1P_RANGE:
        loss = det_log1p(other / e[c])
    else:
        loss = m + det_log(s) - z[c]
    return loss, s, other


@njit(cache=True, nogil=True, inline="always")
def _bounds(n, chunk):
    return (chunk * n) // N_CHUNKS, ((chunk + 1) * n) // N_CHUNKS


@njit(cache=True, nogil=True)
def temperature_derivatives(x, y, w, beta):
    """``(f, f', f'')`` of the weighted mean NLL of ``softmax(beta x)`` in ``beta``:
    ``f' = mean(E_p[x] - x_c)`` and ``f'' = mean(Var_p[x])`` (so ``f`` is convex in ``beta``)."""
    n, K = x.shape
    part = np.zeros((N_CHUNKS, 4))
    for chunk in range(N_CHUNKS):
        lo, hi = _bounds(n, chunk)
        z = np.empty(K)
        e = np.empty(K)
        f = 0.0
        d1 = 0.0
        d2 = 0.0
        ws = 0.0
        for i in range(lo, hi):
            c = y[i]
            for k in range(K):
                z[k] = beta * x[i, k]
            loss, s, _ = _row_loss(z, c, e)
            xc = x[i, c]
            acc = 0.0
            for k in range(K):
                acc += e[k] * (x[i, k] - xc)
            mean_shift = acc / s                # E_p[x] - x_c
            var = 0.0
            for k in range(K):
                dev = x[i, k] - xc - mean_shift
                var += e[k] * dev * dev
            f += w[i] * loss
            d1 += w[i] * mean_shift
            d2 += w[i] * (var / s)
            ws += w[i]
        part[chunk, 0] = f
        part[chunk, 1] = d1
        part[chunk, 2] = d2
        part[chunk, 3] = ws
    tot = np.zeros(4)
    for chunk in range(N_CHUNKS):
        for j in range(4):
            tot[j] += part[chunk, j]
    return tot[0] / tot[3], tot[1] / tot[3], tot[2] / tot[3]


@njit(cache=True, nogil=True, inline="always")
def _residual(e, s, other, c, r):
    """``r = p - e_c`` with the label's entry as ``-other / s`` (no cancellation)."""
    for k in range(e.shape[0]):
        r[k] = e[k] / s
    r[c] = -other / s


#: rows whose rank-one Hessian terms are buffered and applied together (keeps a row of H in
#: L1 cache across the block instead of streaming all of H once per data row)
_BLOCK = 64


@njit(cache=True, nogil=True)
def _rank_one_down(H, V, wv, rows):
    """Upper triangle of ``H -= sum_r wv[r] V[r] V[r]^T`` over the first ``rows`` buffered rows;
    every entry still accumulates the rows in order. The unsigned inner index lets LLVM
    vectorise the loop (elementwise multiply and subtract: the same roundings at any width;
    no fast-math, so no fused multiply-add)."""
    P = V.shape[1]
    for a in range(P):
        Ha = H[a]
        for r in range(rows):
            Vr = V[r]
            va = wv[r] * Vr[a]
            for b in range(uint64(a), uint64(P)):
                Ha[b] -= va * Vr[b]


@njit(cache=True, nogil=True)
def _partials(P, hessian):
    """Per-block sums: objective, weight, gradient and (upper-triangle) Hessian."""
    return (np.zeros(N_CHUNKS), np.zeros(N_CHUNKS), np.zeros((N_CHUNKS, P)),
            np.zeros((N_CHUNKS, P, P) if hessian else (N_CHUNKS, 0, 0)))


@njit(cache=True, nogil=True)
def _row_buffers(K, P):
    """Scratch of one block: logits, exponentials, residuals, buffered Hessian rows, weights."""
    return np.empty(K), np.empty(K), np.empty(K), np.empty((_BLOCK, P)), np.empty(_BLOCK)


@njit(cache=True, nogil=True, inline="always")
def _block(n, chunk, K, P, gp, Hp):
    """Row range and scratch of block ``chunk``, with its gradient and Hessian partials."""
    lo, hi = _bounds(n, chunk)
    z, e, r, V, wv = _row_buffers(K, P)
    return lo, hi, z, e, r, V, wv, gp[chunk], Hp[chunk]


@njit(cache=True, nogil=True, inline="always")
def _row_terms(z, c, e, r):
    """Loss of a row with logits ``z`` and label ``c``, filling ``e`` and the residual ``r``;
    returns ``(loss, s)`` with ``s = sum(e)``."""
    loss, s, other = _row_loss(z, c, e)
    _residual(e, s, other, c, r)
    return loss, s


@njit(cache=True, nogil=True, inline="always")
def _push_row(H, V, wv, buffered, wi, last):
    """Record row weight ``wi`` for the buffered Hessian row; apply the buffer when it is full
    or at the block's last row. Returns the new buffer fill."""
    wv[buffered] = wi
    buffered += 1
    if buffered == _BLOCK or last:
        _rank_one_down(H, V, wv, buffered)
        return 0
    return buffered


@njit(cache=True, nogil=True)
def _finish(fp, gp, Hp, wsp, hessian):
    """Add the block partials in block order, divide by the total weight, mirror ``H``."""
    P = gp.shape[1]
    f = 0.0
    ws = 0.0
    g = np.zeros(P)
    H = np.zeros((P, P) if hessian else (0, 0))
    for chunk in range(N_CHUNKS):
        f += fp[chunk]
        ws += wsp[chunk]
        for a in range(P):
            g[a] += gp[chunk, a]
        if hessian:
            for a in range(P):
                for b in range(a, P):
                    H[a, b] += Hp[chunk, a, b]
    for a in range(P):
        g[a] /= ws
    if hessian:
        for a in range(P):
            for b in range(a, P):
                H[a, b] /= ws
                H[b, a] = H[a, b]
    return f / ws, g, H


@njit(cache=True, nogil=True)
def vector_derivatives(x, y, w, d, b, hessian):
    """Weighted mean NLL of ``softmax(d * x + b)``, its gradient in ``theta = (d, b)`` and, when
    ``hessian``, its Hessian: with ``u = p * x``, ``H_dd = diag(p x^2) - u u^T``,
    ``H_db = diag(p x) - u p^T``, ``H_bb = diag(p) - p p^T`` (row means)."""
    n, K = x.shape
    P = 2 * K
    fp, wsp, gp, Hp = _partials(P, hessian)
    for chunk in range(N_CHUNKS):
        lo, hi, z, e, r, V, wv, g, H = _block(n, chunk, K, P, gp, Hp)
        buffered = 0
        f = 0.0
        ws = 0.0
        for i in range(lo, hi):
            wi = w[i]
            for k in range(K):
                z[k] = d[k] * x[i, k] + b[k]
            loss, s = _row_terms(z, y[i], e, r)
            f += wi * loss
            ws += wi
            for k in range(K):
                g[k] += wi * r[k] * x[i, k]
                g[K + k] += wi * r[k]
            if hessian:
                for k in range(K):
                    pk = e[k] / s
                    xk = x[i, k]
                    V[buffered, k] = pk * xk
                    V[buffered, K + k] = pk
                    H[k, k] += wi * pk * xk * xk
                    H[k, K + k] += wi * pk * xk
                    H[K + k, K + k] += wi * pk
                buffered = _push_row(H, V, wv, buffered, wi, i == hi - 1)
        fp[chunk] = f
        wsp[chunk] = ws
    return _finish(fp, gp, Hp, wsp, hessian)


@njit(cache=True, nogil=True)
def matrix_derivatives(x, y, w, W, b, hessian):
    """Weighted mean NLL of ``softmax(W x + b)``, its gradient in ``theta = (W row-major, b)``
    and, when ``hessian``, its Hessian ``mean((diag(p) - p p^T) kron (x~ x~^T))`` with
    ``x~ = (x, 1)`` mapped to that parameter order."""
    n, K = x.shape
    P = K * K + K
    fp, wsp, gp, Hp = _partials(P, hessian)
    for chunk in range(N_CHUNKS):
        lo, hi, z, e, r, V, wv, g, H = _block(n, chunk, K, P, gp, Hp)
        buffered = 0
        # per-class blocks sum_i w p_k x~ x~^T, scattered into H after the loop
        A = np.zeros((K, K + 1, K + 1) if hessian else (0, 0, 0))
        f = 0.0
        ws = 0.0
        for i in range(lo, hi):
            wi = w[i]
            for k in range(K):
                acc = 0.0
                for j in range(K):
                    acc += W[k, j] * x[i, j]
                z[k] = acc + b[k]
            loss, s = _row_terms(z, y[i], e, r)
            f += wi * loss
            ws += wi
            for k in range(K):
                gk = wi * r[k]
                for j in range(K):
                    g[k * K + j] += gk * x[i, j]
                g[K * K + k] += gk
            if hessian:
                for k in range(K):
                    pk = e[k] / s
                    for j in range(K):
                        V[buffered, k * K + j] = pk * x[i, j]
                    V[buffered, K * K + k] = pk
                    wp = wi * pk
                    for j in range(K + 1):
                        xj = x[i, j] if j < K else 1.0
                        for m in range(j, K + 1):
                            xm = x[i, m] if m < K else 1.0
                            A[k, j, m] += wp * xj * xm
                buffered = _push_row(H, V, wv, buffered, wi, i == hi - 1)
        if hessian:
            for k in range(K):
                for j in range(K + 1):
                    a = k * K + j if j < K else K * K + k
                    for m in range(j, K + 1):
                        bb = k * K + m if m < K else K * K + k
                        H[a, bb] += A[k, j, m]   # a <= bb: stays in the upper triangle
        fp[chunk] = f
        wsp[chunk] = ws
    return _finish(fp, gp, Hp, wsp, hessian)


def matrix_objective_derivatives(x, y, w, theta, hessian, newton):
    """The unpenalised matrix-scaling objective at ``theta = (W row-major, b)``:
    ``(W, b, f, g, H)`` with ``f``, ``g`` and (``newton`` and ``hessian``) ``H`` as in
    :func:`matrix_derivatives`. Without ``newton`` (too many parameters for a dense Hessian)
    the value and gradient come from the L-BFGS kernel and ``H`` is None; callers add their
    own penalty."""
    K = x.shape[1]
    W, b = np.ascontiguousarray(theta[:K * K].reshape(K, K)), theta[K * K:].copy()
    if newton:
        f, g, H = matrix_derivatives(x, y, w, W, b, hessian)
    else:
        f, dW, db = nll_and_gradient_full(x, y, w, W, b)
        g, H = np.concatenate([dW.reshape(-1), db]), None
    return W, b, f, g, H


@njit(cache=True, nogil=True)
def matrix_hessian_diagonal(x, y, w, W, b):
    """Diagonal of the Hessian of :func:`matrix_derivatives`' objective, in the same parameter
    order (``W`` row-major, then ``b``): ``mean(p_k (1 - p_k) x_j^2)`` and ``mean(p_k (1 - p_k))``.
    A preconditioner for L-BFGS (its exact value does not change the optimum found), at the
    cost of one gradient pass; rows in block order as everywhere in this module. The logits
    come from the vectorised :func:`~mlcal._solvers.softmax_affine._affine_row` (the same sums
    in the same order as a dot product per class, so the same bits)."""
    n, K = x.shape
    D = np.zeros(K * K + K)
    z = np.empty(K)
    e = np.empty(K)
    WT = np.ascontiguousarray(W.T)
    ws = 0.0
    for i in range(n):
        wi = w[i]
        _affine_row(x, i, WT, b, 1.0, z)
        _, s, _ = _row_loss(z, y[i], e)
        ws += wi
        xi = x[i]
        for k in range(K):
            pk = e[k] / s
            q = wi * pk * (1.0 - pk)
            Dk = D[k * K:(k + 1) * K]
            for j in range(K):
                Dk[j] += q * xi[j] * xi[j]
            D[K * K + k] += q
    for a in range(K * K + K):
        D[a] /= ws
    return D
