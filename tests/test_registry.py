"""The promotion gate on a real sqlite model registry (no mocks): label checks, the
calibration + sharpness policy, bootstrap confidence, tags, JSON and decision history."""

import json

import numpy as np
import pandas as pd
import pytest

mlflow = pytest.importorskip("mlflow")

from sklearn.naive_bayes import GaussianNB  # noqa: E402

import mlcal.mlflow as mlcal_mlflow  # noqa: E402
from mlcal import CalibratedModel, HistogramBinning, Platt  # noqa: E402
from mlcal.cli import main  # noqa: E402
from mlcal.datasets import make_circular  # noqa: E402
from mlcal.metrics import auc, brier, ece, log_loss  # noqa: E402
from mlcal.metrics.bootstrap import paired_bootstrap_diff  # noqa: E402
from mlcal.mlflow.gate import (InSampleMetricsError, TooFewRowsError,  # noqa: E402
                               UsefulnessNeedsDataError, gate_history)
from support.gate import promote_without_report as promote  # noqa: E402

NAME = "circle-clf"
LOOSE = dict(max_log_loss_increase=10.0, max_brier_increase=1.0, max_auc_decrease=1.0)


@pytest.fixture()
def registry(sqlite_tracking):
    return mlflow.MlflowClient()


@pytest.fixture(scope="module")
def models():
    X, y = make_circular(3000, seed=11)
    X = np.column_stack([X, (X ** 2).sum(1)])
    frame = pd.DataFrame(X, columns=["x1", "x2", "r2"])
    idx = np.random.default_rng(0).permutation(len(y))
    tr, cal, te = idx[:1000], idx[1000:2000], idx[2000:]
    base = GaussianNB().fit(frame.iloc[tr], y[tr])
    good = CalibratedModel(base, Platt()).fit(frame.iloc[cal], y[cal])
    # two output values: calibrated on average (tiny ECE) but with almost no sharpness
    coarse = CalibratedModel(base, HistogramBinning(n_bins=2)).fit(frame.iloc[cal], y[cal])
    holdout = frame.iloc[te].copy()
    holdout["y"] = y[te]
    return good, coarse, holdout


def register(model, holdout, logged=None, source="held-out"):
    with mlflow.start_run():
        if logged is not None:
            mlflow.log_metrics(logged)
            if source is not None:
                mlflow.set_tag("mlcal.metrics_source", source)
        mlcal_mlflow.log_model(model, name="model", registered_model_name=NAME,
                               pip_requirements=["mlcal"], input_example=holdout.iloc[:2, :3])
    client = mlflow.MlflowClient()
    return max(int(v.version) for v in client.search_model_versions(f"name='{NAME}'"))


def holder(client):
    try:
        return str(client.get_model_version_by_alias(NAME, "champion").version)
    except mlflow.exceptions.MlflowException:
        return None


def scores(model, holdout):
    X, y = holdout.drop(columns=["y"]), holdout["y"].to_numpy()
    p = model.predict_proba(X)[:, 1]
    return {"ece": ece(y, p), "log_loss": log_loss(y, p), "brier": brier(y, p), "auc": auc(y, p)}


def logged_of(s):
    return {f"{k}_after": v for k, v in s.items()}


