"""The ``mlcal`` MLflow flavour: save, log and load a :class:`~mlcal.model.CalibratedModel`.

Artifact layout (``<model>/``)::

    MLmodel              flavours "mlcal" and "python_function" (loader_module: mlcal.mlflow)
    calibrator.json      the fitted calibrator as mlcal JSON (no pickle)
    base_model/          the base model as a complete MLflow model in its own flavour
    wheels/              the mlcal wheel, required by relative path (``bundle_mlcal=True``)
    requirements.txt, python_env.yaml, conda.yaml, [input_example.json, serving_input_example.json]

A multicalibrated model (``CalibratedModel(..., feature_columns=[...])`` with a
:class:`~mlcal.multicalibration.Multicalibration`) stores its map in ``calibrator.json`` like
any calibrator and lists ``feature_columns`` in the flavour section (checked against the map on
save and on load); the signature must hold every feature column with a type of its kind.

The pyfunc ``predict`` returns a DataFrame with one row per input row and the columns
``p_calibrated`` (calibrated probability of the positive class ``classes_[1]``) and ``label``
(``classes_[1]`` when ``p_calibrated >= threshold``, else ``classes_[0]``); the request param
``return_uncalibrated=true`` adds ``score_uncalibrated``, the base model's raw score.

A multiclass model (K >= 3 classes) returns one calibrated probability column per class,
``proba_<class>`` in ``classes_`` order (``<class>`` is ``str(class)``: ``proba_0``,
``proba_setosa``; :func:`probability_columns`), then ``label``, the class of highest calibrated
probability in its original type; ``return_uncalibrated=true`` adds the base model's scores as
``score_uncalibrated_<class>``. Class labels whose strings coincide (``1`` and ``"1"``) cannot
be saved. Inside
MLflow's scoring server the same rows come back as a list of records (the server would convert
the DataFrame to exactly that JSON, only slower).

Base models: XGBoost, LightGBM and CatBoost classifiers (and native Boosters) are nested with
their own MLflow flavour, other scikit-learn compatible classifiers with ``mlflow.sklearn``
(skops, trusting the types of the caller's in-memory model; see ``base_format``); any other
MLflow model whose pyfunc output holds a score or probability column is used through
``PyfuncScorer(model_uri, output_column="<column>", kind="probability" | "score")`` and nested as
a copy of its own model directory.

Loading never runs code from the artifact by default: every file is checked against the
SHA-256 digests MLmodel records (:mod:`mlcal.mlflow.integrity`) and the base model is read only
from code-free formats (:mod:`mlcal.mlflow.base_loading`); see :func:`load_model`.
``save_model`` replaces a model crash-safely (:func:`mlcal._atomic.replacing_directory`).

Serving: the model has a column-based signature, so ``mlflow models serve`` accepts JSON
``dataframe_split``, ``dataframe_records``, ``inputs``/``instances`` as a list of records or a
dict of columns, and CSV; a 2-D list without column names is rejected (400).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from mlcal._atomic import checkpoint, recover_directory, replacing_directory, write_json
from mlcal._progress import slow_step
from mlcal.calibrators._params import short_repr
from mlcal.calibrators.base import CalibratorFormatError, load_calibrator
from mlcal.base_models.scores import model_classes
from mlcal.mlflow.base_loading import load_base_safely
from mlcal.mlflow.base_models import (BASE_MODEL_DIR, PyfuncScorer, base_requirements,
                                      save_base_model)
from mlcal.mlflow.bundle import bundle_into, is_mlcal_requirement
from mlcal.mlflow.integrity import (DIGEST_KEY, FILES_KEY, FLAVOR_NAME, MLMODEL,
                                    UnsafeModelFormatError, read_mlmodel, seal,
                                    tag_registered_version, verify_directory)
from mlcal.mlflow.requirements import mlcal_requirements, model_requirements
from mlcal.calibrators.multiclass import MulticlassCalibrator
from mlcal.model import SCORE_SOURCES, CalibratedModel

LOADER_MODULE = "mlcal.mlflow"
CALIBRATOR_FILE = "calibrator.json"
OUTPUT_PROBABILITY = "p_calibrated"
OUTPUT_LABEL = "label"
OUTPUT_UNCALIBRATED = "score_uncalibrated"
#: multiclass column prefixes: ``proba_<class>`` and ``score_uncalibrated_<class>``
PROBA_PREFIX = "proba_"
PARAM_RETURN_UNCALIBRATED = "return_uncalibrated"
# pyfunc model_config {"output": ...}: the whole frame, or one column for MLflow's evaluators
OUTPUT_ALL = "all"
OUTPUT_CHOICES = (OUTPUT_ALL, OUTPUT_LABEL, OUTPUT_PROBABILITY)
# set by MLflow's scoring server (and `mlflow models predict`) in the serving process
_SERVING_FLAG = "_MLFLOW_IS_IN_SERVING_ENVIRONMENT"
#: the caller's opt-in to code-running base formats for mlflow.pyfunc.load_model and serving
#: (model_config cannot carry it: MLflow only accepts keys the artifact itself declares)
ALLOW_PICKLE_ENV = "MLCAL_ALLOW_PICKLE"


def get_default_pip_requirements() -> list[str]:
    """Pinned requirements every ``mlcal`` model needs, mlcal itself included.

    MLflow's requirement inference never captures the package that provides the loader module
    (it is imported before capturing starts), so mlcal is listed here explicitly, with its
    runtime dependencies (numpy, scipy, scikit-learn, numba, pandas, matplotlib) and mlflow.
    """
    return mlcal_requirements()


def get_default_conda_env() -> dict:
    """The default conda environment of ``mlcal`` models (pip section = the defaults above)."""
    from mlflow.utils.environment import _mlflow_conda_env

    return _mlflow_conda_env(additional_pip_deps=get_default_pip_requirements())


def probability_columns(classes, prefix: str = PROBA_PREFIX) -> list[str]:
    """The pyfunc's per-class column names of a multiclass model: ``prefix + str(class)`` for
    each class, in ``classes_`` order.

    Raises
    ------
    ValueError
        Two classes with the same string (e.g. ``1`` and ``"1"``): their columns would collide.
    """
    names = [f"{prefix}{c}" for c in np.asarray(classes, dtype=object).tolist()]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})[:5]
        raise ValueError(f"classes {list(classes)[:10]} give duplicate output columns {dup}; "
                         "relabel the classes so that their strings differ")
    return names


def calibration_method(cal) -> str:
    """The method name recorded for a binary or a multiclass calibrator."""
    return cal.document_method if isinstance(cal, MulticlassCalibrator) else cal.method_name


# -- the pyfunc wrapper ------------------------------------------------------------------------
class CalibratedPyfuncModel:
    """What ``mlflow.pyfunc.load_model`` wraps: tabular rows in, calibrated probabilities out.

    Parameters
    ----------
    model : CalibratedModel
    output : {"all", "label", "p_calibrated"}, default="all"
        ``"all"``: the DataFrame described in the module notes. ``"label"`` or
        ``"p_calibrated"``: only that column, as a Series - the one-column output MLflow's
        default evaluator needs (``mlflow.models.evaluate(..., model_type="classifier",
        model_config={"output": "label"})``). A multiclass model takes ``"label"`` or one of
        its ``proba_<class>`` columns instead of ``"p_calibrated"``.
    """

    def __init__(self, model: CalibratedModel, output: str = OUTPUT_ALL):
        self._multiclass = len(model.classes_) > 2
        self._proba_columns = (probability_columns(model.classes_) if self._multiclass
                               else [OUTPUT_PROBABILITY])
        choices = (OUTPUT_ALL, OUTPUT_LABEL, *self._proba_columns)
        if output not in choices:
            shown = choices if len(choices) <= 8 else (*choices[:7], "...")
            raise ValueError(f"model_config 'output' must be one of {shown}, got {output!r}")
        self.model = model
        self.output = output
        base = model.base_estimator
        # a base fitted on a bare array warns on every DataFrame request; give it the array
        from mlcal.base_models.boosters import BoosterClassifier

        # (a native Booster checks column names itself, so it keeps the DataFrame)
        # (a segmented or multicalibrated model keeps the DataFrame: it reads its segment or
        # feature columns by name and hands the base model its own columns itself)
        self._to_array = (not isinstance(base, (PyfuncScorer, BoosterClassifier))
                          and not hasattr(base, "feature_names_in_")
                          and model.calibrator_columns is None)

    def get_raw_model(self) -> CalibratedModel:
        """The native :class:`CalibratedModel`."""
        return self.model

    def _as_input(self, data):
        import pandas as pd

        if isinstance(data, dict) or (isinstance(data, list) and data
                                      and isinstance(data[0], dict)):
            data = pd.DataFrame(data)
        if self._to_array and isinstance(data, pd.DataFrame):
            return data.to_numpy()
        return data

    def predict(self, data, params: dict[str, Any] | None = None):
        """Per row: ``p_calibrated`` and ``label`` (plus ``score_uncalibrated`` on request);
        for a multiclass model ``proba_<class>`` per class and ``label`` (plus
        ``score_uncalibrated_<class>``), see the module notes.

        Parameters
        ----------
        data : pandas.DataFrame, numpy.ndarray, dict of columns or list of records
        params : dict, optional
            ``{"return_uncalibrated": True}`` adds the base model's raw score.
        """
        import pandas as pd
        from mlflow.exceptions import MlflowException

        params = params or {}
        unknown = set(params) - {PARAM_RETURN_UNCALIBRATED}
        if unknown:
            raise MlflowException.invalid_parameter_value(
                f"mlcal model: unknown params {sorted(unknown)}; supported: "
                f"{PARAM_RETURN_UNCALIBRATED!r}")
        m = self.model
        try:
            scores, p = m.predict_calibrated(self._as_input(data))
        except (ValueError, KeyError) as exc:   # KeyError: an unseen segment under "raise"
            # bad rows (NaN, wrong width, non-probability rows, ...) are the caller's fault:
            # 400 with the reason
            raise MlflowException.invalid_parameter_value(f"mlcal model: {exc}") from None
        if self._multiclass:   # p is (n, K), rows summing to 1
            out = dict(zip(self._proba_columns, p.T))
            out[OUTPUT_LABEL] = m.classes_[np.argmax(p, axis=1)]
            if params.get(PARAM_RETURN_UNCALIBRATED):
                raw = np.asarray(scores, dtype=np.float64)
                out.update(zip(probability_columns(m.classes_, OUTPUT_UNCALIBRATED + "_"),
                               raw.T))
        else:
            out = {OUTPUT_PROBABILITY: p,
                   OUTPUT_LABEL: m.classes_[(p >= m.threshold).astype(np.int64)]}
            if params.get(PARAM_RETURN_UNCALIBRATED):
                out[OUTPUT_UNCALIBRATED] = np.asarray(scores, dtype=np.float64)
        index = data.index if isinstance(data, pd.DataFrame) else None
        if self.output != OUTPUT_ALL:
            return pd.Series(out[self.output], index=index, name=self.output)
        if os.environ.get(_SERVING_FLAG, "").lower() == "true":
            # The scoring server turns a DataFrame into these same records with
            # DataFrame.to_dict, which costs more than the whole calibration; hand it the
            # records directly (identical JSON response, a fraction of the time).
            names = list(out)
            return [dict(zip(names, row)) for row in zip(*(v.tolist() for v in out.values()))]
        return pd.DataFrame(out, index=index)


# -- save / log / load ---------------------------------------------------------------------------
def _check_model(cal_model, threshold) -> float:
    if not isinstance(cal_model, CalibratedModel):
        raise ValueError(f"save_model expects an mlcal CalibratedModel, got "
                         f"{type(cal_model).__name__}")
    if not hasattr(cal_model, "calibrator_"):
        raise ValueError("the CalibratedModel is not fitted; call fit(X_cal, y_cal) before "
                         "saving it")
    t = cal_model.threshold if threshold is None else threshold
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0.0 <= float(t) <= 1.0:
        raise ValueError(f"threshold must be a number in [0, 1], got {t!r}")
    return float(t)


def _must_be_mlflow_model(path: str) -> None:
    if not os.path.isfile(os.path.join(path, "MLmodel")):
        # never delete something that is not a saved model
        raise FileExistsError(f"{path} exists and is not an MLflow model directory; "
                              "refusing to delete it even with overwrite=True")


def _params_schema():
    from mlflow.types import ParamSchema, ParamSpec

    return ParamSchema([ParamSpec(PARAM_RETURN_UNCALIBRATED, "boolean", False)])


def _output_schema(classes):
    from mlflow.types import ColSpec, Schema

    kind = np.asarray(classes).dtype.kind
    label_type = {"b": "boolean", "i": "long", "u": "long", "f": "double"}.get(kind, "string")
    if len(classes) > 2:
        raw = probability_columns(classes, OUTPUT_UNCALIBRATED + "_")
        return Schema([*(ColSpec("double", c) for c in probability_columns(classes)),
                       ColSpec(label_type, OUTPUT_LABEL),
                       *(ColSpec("double", c, required=False) for c in raw)])
    return Schema([ColSpec("double", OUTPUT_PROBABILITY), ColSpec(label_type, OUTPUT_LABEL),
                   ColSpec("double", OUTPUT_UNCALIBRATED, required=False)])


def _signature(signature, example, classes):
    """The user's signature with our params schema added, or one inferred from the example."""
    from mlflow.models import ModelSignature, infer_signature

    if signature is None:
        if example is None:
            return None
        inputs = infer_signature(example.inference_data).inputs
        return ModelSignature(inputs, _output_schema(classes), params=_params_schema())
    if signature.params is None:
        return ModelSignature(signature.inputs, signature.outputs, params=_params_schema())
    return signature


