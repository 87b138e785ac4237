"""Labels to 0/1, refusing anything that would make a fit or a metric silently wrong.

:func:`positive_indicator` is the one mapping of class labels to 0/1 (used by
``CalibratedModel.fit``, the experiment table and the MLflow run logging): a label that is not
one of the model's classes is an error, never a label quietly turned into 0.
:func:`binary_labels` adds what an evaluation needs on top (no missing labels, both classes,
enough rows); the promotion gate and the MLflow evaluator plugin use it.
:func:`class_indices` maps labels of any number of classes to indices, and
:func:`multiclass_labels` adds the same evaluation checks for a model with K >= 3 classes.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

#: Fewest evaluation rows the gate and the evaluator accept by default. Binned ECE on fewer
#: rows is mostly noise; pass ``min_rows`` to change it.
DEFAULT_MIN_ROWS = 100


class MissingLabelError(ValueError):
    """Evaluation labels contain missing values (NaN/None)."""


class UnknownLabelError(ValueError):
    """A label is not one of the model's classes."""


def _missing_mask(y: np.ndarray) -> np.ndarray:
    import pandas as pd

    return np.asarray(pd.isna(y), dtype=bool)


def _plain(classes) -> list:
    """Classes as a list of Python values (numpy scalars unwrapped, so messages read
    ``['a', 'b']``), element types kept: ``[1, "1"]`` stays mixed."""
    return [v.item() if isinstance(v, np.generic) else v
            for v in np.asarray(classes, dtype=object).reshape(-1)]


def _same(a, b) -> bool:
    """Label equality without numpy's casting: "1" is not 1, but 1.0 is 1 and True is 1
    (numpy scalars compare as their Python values: ``np.str_("a")`` is ``"a"``)."""
    a = a.item() if isinstance(a, np.generic) else a
    b = b.item() if isinstance(b, np.generic) else b
    if isinstance(a, (str, bytes)) or isinstance(b, (str, bytes)):
        return type(a) is type(b) and a == b
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def same_label(a, b) -> bool:
    """Whether two labels are the same class ("1" is not 1, 1.0 is 1, True is 1)."""
    return _same(a, b)


def _numeric(values) -> bool:
    return all(isinstance(v, (int, float, bool, np.number, np.bool_)) for v in values)


def _known(arr: np.ndarray, allowed: list) -> np.ndarray:
    """Mask of the labels equal to one of ``allowed`` (vectorised when everything is numeric)."""
    raw = np.asarray(arr.tolist())
    if raw.dtype.kind in "biuf" and _numeric(allowed):
        return np.isin(raw.astype(np.float64), np.asarray(allowed, dtype=np.float64))
    return np.array([any(_same(v, a) for a in allowed) for v in arr], dtype=bool)


def distinct_labels(y) -> list:
    """The distinct labels of ``y`` (missing ones left out), sorted (by their text when the
    types are mixed); "1" and 1 stay distinct, 1.0 and 1 do not."""
    arr = np.asarray(y, dtype=object).reshape(-1)
    found: list = []
    for v in _plain(arr[~_missing_mask(arr)]) if arr.size else []:
        if not any(_same(v, f) for f in found):
            found.append(v)
            if len(found) > 1000:   # a score column passed as labels: enough to say so
                break
    try:
        return sorted(found)
    except TypeError:
        return sorted(found, key=lambda v: (type(v).__name__, str(v)))


def describe_labels(y, limit: int = 10) -> str:
    """``"['maybe', 'no', 'yes'] (3 labels)"``: what an error message says was found."""
    found = distinct_labels(y)
    count = f"{len(found)}{'+' if len(found) > 1000 else ''} label{'s' * (len(found) != 1)}"
    shown = str(found) if len(found) <= limit else str(found[:limit])[:-1] + ", ...]"
    return f"{shown} ({count})"


