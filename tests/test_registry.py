"""ECE-gated promotion on a real sqlite model registry (no mocks)."""

import numpy as np
import pandas as pd
import pytest

mlflow = pytest.importorskip("mlflow")

from sklearn.naive_bayes import GaussianNB  # noqa: E402

import mlcal.mlflow as mlcal_mlflow  # noqa: E402
from mlcal import CalibratedModel, HistogramBinning, Isotonic  # noqa: E402
from mlcal.cli import main  # noqa: E402
from mlcal.datasets import make_circular  # noqa: E402
from mlcal.metrics import ece  # noqa: E402
from mlcal.registry import promote  # noqa: E402

NAME = "circle-clf"


@pytest.fixture()
def registry(sqlite_tracking):
    return mlflow.MlflowClient()


@pytest.fixture(scope="module")
def models():
    X, y = make_circular(3000, seed=11)
    X = np.column_stack([X, (X ** 2).sum(1)])
    cols = ["x1", "x2", "r2"]
    frame = pd.DataFrame(X, columns=cols)
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(y))
    tr, cal, te = idx[:1000], idx[1000:2000], idx[2000:]
    base = GaussianNB().fit(frame.iloc[tr], y[tr])
    good = CalibratedModel(base, Isotonic()).fit(frame.iloc[cal], y[cal])
    # one bin = the base rate everywhere: badly calibrated conditionally, but coarse
    coarse = CalibratedModel(base, HistogramBinning(n_bins=2)).fit(frame.iloc[cal], y[cal])
    holdout = frame.iloc[te].copy()
    holdout["y"] = y[te]
    return good, coarse, holdout


def register(model, holdout, logged_ece=None):
    with mlflow.start_run():
        if logged_ece is not None:
            mlflow.log_metric("ece_after", logged_ece)
        mlcal_mlflow.log_model(model, name="model", registered_model_name=NAME,
                               pip_requirements=["mlcal"], input_example=holdout.iloc[:2, :3])
    client = mlflow.MlflowClient()
    return max(int(v.version) for v in client.search_model_versions(f"name='{NAME}'"))


def holder(client):
    try:
        return str(client.get_model_version_by_alias(NAME, "champion").version)
    except mlflow.exceptions.MlflowException:
        return None


def test_logged_metric_gate_promotes_refuses_and_tags(registry, models):
    good, coarse, holdout = models
    v1 = register(good, holdout, logged_ece=0.02)
    d = promote(NAME, v1, max_ece=0.03)
    assert d.promoted and holder(registry) == str(v1)
    tags = registry.get_model_version(NAME, str(v1)).tags
    assert tags["mlcal.gate.result"] == "promoted" and float(tags["mlcal.gate.ece"]) == 0.02
    assert tags["mlcal.gate.compared_to"] == "none"

    v2 = register(coarse, holdout, logged_ece=0.05)          # above the threshold
    d = promote(NAME, v2, max_ece=0.03)
    assert not d.promoted and holder(registry) == str(v1)
    assert registry.get_model_version(NAME, str(v2)).tags["mlcal.gate.result"] == "refused"

    v3 = register(coarse, holdout, logged_ece=0.025)         # under threshold, worse than champion
    d = promote(NAME, v3, max_ece=0.03)
    assert not d.promoted and holder(registry) == str(v1)
    t3 = registry.get_model_version(NAME, str(v3)).tags
    assert t3["mlcal.gate.compared_to"] == str(v1) and float(t3["mlcal.gate.champion_ece"]) == 0.02
    d = promote(NAME, v3, max_ece=0.03, margin=0.01)         # within the margin: promoted
    assert d.promoted and holder(registry) == str(v3)
    assert "PROMOTED" in d.explain() and "REFUSED" not in d.explain()


def test_recomputed_gate_compares_on_the_same_data(registry, models):
    good, coarse, holdout = models
    X, y = holdout.drop(columns=["y"]), holdout["y"].to_numpy()
    e_good = ece(y, good.predict_proba(X)[:, 1])
    e_coarse = ece(y, coarse.predict_proba(X)[:, 1])
    assert e_good < e_coarse
    v_coarse = register(coarse, holdout)
    v_good = register(good, holdout)
    d = promote(NAME, v_coarse, max_ece=1.0, data=holdout)
    assert d.promoted and d.candidate_ece == pytest.approx(e_coarse, abs=1e-12)
    d = promote(NAME, v_good, max_ece=1.0, data=holdout)     # better than the champion
    assert d.promoted and d.champion_ece == pytest.approx(e_coarse, abs=1e-12)
    d = promote(NAME, v_coarse, max_ece=1.0, data=holdout)   # now worse than the champion
    assert not d.promoted and holder(registry) == str(v_good)
    d = promote(NAME, v_coarse, max_ece=1.0, data=holdout, margin=e_coarse - e_good + 1e-9)
    assert d.promoted


def test_cli_exit_codes(registry, models, tmp_path, capsys):
    good, coarse, holdout = models
    csv = tmp_path / "holdout.csv"
    holdout.to_csv(csv, index=False)
    v = register(good, holdout, logged_ece=0.02)
    assert main(["promote", "--model-name", NAME, "--version", str(v), "--max-ece", "0.001"]) == 1
    assert "REFUSED" in capsys.readouterr().out
    assert main(["promote", "--model-name", NAME, "--max-ece", "0.5", "--data", str(csv)]) == 0
    assert "PROMOTED" in capsys.readouterr().out
    assert main(["promote", "--model-name", "no-such-model", "--max-ece", "0.1"]) == 2
    assert main(["promote", "--model-name", NAME, "--max-ece", "0.1", "--data", str(csv),
                 "--label-column", "nope"]) == 2
    assert "no label column" in capsys.readouterr().err
    assert main(["promote", "--model-name", NAME, "--max-ece", "-1"]) == 2


def test_missing_logged_metric_is_an_error_not_a_pass(registry, models):
    good, _, holdout = models
    v = register(good, holdout)
    with pytest.raises(ValueError, match="ece_after"):
        promote(NAME, v, max_ece=0.5)
    assert holder(registry) is None