def save_model(cal_model: CalibratedModel, path: str, *, threshold: float | None = None,
               overwrite: bool = False, conda_env=None, code_paths=None, mlflow_model=None,
               signature=None, input_example=None, pip_requirements=None,
               extra_pip_requirements=None, metadata: dict | None = None,
               base_format: str = "auto", base_model_kwargs: dict | None = None,
               skops_trusted_types: list[str] | None = None,
               bundle_mlcal: bool = True) -> None:
    """Save a fitted :class:`CalibratedModel` as an MLflow model directory.

    Parameters
    ----------
    cal_model : CalibratedModel
        Fitted; its base is a scikit-learn compatible classifier (saved with ``mlflow.sklearn``)
        or a :class:`~mlcal.mlflow.PyfuncScorer` around any MLflow model (copied as is).
    path : str
        Target directory. It must not exist or be empty unless ``overwrite=True``, which
        replaces an existing MLflow model directory (and only that).
    threshold : float, optional
        The pyfunc's label threshold on the calibrated probability; default
        ``cal_model.threshold`` (0.5 unless set).
    signature : mlflow.models.ModelSignature, optional
        Input/output schema. Inferred from ``input_example`` when omitted. The params schema
        (``return_uncalibrated: boolean = false``) is added when missing, so servers forward it.
    input_example : DataFrame, ndarray or dict, optional
        A few input rows; saved with the model and used for the signature.
    pip_requirements, extra_pip_requirements, conda_env
        As in MLflow's flavours. By default (no inference, so saving takes milliseconds): mlcal,
        its runtime dependencies and mlflow, the base model's flavour requirements and the
        distributions of any third-party class inside the base estimator, all pinned to the
        installed versions (:mod:`mlcal.mlflow.requirements`).
    code_paths, mlflow_model, metadata
        As in MLflow's flavours.
    base_format : {"auto", "native", "skops", "cloudpickle", "pickle"}, default="auto"
        How the base model is nested. ``"auto"``: XGBoost, LightGBM and CatBoost classifiers
        in their own MLflow flavour, any other scikit-learn model (HistGradientBoosting,
        pipelines, ...) with ``mlflow.sklearn`` as skops, trusting the types found in this
        in-memory model. ``"native"`` insists on the boosting library's flavour; the other
        values force ``mlflow.sklearn`` with that serialisation format. See
        :func:`mlcal.mlflow.base_models.save_base_model`.
    base_model_kwargs : dict, optional
        Extra arguments for the base model's ``save_model`` (they override the choices
        above, e.g. an explicit ``skops_trusted_types``).
    skops_trusted_types : list of str, optional
        Types to trust when the base model is saved as skops (MLflow's own argument, which its
        "untrusted types" error suggests); by default the types of the in-memory base model.
    bundle_mlcal : bool, default=True
        Ship the running mlcal as a wheel in ``<model>/wheels/`` and require it by that relative
        path (MLflow's library-bundling layout) instead of ``mlcal==<version>``, so
        ``mlflow models serve/prepare-env --env-manager virtualenv`` can rebuild the
        environment where no package index has this mlcal. ``False`` keeps the pin.
    """
    import yaml
    from mlflow import pyfunc
    from mlflow.models import Model
    from mlflow.models.utils import _save_example
    from mlflow.utils.environment import (_CONDA_ENV_FILE_NAME, _CONSTRAINTS_FILE_NAME,
                                          _PYTHON_ENV_FILE_NAME, _REQUIREMENTS_FILE_NAME,
                                          _process_conda_env, _process_pip_requirements,
                                          _PythonEnv, _validate_env_arguments)
    from mlflow.utils.file_utils import write_to
    from mlflow.utils.model_utils import _validate_and_copy_code_paths

    from mlcal import __version__

    t = _check_model(cal_model, threshold)
    if len(cal_model.classes_) > 2:
        probability_columns(cal_model.classes_)   # refuse colliding column names up front
    _validate_env_arguments(conda_env, pip_requirements, extra_pip_requirements)
    # built beside the target and swapped in (see mlcal._atomic.replacing_directory): a save
    # killed at any point leaves the old model or the new one at `path`
    with replacing_directory(path, overwrite=overwrite,
                             replaceable=_must_be_mlflow_model) as path:
        code_subpath = _validate_and_copy_code_paths(code_paths, path)
        mlflow_model = mlflow_model or Model()
        if metadata is not None:
            mlflow_model.metadata = metadata

        cal = cal_model.calibrator_
        write_json(os.path.join(path, CALIBRATOR_FILE), cal.to_dict(), indent=1, nonfinite="error")
        checkpoint("save-calibrator-written")
        base_kwargs = dict(base_model_kwargs or {})
        if skops_trusted_types is not None:
            base_kwargs["skops_trusted_types"] = list(skops_trusted_types)
        with slow_step(f"saving the base model ({type(cal_model.base_estimator).__name__})"):
            base_conf = save_base_model(cal_model.base_estimator,
                                        os.path.join(path, BASE_MODEL_DIR),
                                        base_format=base_format, base_model_kwargs=base_kwargs)
        checkpoint("save-base-written")

        example = _save_example(mlflow_model, input_example, path)
        mlflow_model.signature = _signature(signature, example, cal_model.classes_)
        segment_conf = segment_columns_conf(cal_model, mlflow_model.signature)
        segment_conf.update(feature_columns_conf(cal_model, mlflow_model.signature))

        # declaring the config is what lets load_model(..., model_config=) override it
        pyfunc.add_to_model(mlflow_model, loader_module=LOADER_MODULE, code=code_subpath,
                            conda_env=_CONDA_ENV_FILE_NAME, python_env=_PYTHON_ENV_FILE_NAME,
                            model_config={"output": OUTPUT_ALL})
        mlflow_model.add_flavor(
            FLAVOR_NAME, mlcal_version=__version__, calibrator=CALIBRATOR_FILE,
            calibration_method=calibration_method(cal), map_type=cal.map_.kind,
            input_transform=cal.map_.input_transform, base_model=BASE_MODEL_DIR,
            score_source=cal_model.score_source_, classes=np.asarray(cal_model.classes_).tolist(),
            threshold=t, code=code_subpath, **segment_conf, **base_conf)
        _save_sealed(mlflow_model, path)  # must exist (and verify) before inference

        if conda_env is None:
            if pip_requirements is None:
                # known, not inferred (MLflow's inference loads the model in a subprocess)
                default_reqs = model_requirements(
                    cal_model.base_estimator,
                    base_requirements(os.path.join(path, BASE_MODEL_DIR)))
            else:
                default_reqs = None
            conda_env, pip_reqs, constraints = _process_pip_requirements(
                default_reqs, pip_requirements, extra_pip_requirements)
        else:
            conda_env, pip_reqs, constraints = _process_conda_env(conda_env)
        if bundle_mlcal:
            with slow_step("bundling the mlcal wheel"):
                pip_reqs = bundle_into(path, pip_reqs)
            for dep in conda_env.get("dependencies", []):
                if isinstance(dep, dict) and "pip" in dep:
                    dep["pip"] = [pip_reqs[0], *(r for r in dep["pip"]
                                                 if not is_mlcal_requirement(r))]
        with open(os.path.join(path, _CONDA_ENV_FILE_NAME), "w") as fh:
            yaml.safe_dump(conda_env, stream=fh, default_flow_style=False)
        if constraints:
            write_to(os.path.join(path, _CONSTRAINTS_FILE_NAME), "\n".join(constraints))
        write_to(os.path.join(path, _REQUIREMENTS_FILE_NAME), "\n".join(pip_reqs))
        _PythonEnv.current().to_yaml(os.path.join(path, _PYTHON_ENV_FILE_NAME))
        _save_sealed(mlflow_model, path)
        checkpoint("save-sealed")


