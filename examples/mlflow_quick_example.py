"""Calibrate a classifier, log it to MLflow with its calibration metrics, load it back.

    python examples/mlflow_quick_example.py

Uses a throw-away sqlite tracking store in a temporary directory. To serve the logged model
(`mlcal serve` runs `mlflow models serve` with this environment and prints the input columns
and a ready-to-run curl request built from the model's input example):

    mlcal serve <model URI> --port 5000
    curl -X POST 127.0.0.1:5000/invocations -H 'Content-Type: application/json' \\
         -d '{"dataframe_records": [{"x1": 0.5, "x2": -1.0, "radius": 1.25}]}'
"""

import tempfile
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression

import mlcal.mlflow
from mlcal.datasets import make_circular

with tempfile.TemporaryDirectory() as tmp:
    mlflow.set_tracking_uri(f"sqlite:///{Path(tmp) / 'mlflow.db'}")
    # an explicit artifact location keeps artifacts out of ./mlruns
    mlflow.set_experiment(experiment_id=mlflow.create_experiment(
        "mlcal-quick-example", artifact_location=(Path(tmp) / "artifacts").as_uri()))

    X, y = make_circular(3000, seed=0)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order], y[order]
    df = pd.DataFrame({"x1": X[:, 0], "x2": X[:, 1], "radius": np.hypot(X[:, 0], X[:, 1])})
    train, cal, test = slice(0, 1000), slice(1000, 2000), slice(2000, None)
    clf = LogisticRegression(C=0.05).fit(df[train], y[train])  # strongly regularised: miscalibrated

    # fit an isotonic calibrator on held-out data, evaluate on a test set, log everything in one run
    result = mlcal.mlflow.calibrate_and_log(
        clf, df[cal], y[cal], calibrator="isotonic", X_eval=df[test], y_eval=y[test],
        registered_model_name="quick-calibrated",
        # omit pip_requirements to let MLflow infer them (slower: loads the model in a subprocess)
        pip_requirements=mlcal.mlflow.get_default_pip_requirements())
    r = result.report
    print(f"run {result.run_id}: ECE {r['before']['ece']:.4f} -> {r['after']['ece']:.4f}, "
          f"Brier {r['before']['brier']:.4f} -> {r['after']['brier']:.4f}")
    print(f"model URI: {result.model_uri}")

    native = mlcal.mlflow.load_model("models:/quick-calibrated/1")  # a CalibratedModel
    served = mlflow.pyfunc.load_model(result.model_uri)  # what `mlflow models serve` runs
    print(served.predict(df[test].iloc[:3], params={"return_uncalibrated": True}))
    assert np.array_equal(native.predict_proba(df[test])[:, 1],
                          served.predict(df[test])["p_calibrated"].to_numpy())
