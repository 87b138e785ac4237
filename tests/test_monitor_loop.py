"""`mlcal monitor`, the monitoring loop, end to end on a real sqlite MLflow registry (no mocks):
a champion is fitted, logged, registered and promoted through the gate; batches are fed through
the CLI one at a time; the alarm builds, registers and gates a candidate; the alias moves only
when the gate promotes; per-batch metrics are logged with steps; an edited state is refused."""

import json
import os

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, logit

mlflow = pytest.importorskip("mlflow")

from sklearn.linear_model import LogisticRegression  # noqa: E402

import mlcal.mlflow as mlcal_mlflow  # noqa: E402
from mlcal import CalibratedModel, Platt  # noqa: E402
from mlcal.cli import main  # noqa: E402
from mlcal.mlflow.gate import promote  # noqa: E402

NAME = "loop-clf"
COLS = ["x1", "x2"]
ROWS = 400


def true_logit(X):
    return 1.2 * X[:, 0] - 0.8 * X[:, 1] - 0.5


def batch(rng, n=ROWS, offset=0.0, slope=1.0):
    X = rng.normal(size=(n, 2))
    y = (rng.random(n) < expit(slope * true_logit(X) + offset)).astype(int)
    frame = pd.DataFrame(X, columns=COLS)
    frame["y"] = y
    return frame


def champion(rng):
    """A logistic base model made under-confident (C small) and Platt-calibrated on fresh rows;
    registered and promoted to @champion through the gate."""
    train, cal, hold = batch(rng, 600), batch(rng, 1500), batch(rng, 1000)
    base = LogisticRegression(C=0.005).fit(train[COLS], train["y"])
    model = CalibratedModel(base, Platt()).fit(cal[COLS], cal["y"])
    with mlflow.start_run():
        mlcal_mlflow.log_model(model, name="model", registered_model_name=NAME,
                               pip_requirements=["mlcal"])
    decision = promote(NAME, "1", max_ece=0.08, data=hold, settle_seconds=0.0)
    assert decision.promoted, decision.explain()
    return model


def holder(client):
    return str(client.get_model_version_by_alias(NAME, "champion").version)


def feed(tmp_path, frame, i, *extra):
    path = tmp_path / f"batch{i}.parquet"
    frame.to_parquet(path) if i % 2 else frame.to_csv(path.with_suffix(".csv"), index=False)
    data = str(path if i % 2 else path.with_suffix(".csv"))
    return main(["monitor", "--model-uri", f"models:/{NAME}@champion", "--data", data,
                 "--label-column", "y", "--state", str(tmp_path / "state.json"),
                 "--gate-min-rows", "200", "--max-ece", "0.08", *extra])