#: MLflow signature types a segment column of each key type may have
_SEGMENT_SIGNATURE_TYPES = {"string": ("string",), "integer": ("long", "integer"),
                            "boolean": ("boolean",)}


def segment_columns_conf(cal_model, signature) -> dict[str, Any]:
    """``{"segment_columns": [...]}`` for the flavour section of a segmented model (else
    empty), after checking that the signature, if any, has every segment column with a type
    the calibrator's keys take (a request without them could never be scored)."""
    from mlcal.calibrators.segmented import SegmentedCalibrator

    cal = cal_model.calibrator_
    if not isinstance(cal, SegmentedCalibrator):
        return {}
    columns = cal.map_.columns
    if signature is not None:
        found = {spec.name: str(getattr(spec.type, "name", spec.type)).lower()
                 for spec in signature.inputs.inputs if getattr(spec, "name", None)}
        for name, key_type in columns:
            if name not in found:
                raise ValueError(f"the signature has no segment column {name!r}; give an "
                                 "input_example or signature that includes the segment columns "
                                 f"{[n for n, _ in columns]}")
            if found[name] not in _SEGMENT_SIGNATURE_TYPES[key_type]:
                raise ValueError(f"segment column {name!r} holds {key_type} keys but the "
                                 f"signature types it {found[name]!r}")
    return {"segment_columns": [n for n, _ in columns]}


