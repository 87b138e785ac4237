"""Native XGBoost and LightGBM ``Booster`` objects as binary classifiers.

``xgb.train`` and ``lgb.train`` return a ``Booster``, not a scikit-learn estimator, and
``mlflow.xgboost`` / ``mlflow.lightgbm`` load such models back as Boosters.
:class:`BoosterClassifier` gives them ``predict_proba`` (the positive-class probability of a binary logistic objective) and
a raw margin, so :class:`~mlcal.CalibratedModel` reads them like any other base model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from mlcal._validation import NotBinaryError

# objectives whose prediction is the probability of class 1
_XGB_BINARY = ("binary:logistic",)
_LGB_BINARY = ("binary", "cross_entropy", "xentropy")


def _booster_library(booster: Any) -> str:
    module = type(booster).__module__.split(".")[0]
    if module not in ("xgboost", "lightgbm") or type(booster).__name__ != "Booster":
        raise TypeError(f"expected an xgboost or lightgbm Booster, got {type(booster).__name__}")
    return module


def booster_objective(booster: Any) -> str:
    """The training objective recorded in ``booster``."""
    if _booster_library(booster) == "xgboost":
        import json

        return json.loads(booster.save_config())["learner"]["objective"]["name"]
    return str(booster.params.get("objective", ""))


def is_booster(obj: Any) -> bool:
    """Whether ``obj`` is a native xgboost or lightgbm Booster."""
    try:
        _booster_library(obj)
    except TypeError:
        return False
    return True


class BoosterClassifier(BaseEstimator):
    """A trained binary XGBoost/LightGBM ``Booster`` with the scikit-learn classifier API.

    Parameters
    ----------
    booster : xgboost.Booster or lightgbm.Booster
        Trained with a binary logistic objective (``binary:logistic`` / ``binary``); any other
        objective is refused, since its output is not a positive-class probability.

    Attributes
    ----------
    classes_ : ndarray ``[0, 1]``
    library_ : str
        ``"xgboost"`` or ``"lightgbm"``.
    """

    def __init__(self, booster: Any = None):
        self.booster = booster
        self.library_ = _booster_library(booster)
        objective = booster_objective(booster)
        allowed = _XGB_BINARY if self.library_ == "xgboost" else _LGB_BINARY
        if objective not in allowed:
            raise NotBinaryError(f"the {self.library_} Booster was trained with objective "
                                 f"{objective!r}; mlcal calibrates binary classifiers "
                                 f"(objective {' or '.join(map(repr, allowed))})")
        self.classes_ = np.array([0, 1])

    def __sklearn_is_fitted__(self) -> bool:
        return True

    def fit(self, *args, **kwargs):
        raise TypeError("BoosterClassifier wraps an already trained Booster and is never fitted")

    def _predict(self, X, margin: bool) -> np.ndarray:
        if self.library_ == "xgboost":
            import xgboost

            out = self.booster.predict(xgboost.DMatrix(X), output_margin=margin)
        else:
            out = self.booster.predict(X, raw_score=margin)
        return np.asarray(out, dtype=np.float64).reshape(-1)

    def predict_proba(self, X) -> np.ndarray:
        """``[1 - p, p]`` with p the booster's probability of class 1."""
        p = self._predict(X, margin=False)
        return np.column_stack([1.0 - p, p])

    def margin(self, X) -> np.ndarray:
        """The raw log-odds of class 1."""
        return self._predict(X, margin=True)

    def predict(self, X) -> np.ndarray:
        """Class 1 where the booster's probability is >= 0.5."""
        return (self._predict(X, margin=False) >= 0.5).astype(np.int64)
