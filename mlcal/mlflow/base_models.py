"""The base model inside an ``mlcal`` MLflow artifact, and the adapter for pyfunc base models.

A calibrated artifact nests its base model as a complete MLflow model in ``base_model/``:

* an XGBoost, LightGBM or CatBoost classifier (or a native ``Booster``) is saved with its own
  MLflow flavour (``mlflow.xgboost`` / ``mlflow.lightgbm`` / ``mlflow.catboost``), any other
  scikit-learn compatible classifier with ``mlflow.sklearn`` (skops, trusting the types of the
  caller's in-memory model); both are loaded back as the native estimator;
* any other MLflow model is accepted through :class:`PyfuncScorer`, which reads one score or
  probability column of the model's pyfunc output; its model directory is copied unchanged.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Sequence

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.metaestimators import available_if

SCORE_KINDS = ("probability", "score")
BASE_MODEL_DIR = "base_model"


class PyfuncScorer(BaseEstimator):
    """Use any MLflow model whose pyfunc output holds a score as the base of a CalibratedModel.

    The wrapped model's ``predict`` output is reduced to one number per row:

    * a DataFrame: the column ``output_column`` (or its only column);
    * a dict of arrays (e.g. an ONNX model's outputs): the entry ``output_column``;
    * a 2-D array: column ``output_column`` if it is an int, else column 1 when there are two
      columns (``predict_proba`` layout), else the only column;
    * a 1-D array or Series: as is.

    A model saved in a flavour mlcal reads natively (sklearn, xgboost, lightgbm, catboost)
    with no ``output_column`` is read through that flavour instead: its pyfunc ``predict``
    returns class labels, which are never calibrated.

    With ``kind="probability"`` the adapter exposes ``predict_proba`` (values must lie in
    [0, 1]); with ``kind="score"`` it exposes ``decision_function`` (any real score; calibrators
    that need [0, 1] squash it with a sigmoid). ``CalibratedModel(PyfuncScorer(...))`` then works
    like any scikit-learn base model, and :func:`mlcal.mlflow.save_model` nests the MLflow model
    as it is.

    Parameters
    ----------
    model_uri : str
        Any MLflow model URI (``runs:/``, ``models:/``, a local directory, ...).
    output_column : str or int, optional
        Which output holds the positive-class score; required when the output has several
        named columns.
    kind : {"probability", "score"}, default="probability"
    classes : sequence of two labels, default=(0, 1)
        The labels the output refers to; ``classes[1]`` is the positive class.

    Examples
    --------
    >>> base = PyfuncScorer("models:/churn-xgb/3", output_column="p_churn")  # doctest: +SKIP
    >>> cal = CalibratedModel(base, "isotonic").fit(X_cal, y_cal)  # doctest: +SKIP
    """

    def __init__(self, model_uri: str, output_column: str | int | None = None,
                 kind: str = "probability", classes: Sequence[Any] = (0, 1)):
        if kind not in SCORE_KINDS:
            raise ValueError(f"kind must be one of {SCORE_KINDS}, got {kind!r}")
        classes_arr = np.asarray(list(classes))
        if classes_arr.shape != (2,) or classes_arr[0] == classes_arr[1]:
            raise ValueError(f"classes must be two distinct labels, got {list(classes)!r}")
        self.model_uri = str(model_uri)
        self.output_column = output_column
        self.kind = kind
        self.classes = classes
        self.classes_ = classes_arr
        self.local_path = _local_copy(self.model_uri)
        import mlflow.pyfunc

        self.model_ = mlflow.pyfunc.load_model(self.local_path)
        # a flavour whose pyfunc predicts labels (sklearn, xgboost, ...) is read natively
        self.native_ = (_load_native(self.local_path, self.model_.metadata.flavors)
                        if output_column is None else None)

    # sklearn's check_is_fitted: the wrapped model is always trained already
    def __sklearn_is_fitted__(self) -> bool:
        return True

    def fit(self, *args, **kwargs):
        raise TypeError("PyfuncScorer wraps an already trained MLflow model and is never fitted")

    def __repr__(self) -> str:
        return (f"PyfuncScorer({self.model_uri!r}, output_column={self.output_column!r}, "
                f"kind={self.kind!r})")

    def scores(self, X) -> np.ndarray:
        """One float per row: the selected output of the wrapped model's ``predict``, or, for
        a model in a flavour mlcal reads natively (and no ``output_column``), its
        positive-class probability (``kind="probability"``) or raw margin (``kind="score"``)."""
        if self.native_ is not None:
            from mlcal.base_models.scores import has_margin, read_scores

            if self.kind == "probability":
                if not hasattr(self.native_, "predict_proba"):
                    raise ValueError(f"{type(self.native_).__name__} has no predict_proba; "
                                     "use kind='score' (its decision function)")
                return read_scores(self.native_, X, "predict_proba")
            return read_scores(self.native_, X, "margin" if has_margin(self.native_)
                               else "decision_function")
        return extract_scores(self.model_.predict(X), self.output_column)

    # exactly one of the two score methods exists, so CalibratedModel(score="auto") picks it
    @available_if(lambda self: self.kind == "probability")
    def predict_proba(self, X) -> np.ndarray:
        """``[1 - p, p]`` for the selected probability output (``kind="probability"``)."""
        p = self.scores(X)
        if p.size and (p.min() < 0.0 or p.max() > 1.0):
            raise ValueError(
                f"the base model's output {self.output_column!r} has values in "
                f"[{p.min():.6g}, {p.max():.6g}], not probabilities; use kind='score'")
        return np.column_stack([1.0 - p, p])

    @available_if(lambda self: self.kind == "score")
    def decision_function(self, X) -> np.ndarray:
        """The selected score output (``kind="score"``)."""
        return self.scores(X)


def extract_scores(output: Any, column: str | int | None) -> np.ndarray:
    """Reduce a pyfunc ``predict`` output to a 1-D float64 score per row (see PyfuncScorer)."""
    import pandas as pd

    if isinstance(output, pd.DataFrame):
        if column is None:
            if output.shape[1] != 1:
                raise ValueError("the base model returns columns "
                                 f"{list(output.columns)}; say which holds the score with "
                                 "output_column")
            column = output.columns[0]
        if isinstance(column, int) and column not in output.columns:
            output = output.iloc[:, column]
        elif column not in output.columns:
            raise ValueError(f"the base model's output has no column {column!r}; "
                             f"columns are {list(output.columns)}")
        else:
            output = output[column]
    elif isinstance(output, dict):
        if column is None and len(output) == 1:
            column = next(iter(output))
        if column not in output:
            raise ValueError(f"the base model's output has no entry {column!r}; "
                             f"entries are {list(output)}")
        output = output[column]
    raw = np.asarray(output)
    if raw.dtype.kind in "iubOUS":
        from mlcal.base_models.scores import HardLabelError

        raise HardLabelError(
            f"the base model's output{'' if column is None else f' {column!r}'} holds class "
            f"labels (dtype {raw.dtype}), not "
            "probabilities or scores; load the model through a flavour mlcal reads natively "
            "(sklearn, xgboost, lightgbm, catboost) or name a probability/score column with "
            "output_column")
    arr = np.asarray(raw, dtype=np.float64)
    if arr.ndim == 2:
        if isinstance(column, int):
            arr = arr[:, column]
        elif arr.shape[1] == 2:
            arr = arr[:, 1]  # predict_proba layout: column 1 is the positive class
        elif arr.shape[1] == 1:
            arr = arr[:, 0]
        else:
            raise ValueError(f"the base model returns an array of shape {arr.shape}; give "
                             "output_column as the index of the score column")
    if arr.ndim != 1:
        raise ValueError(f"the base model's output has shape {arr.shape}; expected one score "
                         "per row")
    return arr


NATIVE_READ_FLAVORS = ("sklearn", "xgboost", "lightgbm", "catboost")


def _load_native(path: str, flavors: dict):
    """The native classifier of a model logged in a flavour from NATIVE_READ_FLAVORS, else None."""
    import importlib

    from mlcal.base_models.boosters import BoosterClassifier, is_booster

    for flavor in NATIVE_READ_FLAVORS:
        if flavor in flavors:
            model = importlib.import_module(f"mlflow.{flavor}").load_model(path)
            if is_booster(model):
                model = BoosterClassifier(model)
            if not (hasattr(model, "predict_proba") or hasattr(model, "decision_function")):
                raise ValueError(f"the {flavor} model at {path} ({type(model).__name__}) is not "
                                 "a classifier (no predict_proba or decision_function); name "
                                 "its score column with output_column")
            return model
    return None


def load_base_estimator(model_uri: str, *, output_column: str | int | None = None,
                        kind: str = "probability", classes: Sequence[Any] = (0, 1)):
    """The best reader of an MLflow model's positive-class score, and its ``ModelInfo``.

    A model logged with ``mlflow.sklearn``, ``mlflow.xgboost``, ``mlflow.lightgbm`` or
    ``mlflow.catboost`` is loaded natively (a ``Booster`` is wrapped in
    :class:`~mlcal.base_models.boosters.BoosterClassifier`), so its probabilities are read rather than the
    hard labels its pyfunc ``predict`` returns. Any other model, or any model when
    ``output_column`` is given, is read through :class:`PyfuncScorer`, which refuses label
    outputs (:class:`mlcal.base_models.scores.HardLabelError`).
    """
    import mlflow.models

    info = mlflow.models.get_model_info(model_uri)
    if output_column is None and any(f in info.flavors for f in NATIVE_READ_FLAVORS):
        return _load_native(_local_copy(model_uri), info.flavors), info
    return PyfuncScorer(model_uri, output_column=output_column, kind=kind,
                        classes=classes), info


def _local_copy(model_uri: str) -> str:
    """A local directory holding the model: the directory itself, or a fresh download."""
    if os.path.isdir(model_uri):
        return os.path.abspath(model_uri)
    from mlflow.tracking.artifact_utils import _download_artifact_from_uri

    return _download_artifact_from_uri(model_uri,
                                       output_path=tempfile.mkdtemp(prefix="mlcal-base-"))


# -- nesting inside an mlcal artifact ----------------------------------------------------------
BASE_FORMATS = ("auto", "native", "skops", "cloudpickle", "pickle")
_NATIVE_FLAVORS = ("xgboost", "lightgbm", "catboost")
_BASE_FLAVORS = ("sklearn", *_NATIVE_FLAVORS)


def trusted_types(estimator: Any) -> list[str]:
    """The types skops would refuse to load in ``estimator``'s own serialisation.

    They come from the caller's in-memory model (which the caller already runs), so trusting
    them for that model is what the caller implicitly asks for; an artifact from elsewhere is
    never scanned this way.
    """
    import skops.io

    return sorted(skops.io.get_untrusted_types(data=skops.io.dumps(estimator)))


def base_flavor_for(estimator: Any, base_format: str = "auto") -> str:
    """The MLflow flavour that nests ``estimator`` for ``base_format``
    (see :func:`save_base_model`)."""
    from mlcal.base_models.scores import library_of

    if base_format not in BASE_FORMATS:
        raise ValueError(f"base_format must be one of {BASE_FORMATS}, got {base_format!r}")
    from mlcal.base_models.boosters import BoosterClassifier

    if isinstance(estimator, PyfuncScorer):
        return "python_function"
    if isinstance(estimator, BoosterClassifier):
        if base_format not in ("auto", "native"):
            raise ValueError(f"a native {estimator.library_} Booster is saved in its own MLflow "
                             f"flavour; base_format={base_format!r} does not apply")
        return estimator.library_
    lib = library_of(estimator)
    native = lib in _NATIVE_FLAVORS and not hasattr(estimator, "steps")
    if base_format == "native" and not native:
        raise ValueError(f"base_format='native' needs an XGBoost, LightGBM or CatBoost "
                         f"classifier (not in a pipeline); {type(estimator).__name__} is saved "
                         "with mlflow.sklearn: use base_format='skops' (or 'auto')")
    return lib if native and base_format in ("auto", "native") else "sklearn"


def save_base_model(estimator: Any, path: str, *, base_format: str = "auto",
                    base_model_kwargs: dict | None = None) -> dict[str, Any]:
    """Write ``estimator`` as an MLflow model in ``path``; return the flavour-conf entries.

    Parameters
    ----------
    estimator : fitted classifier or PyfuncScorer
    path : str
    base_format : {"auto", "native", "skops", "cloudpickle", "pickle"}, default="auto"
        ``"auto"``: XGBoost, LightGBM and CatBoost classifiers in their own MLflow flavour
        (``mlflow.xgboost`` / ``mlflow.lightgbm`` / ``mlflow.catboost``), everything else with
        ``mlflow.sklearn`` in skops format, trusting the types of this in-memory model.
        ``"native"`` insists on the boosting library's flavour; ``"skops"``, ``"cloudpickle"``
        and ``"pickle"`` use ``mlflow.sklearn`` in that format. A :class:`PyfuncScorer`'s
        model directory is always copied as it is.
    base_model_kwargs : dict, optional
        Extra arguments for the flavour's ``save_model`` (override the choices above).
    """
    import importlib

    flavor = base_flavor_for(estimator, base_format)
    if flavor == "python_function":
        shutil.copytree(estimator.local_path, path)
        return {"base_flavor": flavor, "base_output_column": estimator.output_column,
                "base_output_kind": estimator.kind}
    if not (hasattr(estimator, "predict_proba") or hasattr(estimator, "decision_function")):
        raise ValueError(f"cannot save a base model of type {type(estimator).__name__}: it is "
                         "neither a classifier nor an mlcal.mlflow.PyfuncScorer")
    module = importlib.import_module(f"mlflow.{flavor}")
    kwargs = dict(base_model_kwargs or {})
    fmt = None
    if flavor in ("sklearn", "lightgbm"):  # the two flavours that serialise with skops
        fmt = kwargs.setdefault("serialization_format",
                                "skops" if base_format in ("auto", "native") else base_format)
        if fmt == "skops" and "skops_trusted_types" not in kwargs:
            kwargs["skops_trusted_types"] = trusted_types(estimator)
    if "pip_requirements" not in kwargs and "conda_env" not in kwargs:
        # the outer model's requirements cover the nested one (its inference loads it), so
        # skip the nested model's own inference: it costs a subprocess and seconds
        if flavor in ("sklearn", "lightgbm"):
            kwargs["pip_requirements"] = module.get_default_pip_requirements(
                include_cloudpickle=fmt == "cloudpickle", include_skops=fmt == "skops")
        else:
            kwargs["pip_requirements"] = module.get_default_pip_requirements()
    from mlcal.base_models.boosters import BoosterClassifier

    if isinstance(estimator, BoosterClassifier):
        kwargs.pop("serialization_format", None)  # a Booster is always saved natively
        kwargs.pop("skops_trusted_types", None)
        module.save_model(estimator.booster, path, **kwargs)
        return {"base_flavor": flavor, "base_format": "native", "base_booster": True}
    module.save_model(estimator, path, **kwargs)
    conf = {"base_flavor": flavor, "base_format": fmt or "native"}
    if fmt == "skops":
        conf["base_trusted_types"] = _saved_skops_types(path, flavor)
    return conf


def _saved_skops_types(path: str, flavor: str) -> list[str]:
    """The types beyond skops' defaults in the skops file just saved in ``path``: the list the
    loader trusts (and nothing else) for this model."""
    import skops.io
    import yaml

    with open(os.path.join(path, "MLmodel"), encoding="utf-8") as fh:
        nested = yaml.safe_load(fh)["flavors"][flavor]
    data = nested["pickled_model" if flavor == "sklearn" else "data"]
    return sorted(skops.io.get_untrusted_types(file=os.path.join(path, data)))


def load_base_model(path: str, conf: dict[str, Any]):
    """Rebuild the base estimator saved by :func:`save_base_model` (conf = the mlcal flavour)."""
    import importlib

    flavor = conf.get("base_flavor")
    if flavor in _BASE_FLAVORS:
        model = importlib.import_module(f"mlflow.{flavor}").load_model(path)
        if conf.get("base_booster"):
            from mlcal.base_models.boosters import BoosterClassifier

            return BoosterClassifier(model)
        return model
    if flavor == "python_function":
        return PyfuncScorer(path, output_column=conf.get("base_output_column"),
                            kind=conf.get("base_output_kind", "probability"),
                            classes=conf.get("classes", (0, 1)))
    raise ValueError(f"unknown base_flavor {flavor!r} in the mlcal flavour configuration; "
                     f"expected one of {[*_BASE_FLAVORS, 'python_function']}")


def base_requirements(path: str) -> list[str]:
    """The nested model's own ``requirements.txt`` lines (empty if it has none)."""
    req = os.path.join(path, "requirements.txt")
    if not os.path.exists(req):
        return []
    with open(req, encoding="utf-8") as fh:
        return [ln.strip() for ln in fh if ln.strip() and not ln.lstrip().startswith("#")]
