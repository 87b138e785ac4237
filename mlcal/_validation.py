"""Input checks shared by every calibrator, metric and CLI command.

Every check raises ``ValueError`` with a message that names the problem, so a user never gets a
silent wrong answer from NaN scores, stray labels or mismatched lengths.
"""

from __future__ import annotations

import numpy as np


class NotBinaryError(ValueError):
    """The base model is not a binary classifier."""


def as_scores(scores, *, name: str = "scores") -> np.ndarray:
    """Return ``scores`` as a finite 1-D float64 array or raise ``ValueError``."""
    try:
        arr = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric: {exc}") from None
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.reshape(-1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got an array of shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.isfinite(arr).all():
        bad = int(np.count_nonzero(~np.isfinite(arr)))
        kind = "NaN" if np.isnan(arr).any() else "infinite"
        raise ValueError(f"{name} contains {bad} non-finite value(s) ({kind}); "
                         "remove or impute them before calibrating")
    return arr


def as_labels(y, n: int, *, name: str = "y") -> np.ndarray:
    """Return binary labels as a float64 0/1 array of length ``n`` or raise ``ValueError``."""
    try:
        arr = np.asarray(y, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must contain only the labels 0 and 1; found "
                         f"{_found_labels(y)}; map other labels to 0/1 with "
                         "mlcal.labels.to_binary(y, pos_label=...)") from None
    if arr.shape[0] != n:
        raise ValueError(f"length mismatch: {n} scores but {arr.shape[0]} labels in {name}")
    if not np.isin(arr, (0.0, 1.0)).all():
        bad = np.unique(arr[~np.isin(arr, (0.0, 1.0))])[:5]
        raise ValueError(f"{name} must contain only the labels 0 and 1; found {bad.tolist()} "
                         f"among {_found_labels(y)}; map other labels to 0/1 with "
                         "mlcal.labels.to_binary(y, pos_label=...)")
    return arr


def _found_labels(y) -> str:
    """The distinct labels of ``y`` for an error message: ``['maybe', 'no'] (2 labels)``."""
    from mlcal.labels import describe_labels

    return describe_labels(y)


def as_weights(sample_weight, n: int) -> np.ndarray:
    """Return sample weights (ones when None) as a float64 array of length ``n``."""
    if sample_weight is None:
        return np.ones(n)
    w = np.asarray(sample_weight, dtype=np.float64).reshape(-1)
    if w.shape[0] != n:
        raise ValueError(f"length mismatch: {n} scores but {w.shape[0]} sample weights")
    if not np.isfinite(w).all():
        raise ValueError("sample_weight contains non-finite values")
    if (w < 0).any():
        raise ValueError("sample_weight contains negative values")
    with np.errstate(over="ignore"):
        total = w.sum()
    if total <= 0:
        raise ValueError("sample_weight sums to zero")
    if not np.isfinite(total):
        raise ValueError("sample_weight sums to more than the largest float64 (about 1.8e308); "
                         "divide the weights by a common factor")
    return w


def check_fit_inputs(scores, y, sample_weight=None):
    """Validate a calibration set: finite scores, 0/1 labels of both classes, weights.

    Returns ``(scores, y, w)`` as float64 arrays. Observations with zero weight count for
    nothing, so both classes must carry positive weight.
    """
    s = as_scores(scores)
    z = as_labels(y, s.shape[0])
    w = as_weights(sample_weight, s.shape[0])
    # decided on the labels of positive-weight rows, not on float sums of weights
    carries = w > 0
    has_pos = bool(np.any(carries & (z == 1.0)))
    has_neg = bool(np.any(carries & (z == 0.0)))
    if not (has_pos and has_neg):
        only = "0" if not has_pos else "1"
        raise ValueError(f"y contains a single class (only label {only}); calibration needs "
                         "both positives and negatives")
    return s, z, w


def check_probabilities(p, *, name: str = "probabilities") -> np.ndarray:
    """Return finite probabilities in [0, 1] as a 1-D float64 array or raise ``ValueError``."""
    arr = as_scores(p, name=name)
    if arr.min() < 0.0 or arr.max() > 1.0:
        raise ValueError(f"{name} must lie in [0, 1]; found values in "
                         f"[{arr.min():.6g}, {arr.max():.6g}]")
    return arr


def check_binary_forecasts(y, p) -> tuple[np.ndarray, np.ndarray]:
    """Labels in {0, 1} and predicted probabilities of the positive class, checked as for
    every binary metric: ``(y, p)`` as arrays, or ``ValueError`` naming the problem."""
    prob = check_probabilities(p, name="predicted probabilities")
    return as_labels(y, prob.shape[0]), prob
