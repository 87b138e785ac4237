"""Calibrate a base model on the first rows of a labelled frame, log it with the mlcal flavour
and run the `calibration` evaluator on the remaining rows (real MLflow, the active store)."""

import mlflow


def evaluate_calibrated(model, test, calibrator, n_fit: int, pip_requirements: list[str],
                        evaluator_config: dict | None = None):
    """Return ``(calibrated model, holdout frame, run id)``; ``test`` has the label column "y"."""
    import mlcal.mlflow
    from mlcal import CalibratedModel

    X, y = test.drop(columns=["y"]), test["y"].to_numpy()
    cal = CalibratedModel(model, calibrator).fit(X.iloc[:n_fit], y[:n_fit])
    holdout = test.iloc[n_fit:]
    with mlflow.start_run() as run:
        info = mlcal.mlflow.log_model(cal, name="cal", pip_requirements=pip_requirements,
                                      input_example=X.iloc[:2])
        mlflow.models.evaluate(info.model_uri, holdout, targets="y", model_type="classifier",
                               evaluators=["calibration"], evaluator_config=evaluator_config)
    return cal, holdout, run.info.run_id
