"""MLflow integration: the ``mlcal`` model flavour and per-run calibration logging.

>>> import mlflow, mlcal.mlflow                                    # doctest: +SKIP
>>> cal = mlcal.CalibratedModel(clf, "isotonic").fit(X_cal, y_cal)   # doctest: +SKIP
>>> with mlflow.start_run():                                        # doctest: +SKIP
...     mlcal.mlflow.log_calibration(y_test, clf.predict_proba(X_test)[:, 1],
...                                  cal.predict_proba(X_test)[:, 1], calibrator=cal.calibrator_)
...     info = mlcal.mlflow.log_model(cal, name="model", input_example=X_cal[:5])
>>> mlcal.mlflow.load_model(info.model_uri)                        # doctest: +SKIP

This module is the flavour's ``loader_module``: MLflow imports it by name to load and serve the
models it saved. The flavour relies on MLflow internals that are stable within MLflow 3.
"""

from mlcal._optional import require

require("mlflow")  # before anything imports it: a named extra, not a bare ModuleNotFoundError

from mlcal.mlflow.base_models import (BASE_FORMATS, PyfuncScorer,  # noqa: E402
                                      load_base_estimator)
from mlcal.mlflow.flavor import (FLAVOR_NAME, OUTPUT_LABEL, OUTPUT_PROBABILITY,
                                 OUTPUT_UNCALIBRATED, PARAM_RETURN_UNCALIBRATED,
                                 CalibratedPyfuncModel, _load_pyfunc, get_default_conda_env,
                                 get_default_pip_requirements, load_model, log_model,
                                 probability_columns, save_model)
from mlcal.mlflow.integrity import (ModelIntegrityError, UnsafeModelFormatError,
                                    check_registered_version)
from mlcal.mlflow.tracking import CalibrationRun, calibrate_and_log, log_calibration

__all__ = ["BASE_FORMATS", "FLAVOR_NAME", "OUTPUT_LABEL", "OUTPUT_PROBABILITY",
           "OUTPUT_UNCALIBRATED", "PARAM_RETURN_UNCALIBRATED", "CalibratedPyfuncModel",
           "CalibrationRun", "ModelIntegrityError", "PyfuncScorer", "UnsafeModelFormatError",
           "calibrate_and_log", "check_registered_version", "get_default_conda_env",
           "get_default_pip_requirements", "load_base_estimator", "load_model",
           "log_calibration", "log_model", "probability_columns", "save_model"]