#: MLflow signature types a multicalibration feature of each kind may have (a categorical
#: value is read as its text, so a boolean or integer column can hold one)
_FEATURE_SIGNATURE_TYPES = {"numeric": ("double", "float", "long", "integer"),
                            "categorical": ("string", "long", "integer", "boolean")}


def feature_columns_conf(cal_model, signature) -> dict[str, Any]:
    """``{"feature_columns": [...]}`` for the flavour section of a multicalibrated model
    (else empty), after checking that the model's feature columns are the map's features and
    that the signature, if any, has every one of them with a type of its kind (numeric or
    categorical)."""
    from mlcal.multicalibration import Multicalibration

    cal = cal_model.calibrator_
    if not isinstance(cal, Multicalibration):
        return {}
    m = cal.map_
    names = m.feature_names
    if (cal_model.feature_columns is None and names) or (
            cal_model.feature_columns is not None
            and list(cal_model._feature_names()) != names):
        raise ValueError(f"the model's feature_columns {cal_model.feature_columns!r} are not "
                         f"the features its multicalibration map reads {names}")
    if signature is not None:
        found = {spec.name: str(getattr(spec.type, "name", spec.type)).lower()
                 for spec in signature.inputs.inputs if getattr(spec, "name", None)}
        for spec in m.features[1:]:
            if spec.name not in found:
                raise ValueError(f"the signature has no feature column {spec.name!r}; give an "
                                 "input_example or signature that includes the feature "
                                 f"columns {names}")
            if found[spec.name] not in _FEATURE_SIGNATURE_TYPES[spec.kind]:
                raise ValueError(f"feature column {spec.name!r} is {spec.kind} but the "
                                 f"signature types it {found[spec.name]!r}")
    return {"feature_columns": names}