def test_two_value_calibrator_is_refused_against_a_correct_holder(registry, models):
    good, coarse, holdout = models
    sg, sc = scores(good, holdout), scores(coarse, holdout)
    assert len(np.unique(coarse.predict_proba(holdout.drop(columns=["y"]))[:, 1])) == 2
    assert sc["ece"] < 0.03            # ECE alone would promote it...
    assert sc["log_loss"] > sg["log_loss"] + 0.03 and sc["brier"] > sg["brier"] + 0.005
    v_good, v_coarse = register(good, holdout), register(coarse, holdout)
    assert promote(NAME, v_good, max_ece=0.05, data=holdout).promoted
    d = promote(NAME, v_coarse, max_ece=0.05, data=holdout)
    assert not d.promoted and holder(registry) == str(v_good)
    verdicts = {c.name: c.passed for c in d.criteria}
    assert verdicts == {"ece": True, "log_loss_vs_holder": False, "brier_vs_holder": False,
                        "auc_vs_holder": sc["auc"] - sg["auc"] >= -0.01,
                        "log_loss_vs_constant": True, "brier_vs_constant": True}
    by = {c.name: c for c in d.criteria}
    # paired on the same rows: the differences are exactly those of the two models' scores
    assert by["log_loss_vs_holder"].value == pytest.approx(sc["log_loss"] - sg["log_loss"],
                                                           abs=1e-12)
    assert by["auc_vs_holder"].value == pytest.approx(sc["auc"] - sg["auc"], abs=1e-12)
    assert by["ece"].value == pytest.approx(sc["ece"], abs=1e-12)
    text = d.explain()
    assert "REFUSED" in text and "FAIL log_loss_vs_holder" in text and "pass ece" in text
    tags = registry.get_model_version(NAME, str(v_coarse)).tags
    assert tags["mlcal.gate.result"] == "refused"
    assert tags["mlcal.gate.log_loss_vs_holder.verdict"] == "fail"
    assert float(tags["mlcal.gate.auc_vs_holder.value"]) == pytest.approx(sc["auc"] - sg["auc"])
    assert tags["mlcal.gate.compared_to"] == str(v_good)


def test_logged_metrics_gate(registry, models):
    good, coarse, holdout = models
    sg, sc = scores(good, holdout), scores(coarse, holdout)
    v1 = register(good, holdout, logged_of(sg))
    # no holder: usefulness needs rows, logged metrics cannot show it
    with pytest.raises(UsefulnessNeedsDataError, match="pass held-out data"):
        promote(NAME, v1, max_ece=0.03)
    assert holder(registry) is None and gate_history(NAME) == []
    d = promote(NAME, v1, max_ece=0.03, data=holdout, min_rows=1000)
    assert d.promoted and holder(registry) == str(v1)
    assert registry.get_model_version(NAME, str(v1)).tags["mlcal.gate.compared_to"] == "none"
    v2 = register(coarse, holdout, logged_of(sc))
    d = promote(NAME, v2, max_ece=0.03)
    assert not d.promoted and holder(registry) == str(v1)
    d = promote(NAME, v2, max_ece=0.03, **LOOSE)   # within very loose margins: promoted
    assert d.promoted and holder(registry) == str(v2)
    v3 = register(good, holdout, {"ece_after": 0.01})   # no log_loss_after etc.
    with pytest.raises(ValueError, match="log_loss_after"):
        promote(NAME, v3, max_ece=0.03)
    assert holder(registry) == str(v2)


def test_in_sample_or_untagged_logged_metrics_are_refused_without_data(registry, models,
                                                                       capsys):
    good, coarse, holdout = models
    sg, sc = scores(good, holdout), scores(coarse, holdout)
    v_hold = register(good, holdout, logged_of(sg), source="in-sample")
    assert promote(NAME, v_hold, max_ece=0.05, data=holdout).promoted  # rows: tag irrelevant
    v_in = register(good, holdout, logged_of(sg), source="in-sample")
    v_untagged = register(good, holdout, logged_of(sg), source=None)
    hist = len(gate_history(NAME))
    with pytest.raises(InSampleMetricsError, match=f"version {v_in}'s logged metrics .* "
                       "computed in-sample .*allow_in_sample=True"):
        promote(NAME, v_in, max_ece=0.05)
    with pytest.raises(InSampleMetricsError, match="mlcal.metrics_source is missing"):
        promote(NAME, v_untagged, max_ece=0.05)
    code = main(["promote", "--model-name", NAME, "--version", str(v_untagged), "--max-ece",
                 "0.05"])
    assert code == 2 and "--allow-in-sample" in capsys.readouterr().err
    assert holder(registry) == str(v_hold) and len(gate_history(NAME)) == hist
    # a held-out candidate against an in-sample holder is refused too (the holder's metrics)
    v_held = register(good, holdout, logged_of(sg))
    with pytest.raises(InSampleMetricsError, match=f"version {v_hold}'s logged metrics"):
        promote(NAME, v_held, max_ece=0.05)
    # told otherwise: decided on them, and the decision says so
    d = promote(NAME, v_in, max_ece=0.05, allow_in_sample=True)
    assert d.promoted and "in-sample metrics allowed" in d.source
    assert main(["promote", "--model-name", NAME, "--version", str(v_untagged), "--max-ece",
                 "0.05", "--allow-in-sample", "--no-report"]) == 0
    assert holder(registry) == str(v_untagged)


