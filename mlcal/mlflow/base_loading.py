"""Load the base model nested in an ``mlcal`` artifact from formats that cannot run code.

The nested ``base_model/MLmodel`` only locates the data file; what is loaded, and how, is
decided here from the file's own bytes and from an allowlist, never from a format name an
artifact declares:

============  ==================================  ==================================
flavour       data file                           loaded with
============  ==================================  ==================================
sklearn       skops zip                           ``skops.io.load`` trusting only the
                                                  types recorded at save time
lightgbm      ``Booster`` text model, or skops    ``lightgbm.Booster(model_str=...)``
              zip (``LGBMClassifier``)            / skops as above
xgboost       JSON or UBJSON                      ``XGBClassifier().load_model``
catboost      native ``CBM1`` binary              ``CatBoostClassifier().load_model``
============  ==================================  ==================================

Anything else (pickle, cloudpickle, joblib, the legacy XGBoost binary, a skops file with a type
outside the recorded list, a :class:`~mlcal.mlflow.PyfuncScorer` base, which is an arbitrary
MLflow model loaded by its own flavour) raises :class:`UnsafeModelFormatError` unless the caller
passes ``allow_pickle=True``, which hands the directory to MLflow's own flavour loader.
"""

from __future__ import annotations

import zipfile
from typing import Any

from mlcal.mlflow.integrity import UnsafeModelFormatError, read_mlmodel

# the only packages whose classes a skops base model may need beyond skops' own defaults
TRUSTED_TYPE_ROOTS = frozenset({"sklearn", "numpy", "scipy", "xgboost", "lightgbm", "catboost",
                                "collections"})
_XGB_CLASSES = {"xgboost.sklearn.XGBClassifier", "xgboost.sklearn.XGBRFClassifier",
                "xgboost.core.Booster"}
_LGB_SKLEARN = {"lightgbm.sklearn.LGBMClassifier"}
_LGB_BOOSTER = "lightgbm.basic.Booster"
MAX_SKOPS_UNCOMPRESSED = 2 << 30   # declared zip content; skops reads it all into memory


def _data_file(base_dir: str, conf: dict[str, Any], key: str) -> str:
    from mlcal.mlflow.flavor import inside_model_dir

    return inside_model_dir(base_dir, conf, key, "")


def _head(path: str, n: int = 8) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(n)


def check_trusted_types(types: Any, where: str) -> list[str]:
    """The recorded skops trusted types, refused unless each is a class of a package in
    ``TRUSTED_TYPE_ROOTS`` (a function or a class from elsewhere could run code)."""
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise UnsafeModelFormatError(f"{where}: the recorded skops trusted types must be a list "
                                     f"of type names, got {type(types).__name__}")
    for t in types:
        parts = t.split(".")
        if (len(parts) < 2 or parts[0] not in TRUSTED_TYPE_ROOTS or not parts[-1][:1].isupper()
                or not all(p.isidentifier() for p in parts)):
            raise UnsafeModelFormatError(
                f"{where}: skops type {t!r} is not a class of {sorted(TRUSTED_TYPE_ROOTS)}; "
                "loading it could run code (pass allow_pickle=True only if you trust the "
                "artifact)")
    return types


def load_skops(path: str, trusted: list[str]):
    """``skops.io.load`` of ``path`` trusting exactly ``trusted`` (plus skops' defaults);
    refuses a file with any other type before anything is constructed."""
    import skops.io

    try:
        with zipfile.ZipFile(path) as zf:
            if sum(i.file_size for i in zf.infolist()) > MAX_SKOPS_UNCOMPRESSED:
                raise UnsafeModelFormatError(f"{path}: skops archive expands to more than "
                                             f"{MAX_SKOPS_UNCOMPRESSED} bytes")
        untrusted = skops.io.get_untrusted_types(file=path)
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        if isinstance(exc, UnsafeModelFormatError):
            raise
        raise UnsafeModelFormatError(f"{path} is not a readable skops file: "
                                     f"{str(exc)[:200]}") from None
    unknown = sorted(set(untrusted) - set(trusted))
    if unknown:
        raise UnsafeModelFormatError(f"{path} holds types {unknown[:5]} that were not recorded "
                                     "when the model was saved; refusing to load it")
    return skops.io.load(path, trusted=list(untrusted))


