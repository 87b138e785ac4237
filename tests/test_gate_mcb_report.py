"""Issue #28 item 4: the gate's optional CORP miscalibration criterion (``max_mcb``), the CORP
decomposition in its decision, and the HTML gate report logged to the candidate's run.

The criterion on arrays (no MLflow): a forecast reflected inside each ECE bin keeps the bins'
averages (ECE passes) but is anti-monotone within them, so its isotonic recalibration gains
about width^2/4 of Brier (MCB ~ 0.0025) and ``max_mcb`` refuses it while the true probability
passes. Then promotions on a real sqlite registry."""

import mlflow
import numpy as np
import pandas as pd
import pytest

from mlcal.metrics import corp_decomposition
from mlcal.mlflow.gate_policy import GatePolicy, decide

NAME = "mcbgate"
FAST = dict(pip_requirements=["scikit-learn"], bundle_mlcal=False)


def _reflected_within_bins(n=20000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.random(n)
    y = (rng.random(n) < q).astype(np.float64)
    lo = np.floor(q * 10) / 10
    return y, q, np.clip(2 * lo + 0.1 - q, 1e-6, 1 - 1e-6)


def test_max_mcb_refuses_a_miscalibrated_forecast_that_passes_ece():
    y, q, p = _reflected_within_bins()
    policy = GatePolicy(max_ece=0.02, max_mcb=0.0015)
    ok, crit = decide(policy, y, p)
    by = {c.name: c for c in crit}
    assert by["ece"].passed and by["log_loss_vs_constant"].passed
    assert not by["mcb"].passed and not ok
    d = corp_decomposition(y, p)
    assert by["mcb"].value == d.mcb and d.mcb > 0.002
    assert f"DSC {d.dsc:.5f}" in by["mcb"].note and f"UNC {d.unc:.5f}" in by["mcb"].note
    ok, crit = decide(policy, y, q)              # the true probability passes
    assert ok and next(c for c in crit if c.name == "mcb").value < 0.001
    # off by default: the same reflected forecast passes the default policy
    ok, crit = decide(GatePolicy(max_ece=0.02), y, p)
    assert ok and "mcb" not in {c.name for c in crit}


def test_max_mcb_is_validated():
    with pytest.raises(ValueError, match="max_mcb"):
        GatePolicy(max_ece=0.05, max_mcb=-0.1)


@pytest.fixture(scope="module")
def models():
    from sklearn.naive_bayes import GaussianNB

    from mlcal import CalibratedModel, Platt
    from mlcal.datasets import make_circular

    X, y = make_circular(2400, seed=5)
    order = np.random.default_rng(1).permutation(len(y))     # rows come sorted by class
    X, y = X[order], y[order]
    frame = pd.DataFrame(np.column_stack([X, (X ** 2).sum(1)]), columns=["x1", "x2", "r2"])
    tr, cal, te = slice(0, 1000), slice(1000, 2000), slice(2000, 2400)
    base = GaussianNB().fit(frame[tr], y[tr])
    good = CalibratedModel(base, Platt()).fit(frame[cal], y[cal])
    other = CalibratedModel(base, "isotonic").fit(frame[cal], y[cal])
    holdout = frame[te].copy()
    holdout["y"] = y[te]
    return good, other, holdout


def _register(model, holdout):
    import mlcal.mlflow as mlcal_mlflow

    with mlflow.start_run() as run:
        info = mlcal_mlflow.log_model(model, name="model", registered_model_name=NAME,
                                      input_example=holdout.iloc[:2, :3], **FAST)
    return str(info.registered_model_version), run.info.run_id


def _reports(client, run_id):
    return [f.path for f in client.list_artifacts(run_id, "gate")]


def test_gate_reports_corp_terms_and_logs_its_report(sqlite_tracking, models, tmp_path,
                                                     capsys):
    import json

    from mlcal.cli import main
    from mlcal.mlflow.gate import McbNeedsDataError, promote

    good, other, holdout = models
    X, y = holdout.drop(columns=["y"]), holdout["y"].to_numpy()
    client = mlflow.MlflowClient()
    v1, run1 = _register(good, holdout)
    d = promote(NAME, v1, max_ece=0.1, data=holdout, max_mcb=0.05)
    assert d.promoted, d.explain()
    dec = d.as_dict()
    p = good.predict_proba(X)[:, 1]
    for score in ("brier", "log_loss"):
        ref = corp_decomposition(y, p, score=score)
        got = dec["decomposition"]["candidate"][score]
        assert (got["mcb"], got["dsc"], got["unc"], got["score"]) == \
            (ref.mcb, ref.dsc, ref.unc, ref.score)
    assert dec["decomposition"]["holder"] is None
    assert next(c for c in d.criteria if c.name == "mcb").value == corp_decomposition(y, p).mcb
    assert "CORP (MCB/DSC/UNC)" in d.explain()
    # the report is on the candidate's run and names every criterion
    (path,) = _reports(client, run1)
    assert path.startswith("gate/gate_report_champion_") and path.endswith(".html")
    html = open(client.download_artifacts(run1, path, str(tmp_path)), encoding="utf-8").read()
    assert {c.name for c in d.criteria} >= {"ece", "mcb", "log_loss_vs_constant"}
    for c in d.criteria:
        assert c.name in html
    assert "PROMOTED" in html and "<th>on the gate's rows</th>" in html
    assert f"{dec['decomposition']['candidate']['brier']['mcb']:.5f}" in html

    # with a holder: both decompositions; max_mcb = 0 refuses on mcb alone, alias unmoved
    v2, run2 = _register(other, holdout)
    d = promote(NAME, v2, max_ece=0.1, data=holdout, max_mcb=0.0,
                max_log_loss_increase=10.0, max_brier_increase=1.0, max_auc_decrease=1.0)
    assert not d.promoted
    assert [c.name for c in d.criteria if c.passed is False] == ["mcb"], d.explain()
    assert str(client.get_model_version_by_alias(NAME, "champion").version) == v1
    ref = corp_decomposition(y, p, score="log_loss")
    assert d.as_dict()["decomposition"]["holder"]["log_loss"]["mcb"] == ref.mcb
    assert len(_reports(client, run2)) == 1 and "REFUSED" in open(client.download_artifacts(
        run2, _reports(client, run2)[0], str(tmp_path / "b")), encoding="utf-8").read()

    # report=False writes none; defaults carry no mcb criterion
    d = promote(NAME, v2, max_ece=0.1, data=holdout, report=False,
                max_log_loss_increase=10.0, max_brier_increase=1.0, max_auc_decrease=1.0)
    assert "mcb" not in {c.name for c in d.criteria} and len(_reports(client, run2)) == 1
    # without data the mcb criterion cannot be read from logged metrics: refused by name
    with pytest.raises(McbNeedsDataError, match="log_calibration logs no"):
        promote(NAME, v2, max_ece=0.1, max_mcb=0.01, allow_in_sample=True)

    # the CLI: --max-mcb refuses (exit 1) and --no-report writes no report; no data: exit 2
    csv = tmp_path / "holdout.csv"
    holdout.to_csv(csv, index=False)
    base = ["promote", "--model-name", NAME, "--version", v2, "--max-ece", "0.1"]
    loose = ["--max-log-loss-increase", "10", "--max-brier-increase", "1",
             "--max-auc-decrease", "1"]
    assert main(base + loose + ["--data", str(csv), "--max-mcb", "0", "--no-report",
                                "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in out["criteria"] if c["passed"] is False] == ["mcb"]
    assert out["decomposition"]["candidate"]["brier"]["mcb"] > 0
    assert len(_reports(client, run2)) == 1
    assert main(base + ["--max-mcb", "0.01", "--allow-in-sample"]) == 2
    assert "max_mcb needs the evaluation rows" in capsys.readouterr().err


def test_multiclass_mcb_is_the_top_label_corp_mcb():
    from scipy.special import softmax

    from mlcal.metrics import top_label_corp_decomposition
    from mlcal.mlflow.gate_policy import corp_terms

    rng = np.random.default_rng(3)
    p = softmax(2 * rng.normal(size=(3000, 4)), axis=1)
    y = np.array([rng.choice(4, p=row) for row in p])
    over = softmax(3 * np.log(p), axis=1)            # over-confident: the top label's MCB grows
    policy = GatePolicy(max_ece=0.5, max_mcb=0.01)
    for forecast, ok in ((p, True), (over, False)):
        crit = {c.name: c for c in decide(policy, y, forecast)[1]}
        ref = top_label_corp_decomposition(y, forecast)
        assert crit["mcb"].value == ref.mcb and crit["mcb"].passed is ok
        assert "top-label" in crit["mcb"].note
        assert corp_terms(y, forecast)["log_loss"]["mcb"] == \
            top_label_corp_decomposition(y, forecast, score="log_loss").mcb