def test_the_default_minimum_of_rows_follows_max_ece(registry, models):
    good, _, holdout = models
    v = register(good, holdout)
    with pytest.raises(TooFewRowsError, match=r"only 300 rows, fewer than the minimum of 385 "
                                              r"\(derived from max_ece=0.05"):
        promote(NAME, v, max_ece=0.05, data=holdout.iloc[:300])
    # (1.96 * 0.5 / 0.05)^2 = 384.1: 385 rows are enough
    assert promote(NAME, v, max_ece=0.05, data=holdout.iloc[:385]).promoted


def test_confidence_decides_on_the_whole_interval(registry, models):
    good, coarse, holdout = models
    small = holdout.iloc[:300]
    v_coarse, v_good = register(coarse, small), register(good, small)
    # no holder: the two-bin map is worse than its own base model on log loss...
    first = promote(NAME, v_coarse, max_ece=1.0, data=small)
    assert not first.promoted
    assert {c.name for c in first.criteria if c.passed is False} == {"log_loss_vs_base",
                                                                      "brier_vs_base"}
    # ...so it becomes the holder only within loose margins
    assert promote(NAME, v_coarse, max_ece=1.0, data=small, **LOOSE).promoted
    d = promote(NAME, v_good, max_ece=1.0, data=small, confidence=0.95, n_resamples=200)
    assert d.promoted
    for c in d.criteria:
        if c.name.endswith("_vs_constant"):   # one-sided t upper bounds, not the bootstrap
            assert c.lower is None and c.value < c.upper < 0
        else:
            assert c.lower <= c.value <= c.upper and c.lower < c.upper
    ll = next(c for c in d.criteria if c.name == "log_loss_vs_holder")
    assert ll.upper < 0  # the good model is better with confidence
    # a log-loss margin between the point difference and the interval's upper end: point
    # estimates promote, the 95% interval does not
    X, y = small.drop(columns=["y"]), small["y"].to_numpy()
    iv = paired_bootstrap_diff(log_loss, y, coarse.predict_proba(X)[:, 1],
                               good.predict_proba(X)[:, 1], n_resamples=200, seed=0)
    assert iv.estimate < iv.upper
    policy = {**LOOSE, "max_log_loss_increase": (iv.estimate + iv.upper) / 2}
    refused = promote(NAME, v_coarse, max_ece=1.0, data=small, confidence=0.95,
                      n_resamples=200, **policy)
    assert not refused.promoted and holder(registry) == str(v_good)
    ll = next(c for c in refused.criteria if c.name == "log_loss_vs_holder")
    assert (ll.value, ll.lower, ll.upper) == pytest.approx((iv.estimate, iv.lower, iv.upper),
                                                           abs=1e-12)
    assert promote(NAME, v_coarse, max_ece=1.0, data=small, **policy).promoted
    with pytest.raises(ValueError, match="data"):
        promote(NAME, v_good, max_ece=1.0, confidence=0.95)


