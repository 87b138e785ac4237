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


def _let(value: Column, body: Callable[[Column], Column]) -> Column:
    """``body(v)`` with ``v = value`` computed once per row."""
    return F.element_at(F.transform(F.array(value), body), 1)


def _let2(a: Column, b: Column, body: Callable[[Column, Column], Column]) -> Column:
    pair = F.struct(a.alias("a"), b.alias("b"))
    return F.element_at(F.transform(F.array(pair), lambda p: body(p["a"], p["b"])), 1)


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


def _exp_parts(x: Column, body: Callable[[Column, Column, Column], Column]) -> Column:
    """``body(m, t, lo)`` with ``exp(x) = 2^m (t + lo)`` as :func:`detmath._exp_parts`."""
    shifter = F.lit(dm._SHIFTER)

    def with_n(n):
        def with_r(r1, r2):
            return _let(r1 + r2, lambda r: _let(
                r * r * (F.lit(0.5) + r * (F.lit(1.0 / 6.0) + r * (F.lit(1.0 / 24.0) + r * (
                    F.lit(1.0 / 120.0) + r * F.lit(1.0 / 720.0))))),
                lambda q: _let2(r1 + (r2 + q), n.cast("long"), lambda p, k: _let2(
                    F.shiftright(k, 7), F.element_at(_doubles(dm._EXP_HI), (k.bitwiseAND(127) + 1).cast("int")),
                    lambda m, t: body(m, t, F.element_at(_doubles(dm._EXP_LO), (k.bitwiseAND(127) + 1).cast("int")) + t * p)))))
        return _let2(x - n * F.lit(dm._RED_HI), -n * F.lit(dm._RED_LO), with_r)

    return _let((x * F.lit(dm._INV_STEP) + shifter) - shifter, with_n)


def _subnormal_exp(m: Column, t: Column, lo: Column) -> Column:
    """:func:`detmath._subnormal_exp`: ``2^m (t + lo)`` rounded once onto the subnormal grid."""
    two52 = F.lit(dm._TWO_52)

    def with_y(y):
        return _let2(y * pow2(m + 1074), ((t - y) + lo) * pow2(m + 1074), lambda a, ea: _let(
            (a + two52) - two52, lambda r: _let((a - r) + ea, lambda w: (
                F.when(w > 0.5, r + 1.0).when(w < -0.5, r - 1.0).otherwise(r)
                * F.lit(2.0 ** -52)) * F.lit(2.0 ** -1022))))
    return _let(t + lo, with_y)


def _exp_column(x: Column) -> Column:
    """:func:`detmath.det_exp` for finite ``x <= 0`` (what expit needs below -40)."""
    def body(m, t, lo):
        return F.when(m < -1022, _subnormal_exp(m, t, lo)).otherwise((t + lo) * pow2(m))
    return F.when(x < F.lit(dm._EXP_UNDERFLOW), F.lit(0.0)).otherwise(_exp_parts(x, body))


def _two_prod(a: Column, b: Column, body: Callable[[Column, Column], Column]) -> Column:
    """Dekker's exact product ``a*b = p + e`` (Veltkamp splitting), as detmath._two_prod."""
    split = F.lit(dm._SPLITTER)

    def halves(v, then):
        return _let(split * v, lambda t: _let(t - (t - v), lambda h: then(h, v - h)))

    return halves(a, lambda ah, al: halves(b, lambda bh, bl: _let(a * b, lambda p: body(
        p, ((ah * bh - p) + ah * bl + al * bh) + al * bl))))


def expit_column(x: Column) -> Column:
    """:func:`detmath.det_expit` in Spark SQL arithmetic, bit-identical for finite ``x``."""
    def central(m, t, lo):
        def with_h(h):
            return _let2(h * pow2(m), ((t - h) + lo) * pow2(m), lambda e_hi, e_lo: _let(
                F.lit(1.0) + e_hi, lambda s: _let2(
                    ((F.lit(1.0) - s) + e_hi) + e_lo,
                    F.when(x >= 0.0, F.lit(1.0) / s).otherwise(e_hi / s),
                    lambda s_err, q: _two_prod(q, s, lambda p, pe: q + F.when(
                        x >= 0.0, ((F.lit(1.0) - p) - pe) - q * s_err).otherwise(
                        (((e_hi - p) - pe) + e_lo) - q * s_err) / s))))
        return _let(t + lo, with_h)

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
    return _let(count_leq(u, x), interp)


@map_column.register
def _(m: SigmoidMap, u: Column) -> Column:
    return expit_column(-(F.lit(m.a) * u + F.lit(m.b)))
