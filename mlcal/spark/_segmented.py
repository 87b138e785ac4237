"""A segmented map (:class:`mlcal.maps.segmented.SegmentedMap`) as a Spark SQL column.

``q`` is the shared (inner) map's column, exact as for an offset map; the row's segment index
comes from a lookup of its segment values, and then ``expit(slope * (log q - log1p(-q)) +
offset)`` with mlcal's full-range SQL ``log``/``log1p`` and the exact (or, with
``exact=False``, the fast) expit, ``q`` passing through when it is 0 or 1 or the segment is
unseen. The operations are those of :func:`mlcal.maps.segmented.segmented_probabilities`, so the
exact column is ``predict`` bit for bit and the fast one within ``FAST_EXPIT_ULPS`` ulps (only
the final expit differs).

Segment lookup, exact by construction (no hashing, no float keys): each segment column's value
becomes its code among that column's distinct key values (a map literal); the codes are
combined one column at a time, ``prefix * size_j + code_j``, and each combination is looked up
among the key prefixes that exist (so every intermediate is below ``n_segments * size_j``, far
inside a 64-bit integer); the last lookup gives the segment's index. Any lookup that misses
(an unseen value or combination, or a null / NaN value) makes the row unseen. Keys are typed
as in Python: a string column must be a Spark string, an integer column an integral Spark type
(or a float/double holding a whole number of magnitude at most 2^53), a boolean column a Spark
boolean; any other type raises a named error when the column is evaluated. Spark's map lookup
scans the map's keys, so the cost per row grows with the number of distinct values per column
(fine for the tens to thousands of segments this method is for).
"""

from __future__ import annotations

from typing import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from mlcal.maps.segmented import SegmentedMap, lookup_plan
from mlcal.spark._expressions import _doubles, _expit, _let, log1p_column, log_column, map_column

_INTEGRAL_TYPES = ("tinyint", "smallint", "int", "bigint")
_FLOAT_TYPES = ("float", "double")
#: integral floats are integer keys only where every integer is exact in a double
_MAX_EXACT_FLOAT_INT = 2.0 ** 53


def _sql_string(s: str) -> str:
    """A Spark SQL string literal holding exactly ``s``: every character outside [A-Za-z0-9]
    written as ``\\uXXXX`` escapes of its UTF-16 code units (no quoting pitfalls)."""
    out = []
    for ch in s:
        if ch.isascii() and ch.isalnum():
            out.append(ch)
        else:
            b = ch.encode("utf-16-be")
            out.extend(f"\\u{b[i]:02x}{b[i + 1]:02x}" for i in range(0, len(b), 2))
    return "'" + "".join(out) + "'"


def _sql_value(v, column_type: str) -> str:
    if column_type == "string":
        return _sql_string(v)
    if column_type == "boolean":
        return "true" if v else "false"
    return f"CAST('{int(v)}' AS BIGINT)"   # also -2^63, which no BIGINT literal spells


def _lookup_map(keys: Sequence, column_type: str, values: Sequence[int]) -> Column:
    """A map literal ``key -> value`` (bigint values), folded to a constant by Spark."""
    k = ", ".join(_sql_value(v, column_type) for v in keys)
    w = ", ".join(f"CAST({int(v)} AS BIGINT)" for v in values)
    return F.expr(f"map_from_arrays(array({k}), array({w}))")


def typed_key(col: Column, name: str, column_type: str) -> Column:
    """``col`` as a key of a ``column_type`` column (string, bigint or boolean), null for a
    missing value; a Spark type the column cannot hold raises when evaluated."""
    kind = F.typeof(col)

    def refuse(what: str) -> Column:
        return F.raise_error(F.concat(F.lit(f"segment column {name!r}: a {column_type} segment "
                                            f"column got {what}"), kind))
    if column_type == "string":
        return F.when(kind == "string", col.cast("string")).otherwise(refuse("Spark type "))
    if column_type == "boolean":
        return F.when(kind == "boolean", col.cast("boolean")).otherwise(refuse("Spark type "))
    d = col.cast("double")
    integral = (F.floor(d) == d) & (F.abs(d) <= F.lit(_MAX_EXACT_FLOAT_INT))
    return (F.when(kind.isin(*_INTEGRAL_TYPES), col.cast("bigint"))
            .when(kind.isin(*_FLOAT_TYPES) & (col.isNull() | F.isnan(d)), F.lit(None)
                  .cast("bigint"))
            .when(kind.isin(*_FLOAT_TYPES) & integral, d.cast("bigint"))
            .when(kind.isin(*_FLOAT_TYPES), F.raise_error(F.concat(
                F.lit(f"segment column {name!r}: float "), d.cast("string"),
                F.lit(" cannot be an integer key (a whole number of magnitude at most "
                      "2**53)"))))
            .otherwise(refuse("Spark type ")))


def segment_index_column(m: SegmentedMap, segment_cols: Sequence[Column]) -> Column:
    """The row's index into ``m.keys`` (bigint), or null for an unseen segment."""
    types = m.column_types
    index: Column | None = None
    for j, (col, name, t, step) in enumerate(zip(segment_cols, m.column_names, types,
                                                   lookup_plan(m))):
        code = F.try_element_at(_lookup_map(step.uniques, t, step.codes),
                                typed_key(col, name, t))
        if j == 0:
            index = code
            continue
        table = _lookup_map(step.combined, "integer", step.target)
        index = F.try_element_at(table, index * F.lit(len(step.uniques)) + code)
    return index


def segmented_column(m: SegmentedMap, u: Column, segment_cols: Sequence[Column],
                     exact: bool) -> Column:
    """``m`` on the (input-transformed, finite) score column ``u`` and the segment columns
    (in ``m.column_names`` order)."""
    def body(q, k):
        slope = F.element_at(_doubles(m.slopes), (k + 1).cast("int"))
        offset = F.element_at(_doubles(m.offsets), (k + 1).cast("int"))
        z = slope * (log_column(q, full_range=True) - log1p_column(-q, full_range=True)) + offset
        return F.when(k.isNotNull() & (q > 0.0) & (q < 1.0),
                      _expit(z, exact, bind=True)).otherwise(q)

    k = segment_index_column(m, segment_cols)
    if m.unseen == "raise":
        shown = F.concat_ws(", ", *[c.cast("string") for c in segment_cols])
        k = F.when(k.isNotNull(), k).otherwise(F.raise_error(F.concat(
            F.lit("UnseenSegmentError: segment ["), shown,
            F.lit(f"] (columns {m.column_names}) was not seen when the calibrator was fitted "
                  "(unseen='raise')"))))
    return _let(body, q=map_column(m.inner, u, True), k=k)
