"""A real `mlflow models serve --env-manager local` of a multiclass mlcal model on 127.0.0.1:
the JSON response must equal the pyfunc's local predict (and the native model) row for row."""

import json

import mlflow
import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression

from mlcal.mlflow import save_model
from support.serving import LocalServer, pid_alive
from mlcal.model import CalibratedModel
from support.http import post as _post

CLASSES = np.array(["low", "mid", "high"])


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve_mc")
    X, y = make_classification(1500, n_features=5, n_informative=4, n_redundant=0,
                               n_classes=3, random_state=8)
    df = pd.DataFrame(X, columns=[f"x{i}" for i in range(5)])
    labels = CLASSES[y]
    base = LogisticRegression(C=0.05).fit(df[:500], labels[:500])
    model = CalibratedModel(base, "isotonic").fit(df[500:1000], labels[500:1000])  # one-vs-rest
    path = root / "model"
    save_model(model, str(path), input_example=df[:3],
               pip_requirements=["scikit-learn", "numpy", "pandas"])
    server = LocalServer(str(path), log_path=str(root / "server.log")).start()
    try:
        yield {"url": server.url, "model": model, "df": df[1000:], "base": base,
               "pyfunc": mlflow.pyfunc.load_model(str(path))}
    finally:
        server.stop()
        assert server.proc.returncode is not None, "the mlflow server is still running"
        assert not any(pid_alive(c) for c in server.children), "uvicorn outlived the server"


def _split(rows: pd.DataFrame, **extra) -> str:
    return json.dumps({"dataframe_split": {"columns": list(rows.columns),
                                           "data": rows.to_numpy().tolist()}, **extra})


def test_served_rows_equal_local_pyfunc_and_native_model(served):
    rows = served["df"].iloc[:300]
    status, text = _post(f"{served['url']}/invocations", _split(rows))
    assert status == 200, text
    preds = pd.DataFrame(json.loads(text)["predictions"])
    cols = ["proba_high", "proba_low", "proba_mid"]   # classes_ order (sorted by sklearn)
    assert list(preds.columns) == cols + ["label"]
    local = served["pyfunc"].predict(rows)
    # JSON floats round-trip exactly, so the server's numbers equal the local ones exactly
    np.testing.assert_array_equal(preds[cols].to_numpy(), local[cols].to_numpy())
    np.testing.assert_array_equal(preds[cols].to_numpy(), served["model"].predict_proba(rows))
    assert preds["label"].tolist() == local["label"].tolist()
    assert preds["label"].tolist() == served["model"].predict(rows).tolist()


def test_served_uncalibrated_scores_on_request(served):
    rows = served["df"].iloc[:50]
    status, text = _post(f"{served['url']}/invocations",
                         _split(rows, params={"return_uncalibrated": True}))
    assert status == 200, text
    preds = pd.DataFrame(json.loads(text)["predictions"])
    raw = [f"score_uncalibrated_{c}" for c in served["model"].classes_]
    np.testing.assert_array_equal(preds[raw].to_numpy(), served["base"].predict_proba(rows))


def test_bad_rows_get_a_400_with_the_reason(served):
    rows = served["df"].iloc[:2].copy()
    rows.iloc[0, 0] = None
    body = _split(rows).replace("NaN", "null")
    status, text = _post(f"{served['url']}/invocations", body)
    assert status == 400, text
    assert "mlcal model" in text
