"""What a base model says: positive-class probabilities, raw margins, or (refused) hard labels.

One place that knows how scikit-learn classifiers, XGBoost, LightGBM and CatBoost expose their
binary scores, so the calibrated model, the MLflow flavour, the CLI and the ONNX exporter read
them the same way.

Score sources
-------------
``predict_proba``
    ``predict_proba(X)[:, 1]``, the probability of ``classes_[1]``.
``decision_function``
    scikit-learn's ``decision_function(X)`` (one real score per row).
``margin``
    The raw log-odds of the positive class: ``predict(X, output_margin=True)`` for XGBoost,
    ``predict(X, raw_score=True)`` for LightGBM, ``predict(X, prediction_type="RawFormulaVal")``
    for CatBoost and ``decision_function`` for scikit-learn models (HistGradientBoosting's is
    its raw log-odds).
``auto``
    ``predict_proba`` when the model has it, else ``decision_function``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlcal._validation import NotBinaryError  # noqa: F401  (public here; shared with boosters)
from mlcal.base_models.boosters import BoosterClassifier

SCORE_SOURCES = ("auto", "predict_proba", "decision_function", "margin")
# sources whose values are real-valued scores (not probabilities)
RAW_SOURCES = ("decision_function", "margin")


class HardLabelError(ValueError):
    """The base model outputs class labels (0/1 only), not scores that can be calibrated."""


def final_estimator(est: Any) -> Any:
    """The last step of a (nested) scikit-learn Pipeline, else ``est`` itself."""
    while hasattr(est, "steps"):
        est = est.steps[-1][1]
    return est


def library_of(est: Any) -> str:
    """``"xgboost"``, ``"lightgbm"``, ``"catboost"`` or ``"sklearn"`` (anything else) for the
    final estimator of ``est``."""
    module = type(final_estimator(est)).__module__.split(".")[0]
    return module if module in ("xgboost", "lightgbm", "catboost") else "sklearn"


def is_fitted(est: Any) -> bool:
    """Whether ``est`` is trained (CatBoost has its own test; the rest follow scikit-learn)."""
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    if library_of(est) == "catboost" and not hasattr(est, "steps"):
        return bool(est.is_fitted())
    try:
        check_is_fitted(est)
    except NotFittedError:
        return False
    return True


def classes_of(est: Any) -> np.ndarray:
    """The model's classes (``[0, 1]`` when it does not say); raises NotBinaryError unless two."""
    classes = np.asarray(getattr(est, "classes_", [0, 1]))
    if classes.ndim != 1 or classes.shape[0] != 2:
        raise NotBinaryError(f"the base model has {classes.size} classes "
                             f"({classes.tolist()[:6]}); mlcal calibrates binary classifiers")
    return classes


def model_classes(est: Any) -> np.ndarray:
    """The model's classes (``[0, 1]`` when it does not say), any number of them."""
    classes = np.asarray(getattr(est, "classes_", [0, 1]))
    if classes.ndim != 1:
        raise ValueError(f"the base model's classes_ has shape {classes.shape}, expected 1-D")
    return classes


def read_score_matrix(est: Any, X, source: str, n_classes: int) -> np.ndarray:
    """The base model's (n, n_classes) float64 scores of a multiclass model: class
    probabilities (``predict_proba``) or one raw score per class (``decision_function`` or
    ``margin``), columns in ``classes_`` order."""
    scores = _raw_output(est, X, source)
    if scores.ndim != 2 or scores.shape[1] != n_classes:
        raise ValueError(f"the base model's {source} returned shape {scores.shape}; a model with "
                         f"{n_classes} classes needs one column per class")
    return scores


def _raw_output(est: Any, X, source: str) -> np.ndarray:
    """The base model's ``source`` output as float64, whatever its shape (one place that knows
    how each source is read; the callers check the shape they need)."""
    if source == "predict_proba":
        out = est.predict_proba(X)
    elif source == "margin":
        out = _margin(est, X)
    elif source == "decision_function":
        out = est.decision_function(X)
    else:
        raise ValueError(f"unknown score source {source!r}; expected one of {SCORE_SOURCES}")
    return np.asarray(out, dtype=np.float64)


def _is_booster_classifier(est: Any) -> bool:
    return isinstance(est, BoosterClassifier)


def has_margin(est: Any) -> bool:
    """Whether :func:`read_scores` can read raw log-odds from ``est``."""
    return (library_of(est) != "sklearn" or hasattr(est, "decision_function")
            or _is_booster_classifier(final_estimator(est)))


