"""The segment features of a multicalibration map: reading a frame, encoding categories.

A feature is numeric (float64, finite) or categorical. A categorical value is read as its text
(``str(v)``; booleans as ``"True"``/``"False"``, integers as their decimal text) and coded by its
position in the feature's stored category list; a value not in the list (a category unseen in
training, or one of the rare categories beyond ``max_categories`` folded together at fit time)
takes the code ``len(categories)``, the "other" code. The codes are small exact integers, so the
Python scorer, the ONNX graph and SQL make the same decision on them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SCORE_NAME = "score"


def feature_columns(features: Any, n: int) -> tuple[list[str], list[np.ndarray]]:
    """Names and 1-D columns of ``features``: a pandas DataFrame, a dict of name -> array, or a
    2-D array (columns named ``x0, x1, ...``). ``None`` gives no columns."""
    if features is None:
        return [], []
    if hasattr(features, "columns") and hasattr(features, "__getitem__"):   # a DataFrame
        names = [str(c) for c in features.columns]
        cols = [np.asarray(features[c]) for c in features.columns]
    elif isinstance(features, dict):
        names = [str(k) for k in features]
        cols = [np.asarray(v) for v in features.values()]
    else:
        arr = np.asarray(features)
        if arr.ndim == 1:
            arr = arr[:, None]
        if arr.ndim != 2:
            raise ValueError(f"features must be a DataFrame, a dict of columns or a 2-D array, "
                             f"got an array of shape {arr.shape}")
        names = [f"x{j}" for j in range(arr.shape[1])]
        cols = [arr[:, j] for j in range(arr.shape[1])]
    if len(set(names)) != len(names):
        raise ValueError("features: duplicate column names")
    if SCORE_NAME in names:
        raise ValueError(f"features: the name {SCORE_NAME!r} is reserved for the base score")
    for name, col in zip(names, cols):
        if col.ndim != 1 or col.shape[0] != n:
            raise ValueError(f"feature {name!r} has shape {col.shape}; expected ({n},) like "
                             "the scores")
    return names, cols


def is_categorical_column(col: np.ndarray) -> bool:
    """Columns of text, objects or booleans are categorical; numbers are numeric."""
    return col.dtype.kind in "OUSb" or str(col.dtype) == "category"


def as_text(col: np.ndarray) -> np.ndarray:
    """The categorical reading of a column: each value's text."""
    if col.dtype.kind == "O":
        if any(v is None or (isinstance(v, float) and v != v) for v in col):
            raise ValueError("a categorical feature holds missing values (None/NaN); map them "
                             "to a category of their own (e.g. 'missing') first")
    return np.asarray([str(v) for v in col.tolist()], dtype=object)


def as_numeric(col: np.ndarray, name: str) -> np.ndarray:
    """A finite float64 copy of a numeric column (``ValueError`` naming the feature)."""
    try:
        arr = np.asarray(col, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"numeric feature {name!r} is not numeric: {exc}") from None
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(f"numeric feature {name!r} has {int(bad.sum())} non-finite value(s); "
                         "impute them (or pass the column as categorical) first")
    return arr


def category_vocabulary(text: np.ndarray, w: np.ndarray, max_categories: int) -> list[str]:
    """The categories kept for a feature: the ``max_categories`` of largest total weight (ties
    by text), listed in text order; the rest share the "other" code."""
    values, inverse = np.unique(text.astype(str), return_inverse=True)
    weight = np.bincount(inverse, weights=w, minlength=values.size)
    if values.size > max_categories:
        keep = np.lexsort((values, -weight))[:max_categories]
        values = np.sort(values[keep])
    return [str(v) for v in values]


def encode_categories(text: np.ndarray, categories: list[str]) -> np.ndarray:
    """Codes of ``text`` in ``categories`` (``len(categories)`` for any other value), int64."""
    lookup = {c: i for i, c in enumerate(categories)}
    other = len(categories)
    return np.fromiter((lookup.get(v, other) for v in text.tolist()), dtype=np.int64,
                       count=text.shape[0])