def loaded_feature_columns(cal, conf: dict[str, Any], cal_file: str) -> list[str] | None:
    """The feature columns of a loaded model: the multicalibration map's features, which the
    MLmodel file must repeat (an artifact whose two disagree is refused); None for any other
    calibrator (whose MLmodel file must not list any)."""
    from mlcal.multicalibration import Multicalibration

    recorded = conf.get("feature_columns")
    names = cal.map_.feature_names if isinstance(cal, Multicalibration) else None
    if recorded != names:
        raise CalibratorFormatError(f"{cal_file} reads feature columns {short_repr(names)} "
                                    f"but the MLmodel file says {short_repr(recorded)}; the "
                                    "artifact is inconsistent")
    return names or None


def loaded_segment_columns(cal, conf: dict[str, Any], cal_file: str) -> list[str] | None:
    """The segment columns of a loaded model: the segmented calibrator's, which the MLmodel
    file must repeat (an artifact whose two disagree is refused)."""
    from mlcal.calibrators.segmented import SegmentedCalibrator

    recorded = conf.get("segment_columns")
    names = cal.map_.column_names if isinstance(cal, SegmentedCalibrator) else None
    if recorded != names:
        raise CalibratorFormatError(f"{cal_file} keys on segment columns {short_repr(names)} "
                                    f"but the MLmodel file says {short_repr(recorded)}; the "
                                    "artifact is inconsistent")
    return names