def resolve_source(est: Any, score: str) -> str:
    """The concrete score source for ``score`` (one of :data:`SCORE_SOURCES`)."""
    if score not in SCORE_SOURCES:
        raise ValueError(f"score must be one of {SCORE_SOURCES}, got {score!r}")
    if score == "margin":
        if not has_margin(est):
            raise ValueError(f"{type(final_estimator(est)).__name__} exposes no raw margin "
                             "(no decision_function); use score='predict_proba'")
        return score
    if score != "auto":
        if not hasattr(est, score):
            raise ValueError(f"the base model has no {score} method")
        return score
    for name in ("predict_proba", "decision_function"):
        if hasattr(est, name):
            return name
    raise ValueError("the base model has neither predict_proba nor decision_function")


def _margin(est: Any, X) -> np.ndarray:
    lib = library_of(est)
    if _is_booster_classifier(est):
        return est.margin(X)
    if lib == "sklearn" and not _is_booster_classifier(final_estimator(est)):
        return est.decision_function(X)
    if hasattr(est, "steps"):
        # run the preprocessing steps, then ask the booster for its margin
        from sklearn.pipeline import Pipeline

        if not isinstance(est, Pipeline):
            raise ValueError(f"cannot read the margin of {type(est).__name__}")
        return _margin(est.steps[-1][1], est[:-1].transform(X))
    if lib == "xgboost":
        return est.predict(X, output_margin=True)
    if lib == "lightgbm":
        return est.predict(X, raw_score=True)
    return est.predict(X, prediction_type="RawFormulaVal")  # catboost


def read_scores(est: Any, X, source: str) -> np.ndarray:
    """The base model's float64 score for the positive class from ``source``.

    Raises
    ------
    NotBinaryError
        The output has more than one score per row beyond the binary ``predict_proba`` layout.
    """
    scores = _raw_output(est, X, source)
    if source == "predict_proba":
        if scores.ndim != 2 or scores.shape[1] != 2:
            raise NotBinaryError(f"the base model's predict_proba returned shape {scores.shape}; "
                                 "mlcal calibrates binary classifiers (two columns)")
        return scores[:, 1].copy()
    if scores.ndim == 2 and scores.shape[1] == 1:
        scores = scores[:, 0]
    if scores.ndim != 1:
        raise NotBinaryError(f"the base model's {source} returned shape {scores.shape}; "
                             "mlcal calibrates binary classifiers (one score per row)")
    return scores


_LABELS_HINT = ("calibrating labels would give a two-value map. Use a model output that holds "
                "the positive-class probability or a raw score (for MLflow models: log it with "
                "a flavour mlcal reads natively - sklearn, xgboost, lightgbm, catboost - or "
                "name the probability/score column with output_column / --output-column)")


def check_not_labels(scores: np.ndarray, what: str = "the base model", *,
                     hint: str = _LABELS_HINT) -> None:
    """Refuse scores that are hard class labels: every value 0 or 1 (or an integer dtype).

    Calibrating labels gives a two-value map and a model that ranks worse than the base; a
    calibration metric of labels is as meaningless: the silent wrong answers this check exists
    to prevent. ``hint`` ends the message (what the caller can do about it).
    """
    s = np.asarray(scores)
    if s.size == 0:
        return
    if s.dtype.kind in "iub" or np.isin(s, (0.0, 1.0)).all():
        values = np.unique(s)[:4].tolist()
        raise HardLabelError(f"{what} outputs hard class labels (values {values}), not "
                             f"probabilities or scores; {hint}")


def naive_probability(scores, source: str) -> np.ndarray:
    """The base model's own reading of its scores as probabilities: probabilities as they are,
    raw scores (``source`` in :data:`RAW_SOURCES`) squashed with the logistic sigmoid.

    The sigmoid is the maps' own input transform (:func:`mlcal.maps.apply_input_transform`),
    so "before calibration" is exactly the probability a sigmoid-input map starts from.
    """
    from mlcal.maps import apply_input_transform

    s = np.asarray(scores, dtype=np.float64)
    return apply_input_transform(s, "sigmoid") if source in RAW_SOURCES else s


def naive_probability_matrix(scores, source: str) -> np.ndarray:
    """The multiclass counterpart of :func:`naive_probability`: an (n, K) probability matrix
    as it is, one raw score per class (``source`` in :data:`RAW_SOURCES`) read as logits and
    normalised with the softmax (the uncalibrated model's own probabilities)."""
    s = np.asarray(scores, dtype=np.float64)
    if source not in RAW_SOURCES:
        return s
    e = np.exp(s - np.max(s, axis=1, keepdims=True))   # shifted: no overflow
    return e / np.sum(e, axis=1, keepdims=True)
