"""Calibration map -> a Spark SQL column expression (built-in functions only, no Python UDF).

Each map class has one builder registered with :func:`map_column` (dispatch on the class); a new
map type adds one function and one registration. Every builder reproduces ``predict``'s float64
arithmetic operation by operation (Java's double arithmetic is IEEE 754 without fused
multiply-add, as numpy's), so the column equals ``predict`` bit for bit:

* ``StepMap``: ``values[count(thresholds <= u)]``, the count found by a binary search over an
  array literal (:func:`count_leq`);
* ``LinearMap``: numpy's interpolation ``slope[j] * (u - x[j]) + y[j]`` with
  ``slope[j] = (y[j+1] - y[j]) / (x[j+1] - x[j])`` precomputed as numpy does, flat outside the
  knots;
* ``SigmoidMap`` and the ``"sigmoid"`` input transform: :func:`expit_column`, mlcal's own
  deterministic expit (Tang's table-driven exp, :mod:`mlcal._solvers.detmath`) written in SQL
  arithmetic, not Spark's ``exp``;
* ``BetaMap``: the map's clamp ``[lo, hi]`` (default ``[BETA_EPS, 1 - BETA_EPS]``, a
  document's ``clamp`` down to ``lo = 2^-1022``), then detmath's table-driven ``log`` /
  ``log1p`` (:func:`log_column`, :func:`log1p_column`, likewise in SQL arithmetic; the binary
  exponent comes from a search over a power-of-two table instead of the bit pattern, whose
  octaves reach down to the clamp's ends: :func:`clamp_log_exponents`) and the expit.
* ``QuadraticMap``: on probabilities the same clamp and ``z = log(s) - log1p(-s)`` with the same
  SQL log / log1p, on margins the score itself; then ``((a * z) + (b * (z * z))) + c`` and the
  expit.
* a positive output ``floor`` of SigmoidMap, BetaMap or QuadraticMap:
  ``least(greatest(p, floor), 1 - floor)``
  (:func:`floor_column`).
* ``OffsetMap``: the inner map's column ``p``, then ``expit((log p - log1p(-p)) + delta)``
  with the same SQL log (over the whole range of doubles) and expit; ``p`` of exactly 0 or 1
  passes through. ``exact=False`` makes only this final expit fast (the inner map stays exact).

``exact=False`` (the default of :func:`mlcal.spark.calibrated_column`) replaces the expit by
one built on Spark's native ``exp`` (code-generated, tens of times faster, within
:data:`FAST_EXPIT_ULPS` ulps of ``predict`` instead of bit-identical; :func:`fast_expit_column`).

Intermediate values are bound once with :func:`_let` (a one-element ``transform``): a Column
repeated inside an expression is copied, and the copies multiply with the nesting depth.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np
from pyspark.sql import Column
from pyspark.sql import functions as F

from mlcal._dispatch import registered_types
from mlcal._solvers import detmath as dm
from mlcal.maps import BETA_EPS, BetaMap, LinearMap, QuadraticMap, SigmoidMap, StepMap
from mlcal.maps.offset import OffsetMap


def _let(body: Callable[..., Column], **values: Column) -> Column:
    """``body(**values)`` with each value computed once per row.

    Every binding is a nested lambda, and Spark's analyzer resolves one nesting level per pass
    (at most ``spark.sql.analyzer.maxIterations``, 100 by default), so callers bind several
    values per level and inline what is cheap (lambda variables, small arithmetic)."""
    names = list(values)
    pair = F.struct(*[values[k].alias(k) for k in names])
    return F.element_at(F.transform(F.array(pair), lambda p: body(**{k: p[k] for k in names})), 1)


#: large array literals (detmath's tables, pow2's), built once per Spark context
_TABLE_CACHE: dict[bytes, tuple[object, Column]] = {}


def _doubles(values) -> Column:
    """An array<double> literal holding exactly these float64 values: one ``Literal`` node of
    type ``array<double>`` (``F.lit`` of the ndarray; py4j sends each double by its repr,
    which round-trips). Not ``array(v1, v2, ...)``: that is a ``CreateArray`` with one child
    per value, whose type Spark's analyzer recomputes over all of them each time an
    ``element_at`` on it asks for its nullability, which made the analysis of an exact
    expit (five 2046-value ``pow2`` tables) take tens of seconds per column. The tables
    repeated in every column (detmath's, ``pow2``'s) are converted once per Spark context."""
    from pyspark import SparkContext

    arr = np.ascontiguousarray(values, dtype=np.float64)
    if arr.size < 100:
        return F.lit(arr)
    key, sc = arr.tobytes(), SparkContext._active_spark_context
    hit = _TABLE_CACHE.get(key)
    if hit is None or hit[0] is not sc:
        if len(_TABLE_CACHE) >= 64:     # maps' own tables pass through: keep it bounded
            _TABLE_CACHE.clear()
        hit = _TABLE_CACHE[key] = (sc, F.lit(arr))
    return hit[1]


def count_leq(u: Column, sorted_values: np.ndarray) -> Column:
    """``numpy.searchsorted(sorted_values, u, side="right")`` for finite ``u``: the number of
    (strictly increasing) values ``<= u``, by a binary search of ceil(log2(K + 1)) steps.

    The array is padded with ``+inf`` to a power of two so every probe index is valid.
    """
    k = int(sorted_values.size)
    if k == 0:
        return F.lit(0)
    levels = k.bit_length()                       # 2^levels > k
    padded = np.full(2 ** levels, np.inf)
    padded[:k] = sorted_values
    table = _doubles(padded)
    steps = F.array(*[F.lit(2 ** b) for b in range(levels - 1, -1, -1)])
    # pos = count found so far; probe pos + step (1-based element_at = the (pos+step)-th value)
    return F.aggregate(steps, F.lit(0), lambda pos, step: F.when(
        F.element_at(table, pos + step) <= u, pos + step).otherwise(pos))


def step_lookup(u: Column, thresholds: np.ndarray, values: np.ndarray) -> Column:
    """``values[searchsorted(thresholds, u, side="right")]`` as a column."""
    if thresholds.size == 0:
        return F.lit(float(values[0]))
    return F.element_at(_doubles(values), count_leq(u, thresholds) + 1)


# -- mlcal's deterministic exp / expit in SQL arithmetic (same operations as detmath) ---------
def pow2(m: Column) -> Column:
    """``2^m`` for an integer column ``m`` in [-1022, 1023], looked up in a literal table
    (exact; Spark's ``pow`` promises no exactness)."""
    # the index is clamped so a branch that F.when does not pick can never fail
    index = F.least(F.greatest(m + 1023, F.lit(1)), F.lit(2046)).cast("int")
    return F.element_at(_doubles(np.ldexp(1.0, np.arange(-1022, 1024))), index)


def _exp_parts(x: Column, body: Callable[..., Column]) -> Column:
    """``body(m=, t=, lo=)`` with ``exp(x) = 2^m (t + lo)``, as :func:`detmath._exp_parts`."""
    shifter = F.lit(dm._SHIFTER)

    def reduced(n):
        return _let(lambda r1, r2: parts(n, r1, r2),
                    r1=x - n * F.lit(dm._RED_HI), r2=-n * F.lit(dm._RED_LO))

    def parts(n, r1, r2):
        r = r1 + r2
        q = r * r * (F.lit(0.5) + r * (F.lit(1.0 / 6.0) + r * (F.lit(1.0 / 24.0) + r * (
            F.lit(1.0 / 120.0) + r * F.lit(1.0 / 720.0)))))
        k = n.cast("long")
        j = (k.bitwiseAND(127) + 1).cast("int")
        t = F.element_at(_doubles(dm._EXP_HI), j)
        return _let(body, m=F.shiftright(k, 7), t=t,
                    lo=F.element_at(_doubles(dm._EXP_LO), j) + t * (r1 + (r2 + q)))

    return _let(reduced, n=(x * F.lit(dm._INV_STEP) + shifter) - shifter)


def _subnormal_exp(m: Column, t: Column, lo: Column) -> Column:
    """:func:`detmath._subnormal_exp`: ``2^m (t + lo)`` rounded once onto the subnormal grid."""
    two52 = F.lit(dm._TWO_52)
    y = t + lo

    def rounded(a, ea):
        r = (a + two52) - two52
        w = (a - r) + ea
        return (F.when(w > 0.5, r + 1.0).when(w < -0.5, r - 1.0).otherwise(r)
                * F.lit(2.0 ** -52)) * F.lit(2.0 ** -1022)
    return _let(rounded, a=y * pow2(m + 1074), ea=((t - y) + lo) * pow2(m + 1074))


def _exp_column(x: Column) -> Column:
    """:func:`detmath.det_exp` for finite ``x <= 0`` (what expit needs below -40)."""
    def body(m, t, lo):
        return F.when(m < -1022, _subnormal_exp(m, t, lo)).otherwise((t + lo) * pow2(m))
    return F.when(x < F.lit(dm._EXP_UNDERFLOW), F.lit(0.0)).otherwise(_exp_parts(x, body))


def _split(v: Column) -> Column:
    """Veltkamp's high half of ``v`` (``v - hi`` is the exact low half)."""
    t = F.lit(dm._SPLITTER) * v
    return t - (t - v)


def expit_column(x: Column) -> Column:
    """:func:`detmath.det_expit` in Spark SQL arithmetic, bit-identical for finite ``x``."""
    def central(m, t, lo):
        h = t + lo
        return _let(quotient, e_hi=h * pow2(m), e_lo=((t - h) + lo) * pow2(m))

    def quotient(e_hi, e_lo):
        return _let(lambda q, s: _let(lambda qh, sh: newton(qh, sh, q, s, e_hi, e_lo),
                                      qh=_split(q), sh=_split(s)),
                    q=F.when(x >= 0.0, F.lit(1.0) / (F.lit(1.0) + e_hi))
                    .otherwise(e_hi / (F.lit(1.0) + e_hi)), s=F.lit(1.0) + e_hi)

    def newton(qh, sh, q, s, e_hi, e_lo):
        # Dekker's exact product q * s = p + pe (detmath._two_prod), then one Newton step on
        # the residual; 1 + exp(-|x|) = s + s_err exactly (Fast2Sum)
        ql, sl = q - qh, s - sh
        p = q * s
        pe = ((qh * sh - p) + qh * sl + ql * sh) + ql * sl
        s_err = ((F.lit(1.0) - s) + e_hi) + e_lo
        r = F.when(x >= 0.0, ((F.lit(1.0) - p) - pe) - q * s_err).otherwise(
            (((e_hi - p) - pe) + e_lo) - q * s_err)
        return q + r / s

    return (F.when(x > 40.0, F.lit(1.0)).when(x < -40.0, _exp_column(x))
            .otherwise(_exp_parts(-F.abs(x), central)))


#: ``|fast_expit_column(x) - det_expit(x)| <= FAST_EXPIT_ULPS * ulp(det_expit(x))`` for normal
#: results (see docs/spark.md for the derivation; tests/test_spark.py measures it).
FAST_EXPIT_ULPS = 8


def fast_expit_column(x: Column) -> Column:
    """``1 / (1 + e)`` or ``e / (1 + e)`` with ``e = exp(-|x|)`` from Spark's native ``exp``
    (fdlibm's, under 1 ulp): within :data:`FAST_EXPIT_ULPS` ulps of :func:`expit_column`.
    No lambda, so Spark code-generates it (``x`` should be cheap: it is repeated)."""
    e = F.exp(-F.abs(x))
    return F.when(x >= 0.0, F.lit(1.0) / (F.lit(1.0) + e)).otherwise(e / (F.lit(1.0) + e))


def _expit(x: Column, exact: bool, bind: bool) -> Column:
    """The exact or the fast expit of ``x``; ``bind`` computes an expensive ``x`` once."""
    f = expit_column if exact else fast_expit_column
    return _let(lambda v: f(v), v=x) if bind else f(x)


# -- mlcal's deterministic log / log1p in SQL arithmetic (same operations as detmath) ------
#: Smallest exponent the SQL log handles for a map with the default clamp: its arguments
#: (``s`` and ``1 + (-s)``) are then >= BETA_EPS = 2^-40 (one octave of margin below).
_LOG_MIN_EXP = int(np.frexp(BETA_EPS)[1]) - 2


def _exponent(x: float) -> int:
    """The binary exponent ``e`` of a positive normal double, ``2^e <= x < 2^(e + 1)``
    (read from frexp, exact: no rounded log2 decides it)."""
    return int(np.frexp(x)[1]) - 1


def clamp_log_exponents(lo: float, hi: float) -> tuple[int, int]:
    """The smallest binary exponents the SQL ``log(s)`` and ``log1p(-s)`` must cover for a
    score clamped to ``[lo, hi]``: ``s >= lo`` and ``1 + (-s) >= 1 - hi`` (exact: ``hi`` is in
    ``[1/2, 1)``). Never above the default's :data:`_LOG_MIN_EXP`, so a map with the default
    clamp builds the same expression as before; never below -1022 (``lo`` is normal)."""
    return (max(min(_LOG_MIN_EXP, _exponent(lo)), _LOG_FULL_MIN_EXP),
            max(min(_LOG_MIN_EXP, _exponent(1.0 - hi)), _LOG_FULL_MIN_EXP))


#: The whole normal range (the offset stage's logs take any probability in (0, 1); a
#: subnormal argument is scaled by 2^54 first, as detmath does).
_LOG_FULL_MIN_EXP = -1022


def _log_parts(x: Column, corr: Column, min_exp: int = _LOG_MIN_EXP,
               shift: Column | None = None) -> Column:
    """``log(x * 2^shift) + corr`` rounded as :func:`detmath._log_parts` (``s + tail``) for
    ``x`` in ``[2^min_exp, 2)``."""
    octaves = np.ldexp(1.0, np.arange(min_exp, 1))
    # x = 2^m y, y in [1, 2): m from the number of powers of two <= x (exact, no bit access)
    m = count_leq(x, octaves) + (min_exp - 1)
    if shift is not None:
        return _let(lambda m: _log_reduce(x * pow2(-m), m + shift, corr), m=m)
    return _let(lambda m: _log_reduce(x * pow2(-m), m, corr), m=m)


def _log_reduce(y: Column, m: Column, corr: Column) -> Column:
    """``m ln 2 + log(y) + corr`` for ``y`` in [1, 2), as :func:`detmath._log_parts`."""

    def reduce(m, y):
        return _let(lambda j: table(m, j, y - (F.lit(1.0) + j * F.lit(0.0078125))),
                    j=((y - 1.0) * F.lit(128.0) + F.lit(dm._SHIFTER)) - F.lit(dm._SHIFTER))

    def table(m, j, f):
        k = (j + 1).cast("int")
        return _let(lambda u, inv_f: split(m, k, j, f, u, inv_f),
                    u=f * F.element_at(_doubles(dm._INV_F), k),
                    inv_f=F.element_at(_doubles(dm._INV_F), k))

    def split(m, k, j, f, u, inv_f):
        big_f = F.lit(1.0) + j * F.lit(0.0078125)
        return _let(lambda uh: tail(m, k, u, ((f - uh * big_f) - (u - uh) * big_f) * inv_f),
                    uh=_split(u))

    def tail(m, k, u, u_lo):
        poly = u * u * (F.lit(-0.5) + u * (F.lit(1.0 / 3.0) + u * (F.lit(-0.25) + u * (
            F.lit(0.2) + u * (F.lit(-1.0 / 6.0) + u * F.lit(1.0 / 7.0))))))
        md = m.cast("double")
        a = md * F.lit(dm._LN2_HI) + F.element_at(_doubles(dm._LOG_HI), k)
        rest = ((md * F.lit(dm._LN2_LO) + F.element_at(_doubles(dm._LOG_LO), k)) + corr) \
            + (u_lo + poly)
        return _let(lambda a, s: s + (((a - s) + u) + rest), a=a, s=a + u)

    return reduce(m, y)


def log_column(x: Column, full_range: bool = False, min_exp: int = _LOG_MIN_EXP) -> Column:
    """:func:`detmath.det_log`, bit-identical for ``x`` in ``[2^min_exp, 2)`` (``min_exp >=
    -1022``; by default ``[2^-41, 2)``, the default clamp's range), or for every ``x`` in
    ``(0, 2)`` (subnormals included) with ``full_range``."""
    if not full_range:
        return _log_parts(x, F.lit(0.0), min_exp)
    tiny = x < F.lit(2.0 ** -1022)          # subnormal: normalise exactly, as detmath does
    return _log_parts(F.when(tiny, x * F.lit(dm._TWO_54)).otherwise(x), F.lit(0.0),
                      _LOG_FULL_MIN_EXP, F.when(tiny, F.lit(-54)).otherwise(F.lit(0)))


def log1p_column(x: Column, full_range: bool = False, min_exp: int = _LOG_MIN_EXP) -> Column:
    """:func:`detmath.det_log1p`, bit-identical for ``1 + x`` in ``[2^min_exp, 2)`` (``min_exp
    >= -1022``; by default ``[2^-41, 2)``), or for every ``x`` in ``(-1, 1)`` with
    ``full_range`` (``1 + x`` is then at least ``2^-53``)."""
    taylor = x + x * x * (F.lit(-0.5) + x * (F.lit(1.0 / 3.0) + x * (
        F.lit(-0.25) + x * F.lit(0.2))))

    def general(y):
        bb = y - 1.0
        c = (F.lit(1.0) - (y - bb)) + (x - bb)       # 1 + x = y + c exactly (TwoSum)
        return _log_parts(y, c / y, _LOG_FULL_MIN_EXP if full_range else min_exp)
    return F.when(F.abs(x) < F.lit(2.0 ** -12), taylor).otherwise(
        _let(general, y=F.lit(1.0) + x))


# -- one builder per map type --------------------------------------------------------------
@functools.singledispatch
def map_column(m, u: Column, exact: bool = False) -> Column:
    """The map evaluated on the (input-transformed, finite) score column ``u``; ``exact=False``
    evaluates a map's final logistic function with :func:`fast_expit_column`."""
    raise TypeError(f"no Spark SQL expression for a {type(m).__name__}; supported map types: "
                    f"{', '.join(registered_types(map_column))}")


@map_column.register
def _(m: StepMap, u: Column, exact: bool = False) -> Column:
    return step_lookup(u, m.thresholds, m.values)


@map_column.register
def _(m: LinearMap, u: Column, exact: bool = False) -> Column:
    x, v = m.knots, m.values
    if x.size == 1:
        return F.lit(float(v[0]))
    slopes = np.diff(v) / np.diff(x)         # numpy's slope table, same division

    def interp(pos):
        # 1-based index of the segment's left knot, kept valid where a flat end is returned
        j = F.greatest(F.least(pos, F.lit(x.size - 1)), F.lit(1))
        inner = (F.element_at(_doubles(slopes), j) * (u - F.element_at(_doubles(x), j))
                 + F.element_at(_doubles(v), j))
        return (F.when(pos == 0, F.lit(float(v[0])))
                .when(pos == x.size, F.lit(float(v[-1]))).otherwise(inner))
    return _let(interp, pos=count_leq(u, x))


def floor_column(p: Column, floor: float) -> Column:
    """``least(greatest(p, floor), 1 - floor)``: a parametric map's output floor (``p`` itself
    when the floor is 0); ``1 - floor`` rounded in float64 as ``predict`` does."""
    if floor == 0.0:
        return p
    return F.least(F.greatest(p, F.lit(floor)), F.lit(1.0 - floor))


@map_column.register
def _(m: SigmoidMap, u: Column, exact: bool = False) -> Column:
    return floor_column(_expit(-(F.lit(m.a) * u + F.lit(m.b)), exact,
                               bind=m.input_transform == "sigmoid"), m.floor)


def _clamped(m, u: Column, body: Callable[[Column, Column], Column]) -> Column:
    """``body(log s, log1p(-s))`` of the score ``s`` clamped to the map's ``[lo, hi]`` as
    ``predict`` does (``min(max(u, lo), hi)``), with the SQL logs' octave tables reaching down
    to the clamp's ends."""
    lo, hi = m.clamp   # validated floats: [BETA_EPS, 1 - BETA_EPS] unless the document says
    e_log, e_log1p = clamp_log_exponents(lo, hi)
    return _let(lambda s: body(log_column(s, min_exp=e_log), log1p_column(-s, min_exp=e_log1p)),
                s=F.least(F.greatest(u, F.lit(lo)), F.lit(hi)))


@map_column.register
def _(m: BetaMap, u: Column, exact: bool = False) -> Column:
    def body(log_s, log_1ms):
        z = (F.lit(m.a) * log_s - F.lit(m.b) * log_1ms) + F.lit(m.c)
        return floor_column(_expit(z, exact, bind=True), m.floor)
    return _clamped(m, u, body)


@map_column.register
def _(m: QuadraticMap, u: Column, exact: bool = False) -> Column:
    def tail(z):
        eta = (F.lit(m.a) * z + F.lit(m.b) * (z * z)) + F.lit(m.c)
        # inf - inf (huge coefficients or margins): predict's fallback (z * (b * z + a)) + c
        eta = F.when(F.isnan(eta), (z * (F.lit(m.b) * z + F.lit(m.a))) + F.lit(m.c)) \
            .otherwise(eta)
        return floor_column(_expit(eta, exact, bind=True), m.floor)

    if m.on == "margin":
        return tail(u)

    return _clamped(m, u, lambda log_s, log_1ms: _let(tail, z=log_s - log_1ms))


@map_column.register
def _(m: OffsetMap, u: Column, exact: bool = True) -> Column:
    def body(p):
        z = (log_column(p, full_range=True) - log1p_column(-p, full_range=True)) + F.lit(m.delta)
        return F.when((p > 0.0) & (p < 1.0), _expit(z, exact, bind=True)).otherwise(p)
    # exact=False makes only the final expit fast: a fast inner expit's ulps would be
    # multiplied by up to e^|delta| in the offset
    return _let(body, p=map_column(m.inner, u, True))
