"""Histogram-based Newton regression trees (numba kernels) and forest scoring.

Fitting works on *binned* features: every column is a small integer (``uint8``) per row. A
numeric column's bin is ``#cuts < x`` (:func:`bin_numeric`), so "bin <= b" is exactly
"x <= cuts[b]" and a split found on bins is exported as the float64 threshold ``cuts[b]``
compared with ``<=``: the fitted routing and the scored routing are the same comparison. A
categorical column's bin is its category code.

One tree is grown level by level (:func:`grow_tree`): one pass over the rows per level
accumulates gradient and hessian sums per (node, feature, bin), then each node takes the split
of largest Newton gain

    gain = GL^2 / (HL + lam) + GR^2 / (HR + lam) - G^2 / (H + lam)

(the decrease of the second-order approximation of the loss when the node's single value
``-G / (H + lam)`` becomes two), subject to ``HL, HR >= min_hessian`` and ``gain > min_gain``.
Numeric splits scan the bin prefixes; categorical splits order the node's categories by
``G_c / (H_c + lam)`` and scan prefixes of that order (with ``lam = 0`` the best prefix is the
best of all two-way partitions of the categories: the gain is a sum of ``G^2 / H`` terms and
Fisher's (1958) argument for grouping on a line applies). Ties keep the first split found
(feature order, then bin order), so a fit is deterministic.
"""

from __future__ import annotations

import numpy as np
from numba import njit

LEAF = -1


def numeric_cuts(x: np.ndarray, w: np.ndarray, max_bins: int) -> np.ndarray:
    """At most ``max_bins - 1`` cut values of a numeric column: data values at which the
    cumulative weight crosses ``k / max_bins`` of the total (all distinct values but the largest
    when there are few). Defined on distinct values and their total weights, so duplicating a
    row is the same as doubling its weight."""
    values, inverse = np.unique(x, return_inverse=True)
    if values.size <= max_bins:
        return values[:-1].copy()
    wsum = np.bincount(inverse, weights=w, minlength=values.size)
    cum = np.cumsum(wsum)
    targets = cum[-1] * np.arange(1, max_bins) / max_bins
    idx = np.unique(np.searchsorted(cum, targets, side="left"))
    idx = idx[idx < values.size - 1]   # the largest value is never a cut (empty right side)
    return values[idx].copy()


