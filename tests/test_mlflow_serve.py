"""A real `mlflow models serve --env-manager local` of an mlcal model on 127.0.0.1 (no mocks).

One server for the whole module (`LocalServer`): the `mlflow` executable next to sys.executable,
a free port, awaited via /ping, stopped by its PID; its uvicorn child is checked gone by PID.
"""

import json
import sys
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from mlcal.calibrators.platt import Platt
from mlcal.datasets import make_circular
from mlcal.mlflow import save_model
from support.http import post
from support.serving import LocalServer, pid_alive
from mlcal.model import CalibratedModel

BIN_DIR = Path(sys.executable).parent


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    X, y = make_circular(1500, seed=23)
    order = np.random.default_rng(1).permutation(len(y))
    X = np.column_stack([X[order], (X[order] ** 2).sum(1)])
    y = y[order]
    df = pd.DataFrame(X, columns=["x1", "x2", "radius"])
    base = LogisticRegression(C=0.05).fit(df[:500], y[:500])
    model = CalibratedModel(base, Platt()).fit(df[500:1000], y[500:1000])
    path = root / "model"
    save_model(model, str(path), input_example=df[:3],
               pip_requirements=["scikit-learn", "numpy", "pandas"])

    server = LocalServer(str(path), log_path=str(root / "server.log")).start()
    try:
        yield {"url": server.url, "server": server, "model": model, "df": df[1000:],
               "pyfunc": mlflow.pyfunc.load_model(str(path)), "base": base}
    finally:
        server.stop()
        assert server.proc.returncode is not None, "the mlflow server is still running"
        assert not any(pid_alive(c) for c in server.children), "uvicorn outlived the server"


def _payloads(rows: pd.DataFrame):
    """Every request body the server accepts for a column signature (floats sent exactly)."""
    records = rows.to_dict(orient="records")
    columns = {c: rows[c].tolist() for c in rows.columns}
    return {
        "dataframe_split": ("application/json",
                            json.dumps({"dataframe_split": {"columns": list(rows.columns),
                                                            "data": rows.to_numpy().tolist()}})),
        "dataframe_records": ("application/json", json.dumps({"dataframe_records": records})),
        "inputs_records": ("application/json", json.dumps({"inputs": records})),
        "inputs_columns": ("application/json", json.dumps({"inputs": columns})),
        "instances_records": ("application/json", json.dumps({"instances": records})),
        "csv": ("text/csv", rows.to_csv(index=False, float_format="%.17g")),
    }


FORMATS = list(_payloads(pd.DataFrame({"a": [0.0]})))


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_accepted_payload_matches_local_predict(served, fmt):
    rows = served["df"].iloc[:200]
    local = served["pyfunc"].predict(rows)
    content_type, body = _payloads(rows)[fmt]
    status, text = post(f"{served['url']}/invocations", body, content_type)
    assert status == 200, text
    preds = pd.DataFrame(json.loads(text)["predictions"])
    assert list(preds.columns) == ["p_calibrated", "label"]
    np.testing.assert_allclose(preds["p_calibrated"].to_numpy(), local["p_calibrated"].to_numpy(),
                               rtol=0, atol=1e-12)
    np.testing.assert_array_equal(preds["label"].to_numpy(), local["label"].to_numpy())


def test_served_probabilities_match_the_native_model_and_platt_formula(served):
    rows = served["df"].iloc[:300]
    status, text = post(f"{served['url']}/invocations",
                         json.dumps({"dataframe_split": {"columns": list(rows.columns),
                                                         "data": rows.to_numpy().tolist()},
                                     "params": {"return_uncalibrated": True}}))
    assert status == 200, text
    preds = pd.DataFrame(json.loads(text)["predictions"])
    s = served["base"].predict_proba(rows)[:, 1]
    m = served["model"].calibrator_.map_
    np.testing.assert_allclose(preds["score_uncalibrated"].to_numpy(), s, rtol=0, atol=1e-12)
    np.testing.assert_allclose(preds["p_calibrated"].to_numpy(),
                               1.0 / (1.0 + np.exp(m.a * s + m.b)), rtol=0, atol=1e-12)
    np.testing.assert_allclose(preds["p_calibrated"].to_numpy(),
                               served["model"].predict_proba(rows)[:, 1], rtol=0, atol=1e-12)


def test_single_row_request(served):
    row = served["df"].iloc[[7]]
    status, text = post(f"{served['url']}/invocations",
                         json.dumps({"inputs": row.to_dict(orient="records")}))
    assert status == 200, text
    (pred,) = json.loads(text)["predictions"]
    p = served["model"].predict_proba(row)[0, 1]
    assert abs(pred["p_calibrated"] - p) <= 1e-12
    assert pred["label"] == int(p >= 0.5)


@pytest.mark.parametrize("body, content_type, fragment", [
    ('[[0.1, 0.2, 0.3]]', "application/json", "must be a JSON dictionary"),
    ('{"inputs": [[0.1, 0.2, 0.3]]}', "application/json", "Model is missing inputs"),
    ('{"dataframe_split": {"columns": ["x1", "x2"], "data": [[0.1, 0.2]]}}', "application/json",
     "missing inputs ['radius']"),
    ('{"dataframe_records": [{"x1": null, "x2": 0.2, "radius": 1.0}]}', "application/json",
     "mlcal model: Input X contains NaN"),
    ('{"inputs": [{"x1": 0.1, "x2": 0.2, "radius": 1.0}], '
     '"params": {"return_uncalibrated": "maybe"}}',
     "application/json", "return_uncalibrated"),
    ('{"inputs": [{"x1": 0.1, "x2": ', "application/json", "valid JSON"),
    ('x1,x2,radius\n0.1,abc,1.0\n', "text/csv", "Failed to parse input"),
])
def test_malformed_payloads_get_a_4xx_with_a_message(served, body, content_type, fragment):
    status, text = post(f"{served['url']}/invocations", body, content_type)
    assert 400 <= status < 500, (status, text)
    message = json.loads(text)["message"]
    assert fragment in message, message


def test_server_is_the_interpreters_mlflow_on_loopback_with_a_uvicorn_child(served):
    server = served["server"]
    cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes().split(b"\0")
    assert str(BIN_DIR / "mlflow").encode() in cmdline
    assert b"--env-manager" in cmdline and b"local" in cmdline and b"127.0.0.1" in cmdline
    assert server.children, "no uvicorn child recorded"
    child = Path(f"/proc/{server.children[0]}/cmdline").read_bytes()
    assert b"uvicorn" in child
