"""How far an exported graph may be from ``predict``: a bound derived from the graph's formula.

``error_bound(map, dtype)`` bounds ``|graph(x) - predict(x)|`` over every finite ``x`` of the
graph dtype, with ``predict`` evaluated in float64 on the same ``x``; each map class registers
its bound with :func:`map_error_bound` (dispatch on the class). Derivation (u = unit
roundoff of the graph dtype, 2**-53 or 2**-24; each +, -, *, / is correctly rounded, so it
contributes a relative error <= u):

* StepMap: the bin is always the one ``predict`` picks (thresholds rounded *up* to the graph
  dtype, sigmoid thresholds pulled back to raw scores exactly), so the only error is the rounding
  of the bin values to the graph dtype: 0 in float64, ``max |float32(v) - v|`` in float32 (a
  float32 graph equals ``predict(x).astype(float32)`` exactly).
* LinearMap, identity transform: float64 evaluates numpy's own formula in numpy's order on the
  same index, so the bound is 0. float32 computes ``y = s^ * ((x - hi_j) - lo_j) + f^_j`` with
  the knot split ``x_j = hi_j + lo_j + r_j`` (hi, lo float32; r_j the residual) and rounded slope
  ``s^`` and value ``f^``. With ``d = x - x_j`` in ``[0, w_j]``:
  ``|d^ - d| <= |r_j|(1+2u) + 2u d (1+u) + u |lo_j| (1+u)``,
  ``|s^ d^ - s d| <= |s||d^ - d| + |s^ - s|(w_j + E_d) + u |s^|(w_j + E_d)``,
  ``|y^ - y| <= E_prod + |f^ - f| + u (max(f_j, f_j+1) + E_prod + |f^ - f|)``,
  maximised over the segments a float32 score can reach, plus 4 float64 ulps for numpy's own
  rounding. Typically ~6u = 3.6e-7 whatever the slope, because ``lo_j`` keeps ``d`` accurate on
  segments narrower than a float32 ulp.
* Sigmoid transform / SigmoidMap: ``exp`` is not correctly rounded in any runtime (onnxruntime,
  numpy and glibc differ by up to 2 ulp), so the graph cannot be bit-identical to scipy's
  ``expit``. With ``E`` = allowed relative ``exp`` discrepancy (4 ulp), ``p = 1/(1+e)`` differs by
  at most ``p (E (1-p) + 4u)``; a linear map then adds ``max|slope| * |dp|``; a SigmoidMap in
  float32 adds the rounding of ``z = a s + b``: ``|dz| <= u (3|z| + 3|b|)(1+2u)`` and
  ``sup_z sigma'(z) |z| = 0.2240``, so ``|dp| <= 3u (0.2241 + 0.25 |b|)``.
"""

from __future__ import annotations

import functools

import numpy as np

from mlcal._dispatch import registered_types
from mlcal.maps import LinearMap, SigmoidMap, StepMap
from mlcal.onnx._maps import linear_slopes, linear_tables
from mlcal.onnx._search import round_up

U64 = 2.0 ** -53
ETA32 = 2.0 ** -149          # absolute error floor of a float32 operation (subnormal spacing)
EXP_ULPS = 4                 # allowed discrepancy between two exp implementations, in ulps


def _unit_roundoff(dtype) -> float:
    return U64 if np.dtype(dtype) == np.float64 else 2.0 ** -24


def _expit_error(dtype) -> float:
    """Bound on |expit_graph(x) - expit_scipy(x)| over all x (absolute, p <= 1)."""
    u = _unit_roundoff(dtype)
    exp_rel = EXP_ULPS * 2 * u
    # p (E (1-p) + 4u) <= E/4 + 4u; a float32 graph also carries float64 scipy's own error
    err = exp_rel / 4 + 4 * u
    if u != U64:
        err += EXP_ULPS * 2 * U64 / 4 + 4 * U64
    return err * (1 + 4 * u)


