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


def select_segment_columns(frame, columns: Sequence[str], *, what: str = "data",
                           error: type[ValueError] = SegmentKeyError):
    """``frame[columns]`` of a DataFrame, or ``error`` naming the absent columns and the ones
    found (the one column lookup of the model, the gate, tracking and the segment report)."""
    columns = list(columns)
    absent = [c for c in columns if c not in frame.columns]
    if absent:
        raise error(f"{what} has no segment column(s) {absent}; columns are "
                    f"{list(frame.columns)}")
    return frame[columns]


def segment_columns_of(segments: Any) -> tuple[list[str], list[np.ndarray]]:
    """``(names, columns)`` of a segment input: a pandas DataFrame (its columns), a pandas
    Series (its name, or ``"segment"``), a 1-D array-like (one column ``"segment"``) or a 2-D
    array (columns ``"segment_0"``, ``"segment_1"``, ...). Columns keep their dtypes."""
    try:
        import pandas as pd
    except ImportError:   # pragma: no cover - pandas is a dependency
        pd = None
    if pd is not None and isinstance(segments, pd.DataFrame):
        names = [str(c) for c in segments.columns]
        cols = [segments.iloc[:, j] for j in range(segments.shape[1])]
    elif pd is not None and isinstance(segments, pd.Series):
        names = [DEFAULT_SEGMENT_COLUMN if segments.name is None else str(segments.name)]
        cols = [segments]
    else:
        # a list keeps its Python types (numpy would turn ["a", 1] into two strings)
        arr = segments if isinstance(segments, np.ndarray) else np.asarray(segments, dtype=object)
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


def infer_column_types(names: Sequence[str], cols: Sequence[np.ndarray], *,
                       allow_missing: bool = False) -> list[str]:
    """The type of each segment column from its values, one by one: every value must be of one
    type, and non-missing unless ``allow_missing``."""
    types = []
    for name, col in zip(names, cols):
        found: dict[str, Any] = {}
        for i, v in enumerate(col):
            if _is_missing(v):
                if allow_missing:
                    continue
                raise SegmentKeyError(f"segment column {name!r} has a missing value at row {i}; "
                                      "fill it with a value of its own (e.g. '__missing__') "
                                      "to make missing a segment")
            t = value_type(v)
            if t is None:
                raise SegmentKeyError(f"segment column {name!r}, row {i}: {_describe(v)} "
                                      f"cannot be a key (keys are strings, integers or "
                                      "booleans)")
            found.setdefault(t, v)
        if len(found) > 1:
            shown = ", ".join(f"{t} (e.g. {_describe(v)})" for t, v in sorted(found.items()))
            raise SegmentKeyError(f"segment column {name!r} mixes value types: {shown}; a "
                                  "column holds one type")
        types.append(next(iter(found), "empty"))
    return types


#: pandas' inferred kinds of an object column whose values all have one key type
_INFERRED = {"string": "string", "integer": "integer", "boolean": "boolean"}


def _fast_type(series) -> str | None:
    """The key type of a column from its dtype alone (every value has it), ``"empty"`` when
    every value is missing, or None when the values must be inspected one by one."""
    import pandas as pd

    kind = series.dtype.kind
    if kind == "b":
        return "boolean"
    if kind in "iu":
        return "integer"
    if kind == "U":
        return "string"
    if kind == "f":
        return None if series.dtype == object else "float"
    inferred = pd.api.types.infer_dtype(series, skipna=True)
    if inferred == "empty":
        return "empty"
    return _INFERRED.get(inferred)


