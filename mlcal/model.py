"""CalibratedModel: a fitted classifier (binary or multiclass) followed by a calibration map."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import NotFittedError

from mlcal._validation import as_weights
# SCORE_SOURCES and read_scores are re-exported: callers import them from here
from mlcal.base_models.scores import (RAW_SOURCES, SCORE_SOURCES, check_not_labels,  # noqa: F401
                               classes_of, is_fitted, model_classes, read_score_matrix,
                               read_scores, resolve_source)
from mlcal.calibrators._params import short_repr
from mlcal.calibrators.base import BaseCalibrator
from mlcal.calibrators.catalog import get_calibrator
from mlcal.calibrators.multiclass import (MissingClassError, MulticlassCalibrator, OneVsRest,
                                          TooFewClassesError)
from mlcal.calibrators.multiclass_catalog import multiclass_calibrator
from mlcal.labels import class_indices, positive_indicator
from mlcal.maps.segment_keys import SegmentKeyError, select_segment_columns


def _reads_frames(est) -> bool:
    """Whether a base model without ``feature_names_in_`` still reads DataFrames by column
    name (a native Booster wrapper, or an MLflow pyfunc scorer: an instance exists only if
    its module was imported)."""
    import sys

    from mlcal.base_models.boosters import BoosterClassifier

    if isinstance(est, BoosterClassifier):
        return True
    scorer_module = sys.modules.get("mlcal.mlflow.base_models")
    return scorer_module is not None and isinstance(est, scorer_module.PyfuncScorer)


class SegmentedMulticlassError(NotImplementedError):
    """``segment_columns`` was given for a multiclass base model: segmented calibration is
    binary only (the segmented map wraps one binary map)."""


class FeatureColumnsError(ValueError):
    """``feature_columns`` do not fit the calibrator: given for a calibrator that reads the
    score alone, together with ``segment_columns``, for a multiclass model, or for a base
    model whose score is not a probability (multicalibration reads probabilities)."""


def _is_multicalibration(c) -> bool:
    """Whether ``c`` names or is a :class:`~mlcal.multicalibration.Multicalibration` (the one
    calibrator that reads feature columns); the module is looked up, never imported, for an
    object (an instance implies it is loaded)."""
    import sys

    if isinstance(c, str):
        return c == "multicalibration"
    module = sys.modules.get("mlcal.multicalibration")
    return module is not None and isinstance(c, module.Multicalibration)


class CalibratedModel(ClassifierMixin, BaseEstimator):
    """A fitted scikit-learn classifier plus a calibrator fitted on held-out data.

    The base model is never refitted: :meth:`fit` only reads its scores on the calibration set
    and fits a clone of ``calibrator`` to them.

    Multiclass (3 or more classes): the calibrator takes the base model's whole score matrix
    (``predict_proba``, or one ``decision_function``/margin column per class, read as
    logits). ``calibrator`` is then a multiclass method name (``"auto"``, ``"temperature"``,
    ``"vector"``, ``"matrix"``), a :class:`~mlcal.calibrators.multiclass.MulticlassCalibrator`,
    or another binary method name / calibrator, which is applied one-vs-rest
    (:class:`~mlcal.calibrators.multiclass.OneVsRest`). ``"auto"`` is
    :class:`~mlcal.calibrators.multiclass_auto.MulticlassAuto` there. ``predict`` returns the class of
    highest calibrated probability (``threshold`` is not used).

    Parameters
    ----------
    base_estimator : fitted classifier
        A scikit-learn classifier or pipeline, or an XGBoost, LightGBM or CatBoost
        classifier (their scikit-learn API); must expose ``predict_proba`` or
        ``decision_function`` (or a margin, see ``score``) and have at least two classes.
    calibrator : BaseCalibrator, MulticlassCalibrator or str, default="auto"
        An unfitted calibrator, or a registered method name (see
        :func:`mlcal.available_calibrators`; multiclass models also take the names in
        :data:`mlcal.calibrators.multiclass.MULTICLASS_METHODS`). The default, ``"auto"``,
        chooses the method by cross-validated log loss (binary:
        :class:`~mlcal.calibrators.auto.AutoCalibrator`; multiclass: among temperature,
        vector and matrix scaling and one-vs-rest ``auto``).
    score : {"auto", "predict_proba", "decision_function", "margin"}, default="auto"
        Which base-model output to calibrate. ``"auto"`` takes ``predict_proba[:, 1]`` (the
        positive-class probability) when the model has it, else ``decision_function``.
        ``"margin"`` takes the raw log-odds: ``output_margin=True`` (XGBoost),
        ``raw_score=True`` (LightGBM), ``RawFormulaVal`` (CatBoost) or ``decision_function``
        (scikit-learn, e.g. HistGradientBoosting); see :mod:`mlcal.base_models.scores`. Methods that
        need scores in [0, 1] squash a decision function or margin with the logistic sigmoid,
        as the papers do; the squashing is recorded on the map (``map_.input_transform == "sigmoid"``).
    threshold : float, default=0.5
        ``predict`` returns the positive class when the calibrated probability is >= threshold.
    segment_columns : list of str, optional
        Binary models only: columns of the input DataFrame that name each row's segment; the
        calibrator is then a :class:`~mlcal.calibrators.segmented.SegmentedCalibrator`
        (``calibrator`` is its shared method, a binary calibrator, or a
        ``SegmentedCalibrator``). The base model gets the columns it was fitted on when it
        records them (``feature_names_in_``: a segment column the base model uses is passed
        to it too), else every column except the segment columns. See docs/segments.md.
    feature_columns : list of str, optional
        Binary models only: columns of the input DataFrame that a
        :class:`~mlcal.multicalibration.Multicalibration` calibrator reads besides the score
        (numeric, or categorical: text, boolean, object or category dtype); ``calibrator`` is
        then a ``Multicalibration`` or the name ``"multicalibration"``. The base model gets its
        columns as with ``segment_columns`` (a feature column it uses is passed to it too).
        Unlike segment columns these are not segment keys (a numeric feature may take a
        different value on every row), so they are not used for per-segment reports. Needs
        a base model whose score is a probability (``predict_proba``). See
        docs/multicalibration.md ("In a model").

    Attributes
    ----------
    calibrator_ : BaseCalibrator or MulticlassCalibrator
        The fitted calibrator.
    score_source_ : str
        The base-model method actually read.
    classes_ : ndarray of shape (K,)
        The base model's classes (any label type); for a binary model ``classes_[1]`` is the
        positive class.
    """

    def __init__(self, base_estimator=None, calibrator="auto", score: str = "auto",
                 threshold: float = 0.5, segment_columns=None, feature_columns=None):
        self.base_estimator = base_estimator
        self.calibrator = calibrator
        self.score = score
        self.threshold = threshold
        self.segment_columns = segment_columns
        self.feature_columns = feature_columns

    # -- columns the calibrator reads besides the score ------------------------------------
    @staticmethod
    def _column_list(cols, what: str) -> list[str] | None:
        if cols is None:
            return None
        if isinstance(cols, str):
            cols = [cols]
        cols = list(cols)
        if not cols or not all(isinstance(c, str) and c for c in cols) or \
                len(set(cols)) != len(cols):
            raise ValueError(f"{what} must be a non-empty list of distinct column "
                             f"names, got {cols!r}")
        return cols

    def _segment_names(self) -> list[str] | None:
        return self._column_list(self.segment_columns, "segment_columns")

    def _feature_names(self) -> list[str] | None:
        names = self._column_list(self.feature_columns, "feature_columns")
        if names is not None and self.segment_columns is not None:
            raise FeatureColumnsError("give segment_columns (a SegmentedCalibrator's keys) or "
                                      "feature_columns (a Multicalibration's features), not "
                                      "both")
        return names

    @property
    def calibrator_columns(self) -> list[str] | None:
        """The columns of the input frame the calibrator reads besides the score: the
        segment columns or the feature columns (None when it reads the score alone)."""
        return self._segment_names() or self._feature_names()

    def _split_columns(self, X):
        """``(base input, calibrator columns frame)`` of a DataFrame ``X`` (``(X, None)``
        when the calibrator reads the score alone)."""
        segments = self._segment_names()
        names = segments or self._feature_names()
        if names is None:
            return X, None
        import pandas as pd

        what = "segment_columns" if segments else "feature_columns"
        if not isinstance(X, pd.DataFrame):
            error = SegmentKeyError if segments else ValueError
            raise error(f"{what}={names}: X must be a pandas DataFrame "
                        f"holding those columns, got {type(X).__name__}")
        if segments:
            select_segment_columns(X, names, what="X")   # names the missing ones
        else:
            absent = [c for c in names if c not in X.columns]
            if absent:
                raise ValueError(f"X has no feature column(s) {absent} (feature_columns="
                                 f"{names})")
        used = getattr(self.base_estimator, "feature_names_in_", None)
        if used is not None:   # exactly the base model's columns (segment ones included)
            absent = [str(c) for c in used if str(c) not in X.columns]
            if absent:
                raise ValueError(f"column(s) {absent[:10]} of the base model are missing "
                                 "from X")
            base_X = X[[str(c) for c in used]]
        else:
            base_X = X.drop(columns=names)
            if not _reads_frames(self.base_estimator):
                base_X = base_X.to_numpy()   # fitted without column names: give it an array
        return base_X, X[names]

    def _resolve_source(self) -> str:
        return resolve_source(self.base_estimator, self.score)

    def fit(self, X, y, sample_weight=None) -> "CalibratedModel":
        """Fit the calibrator on the base model's scores for a held-out calibration set.

        ``y`` holds the base model's class labels (``classes_``); for a binary model
        ``classes_[1]`` is positive. A multiclass model needs every class in ``y``
        (:class:`~mlcal.calibrators.multiclass.MissingClassError` otherwise).
        """
        est = self.base_estimator
        if est is None:
            raise ValueError("base_estimator is required")
        if not is_fitted(est):
            raise ValueError("the base model is not fitted; CalibratedModel never trains it, "
                             "fit it on training data first")
        classes = model_classes(est)
        if classes.shape[0] < 2:
            raise TooFewClassesError(f"the base model has {classes.shape[0]} class(es); "
                                     "calibration needs at least 2")
        if classes.shape[0] > 2:
            if self._segment_names() is not None:
                raise SegmentedMulticlassError(
                    f"segment_columns is supported for binary models only; this base model has "
                    f"{classes.shape[0]} classes")
            if self._feature_names() is not None or _is_multicalibration(self.calibrator):
                raise FeatureColumnsError(
                    f"multicalibration (feature_columns) is supported for binary models only; "
                    f"this base model has {classes.shape[0]} classes")
            return self._fit_multiclass(est, classes, X, y, sample_weight)
        classes = classes_of(est)
        y01 = positive_indicator(y, classes, name="y")
        source = self._resolve_source()
        if self._feature_names() is not None or _is_multicalibration(self.calibrator):
            return self._fit_multicalibration(est, classes, source, X, y01, sample_weight)
        X, segments = self._split_columns(X)
        cal = self._binary_calibrator(segments is not None)
        shared = cal.method if segments is not None else cal
        if isinstance(shared, str):   # a segmented calibrator's shared method given by name
            shared = get_calibrator(shared)
        if (source in RAW_SOURCES and isinstance(shared, BaseCalibrator)
                and shared.requires_unit_interval
                and shared.get_params().get("input_transform") == "auto"):
            shared.set_params(input_transform="sigmoid")
            if segments is not None:
                cal.set_params(method=shared)
        scores = read_scores(est, X, source)
        check_not_labels(scores)
        w = None if sample_weight is None else as_weights(sample_weight, scores.shape[0])
        if segments is not None:
            cal.fit(scores, y01, segments, sample_weight=w)
        else:
            cal.fit(scores, y01, sample_weight=w)
        self.calibrator_ = cal
        self.score_source_ = source
        self.classes_ = classes
        return self

    def _fit_multicalibration(self, est, classes, source, X, y01,
                              sample_weight) -> "CalibratedModel":
        """Fit a Multicalibration on the base model's probabilities and the feature columns
        (none: corrections along the score only)."""
        from mlcal.multicalibration import Multicalibration

        c = self.calibrator
        if not _is_multicalibration(c):
            raise FeatureColumnsError(
                f"feature_columns are read by a Multicalibration calibrator; "
                f"calibrator={short_repr(c)} does not read them (pass "
                "calibrator=mlcal.Multicalibration(...) or \"multicalibration\", or drop "
                "feature_columns)")
        if source != "predict_proba":
            raise FeatureColumnsError(
                f"multicalibration reads the base model's probabilities, but its score source "
                f"is {source!r}; use a base model with predict_proba and score='auto' or "
                "'predict_proba'")
        if self._segment_names() is not None:
            raise FeatureColumnsError(
                "a Multicalibration reads feature_columns (numeric or categorical), not "
                "segment_columns (a SegmentedCalibrator's keys); pass the columns as "
                "feature_columns")
        cal = Multicalibration() if isinstance(c, str) else clone(c)
        X, features = self._split_columns(X)
        scores = read_scores(est, X, source)
        check_not_labels(scores)
        w = None if sample_weight is None else as_weights(sample_weight, scores.shape[0])
        cal.fit(scores, y01, features, sample_weight=w)
        self.calibrator_ = cal
        self.score_source_ = source
        self.classes_ = classes
        return self

    def _binary_calibrator(self, segmented: bool):
        """An unfitted copy of the binary (or segmented) calibrator to fit."""
        from mlcal.calibrators.segmented import SegmentedCalibrator

        c = self.calibrator
        if segmented:
            if isinstance(c, SegmentedCalibrator):
                return clone(c)
            if isinstance(c, str) or isinstance(c, BaseCalibrator):
                return SegmentedCalibrator(c if isinstance(c, str) else clone(c))
        elif isinstance(c, SegmentedCalibrator):
            raise ValueError("a SegmentedCalibrator needs segment_columns (the columns of X "
                             "that name each row's segment)")
        cal = get_calibrator(c) if isinstance(c, str) else clone(c)
        if not isinstance(cal, BaseCalibrator):
            raise ValueError("calibrator must be an mlcal calibrator or a registered method name")
        return cal

    def _fit_multiclass(self, est, classes, X, y, sample_weight) -> "CalibratedModel":
        yi = class_indices(y, classes, name="y")
        source = self._resolve_source()
        cal = self.calibrator
        if isinstance(cal, str):
            cal = multiclass_calibrator(cal)
        elif isinstance(cal, BaseCalibrator):
            cal = OneVsRest(clone(cal))
        elif isinstance(cal, MulticlassCalibrator):
            cal = clone(cal)
        else:
            raise ValueError("calibrator must be an mlcal calibrator or a registered method name")
        cal.set_params(input_kind="logits" if source in RAW_SOURCES else "probabilities")
        scores = read_score_matrix(est, X, source, classes.shape[0])
        check_not_labels(scores)
        w = as_weights(sample_weight, scores.shape[0])
        present = np.zeros(classes.shape[0], dtype=bool)
        present[yi[w > 0]] = True
        if not present.all():   # named here by label; the calibrator only knows indices
            raise MissingClassError(f"class(es) {classes[~present][:10].tolist()} of the base "
                                    "model never occur in y (with positive weight); every "
                                    "class needs calibration rows")
        cal.fit(scores, yi, sample_weight=w)
        self.calibrator_ = cal
        self.score_source_ = source
        self.classes_ = classes
        return self

    @property
    def _multicalibrated(self) -> bool:
        """Whether the fitted calibrator is a Multicalibration (a map over the score and
        feature columns, with no single curve over the score)."""
        return _is_multicalibration(getattr(self, "calibrator_", None))

    @property
    def _multiclass(self) -> bool:
        return isinstance(getattr(self, "calibrator_", None), MulticlassCalibrator)

    def _check_fitted(self) -> None:
        if not hasattr(self, "calibrator_"):
            raise NotFittedError("this CalibratedModel is not fitted yet; call "
                                 "fit(X_cal, y_cal) first")

    def predict_uncalibrated(self, X) -> np.ndarray:
        """The base model's raw score for the positive class (the calibrator's input); for a
        multiclass model the (n, K) score matrix."""
        self._check_fitted()
        if self._multiclass:
            return read_score_matrix(self.base_estimator, X, self.score_source_,
                                     self.classes_.shape[0])
        X, _ = self._split_columns(X)
        return read_scores(self.base_estimator, X, self.score_source_)

    def predict_calibrated(self, X) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, probabilities)``: the base model's raw scores and the calibrated
        probabilities (binary: of the positive class, shape (n,); multiclass: (n, K))."""
        scores = self.predict_uncalibrated(X)  # checks fitted first
        if self._multiclass:
            return scores, self.calibrator_.predict_proba(scores)
        _, columns = self._split_columns(X)
        if columns is not None or _is_multicalibration(self.calibrator_):
            return scores, self.calibrator_.predict(scores, columns)
        return scores, self.calibrator_.predict(scores)

    def predict_proba(self, X) -> np.ndarray:
        """Calibrated class probabilities, shape (n, K), columns ordered as ``classes_``; rows
        sum to 1."""
        _, p = self.predict_calibrated(X)
        return p if self._multiclass else np.column_stack([1.0 - p, p])

    def predict(self, X) -> np.ndarray:
        """Class labels: ``classes_[1]`` where the calibrated probability >= ``threshold``; for
        a multiclass model the class of highest calibrated probability."""
        if self._multiclass:   # (checks fitted first)
            return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
        p = self.predict_proba(X)[:, 1]
        return self.classes_[(p >= self.threshold).astype(np.int64)]