def _save_sealed(mlflow_model, path: str) -> None:
    """Record the digests of every file in ``path`` in the mlcal flavour (on the Model object
    too: MLflow's ``log`` may rewrite MLmodel from it) and write MLmodel."""
    import yaml

    mlmodel = os.path.join(path, MLMODEL)
    # the digest covers the flavour sections as they read back from the YAML file
    mlflow_model.save(mlmodel)
    flavors = yaml.safe_load(open(mlmodel, encoding="utf-8"))["flavors"]
    seal(path, flavors)
    mlflow_model.flavors[FLAVOR_NAME].update(
        {FILES_KEY: flavors[FLAVOR_NAME][FILES_KEY], DIGEST_KEY: flavors[FLAVOR_NAME][DIGEST_KEY]})
    mlflow_model.save(mlmodel)


def log_model(cal_model: CalibratedModel, name: str | None = None, *,
              artifact_path: str | None = None, registered_model_name: str | None = None,
              signature=None, input_example=None, pip_requirements=None,
              extra_pip_requirements=None, conda_env=None, code_paths=None,
              threshold: float | None = None, metadata: dict | None = None,
              base_format: str = "auto", base_model_kwargs: dict | None = None,
              skops_trusted_types: list[str] | None = None, bundle_mlcal: bool = True,
              **kwargs):
    """Log a fitted :class:`CalibratedModel` to the active run (MLflow 3 LoggedModel).

    Parameters
    ----------
    cal_model : CalibratedModel
    name : str, optional
        The model's name in the run (MLflow 3); ``artifact_path`` is the deprecated alias.
    registered_model_name : str, optional
        Also register the model under this name (creates the registered model if needed).
    signature, input_example, pip_requirements, extra_pip_requirements, conda_env, code_paths,
    threshold, metadata, base_format, base_model_kwargs, skops_trusted_types, bundle_mlcal
        See :func:`save_model`.
    **kwargs
        Passed to ``mlflow.models.Model.log`` (e.g. ``params``, ``tags``, ``step``,
        ``await_registration_for``).

    Returns
    -------
    mlflow.models.model.ModelInfo
        ``model_info.model_uri`` loads the model back. A registered version gets the tag
        ``mlcal.digest`` (see :func:`mlcal.mlflow.check_registered_version`).
    """
    import sys

    from mlflow.models import Model

    if name is None and artifact_path is None:
        name = "model"
    with slow_step("logging the model (save, upload, serving-input check)"):
        info = Model.log(artifact_path=artifact_path, name=name, flavor=sys.modules[__name__],
                         flavor_name=FLAVOR_NAME, cal_model=cal_model,
                         registered_model_name=registered_model_name, signature=signature,
                         input_example=input_example, pip_requirements=pip_requirements,
                         extra_pip_requirements=extra_pip_requirements, conda_env=conda_env,
                         code_paths=code_paths, threshold=threshold, metadata=metadata,
                         base_format=base_format, base_model_kwargs=base_model_kwargs,
                         skops_trusted_types=skops_trusted_types, bundle_mlcal=bundle_mlcal,
                         **kwargs)
    if registered_model_name is not None and info.registered_model_version is not None:
        # the registry's own record of what was registered: a directory rewritten later
        # (MLmodel digests included) no longer matches it (check_registered_version)
        tag_registered_version(registered_model_name, info.registered_model_version,
                               info.flavors[FLAVOR_NAME][DIGEST_KEY])
    return info