def _refuse(path: str, what: str):
    raise UnsafeModelFormatError(
        f"{path}: {what}, which can run code when loaded; mlcal loads base models only from "
        "skops (recorded types), XGBoost JSON/UBJSON, LightGBM text and CatBoost native "
        "files. Pass allow_pickle=True to load it anyway, only if you trust the artifact")


def _load_sklearn(base_dir: str, nested: dict, trusted: Any):
    path = _data_file(base_dir, nested, "pickled_model")
    fmt = nested.get("serialization_format")
    if fmt != "skops" or _head(path, 4) != b"PK\x03\x04":
        _refuse(path, f"a {fmt!r} scikit-learn model (not a skops archive)")
    return load_skops(path, check_trusted_types(trusted, path))


def _load_xgboost(base_dir: str, nested: dict):
    import xgboost

    path = _data_file(base_dir, nested, "data")
    cls = nested.get("model_class")
    if cls not in _XGB_CLASSES:
        _refuse(path, f"XGBoost model class {cls!r} is not one of {sorted(_XGB_CLASSES)}")
    if _head(path, 1) != b"{":   # JSON and UBJSON both open an object with '{'
        _refuse(path, "not an XGBoost JSON/UBJSON model (legacy binary or other)")
    model = getattr(xgboost, cls.rsplit(".", 1)[1])()
    model.load_model(path)
    return model


def _load_lightgbm(base_dir: str, nested: dict, trusted: Any):
    import lightgbm

    path = _data_file(base_dir, nested, "data")
    cls = nested.get("model_class")
    if cls == _LGB_BOOSTER:
        with open(path, "rb") as fh:
            text = fh.read()
        if not text.startswith(b"tree\n"):
            _refuse(path, "not a LightGBM text model")
        return lightgbm.Booster(model_str=text.decode("utf-8", errors="strict"))
    if cls not in _LGB_SKLEARN or nested.get("serialization_format") != "skops" \
            or _head(path, 4) != b"PK\x03\x04":
        _refuse(path, f"a {nested.get('serialization_format')!r} LightGBM {cls!r} model")
    return load_skops(path, check_trusted_types(trusted, path))


def _load_catboost(base_dir: str, nested: dict):
    import catboost

    path = _data_file(base_dir, nested, "data")
    if nested.get("model_type") != "CatBoostClassifier" or nested.get("save_format") != "cbm" \
            or _head(path, 4) != b"CBM1":
        _refuse(path, f"a CatBoost {nested.get('model_type')!r} model in format "
                      f"{nested.get('save_format')!r} (only CatBoostClassifier in cbm loads)")
    model = catboost.CatBoostClassifier()
    model.load_model(path, format="cbm")
    return model


def load_base_safely(base_dir: str, conf: dict[str, Any], *, allow_pickle: bool = False):
    """The base model of an mlcal artifact (``conf`` = its mlcal flavour section), loaded
    without running code from the artifact; see the module notes.

    Raises
    ------
    UnsafeModelFormatError
        The base model is stored in a format that can run code, and ``allow_pickle`` is False.
    """
    from mlcal.calibrators.base import CalibratorFormatError
    from mlcal.mlflow.base_models import load_base_model

    flavor = conf.get("base_flavor")
    if allow_pickle:
        return load_base_model(base_dir, conf)
    if flavor == "python_function":
        _refuse(base_dir, "the base model is an arbitrary MLflow model (PyfuncScorer) loaded "
                          "by its own flavour")
    loaders = {"sklearn": _load_sklearn, "xgboost": _load_xgboost,
               "lightgbm": _load_lightgbm, "catboost": _load_catboost}
    if flavor not in loaders:
        raise CalibratorFormatError(f"unknown base_flavor {flavor!r} in the mlcal flavour "
                                    f"configuration; expected one of {sorted(loaders)}")
    nested = read_mlmodel(base_dir)["flavors"].get(flavor)
    if not isinstance(nested, dict):
        raise CalibratorFormatError(f"{base_dir}/MLmodel has no {flavor!r} flavour mapping")
    if flavor in ("sklearn", "lightgbm"):
        model = loaders[flavor](base_dir, nested, conf.get("base_trusted_types", []))
    else:
        model = loaders[flavor](base_dir, nested)
    if conf.get("base_booster"):
        from mlcal.base_models.boosters import BoosterClassifier

        return BoosterClassifier(model)
    return model