def to_binary(y, pos_label=None, *, name: str = "y") -> np.ndarray:
    """Binary labels of any type as the float64 0/1 array the calibrators fit on.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels: numbers, strings or booleans, exactly two distinct values.
    pos_label : optional
        The positive class (mapped to 1, the other label to 0). Required unless the labels
        are 0/1 (or booleans), which are taken as they are.
    name : str
        How the labels are named in error messages, e.g. ``"column 'y' of data.csv"``.

    Returns
    -------
    ndarray of float64, shape (n,)

    Raises
    ------
    MissingLabelError
        Missing labels (NaN/None).
    ValueError
        Not exactly two distinct labels, ``pos_label`` not among them, or labels other than
        0/1 without ``pos_label``; each message lists the labels found.
    """
    arr = np.asarray(y, dtype=object).reshape(-1)
    if arr.size == 0:
        raise ValueError(f"{name} is empty (0 rows)")
    missing = _missing_mask(arr)
    if missing.any():
        raise MissingLabelError(f"{name}: {int(missing.sum())} of {arr.size} labels are missing "
                                "(NaN/None); drop or fix those rows")
    found = distinct_labels(arr)
    if len(found) != 2:
        raise ValueError(f"{name} must contain two classes; found {describe_labels(arr)} "
                         f"in {arr.size} rows")
    if pos_label is None:
        if not all(_same(v, 0) or _same(v, 1) for v in found):
            raise ValueError(f"{name} holds the labels {found}, not 0/1; name the positive "
                             "class with pos_label (CLI: --pos-label)")
        pos_label = 1
    elif not any(_same(pos_label, v) for v in found):
        raise ValueError(f"pos_label {pos_label!r} is not one of the labels found in {name}: "
                         f"{found}")
    return _known(arr, [pos_label]).astype(np.float64)


def positive_indicator(y, classes: Sequence, *, name: str = "y") -> np.ndarray:
    """Class labels as a float64 0/1 array: 1.0 where the label is ``classes[1]``.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels of the model's classes.
    classes : sequence of two labels
        The model's classes (negative, positive), e.g. ``classes_``.
    name : str
        How the labels are named in error messages.

    Raises
    ------
    ValueError
        A label that is not one of ``classes`` (a missing label included), or ``classes`` that
        are not two distinct labels.
    """
    allowed = _plain(classes)
    if len(allowed) != 2 or _same(allowed[0], allowed[1]):
        raise ValueError(f"a binary model has two distinct classes, got {allowed}")
    raw = np.asarray(y).reshape(-1)
    if raw.dtype.kind in "biuf" and _numeric(allowed):   # the common case, vectorised
        values = raw.astype(np.float64)
        known = np.isin(values, np.asarray(allowed, dtype=np.float64))
        positive = values == float(allowed[1])
    else:
        arr = raw.astype(object)
        known, positive = _known(arr, allowed), _known(arr, allowed[1:])
    if not known.all():
        bad = list(dict.fromkeys(raw[~known].tolist()))[:5]
        raise UnknownLabelError(f"{name} contains labels {bad} that are not among the base model's "
                         f"classes {allowed}")
    return positive.astype(np.float64)


def class_indices(y, classes: Sequence, *, name: str = "y") -> np.ndarray:
    """Class labels as int64 indices into ``classes`` (any label type, as in
    :func:`positive_indicator`: "1" is not 1).

    Raises
    ------
    UnknownLabelError
        A label that is not one of ``classes`` (a missing label included).
    ValueError
        ``classes`` that are not distinct.
    """
    allowed = _plain(classes)
    if any(_same(a, b) for i, a in enumerate(allowed) for b in allowed[i + 1:]):
        raise ValueError(f"the model's classes must be distinct, got {allowed[:10]}")
    raw = np.asarray(y).reshape(-1)
    out = np.full(raw.shape[0], -1, dtype=np.int64)
    if raw.dtype.kind in "biuf" and _numeric(allowed):   # the common case, vectorised
        values = raw.astype(np.float64)
        for k, c in enumerate(allowed):
            out[values == float(c)] = k
    else:
        arr = raw.astype(object)
        for k, c in enumerate(allowed):
            out[_known(arr, [c])] = k
    if (out < 0).any():
        bad = list(dict.fromkeys(raw[out < 0].tolist()))[:5]
        raise UnknownLabelError(f"{name} contains labels {bad} that are not among the base model's "
                         f"classes {allowed[:10]}")
    return out


def _evaluation_rows(y, min_rows, name: str) -> np.ndarray:
    """Labels as a 1-D object array with at least ``min_rows`` rows and none missing."""
    if isinstance(min_rows, bool) or not isinstance(min_rows, (int, np.integer)) or min_rows < 1:
        raise ValueError(f"min_rows must be a positive integer, got {min_rows!r}")
    arr = np.asarray(y, dtype=object).reshape(-1)
    n = arr.shape[0]
    if n < min_rows:
        raise ValueError(f"{name}: only {n} rows, fewer than the minimum of {min_rows}; "
                         "evaluate on more data or lower min_rows")
    missing = _missing_mask(arr)
    if missing.any():
        raise MissingLabelError(f"{name}: {int(missing.sum())} of {n} labels are missing "
                                "(NaN/None); drop or fix those rows")
    return arr