def encode_column(name: str, values: Any, column_type: str | None = None
                  ) -> tuple[np.ndarray, list, str | None]:
    """``(codes, uniques, type)`` of one segment column: ``uniques[codes[i]]`` is row ``i``'s
    canonical key value (``codes[i] = -1``: missing). ``column_type`` (predict time) is the
    type the values must have; None (fit time) infers it (``None`` when every value is
    missing). Only the distinct values are converted, so a million rows cost a few
    vectorised passes."""
    import pandas as pd

    series = values if isinstance(values, pd.Series) else pd.Series(values, copy=False)
    if isinstance(series.dtype, pd.CategoricalDtype):
        series = series.astype(object)
    found = _fast_type(series)
    if found == "float":   # integral floats are integer keys (a missing value makes ints float)
        v = series.to_numpy(dtype=np.float64)
        bad = ~np.isnan(v) & ~((np.floor(v) == v) & (np.abs(v) <= MAX_EXACT_FLOAT_INT))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise SegmentKeyError(f"segment column {name!r}, row {i}: float {v[i]!r} cannot be "
                                  "a key (keys are strings, integers or booleans; a float must "
                                  "be a whole number of magnitude at most 2**53)")
        found = "integer"
    if found is None:   # mixed or unusual values: one by one, with a named error
        raw = series.to_numpy(dtype=object)
        t = column_type or infer_column_types([name], [raw], allow_missing=True)[0]
        conv = [None] * raw.shape[0]
        for i, v in enumerate(raw):
            try:
                conv[i] = canonical_value(v, t)
            except SegmentKeyError as exc:
                raise SegmentKeyError(f"segment column {name!r}, row {i}: {exc}") from None
        series, found = pd.Series(conv, dtype=object), t
    if found == "empty":
        return np.full(len(series), -1, dtype=np.int64), [], column_type
    if column_type is not None and found != column_type:
        first = series.dropna().iloc[0]
        raise SegmentKeyError(f"segment column {name!r}: a {column_type} segment column got "
                              f"{_describe(first)}")
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    canon = []
    for u in np.asarray(uniques, dtype=object):
        try:
            canon.append(canonical_value(u, found))
        except SegmentKeyError as exc:
            raise SegmentKeyError(f"segment column {name!r}: {exc}") from None
    return np.asarray(codes, dtype=np.int64), canon, found


def encode_rows(names: Sequence[str], cols: Sequence[Any],
                types: Sequence[str] | None = None
                ) -> tuple[np.ndarray, list[tuple], list[str | None]]:
    """``(group, keys, types)``: each row's group ``keys[group[i]]`` (a tuple of canonical
    values; ``group[i] = -1`` for a row with a missing value), for segment columns ``cols``."""
    n = len(cols[0])
    if any(len(c) != n for c in cols):
        raise SegmentKeyError(f"segment columns differ in length: {[len(c) for c in cols]}")
    encoded = [encode_column(name, col, None if types is None else types[j])
               for j, (name, col) in enumerate(zip(names, cols))]
    codes = np.column_stack([c for c, _, _ in encoded]) if n else \
        np.empty((0, len(cols)), dtype=np.int64)
    complete = (codes >= 0).all(axis=1)
    group = np.full(n, -1, dtype=np.int64)
    keys: list[tuple] = []
    if complete.any():
        import pandas as pd

        sizes = [max(len(u), 1) for _, u, _ in encoded]
        if float(np.prod(np.array(sizes, dtype=np.float64))) < 2.0 ** 62:
            # one int64 per row (mixed radix), grouped by hashing: O(n)
            flat = np.zeros(int(complete.sum()), dtype=np.int64)
            for j, size in enumerate(sizes):
                flat = flat * size + codes[complete, j]
            inverse, combo_ids = pd.factorize(flat)
            combos = np.empty((len(combo_ids), len(sizes)), dtype=np.int64)
            rest = np.asarray(combo_ids, dtype=np.int64)
            for j in range(len(sizes) - 1, -1, -1):
                combos[:, j] = rest % sizes[j]
                rest = rest // sizes[j]
        else:
            combos, inverse = np.unique(codes[complete], axis=0, return_inverse=True)
        group[complete] = np.asarray(inverse).reshape(-1)
        keys = [tuple(encoded[j][1][c] for j, c in enumerate(row)) for row in combos.tolist()]
    return group, keys, [t for _, _, t in encoded]
