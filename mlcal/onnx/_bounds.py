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
* BetaMap: the graph computes in float64 whatever its dtype (a float32 graph adds the
  rounding of ``p`` to float32, <= 2**-24). ``Log`` is allowed ``LOG_ULPS`` ulps from
  ``predict``'s log, and ``Log(1 - s)`` against ``log1p(-s)`` adds the rounding of ``1 - s``
  (<= u absolute in the log). With the sigmoid transform the graph's ``s`` is within
  ``s (E (1-s) + 4u)`` of ``predict``'s, i.e. a relative ``E + 4u`` in ``s`` and
  ``E + 4u / (1 - s)`` in ``1 - s`` (``1 - s >= 1 - hi`` after the map's clip to its
  clamp ``[lo, hi]``). With ``Lmax`` bounding both logs (``40 ln 2`` for the default clamp
  ``[BETA_EPS, 1 - BETA_EPS]``; from the octaves of ``lo`` and ``1 - hi`` otherwise),
  ``z = (a L1 - b L2) + c`` differs by
  ``|a| dL1 + |b| dL2 + 2 * 1.01 u (3 |a| Lmax + 3 |b| Lmax + |c|)`` and ``p`` by
  ``sup sigma'(z) |dz|`` plus the expit discrepancy. The sup is taken per octave of
  ``1 - s`` (``[2^-j-1, 2^-j]``, where ``dL2`` is largest) over the range of ``z`` there (``ln s``
  and ``ln(1 - s)`` are monotone, so the range comes from the octave's ends); near ``s = 1``
  a fitted map is flat (``sigma'`` tiny), which keeps the bound close to the measured error.
* QuadraticMap: float64 whatever the dtype, as BetaMap. On margins (``on="margin"``) the graph's
  ``eta`` has ``predict``'s bits, so only the expit differs. On probabilities the graph's
  ``z = Log(s) - Log(1 - s)`` differs from ``predict``'s by
  ``dz <= LOG_ULPS 2u (|L1| + |L2|) + 1.01u + 2.02u |z|`` (the logs, the rounding of ``1 - s``,
  both subtractions), plus the sigmoid transform's terms as for BetaMap; ``eta`` then by
  ``(|a| + 2|b| (|z| + dz)) dz`` plus both sides' rounding ``2.02u (3|a z| + 4|b| z^2 + |c|)``,
  and ``p`` by ``sup sigma'(eta) |d eta|`` plus the expit discrepancy. The sup is taken per
  octave of ``s`` and of ``1 - s`` (78 intervals for the default clamp), over the range of
  ``eta`` there (``z`` is increasing in ``s``, so the quadratic's range comes from the
  interval's ends and its vertex; the octaves run from the one holding the clamp's ``lo`` to
  the one holding ``1 - hi``).
* OffsetMap: the inner map's float64 bound times ``e^|delta|`` (the offset's largest slope in
  ``p``), plus the offset stage's own error on the same ``p`` (``_offset_stage_error``: two
  ``Log`` and one expit against detmath's), plus ``2**-24`` for a float32 graph's final cast.
"""

from __future__ import annotations

import functools

import numpy as np

from mlcal._dispatch import registered_types
from mlcal.maps import BetaMap, LinearMap, QuadraticMap, SigmoidMap, StepMap
from mlcal.maps.offset import OffsetMap
from mlcal.onnx._maps import linear_slopes, linear_tables
from mlcal.onnx._search import round_up

U64 = 2.0 ** -53
ETA32 = 2.0 ** -149          # absolute error floor of a float32 operation (subnormal spacing)
EXP_ULPS = 4                 # allowed discrepancy between two exp implementations, in ulps
LOG_ULPS = 4                 # ... and between two log implementations


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
    if m.floor != 0.0 and dtype != np.float64:
        # Clip is 1-Lipschitz; only its float32 bounds differ from predict's float64 ones
        err += u
    return min(1.0, err * (1 + 4 * u))


# -- BetaMap (kept apart from the other registrations) ------------------------------------------
def _sigmoid_slope_sup(lo: float, hi: float) -> float:
    """``sup sigma'(z)`` over ``z`` in ``[lo, hi]`` (largest at the point nearest 0)."""
    z = 0.0 if lo <= 0.0 <= hi else min(abs(lo), abs(hi))
    e = float(np.exp(-z))
    return e / (1.0 + e) ** 2


def _clamp_octaves(clamp: tuple[float, float]) -> tuple[int, int]:
    """``(j_lo, j_hi)``: the clamp's ``lo`` lies in ``[2^-(j_lo+1), 2^-j_lo)`` and
    ``1 - hi`` in ``[2^-(j_hi+1), 2^-j_hi)`` (exact: read from the exponents, and ``1 - hi``
    is exact for ``hi >= 1/2``); 39 and 39 for the default clamp ``[2^-40, 1 - 2^-40]``."""
    return -int(np.frexp(clamp[0])[1]), -int(np.frexp(1.0 - clamp[1])[1])


def _clamp_log_max(clamp: tuple[float, float]) -> float:
    """A bound on ``|ln s|`` and ``|ln(1 - s)|`` for ``s`` in the clamp (``40 ln 2`` for the
    default one)."""
    j_lo, j_hi = _clamp_octaves(clamp)
    return float(max(j_lo, j_hi) + 1) * float(np.log(2.0)) * (1 + 4 * U64)


@map_error_bound.register
def _(m: BetaMap, dtype: np.dtype) -> float:
    u = U64
    a, b, c = abs(m.a), abs(m.b), abs(m.c)
    lmax = _clamp_log_max(m.clamp)                 # |ln s|, |ln(1 - s)| after the clip
    sig = m.input_transform == "sigmoid"
    e_rel = EXP_ULPS * 2 * u + 4 * u               # relative error of the graph's expit
    rounding = 2 * 1.01 * u * (3 * a * lmax + 3 * b * lmax + c)
    d_log = LOG_ULPS * 2 * u * lmax                # Log vs predict's log, both logs
    s_min, s_max = m.clamp
    n_oct = _clamp_octaves(m.clamp)[1] + 1          # octaves of 1 - s down past 1 - hi
    worst = 0.0
    for j in range(n_oct + 1):
        if j == 0:   # s in [lo, 1/2]: 1 - s >= 1/2
            s_lo, s_hi, inv_1ms = s_min, 0.5, 2.0
        else:        # 1 - s in [2^-(j+1), 2^-j]
            s_lo, s_hi, inv_1ms = 1.0 - 2.0 ** -j, 1.0 - 2.0 ** -(j + 1), 2.0 ** (j + 1)
            if s_lo > s_max:
                break
            s_hi = min(s_hi, s_max)
        dl1 = d_log + (1.01 * e_rel if sig else 0.0)
        dl2 = d_log + 1.01 * u + (1.01 * (EXP_ULPS * 2 * u + 4 * u * inv_1ms) if sig else 0.0)
        dz = a * dl1 + b * dl2 + rounding
        ends = [m.a * np.log(v) - m.b * np.log1p(-v) + m.c for v in (s_lo, s_hi)]
        # each term is monotone in s, so z over the octave lies between the sums of the
        # terms' smaller and larger ends (widened by dz and a safety margin for this float math)
        t1 = sorted(m.a * np.log(v) for v in (s_lo, s_hi))
        t2 = sorted(-m.b * np.log1p(-v) for v in (s_lo, s_hi))
        lo = t1[0] + t2[0] + m.c - dz - 1e-9 * (1 + max(abs(x) for x in ends))
        hi = t1[1] + t2[1] + m.c + dz + 1e-9 * (1 + max(abs(x) for x in ends))
        worst = max(worst, _sigmoid_slope_sup(lo, hi) * dz * 1.01)
    err = worst + _expit_error(np.float64)
    if dtype != np.float64:
        err += 2.0 ** -24   # the final Cast of p to float32
    return min(1.0, err * (1 + 4 * u))


# -- QuadraticMap -------------------------------------------------------------------------------
def _quadratic_intervals(clamp: tuple[float, float]):
    """``(s_lo, s_hi)`` octaves of ``s`` (below 1/2) and of ``1 - s`` (above) covering the
    clamp ``[lo, hi]`` (for the default ``[BETA_EPS, 1 - BETA_EPS]`` exactly; otherwise the
    outermost octaves may reach past ``lo`` and ``hi``)."""
    j_lo, j_hi = _clamp_octaves(clamp)
    low = [(2.0 ** -(j + 1), 2.0 ** -j) for j in range(j_lo, 0, -1)]
    high = [(1.0 - 2.0 ** -j, 1.0 - 2.0 ** -(j + 1)) for j in range(1, j_hi + 1)]
    return low + high


@map_error_bound.register
def _(m: QuadraticMap, dtype: np.dtype) -> float:
    u = U64
    if m.on == "margin":   # eta has predict's bits: only the expit differs
        err = _expit_error(np.float64)
    else:
        a, b, c = abs(m.a), abs(m.b), abs(m.c)
        sig = m.input_transform == "sigmoid"
        e_rel = EXP_ULPS * 2 * u + 4 * u
        worst = 0.0
        for s_lo, s_hi in _quadratic_intervals(m.clamp):
            l1 = max(abs(np.log(s_lo)), abs(np.log(s_hi))) * (1 + 1e-12)
            l2 = max(abs(np.log1p(-s_lo)), abs(np.log1p(-s_hi))) * (1 + 1e-12)
            z_ends = [float(np.log(v) - np.log1p(-v)) for v in (s_lo, s_hi)]
            zmax = max(abs(v) for v in z_ends) * (1 + 1e-9) + 1e-12
            dz = LOG_ULPS * 2 * u * (l1 + l2) + 1.01 * u + 2.02 * u * zmax
            if sig:
                dz += 1.01 * e_rel + 1.01 * (EXP_ULPS * 2 * u + 4 * u / (1.0 - s_hi))
            d_eta = (a + 2 * b * (zmax + dz)) * dz + b * dz * dz \
                + 2.02 * u * (3 * a * zmax + 4 * b * zmax * zmax + c)
            zs = [z_ends[0] - dz, z_ends[1] + dz]
            if m.b != 0.0 and zs[0] < -m.a / (2.0 * m.b) < zs[1]:
                zs.append(-m.a / (2.0 * m.b))
            etas = [m.a * z + m.b * z * z + m.c for z in zs]
            slack = d_eta + 1e-9 * (1 + max(abs(e) for e in etas))
            worst = max(worst, _sigmoid_slope_sup(min(etas) - slack, max(etas) + slack)
                        * d_eta * 1.01)
        err = worst + _expit_error(np.float64)
    if dtype != np.float64:
        err += 2.0 ** -24   # the final Cast of p to float32
    return min(1.0, err * (1 + 4 * u))


# -- OffsetMap ----------------------------------------------------------------------------------
def _offset_stage_error(delta: float) -> float:
    """``|graph - predict|`` of the offset stage alone on the same float64 ``p``.

    ``Log`` is within ``LOG_ULPS`` ulps of ``det_log`` on both logs; ``Log(1 - p)`` against
    ``log1p(-p)`` adds the rounding of ``1 - p`` (<= 2u absolute in the log; exact for
    ``p >= 1/2``); both sides round the subtraction and the addition. With ``L1 = ln p``,
    ``L2 = ln(1 - p)``, ``|L1| + |L2| <= |L1 - L2| + 2 ln 2`` and ``|L1 - L2| <= |z| + |delta|``:
    ``|dz| <= 12u |z| + 10u |delta| + 13.1u``; ``p'`` moves by ``sigma'(z) |dz|`` with
    ``sup sigma'(z) |z| = 0.2240`` and ``sigma' <= 1/4``, plus the two expits' discrepancy."""
    u = U64
    dz_part = 12 * u * 0.2241 + 0.25 * (10 * u * abs(delta) + 13.1 * u)
    return dz_part * 1.01 + _expit_error(np.float64)


@map_error_bound.register
def _(m: OffsetMap, dtype: np.dtype) -> float:
    # the graph runs inner map and offset in float64 whatever its dtype (scores cast up
    # exactly); the offset's slope in p is e^delta / ((1 - p) + p e^delta)^2 <= e^|delta|
    inner = map_error_bound(m.inner, np.dtype(np.float64))
    err = inner * float(np.exp(abs(m.delta))) * 1.01 + _offset_stage_error(m.delta)
    if dtype != np.float64:
        err += 2.0 ** -24   # the final Cast of p' to float32
    return min(1.0, err * (1 + 4 * U64))

