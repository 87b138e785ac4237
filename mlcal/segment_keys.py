"""Segment keys: reading segment columns, typing them, and looking rows up in a segment table.

A segment is identified by one value per segment column. Each column has one of three types,
fixed when the calibrator is fitted and recorded in its JSON document:

* ``"string"``: Python/numpy strings;
* ``"integer"``: integers (not booleans) within the signed 64-bit range; floats with an integral
  value of magnitude at most 2**53 are read as that integer (a pandas integer column with a
  missing value is stored as floats);
* ``"boolean"``: Python/numpy booleans.

Values are compared by type and value: the integer ``1``, the string ``"1"`` and the boolean
``true`` are three different keys, and a string column given an integer (or the reverse) is an
error (:class:`SegmentKeyError`), never a silent miss. A missing value (None, NaN, pandas NA)
is refused when fitting; when predicting, a row with a missing key component is an unseen
segment (the map's ``unseen`` policy applies).
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

import numpy as np

COLUMN_TYPES = ("string", "integer", "boolean")
#: at most this many segment columns (a key of more columns cannot be meant)
MAX_SEGMENT_COLUMNS = 16
#: a column name or string key of more characters is refused
MAX_KEY_CHARS = 1000
#: integral floats are read as integers only where every integer is exact in a double
MAX_EXACT_FLOAT_INT = 2 ** 53
INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
#: column name of a one-column segment input that has no name of its own
DEFAULT_SEGMENT_COLUMN = "segment"


class SegmentKeyError(ValueError):
    """Segment values that cannot be keys: missing at fit time, of a type other than the
    column's, a non-integral float, a mismatched number of columns or rows."""


def _is_missing(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, (float, np.floating)):
        return math.isnan(float(v))
    try:   # pandas.NA, pandas.NaT
        import pandas as pd

        return v is pd.NA or v is pd.NaT
    except ImportError:   # pragma: no cover - pandas is a dependency
        return False


def value_type(v: Any) -> str | None:
    """The column type of one non-missing value, or None when it can be no key."""
    if isinstance(v, (bool, np.bool_)):
        return "boolean"
    if isinstance(v, (str, np.str_)):
        return "string"
    if isinstance(v, numbers.Integral):
        return "integer"
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return "integer" if math.isfinite(f) and f.is_integer() and \
            abs(f) <= MAX_EXACT_FLOAT_INT else None
    return None


def canonical_value(v: Any, column_type: str) -> Any:
    """``v`` as the key value of a ``column_type`` column (``str``, ``int`` or ``bool``), or
    ``None`` when ``v`` is missing; :class:`SegmentKeyError` when it has another type."""
    if _is_missing(v):
        return None
    found = value_type(v)
    if found != column_type:
        raise SegmentKeyError(f"a {column_type} segment column got {_describe(v)}")
    if column_type == "string":
        s = str(v)
        if len(s) > MAX_KEY_CHARS:
            raise SegmentKeyError(f"a segment key string has {len(s)} characters, more than "
                                  f"{MAX_KEY_CHARS}")
        return s
    if column_type == "boolean":
        return bool(v)
    i = int(v)
    if not INT64_MIN <= i <= INT64_MAX:
        raise SegmentKeyError(f"segment key {_describe(v)} is outside the signed 64-bit range")
    return i


def _describe(v: Any) -> str:
    from mlcal.calibrators._params import short_repr

    return f"{type(v).__name__} {short_repr(v)}"


def segment_columns_of(segments: Any) -> tuple[list[str], list[np.ndarray]]:
    """``(names, columns)`` of a segment input: a pandas DataFrame (its columns), a pandas
    Series (its name, or ``"segment"``), a 1-D array-like (one column ``"segment"``) or a 2-D
    array (columns ``"segment_0"``, ``"segment_1"``, ...). Columns are object arrays."""
    try:
        import pandas as pd
    except ImportError:   # pragma: no cover - pandas is a dependency
        pd = None
    if pd is not None and isinstance(segments, pd.DataFrame):
        names = [str(c) for c in segments.columns]
        cols = [segments[c].to_numpy(dtype=object) for c in segments.columns]
    elif pd is not None and isinstance(segments, pd.Series):
        names = [DEFAULT_SEGMENT_COLUMN if segments.name is None else str(segments.name)]
        cols = [segments.to_numpy(dtype=object)]
    else:
        arr = np.asarray(segments, dtype=object)
        if arr.ndim == 1:
            names, cols = [DEFAULT_SEGMENT_COLUMN], [arr]
        elif arr.ndim == 2:
            names = [f"{DEFAULT_SEGMENT_COLUMN}_{j}" for j in range(arr.shape[1])]
            cols = [arr[:, j] for j in range(arr.shape[1])]
        else:
            raise SegmentKeyError(f"segments must be 1-D (one column) or 2-D (one column per "
                                  f"segment variable), got {arr.ndim} dimensions")
    if not cols:
        raise SegmentKeyError("segments has no columns")
    if len(cols) > MAX_SEGMENT_COLUMNS:
        raise SegmentKeyError(f"segments has {len(cols)} columns, more than "
                              f"{MAX_SEGMENT_COLUMNS}")
    if len(set(names)) != len(names):
        raise SegmentKeyError(f"segment column names repeat: {names}")
    return names, cols


def infer_column_types(names: Sequence[str], cols: Sequence[np.ndarray]) -> list[str]:
    """The type of each segment column from its values (fit time): every value must be
    non-missing and of one type."""
    types = []
    for name, col in zip(names, cols):
        found: dict[str, Any] = {}
        for i, v in enumerate(col):
            if _is_missing(v):
                raise SegmentKeyError(f"segment column {name!r} has a missing value at row {i}; "
                                      "fill it with a value of its own (e.g. '__missing__') "
                                      "to make missing a segment")
            t = value_type(v)
            if t is None:
                raise SegmentKeyError(f"segment column {name!r}, row {i}: {_describe(v)} "
                                      f"cannot be a key (keys are strings, integers or "
                                      "booleans)")
            found.setdefault(t, v)
        if len(found) != 1:
            shown = ", ".join(f"{t} (e.g. {_describe(v)})" for t, v in sorted(found.items()))
            raise SegmentKeyError(f"segment column {name!r} mixes value types: {shown}; a "
                                  "column holds one type")
        types.append(next(iter(found)))
    return types


def canonical_keys(names: Sequence[str], cols: Sequence[np.ndarray], types: Sequence[str],
                   ) -> list[tuple | None]:
    """One key tuple per row (``None`` for a row with a missing component)."""
    n = len(cols[0])
    if any(len(c) != n for c in cols):
        raise SegmentKeyError(f"segment columns differ in length: {[len(c) for c in cols]}")
    out_cols = []
    for name, col, t in zip(names, cols, types):
        conv = []
        for i, v in enumerate(col):
            try:
                conv.append(canonical_value(v, t))
            except SegmentKeyError as exc:
                raise SegmentKeyError(f"segment column {name!r}, row {i}: {exc}") from None
        out_cols.append(conv)
    return [None if any(v is None for v in row) else row for row in zip(*out_cols)]