def _linear_float32_bound(m: LinearMap) -> float:
    u = 2.0 ** -24
    x, y = m.knots, m.values
    s = linear_slopes(m)                                   # numpy's float64 slopes, last 0
    big = float(np.finfo(np.float32).max)
    s_hat = np.clip(s, -big, big).astype(np.float32).astype(np.float64)
    head = x.astype(np.float32)
    tail = (x - head.astype(np.float64)).astype(np.float32)
    if linear_tables(m, np.float32)["tail"] is None:    # the graph skips the tail correction
        tail = np.zeros_like(tail)
    resid = (x - head.astype(np.float64)) - tail.astype(np.float64)
    tail = tail.astype(np.float64)
    f_err = np.abs(y.astype(np.float32).astype(np.float64) - y)
    width = np.append(np.diff(x), 0.0)
    # segment j is used iff some float32 lies in [x_j, x_j+1); left of x_0 the graph returns
    # float32(y_0) and right of the last knot float32(y_K-1), both covered by f_err
    reach = np.append(round_up(x[:-1], np.float32).astype(np.float64) < x[1:], True)
    w = width
    e_d = np.abs(resid) * (1 + 2 * u) + 2 * u * w * (1 + u) + u * np.abs(tail) * (1 + u) + 2 * ETA32
    e_prod = (np.abs(s) * e_d + np.abs(s_hat - s) * (w + e_d) + u * np.abs(s_hat) * (w + e_d)
              + ETA32)
    y_max = np.maximum(y, np.append(y[1:], y[-1]))
    e_y = e_prod + f_err + u * (y_max + e_prod + f_err)
    return float(max(e_y[reach].max(), f_err.max())) + 4 * U64


def error_bound(m, dtype="float64") -> float:
    """Bound on ``|graph(x) - m(x)|`` for every finite score ``x`` of ``dtype``.

    Parameters
    ----------
    m : StepMap, LinearMap, SigmoidMap or another registered map type
        The map (``calibrator.map_``).
    dtype : {"float64", "float32"}
        The dtype of the exported graph.

    Returns
    -------
    float
        0.0 where the graph is bit-identical to ``predict`` (step maps in float64, linear maps
        with the identity transform in float64). See the module docstring for the derivation.
    """
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    return map_error_bound(m, dtype)


@functools.singledispatch
def map_error_bound(m, dtype: np.dtype) -> float:
    """The per-map-type bound behind :func:`error_bound` (``dtype`` already checked): one
    ``map_error_bound.register(MapClass)`` per map type."""
    raise ValueError(f"no ONNX error bound is registered for {type(m).__name__} (expected one "
                     f"of {registered_types(map_error_bound)})")


@map_error_bound.register
def _(m: StepMap, dtype: np.dtype) -> float:
    if dtype == np.float64:
        return 0.0
    return float(np.abs(m.values.astype(np.float32).astype(np.float64) - m.values).max())


@map_error_bound.register
def _(m: LinearMap, dtype: np.dtype) -> float:
    u = _unit_roundoff(dtype)
    if m.size == 1:
        return 0.0 if dtype == np.float64 else float(
            abs(float(np.float32(m.values[0])) - m.values[0]))
    base = 0.0 if dtype == np.float64 else _linear_float32_bound(m)
    if m.input_transform != "sigmoid":
        return base
    lipschitz = float(np.abs(linear_slopes(m)).max())
    # both sides evaluate the interpolation formula at slightly different p: 3u each side
    extra = 6 * u if dtype == np.float64 else 6 * U64
    return min(1.0, base + lipschitz * _expit_error(dtype) * (1 + 2 * u) + extra)


@map_error_bound.register
def _(m: SigmoidMap, dtype: np.dtype) -> float:
    u = _unit_roundoff(dtype)
    a, b = abs(m.a), abs(m.b)
    exp_part = EXP_ULPS * 2 * u + 4 * u            # p (E (1-p) + 4u) <= E + 4u
    if m.input_transform == "sigmoid":
        dx = _expit_error(dtype)
        z_round = 0.0 if dtype == np.float64 else 0.25 * u * (3 * a + 2 * b) * (1 + 2 * u)
        err = 0.25 * a * dx * (1 + u) + z_round + exp_part
    else:
        z_round = 0.0 if dtype == np.float64 else 3 * u * (0.2241 + 0.25 * b) * 1.001
        err = z_round + exp_part
    if dtype != np.float64:   # float64 scipy's own rounding of z and p
        err += 3 * U64 * (0.2241 + 0.25 * b) + (EXP_ULPS * 2 + 4) * U64
    return min(1.0, err * (1 + 4 * u))