def test_cli_json_history_and_exit_codes(registry, models, tmp_path, capsys):
    good, coarse, holdout = models
    csv = tmp_path / "holdout.csv"
    holdout.to_csv(csv, index=False)
    v_good, v_coarse = register(good, holdout), register(coarse, holdout)
    base = ["promote", "--model-name", NAME, "--data", str(csv)]
    # --no-report where the decision is the point; the promoted call keeps the default and
    # logs its HTML gate report (checked below)
    assert main(base + ["--version", str(v_good), "--max-ece", "0.001", "--min-rows",
                        "100", "--no-report"]) == 1
    assert "REFUSED" in capsys.readouterr().out
    # the default minimum is derived from --max-ece: 0.001 would need 960,365 rows
    assert main(base + ["--version", str(v_good), "--max-ece", "0.001"]) == 2
    assert "fewer than the minimum of 960365 (derived from max_ece=0.001" \
        in capsys.readouterr().err
    assert main(base + ["--version", str(v_good), "--max-ece", "0.5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["result"] == "promoted" and out["criteria"][0]["name"] == "ece"
    assert out["criteria"][0]["value"] == pytest.approx(scores(good, holdout)["ece"])
    assert out["policy"]["max_log_loss_increase"] == 0.01
    run_id = registry.get_model_version(NAME, str(v_good)).run_id
    (report,) = [a.path for a in registry.list_artifacts(run_id, "gate")]
    assert report.startswith("gate/gate_report_champion_") and report.endswith(".html")
    assert main(base + ["--version", str(v_coarse), "--max-ece", "0.5", "--json",
                        "--no-report"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert {c["name"]: c["passed"] for c in out["criteria"]}["brier_vs_holder"] is False
    # every decision kept, oldest first, readable from the CLI
    hist = gate_history(NAME)
    assert [(h["version"], h["result"]) for h in hist] == [
        (str(v_good), "refused"), (str(v_good), "promoted"), (str(v_coarse), "refused")]
    assert main(["promote", "--history", NAME]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 4 and "brier_vs_holder" in table[3] and "promoted" in table[2]
    assert main(["promote", "--history", NAME, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == hist
    assert main(["promote", "--model-name", "no-such-model", "--max-ece", "0.1"]) == 2
    assert main(base + ["--max-ece", "0.1", "--label-column", "nope"]) == 2
    assert "no label column" in capsys.readouterr().err
    assert main(["promote", "--model-name", NAME, "--max-ece", "-1"]) == 2
    assert main(base + ["--max-ece", "0.1", "--confidence", "1.5"]) == 2
    assert holder(registry) == str(v_good)


def _bad(holdout, kind):
    h = holdout.copy()
    if kind == "all NaN":
        h["y"] = np.nan
    elif kind == "strings not among the classes":
        h["y"] = np.where(h["y"] == 1, "yes", "no")
    elif kind == "5% NaN":
        h["y"] = h["y"].astype(float)
        h.loc[h.index[::20], "y"] = np.nan
    elif kind == "a single class":
        h = h[h["y"] == 1]
    elif kind == "a label 2":
        h.loc[h.index[0], "y"] = 2
    elif kind == "too few rows":
        h = h.iloc[:60]
    return h


@pytest.fixture(scope="module")
def bad_label_registry(models, tmp_path_factory):
    """One real store for the bad-label cases (a holder promoted, a candidate registered): each
    case must change nothing, and each checks the holder, the candidate's tags and the history
    before and after its own attempt, so they can share it (registering and promoting once
    instead of once per case)."""
    from support.mlflow_store import sqlite_store

    good, coarse, holdout = models
    with sqlite_store(tmp_path_factory.mktemp("bad-labels"), "bad-labels") as uri:
        v_good = register(good, holdout)
        assert promote(NAME, v_good, max_ece=0.5, data=holdout).promoted
        v_coarse = register(coarse, holdout)
        yield uri, v_good, v_coarse


@pytest.mark.parametrize("kind,message", [
    ("all NaN", "missing"), ("strings not among the classes", "not among the model's classes"),
    ("5% NaN", "50 of 1000 labels are missing"), ("a single class", "positive class"),
    ("a label 2", "not among the model's classes"), ("too few rows", "minimum of 97")])
def test_bad_labels_exit_2_and_change_nothing(bad_label_registry, models, tmp_path, capsys,
                                              monkeypatch, kind, message):
    _, _, holdout = models
    uri, v_good, v_coarse = bad_label_registry
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
    registry = mlflow.MlflowClient()
    assert holder(registry) == str(v_good)
    before_tags = registry.get_model_version(NAME, str(v_coarse)).tags
    n_hist = len(gate_history(NAME))
    csv = tmp_path / "bad.csv"
    _bad(holdout, kind).to_csv(csv, index=False)
    max_ece = "0.1" if kind == "too few rows" else "1"     # 0.1: at least 97 rows
    code = main(["promote", "--model-name", NAME, "--version", str(v_coarse), "--max-ece", max_ece,
                 "--data", str(csv), *sum(([f"--{k.replace('_', '-')}", str(v)]
                                           for k, v in LOOSE.items()), [])])
    assert code == 2
    assert message in capsys.readouterr().err
    assert holder(registry) == str(v_good)
    assert registry.get_model_version(NAME, str(v_coarse)).tags == before_tags
    assert len(gate_history(NAME)) == n_hist


def test_too_few_rows_is_configurable(registry, models):
    good, _, holdout = models
    v = register(good, holdout)
    assert promote(NAME, v, max_ece=1.0, data=holdout.iloc[:60], min_rows=50).promoted


def test_store_write_conflicts_are_retried_then_reraised():
    # sqlite answers two processes writing the same alias row with a UNIQUE-constraint error;
    # the gate repeats such idempotent writes a bounded number of times
    from mlflow.exceptions import MlflowException

    from mlcal.mlflow.gate import _retry_write

    calls = []

    def flaky(value):
        calls.append(value)
        if len(calls) < 3:
            raise MlflowException("(sqlite3.IntegrityError) UNIQUE constraint failed: "
                                  "registered_model_aliases.name")
        return value

    assert _retry_write(flaky, 7) == 7 and len(calls) == 3

    def broken(_):
        raise MlflowException("RESOURCE_DOES_NOT_EXIST: no such model")

    with pytest.raises(MlflowException, match="RESOURCE_DOES_NOT_EXIST"):
        _retry_write(broken, 1)                 # not transient: raised at once


def _register_sklearn(estimator, holdout):
    """A plain ``mlflow.sklearn`` model version (pickled: no mlcal flavour)."""
    with mlflow.start_run():
        mlflow.sklearn.log_model(estimator, name="model", registered_model_name=NAME,
                                 input_example=holdout.iloc[:2, :3])
    client = mlflow.MlflowClient()
    return max(int(v.version) for v in client.search_model_versions(f"name='{NAME}'"))


def test_a_model_that_only_loads_by_unpickling_needs_allow_pickle(registry, models, tmp_path,
                                                                  capsys):
    from mlcal.mlflow.integrity import UnsafeModelFormatError

    good, _, holdout = models
    base = getattr(good, "base_estimator_", good.base_estimator)
    X, y = holdout.drop(columns=["y"]), holdout["y"].to_numpy()
    v_sk = _register_sklearn(base, holdout)
    # refused by default, by name, before anything is written
    with pytest.raises(UnsafeModelFormatError, match="not an mlcal-flavour model.*allow_pickle"):
        promote(NAME, v_sk, max_ece=0.5, data=holdout, **LOOSE)
    csv = tmp_path / "holdout.csv"
    holdout.to_csv(csv, index=False)
    cli = ["promote", "--model-name", NAME, "--data", str(csv), "--max-ece", "0.5"]
    assert main(cli + ["--version", str(v_sk)]) == 2
    assert "not an mlcal-flavour model" in capsys.readouterr().err
    assert holder(registry) is None and gate_history(NAME) == []
    assert "mlcal.gate.result" not in registry.get_model_version(NAME, str(v_sk)).tags
    # with the opt-in it is judged on its own predict_proba, as before
    d = promote(NAME, v_sk, max_ece=0.5, data=holdout, allow_pickle=True, **LOOSE)
    p = base.predict_proba(X)[:, 1]
    assert {c.name: c for c in d.criteria}["ece"].value == pytest.approx(ece(y, p), abs=1e-12)
    assert d.promoted and holder(registry) == str(v_sk)
    # an mlcal candidate against that pickled holder: refused by default, judged with the opt-in
    v_good = register(good, holdout)
    assert main(cli + ["--version", str(v_good)]) == 2
    assert f"models:/{NAME}/{v_sk} is not an mlcal-flavour model" in capsys.readouterr().err
    assert holder(registry) == str(v_sk)
    assert main(cli + ["--version", str(v_good), "--allow-pickle", "--json", "--no-report"]) == 0
    out = json.loads(capsys.readouterr().out)
    by = {c["name"]: c["value"] for c in out["criteria"]}
    pg = good.predict_proba(X)[:, 1]
    assert by["log_loss_vs_holder"] == pytest.approx(log_loss(y, pg) - log_loss(y, p),
                                                     abs=1e-12)
    assert holder(registry) == str(v_good)
