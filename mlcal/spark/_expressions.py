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
  arithmetic, not Spark's ``exp``.

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
from mlcal.maps import LinearMap, SigmoidMap, StepMap


def _let(body: Callable[..., Column], **values: Column) -> Column:
    """``body(**values)`` with each value computed once per row.

    Every binding is a nested lambda, and Spark's analyzer resolves one nesting level per pass
    (at most ``spark.sql.analyzer.maxIterations``, 100 by default), so callers bind several
    values per level and inline what is cheap (lambda variables, small arithmetic)."""
    names = list(values)
    pair = F.struct(*[values[k].alias(k) for k in names])
    return F.element_at(F.transform(F.array(pair), lambda p: body(**{k: p[k] for k in names})), 1)


def _double_sql(v: float) -> str:
    if np.isinf(v):
        return "CAST('Infinity' AS DOUBLE)" if v > 0 else "CAST('-Infinity' AS DOUBLE)"
    return f"{v!r}D"    # repr round-trips, and Spark parses a D literal with Double.parseDouble


def _doubles(values) -> Column:
    """An array<double> literal holding exactly these float64 values (one parsed SQL literal
    instead of a py4j call per element)."""
    items = ", ".join(_double_sql(float(v)) for v in np.asarray(values, dtype=np.float64))
    return F.expr(f"array({items})")


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


# -- one builder per map type --------------------------------------------------------------
@functools.singledispatch
def map_column(m, u: Column) -> Column:
    """The map evaluated on the (input-transformed, finite) score column ``u``."""
    raise TypeError(f"no Spark SQL expression for a {type(m).__name__}; supported map types: "
                    f"{', '.join(registered_types(map_column))}")


@map_column.register
def _(m: StepMap, u: Column) -> Column:
    return step_lookup(u, m.thresholds, m.values)


@map_column.register
def _(m: LinearMap, u: Column) -> Column:
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


@map_column.register
def _(m: SigmoidMap, u: Column) -> Column:
    return expit_column(-(F.lit(m.a) * u + F.lit(m.b)))