def inside_model_dir(root: str, conf: dict[str, Any], key: str, default: str) -> str:
    """The real path of the MLmodel entry ``key``, which must name something inside ``root``
    (no absolute paths, no ``..``, no symlinks leading out)."""
    rel = conf.get(key, default)
    if not isinstance(rel, str) or not rel or "\x00" in rel or os.path.isabs(rel):
        raise CalibratorFormatError(f"mlcal model at {root}: MLmodel field {key!r} must be a "
                                    f"relative path inside the model directory, got "
                                    f"{short_repr(rel)}")
    base = os.path.realpath(root)
    full = os.path.realpath(os.path.join(base, rel))
    if full == base or os.path.commonpath([base, full]) != base:
        raise CalibratorFormatError(f"mlcal model at {root}: MLmodel field {key!r} points "
                                    f"outside the model directory ({short_repr(rel)}); refusing "
                                    "to read it")
    return full


def _model_fields(root: str, conf: dict[str, Any]) -> tuple[str, float, np.ndarray]:
    """``score_source``, ``threshold`` and ``classes`` of the MLmodel file, validated."""
    def bad(key: str, expected: str):
        return CalibratorFormatError(f"mlcal model at {root}: MLmodel field {key!r} must be "
                                     f"{expected}, got {short_repr(conf.get(key))}")

    source = conf.get("score_source")
    if not isinstance(source, str) or source not in SCORE_SOURCES[1:]:
        raise bad("score_source", f"one of {SCORE_SOURCES[1:]}")
    t = conf.get("threshold")
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= 1:
        raise bad("threshold", "a number in [0, 1]")
    classes = conf.get("classes")
    if (not isinstance(classes, list) or len(classes) < 2
            or not all(isinstance(c, (str, int, float)) for c in classes)
            or any(type(c) is not type(classes[0]) for c in classes)
            or len(set(classes)) != len(classes)
            or any(isinstance(c, float) and not np.isfinite(c) for c in classes)):
        raise bad("classes", "a list of two or more distinct labels of one type (strings, "
                             "integers, numbers or booleans)")
    return source, float(t), np.asarray(classes)


def _load_local(path: str, conf: dict[str, Any], *, allow_pickle: bool = False
                ) -> CalibratedModel:
    from pathlib import Path

    from sklearn.base import clone

    source, threshold, classes = _model_fields(path, conf)
    cal_file = inside_model_dir(path, conf, "calibrator", CALIBRATOR_FILE)
    try:
        cal = load_calibrator(Path(cal_file))   # a Path: the file is parsed as JSON, only
    except CalibratorFormatError as exc:
        raise CalibratorFormatError(f"cannot load the calibrator of the mlcal model at {path} "
                                    f"({cal_file}): {exc}") from None
    method = conf.get("calibration_method")
    if method is not None and calibration_method(cal) != method:
        raise CalibratorFormatError(f"{cal_file} holds a {calibration_method(cal)!r} calibrator "
                                    f"but the MLmodel file says {short_repr(method)}; the "
                                    "artifact is inconsistent")
    # a binary calibrator needs two classes, a multiclass one exactly one column per class
    n_cal = cal.n_classes_ if isinstance(cal, MulticlassCalibrator) else 2
    if n_cal != len(classes) or (len(classes) > 2) != isinstance(cal, MulticlassCalibrator):
        raise CalibratorFormatError(f"{cal_file} holds a calibrator for {n_cal} classes but the "
                                    f"MLmodel file lists {len(classes)}; the artifact is "
                                    "inconsistent")
    base = load_base_safely(inside_model_dir(path, conf, "base_model", BASE_MODEL_DIR), conf,
                            allow_pickle=allow_pickle)
    base_classes = model_classes(base)
    if base_classes.tolist() != classes.tolist():
        raise CalibratorFormatError(f"mlcal model at {path}: MLmodel field 'classes' is "
                                    f"{short_repr(classes.tolist())} but the base model's "
                                    f"classes_ are {short_repr(base_classes.tolist())}; the "
                                    "artifact is inconsistent (labels would be mixed up)")
    segment_columns = loaded_segment_columns(cal, conf, cal_file)
    feature_columns = loaded_feature_columns(cal, conf, cal_file)
    model = CalibratedModel(base_estimator=base, calibrator=clone(cal),
                            score=source, threshold=threshold, segment_columns=segment_columns,
                            feature_columns=feature_columns)
    model.calibrator_ = cal
    model.score_source_ = source
    model.classes_ = classes
    return model


