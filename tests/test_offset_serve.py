"""A re-offset model behind a real `mlflow models serve --env-manager local` on 127.0.0.1: the
served probabilities are the offset of the base calibrator's, bit for bit with local predict."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, logit
from sklearn.linear_model import LogisticRegression

import mlcal
from mlcal.mlflow import save_model
from support.http import post
from support.serving import LocalServer


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve_offset")
    rng = np.random.default_rng(31)
    X = rng.normal(size=(1200, 2))
    y = (rng.random(1200) < expit(X @ [1.2, -0.7] - 1.0)).astype(int)
    df = pd.DataFrame(X, columns=["a", "b"])
    base = LogisticRegression().fit(df[:400], y[:400])
    model = mlcal.CalibratedModel(base, "histogram").fit(df[400:800], y[400:800])
    shifted = mlcal.reoffset(model, train_rate=0.5, target_rate=0.05)
    path = root / "model"
    save_model(shifted, str(path), input_example=df[:3],
               pip_requirements=["scikit-learn", "numpy", "pandas"])
    server = LocalServer(str(path), log_path=str(root / "server.log")).start()
    try:
        yield {"url": server.url, "model": model, "shifted": shifted, "df": df[800:]}
    finally:
        server.stop()


def test_served_probabilities_are_the_offset_model_bit_for_bit(served):
    rows = served["df"].iloc[:300]
    status, text = post(f"{served['url']}/invocations",
                         json.dumps({"dataframe_split": {"columns": list(rows.columns),
                                                         "data": rows.to_numpy().tolist()}}))
    assert status == 200, text
    got = pd.DataFrame(json.loads(text)["predictions"])["p_calibrated"].to_numpy()
    local = served["shifted"].predict_proba(rows)[:, 1]
    assert np.array_equal(got.view(np.int64), local.view(np.int64))   # JSON floats round-trip
    base = served["model"].predict_proba(rows)[:, 1]
    inside = (base > 0) & (base < 1)
    delta = logit(0.05) - logit(0.5)
    np.testing.assert_allclose(got[inside], expit(logit(base[inside]) + delta), rtol=1e-12)
    assert got.mean() < base.mean()   # a lower target rate lowers every probability