def binary_labels(y, *, classes: Sequence | None = None, pos_label=None,
                  min_rows: int = DEFAULT_MIN_ROWS, name: str = "labels") -> np.ndarray:
    """Validate binary evaluation labels and return them as a float64 0/1 array.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels as given by the user (numbers, strings, booleans).
    classes : sequence of two labels, optional
        The model's classes in order (negative, positive), e.g. ``classes_`` of a scikit-learn
        classifier. Every label must be one of them. Without ``classes`` and ``pos_label`` the
        labels must be 0/1 (or booleans).
    pos_label : optional
        The positive class; defaults to ``classes[1]`` (or 1 when ``classes`` is None).
    min_rows : int, default=DEFAULT_MIN_ROWS
        Fewest rows accepted.
    name : str
        How the labels are named in error messages.

    Returns
    -------
    ndarray of float64, shape (n,)
        1.0 for the positive class, 0.0 otherwise.

    Raises
    ------
    MissingLabelError, UnknownLabelError
        Missing labels (NaN/None); a label outside ``classes``.
    ValueError
        A single class, fewer than ``min_rows`` rows, or ``classes`` that are not two distinct
        labels.
    """
    arr = _evaluation_rows(y, min_rows, name)
    n = arr.shape[0]
    if classes is None:
        allowed = [0, 1] if pos_label is None else None
    else:
        allowed = _plain(classes)
        if len(allowed) != 2 or allowed[0] == allowed[1]:
            raise ValueError(f"a binary model has two distinct classes, got {allowed}")
    positive = pos_label if pos_label is not None else (1 if classes is None else allowed[1])
    if allowed is not None and not any(_same(positive, a) for a in allowed):
        raise ValueError(f"pos_label {positive!r} is not one of the classes {allowed}")
    if allowed is not None:
        known = _known(arr, allowed)
        if not known.all():
            bad = list(dict.fromkeys(arr[~known].tolist()))[:5]
            raise UnknownLabelError(f"{name}: {int((~known).sum())} of {n} labels are not "
                                    f"among the model's classes {allowed}: e.g. {bad}")
    y01 = _known(arr, [positive]).astype(np.float64)
    n_pos = int(y01.sum())
    if n_pos == 0 or n_pos == n:
        only = "negative" if n_pos == 0 else "positive"
        raise ValueError(f"{name}: all {n} labels are the {only} class; calibration metrics "
                         "and the gate need both classes")
    return y01


def multiclass_labels(y, classes: Sequence, *, min_rows: int = DEFAULT_MIN_ROWS,
                      name: str = "labels") -> np.ndarray:
    """Validate evaluation labels of a model with K >= 3 classes and return class indices.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels as given by the user (any label type; "1" is not 1).
    classes : sequence of K >= 3 labels
        The model's classes in column order, e.g. ``classes_``.
    min_rows, name
        As in :func:`binary_labels`.

    Returns
    -------
    ndarray of int64, shape (n,)
        Index of each label in ``classes``.

    Raises
    ------
    MissingLabelError, UnknownLabelError
        Missing labels (NaN/None); a label outside ``classes``.
    mlcal.calibrators.multiclass.TooFewClassesError
        ``classes`` has fewer than 3 labels (two: use :func:`binary_labels`).
    mlcal.calibrators.multiclass.MissingClassError
        A class of the model never occurs in ``y``: its class-wise calibration cannot be
        measured, and a comparison on such data would silently ignore it.
    ValueError
        Fewer than ``min_rows`` rows, or ``classes`` that are not distinct.
    """
    from mlcal.calibrators.multiclass import MissingClassError, TooFewClassesError

    allowed = _plain(classes)
    if len(allowed) < 3:
        raise TooFewClassesError(f"{name}: a multiclass model has at least 3 classes, got "
                                 f"{allowed}" + ("; use binary_labels" if len(allowed) == 2
                                                 else ""))
    arr = _evaluation_rows(y, min_rows, name)
    yi = class_indices(arr, allowed, name=name)
    counts = np.bincount(yi, minlength=len(allowed))
    if (counts == 0).any():
        absent = [allowed[k] for k in np.flatnonzero(counts == 0)[:10]]
        raise MissingClassError(f"{name}: class(es) {absent} of the model's {len(allowed)} "
                                "classes never occur; every class needs evaluation rows")
    return yi
