"""CalibratedModel: a fitted binary classifier followed by a calibration map."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import NotFittedError

from mlcal._validation import as_weights
# SCORE_SOURCES and read_scores are re-exported: callers import them from here
from mlcal.base_scores import (RAW_SOURCES, SCORE_SOURCES, check_not_labels,  # noqa: F401
                               classes_of, is_fitted, read_scores, resolve_source)
from mlcal.calibrators.base import BaseCalibrator
from mlcal.calibrators.registry import get_calibrator

class CalibratedModel(ClassifierMixin, BaseEstimator):
    """A fitted scikit-learn binary classifier plus a calibrator fitted on held-out data.

    The base model is never refitted: :meth:`fit` only reads its scores on the calibration set
    and fits a clone of ``calibrator`` to them.

    Parameters
    ----------
    base_estimator : fitted classifier
        A binary scikit-learn classifier or pipeline, or an XGBoost, LightGBM or CatBoost
        classifier (their scikit-learn API); must expose ``predict_proba`` or
        ``decision_function`` (or a margin, see ``score``) and have two classes.
    calibrator : BaseCalibrator or str, default="isotonic"
        An unfitted calibrator, or a registered method name (see
        :func:`mlcal.available_calibrators`).
    score : {"auto", "predict_proba", "decision_function", "margin"}, default="auto"
        Which base-model output to calibrate. ``"auto"`` takes ``predict_proba[:, 1]`` (the
        positive-class probability) when the model has it, else ``decision_function``.
        ``"margin"`` takes the raw log-odds: ``output_margin=True`` (XGBoost),
        ``raw_score=True`` (LightGBM), ``RawFormulaVal`` (CatBoost) or ``decision_function``
        (scikit-learn, e.g. HistGradientBoosting); see :mod:`mlcal.base_scores`. Methods that
        need scores in [0, 1] squash a decision function or margin with the logistic sigmoid,
        as the papers do; the squashing is recorded on the map (``map_.input_transform == "sigmoid"``).
    threshold : float, default=0.5
        ``predict`` returns the positive class when the calibrated probability is >= threshold.

    Attributes
    ----------
    calibrator_ : BaseCalibrator
        The fitted calibrator.
    score_source_ : str
        The base-model method actually read.
    classes_ : ndarray of shape (2,)
        The base model's classes; ``classes_[1]`` is the positive class.
    """

    def __init__(self, base_estimator=None, calibrator="isotonic", score: str = "auto",
                 threshold: float = 0.5):
        self.base_estimator = base_estimator
        self.calibrator = calibrator
        self.score = score
        self.threshold = threshold

    def _resolve_source(self) -> str:
        return resolve_source(self.base_estimator, self.score)

    def fit(self, X, y, sample_weight=None) -> "CalibratedModel":
        """Fit the calibrator on the base model's scores for a held-out calibration set.

        ``y`` holds the base model's class labels (``classes_``); ``classes_[1]`` is positive.
        """
        est = self.base_estimator
        if est is None:
            raise ValueError("base_estimator is required")
        if not is_fitted(est):
            raise ValueError("the base model is not fitted; CalibratedModel never trains it, "
                             "fit it on training data first")
        classes = classes_of(est)
        y = np.asarray(y).reshape(-1)
        unknown = ~np.isin(y, classes)
        if unknown.any():
            raise ValueError(f"y contains labels {np.unique(y[unknown])[:5].tolist()} that are not "
                             f"among the base model's classes {classes.tolist()}")
        source = self._resolve_source()
        cal = (get_calibrator(self.calibrator) if isinstance(self.calibrator, str)
               else clone(self.calibrator))
        if not isinstance(cal, BaseCalibrator):
            raise ValueError("calibrator must be an mlcal calibrator or a registered method name")
        if (source in RAW_SOURCES and cal.requires_unit_interval
                and cal.get_params().get("input_transform") == "auto"):
            cal.set_params(input_transform="sigmoid")
        scores = read_scores(est, X, source)
        check_not_labels(scores)
        w = None if sample_weight is None else as_weights(sample_weight, scores.shape[0])
        cal.fit(scores, (y == classes[1]).astype(np.float64), sample_weight=w)
        self.calibrator_ = cal
        self.score_source_ = source
        self.classes_ = classes
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "calibrator_"):
            raise NotFittedError("this CalibratedModel is not fitted yet; call "
                                 "fit(X_cal, y_cal) first")

    def predict_uncalibrated(self, X) -> np.ndarray:
        """The base model's raw score for the positive class (the calibrator's input)."""
        self._check_fitted()
        return read_scores(self.base_estimator, X, self.score_source_)

    def predict_proba(self, X) -> np.ndarray:
        """Calibrated class probabilities, shape (n, 2), columns ordered as ``classes_``."""
        scores = self.predict_uncalibrated(X)  # checks fitted first
        return self.calibrator_.predict_proba(scores)

    def predict(self, X) -> np.ndarray:
        """Class labels: ``classes_[1]`` where the calibrated probability >= ``threshold``."""
        p = self.predict_proba(X)[:, 1]
        return self.classes_[(p >= self.threshold).astype(np.int64)]