def _verified_conf(path: str, *, allow_pickle: bool) -> dict[str, Any]:
    """The mlcal flavour section of the model directory ``path``, after the directory was
    checked against its recorded digests (nothing else in it is read before that)."""
    flavors = read_mlmodel(path)["flavors"]
    conf = flavors.get(FLAVOR_NAME)
    if not isinstance(conf, dict):
        raise CalibratorFormatError(f"mlcal model at {path}: the mlcal flavour configuration "
                                    f"in MLmodel must be a mapping, got {short_repr(conf)}")
    verify_directory(path, conf, flavors)
    pyfunc_conf = flavors.get("python_function")
    code = [c for c in (conf.get("code"), isinstance(pyfunc_conf, dict)
                        and pyfunc_conf.get("code")) if c]
    if code and not allow_pickle:
        raise UnsafeModelFormatError(f"mlcal model at {path} ships Python code ({code[0]!r}, "
                                     "saved with code_paths), which loading would import; "
                                     "pass allow_pickle=True only if you trust the artifact")
    return conf


def _is_local(model_uri: str) -> bool:
    from urllib.parse import urlparse

    scheme = urlparse(model_uri).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def load_model(model_uri: str, dst_path: str | None = None, *,
               allow_pickle: bool = False) -> CalibratedModel:
    """Load an ``mlcal`` model as a native :class:`CalibratedModel`.

    The directory is checked against the SHA-256 digests recorded when it was saved before
    anything in it is read, and the base model is loaded only from formats that cannot run
    code (see :mod:`mlcal.mlflow.base_loading`). A local directory left half-replaced by a
    killed ``save_model(overwrite=True)`` is restored first.

    Parameters
    ----------
    model_uri : str
        ``runs:/<run_id>/<name>``, ``models:/<name>/<version>``, ``models:/<model_id>``, a
        local path, ...
    dst_path : str, optional
        Where to download remote artifacts (a temporary directory by default).
    allow_pickle : bool, default=False
        Also load what can run code while it loads: a base model saved as pickle/cloudpickle,
        a skops file with types outside scikit-learn/numpy/scipy/the boosting libraries, a
        :class:`~mlcal.mlflow.PyfuncScorer` base (loaded by its own MLflow flavour) and code
        saved with ``code_paths``. **Loading such an artifact runs whatever code its author
        (or anyone who could modify it) put there**: pass True only for artifacts you trust.
        (``mlflow.pyfunc.load_model`` takes the same opt-in from the environment variable
        ``MLCAL_ALLOW_PICKLE=1``.)

    Raises
    ------
    mlcal.mlflow.ModelIntegrityError
        A file was changed, removed or added after saving, the directory holds a symlink or a
        special file, or MLmodel's flavour sections were edited.
    mlcal.mlflow.UnsafeModelFormatError
        The base model (or shipped code) could run code and ``allow_pickle`` is False.
    mlcal.calibrators.base.CalibratorFormatError
        The calibrator JSON or an MLmodel field is malformed or inconsistent (e.g. ``classes``
        differs from the base model's ``classes_``).
    """
    from mlflow.tracking.artifact_utils import _download_artifact_from_uri
    from mlflow.utils.model_utils import _add_code_from_conf_to_system_path

    if _is_local(model_uri):
        from urllib.parse import urlparse

        local_dir = urlparse(model_uri).path if model_uri.startswith("file:") else model_uri
        recover_directory(local_dir)
    local = _download_artifact_from_uri(artifact_uri=model_uri, output_path=dst_path)
    conf = _verified_conf(local, allow_pickle=allow_pickle)
    if allow_pickle:
        _add_code_from_conf_to_system_path(local, conf)
    return _load_local(local, conf, allow_pickle=allow_pickle)


def _forget_code_paths(path: str) -> None:
    """Take the refused model's directories off ``sys.path``: MLflow put its ``code`` entry
    there before calling the flavour, and a later import would pick modules from it."""
    import sys

    root = os.path.realpath(path)
    sys.path[:] = [p for p in sys.path if not (
        isinstance(p, str) and p and os.path.commonpath(
            [root, os.path.realpath(p)]) == root)]


def _load_pyfunc(path: str, model_config=None) -> CalibratedPyfuncModel:
    """Called by ``mlflow.pyfunc.load_model`` with the local model directory.

    ``model_config={"output": "label" | "p_calibrated"}`` (multiclass: ``"label"`` or a
    ``"proba_<class>"`` column) makes ``predict`` return that one column (see
    :class:`CalibratedPyfuncModel`); any other key is refused.
    """
    config = dict(model_config or {})
    unknown = set(config) - {"output"}
    if unknown:
        raise ValueError(f"mlcal model: unknown model_config keys {sorted(unknown)}; "
                         "supported: 'output'")

    allow_pickle = os.environ.get(ALLOW_PICKLE_ENV, "") == "1"
    try:
        conf = _verified_conf(path, allow_pickle=allow_pickle)
    except Exception:
        _forget_code_paths(path)
        raise
    return CalibratedPyfuncModel(_load_local(path, conf, allow_pickle=allow_pickle),
                                 output=config.get("output", OUTPUT_ALL))