def bin_numeric(x: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """``#cuts < x`` per value (``uint8``): bin ``b`` holds ``cuts[b-1] < x <= cuts[b]``."""
    return np.searchsorted(cuts, x, side="left").astype(np.uint8)


@njit(cache=True, nogil=True)
def _histograms(xb, g, h, node_of, slot_of, n_slots, n_bins_max):
    n, n_features = xb.shape
    hist = np.zeros((n_slots, n_features, n_bins_max, 2))
    for i in range(n):
        s = slot_of[node_of[i]]
        if s < 0:
            continue
        gi = g[i]
        hi = h[i]
        for f in range(n_features):
            b = xb[i, f]
            hist[s, f, b, 0] += gi
            hist[s, f, b, 1] += hi
    return hist


@njit(cache=True, nogil=True)
def _score(gs, hs, lam):
    return gs * gs / (hs + lam)


@njit(cache=True, nogil=True)
def _best_split(hist_node, n_bins, is_cat, lam, min_hessian, min_gain, order_buf):
    """(gain, feature, bin, n_left_categories) of the best split of one node; feature -1 if
    none qualifies. For a categorical split, ``order_buf[f, :k]`` holds the left categories."""
    n_features = hist_node.shape[0]
    G = 0.0
    H = 0.0
    for b in range(n_bins[0]):
        G += hist_node[0, b, 0]
        H += hist_node[0, b, 1]
    parent = _score(G, H, lam)
    best_gain = min_gain
    best_f = -1
    best_b = -1
    for f in range(n_features):
        nb = n_bins[f]
        if not is_cat[f]:
            gl = 0.0
            hl = 0.0
            for b in range(nb - 1):
                gl += hist_node[f, b, 0]
                hl += hist_node[f, b, 1]
                hr = H - hl
                if hl < min_hessian or hr < min_hessian:
                    continue
                gain = _score(gl, hl, lam) + _score(G - gl, hr, lam) - parent
                if gain > best_gain:
                    best_gain = gain
                    best_f = f
                    best_b = b
        else:
            m = 0
            keys = np.empty(nb)
            cats = np.empty(nb, dtype=np.int64)
            for c in range(nb):
                if hist_node[f, c, 1] > 0.0:
                    keys[m] = hist_node[f, c, 0] / (hist_node[f, c, 1] + lam)
                    cats[m] = c
                    m += 1
            order = np.argsort(keys[:m], kind="mergesort")   # stable: ties by code
            gl = 0.0
            hl = 0.0
            for k in range(m - 1):
                c = cats[order[k]]
                gl += hist_node[f, c, 0]
                hl += hist_node[f, c, 1]
                hr = H - hl
                if hl < min_hessian or hr < min_hessian:
                    continue
                gain = _score(gl, hl, lam) + _score(G - gl, hr, lam) - parent
                if gain > best_gain:
                    best_gain = gain
                    best_f = f
                    best_b = k + 1
                    for j in range(k + 1):
                        order_buf[f, j] = cats[order[j]]
    return best_gain, best_f, best_b, G, H


@njit(cache=True, nogil=True)
def grow_tree(xb, g, h, n_bins, is_cat, max_depth, lam, min_hessian, min_gain):
    """One Newton tree on binned features.

    Returns ``(feature, split_bin, cat_left, left, right, value, leaf_of)``: per node the
    split feature (-1 for a leaf), the numeric split bin (left: ``bin <= split_bin``), the
    categorical left set as a ``(nodes, max_bins)`` mask, the children, the leaf value
    ``-G / (H + lam)`` (0 for internal nodes), and per row the leaf it falls in.
    """
    n, n_features = xb.shape
    n_bins_max = 0
    for f in range(n_features):
        n_bins_max = max(n_bins_max, n_bins[f])
    cap = 2 ** (max_depth + 1)
    feature = np.full(cap, -1, dtype=np.int64)
    split_bin = np.full(cap, -1, dtype=np.int64)
    cat_left = np.zeros((cap, n_bins_max), dtype=np.bool_)
    left = np.full(cap, -1, dtype=np.int64)
    right = np.full(cap, -1, dtype=np.int64)
    value = np.zeros(cap)
    node_of = np.zeros(n, dtype=np.int64)
    order_buf = np.zeros((n_features, n_bins_max), dtype=np.int64)
    n_nodes = 1
    frontier = np.zeros(1, dtype=np.int64)
    for depth in range(max_depth + 1):
        slot_of = np.full(cap, -1, dtype=np.int64)
        for s in range(frontier.size):
            slot_of[frontier[s]] = s
        hist = _histograms(xb, g, h, node_of, slot_of, frontier.size, n_bins_max)
        new_frontier = np.empty(2 * frontier.size, dtype=np.int64)
        n_new = 0
        for s in range(frontier.size):
            node = frontier[s]
            gain, f, b, G, H = _best_split(hist[s], n_bins, is_cat, lam, min_hessian,
                                           min_gain, order_buf)
            if depth == max_depth or f < 0:
                value[node] = -G / (H + lam)
                continue
            feature[node] = f
            if is_cat[f]:
                for j in range(b):
                    cat_left[node, order_buf[f, j]] = True
            else:
                split_bin[node] = b
            left[node] = n_nodes
            right[node] = n_nodes + 1
            new_frontier[n_new] = n_nodes
            new_frontier[n_new + 1] = n_nodes + 1
            n_new += 2
            n_nodes += 2
        if n_new == 0:
            break
        for i in range(n):   # route the rows of the nodes just split
            node = node_of[i]
            f = feature[node]
            if f < 0:
                continue
            b = xb[i, f]
            go_left = cat_left[node, b] if is_cat[f] else b <= split_bin[node]
            node_of[i] = left[node] if go_left else right[node]
        frontier = new_frontier[:n_new].copy()
    return (feature[:n_nodes].copy(), split_bin[:n_nodes].copy(), cat_left[:n_nodes].copy(),
            left[:n_nodes].copy(), right[:n_nodes].copy(), value[:n_nodes].copy(), node_of)


@njit(cache=True, nogil=True)
def route_binned(xb, feature, split_bin, cat_left, left, right, is_cat):
    """The leaf of each binned row in one tree (as grown by :func:`grow_tree`)."""
    n = xb.shape[0]
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        node = 0
        while feature[node] >= 0:
            f = feature[node]
            b = xb[i, f]
            go_left = cat_left[node, b] if is_cat[f] else b <= split_bin[node]
            node = left[node] if go_left else right[node]
        out[i] = node
    return out


@njit(cache=True, nogil=True)
def forest_sum(x, z0, roots, feature, threshold, left, right, value, cat_start, cat_end,
               cat_codes, is_cat):
    """``z0 + sum over trees of the reached leaf's value`` per row, added in tree order.

    ``x`` is the (n, F) float64 feature matrix (categorical columns hold exact integer codes);
    node arrays are concatenated over trees with absolute child indices; a numeric node sends
    ``x <= threshold`` left, a categorical node sends codes in ``cat_codes[start:end]`` left.
    """
    n = x.shape[0]
    out = np.empty(n)
    for i in range(n):
        z = z0[i]
        for t in range(roots.size):
            node = roots[t]
            while feature[node] >= 0:
                f = feature[node]
                v = x[i, f]
                if is_cat[f]:
                    go_left = False
                    for j in range(cat_start[node], cat_end[node]):
                        if cat_codes[j] == v:
                            go_left = True
                            break
                else:
                    go_left = v <= threshold[node]
                node = left[node] if go_left else right[node]
            z += value[node]
        out[i] = z
    return out
