"""Issue #30 item 4: the gate's optional per-segment criterion ``segment_citl``.

On arrays: a forecast calibrated overall but off by +-0.1 in two halves is refused by the
segment criterion alone; a calibrated forecast is refused at most at about 1 -
``segment_confidence`` however many segments. Then promotions on a real sqlite registry: a
model calibrated globally but not per region is refused with the criterion and promoted
without it; a segment below ``min_segment_rows`` is never used."""

import json

import mlflow
import numpy as np
import pandas as pd
import pytest

from mlcal.mlflow.gate_policy import GatePolicy, decide
from mlcal.metrics.segments import NoEligibleSegmentError, segment_report

NAME = "seggate"
FAST = dict(pip_requirements=["scikit-learn"], bundle_mlcal=False)


def _shifted_halves(n=6000, seed=0):
    rng = np.random.default_rng(seed)
    seg = rng.choice(["a", "b"], n)
    q = rng.uniform(0.2, 0.8, n)
    y = (rng.random(n) < q).astype(float)
    p = np.where(seg == "a", q + 0.1, q - 0.1)   # +0.1 in a, -0.1 in b: calibrated overall
    return y, q, p, seg


def test_segment_criterion_refuses_what_the_global_criteria_pass():
    y, q, p, seg = _shifted_halves()
    policy = GatePolicy(max_ece=0.05, max_segment_citl=0.03, segment_columns=["seg"])
    ok, crit = decide(policy, y, p, segments=pd.DataFrame({"seg": seg}))
    by = {c.name: c for c in crit}
    assert by["ece"].passed and by["log_loss_vs_constant"].passed
    assert not by["segment_citl"].passed and not ok
    rep = segment_report(y, p, seg, simultaneous=True)
    worst = rep.worst
    assert by["segment_citl"].value == abs(worst["citl"]) and by["segment_citl"].lower == \
        worst["citl_excess"] > 0.03
    assert f"{worst['citl']:+.4f}" in by["segment_citl"].note and "Bonferroni" in \
        by["segment_citl"].note
    # the true probability passes; so does the shifted forecast without the criterion
    assert decide(policy, y, q, segments=pd.DataFrame({"seg": seg}))[0]
    assert decide(GatePolicy(max_ece=0.05), y, p)[0]
    with pytest.raises(ValueError, match="needs the segment keys"):
        decide(policy, y, p)
    with pytest.raises(ValueError, match="needs segment_columns"):
        GatePolicy(max_ece=0.05, max_segment_citl=0.03)
    with pytest.raises(ValueError, match="min_segment_rows"):
        GatePolicy(max_ece=0.05, min_segment_rows=0)


def test_multiclass_segments_are_top_label():
    from scipy.special import softmax

    rng = np.random.default_rng(4)
    n = 4000
    seg = rng.choice(["a", "b"], n)
    p = softmax(2 * rng.normal(size=(n, 3)), axis=1)
    y = np.array([rng.choice(3, p=row) for row in p])
    # over-confident in segment a only: its top-label accuracy falls below its confidence
    sharp = np.where((seg == "a")[:, None], softmax(3 * np.log(p), axis=1), p)
    policy = GatePolicy(max_ece=0.2, max_segment_citl=0.02, segment_columns=["seg"])
    keys = pd.DataFrame({"seg": seg})
    crit = {c.name: c for c in decide(policy, y, sharp, segments=keys)[1]}
    assert crit["segment_citl"].passed is False and "top-label accuracy - confidence" in \
        crit["segment_citl"].note and ": a (" in crit["segment_citl"].note
    assert {c.name: c for c in decide(policy, y, p, segments=keys)[1]}["segment_citl"].passed


def test_a_calibrated_model_is_rarely_refused_however_many_segments():
    # 12 segments of 80..200 rows, labels drawn from the forecast itself; limit 0: refused
    # whenever any interval excludes 0. Bonferroni keeps that near 1 - confidence = 5 %
    # (bound 10 %: 2.3 standard errors of 120 draws above it); plain 95 % intervals do not.
    rng = np.random.default_rng(11)
    refused = {True: 0, False: 0}
    reps = 120
    for _ in range(reps):
        sizes = rng.integers(80, 200, 12)
        seg = np.repeat(np.arange(12), sizes)
        p = rng.beta(2, 3, seg.size)
        y = (rng.random(seg.size) < p).astype(float)
        for simultaneous in (True, False):
            rep = segment_report(y, p, seg, min_segment_rows=50, simultaneous=simultaneous)
            refused[simultaneous] += rep.worst["citl_excess"] > 0
    assert refused[True] / reps <= 0.10, refused
    assert refused[False] / reps >= 0.30, refused


def _population(n, seed):
    """x1, x2 and a region: the true log-odds x1 - x2/2 + 0.9 rc, rc = +1 north, -1 south,
    0 for a small 'tiny' region."""
    rng = np.random.default_rng(seed)
    region = rng.choice(["north", "south", "tiny"], n, p=[0.485, 0.485, 0.03])
    rc = np.select([region == "north", region == "south"], [1.0, -1.0], 0.0)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    eta = x1 - 0.5 * x2
    y = (rng.random(n) < 1 / (1 + np.exp(-(eta + 0.9 * rc)))).astype(int)
    y_blind = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)   # no region effect
    return pd.DataFrame({"x1": x1, "x2": x2, "rc": rc}), region, y, y_blind


@pytest.fixture(scope="module")
def models():
    from sklearn.linear_model import LogisticRegression

    from mlcal import CalibratedModel, Platt

    X, region, y, y_blind = _population(9000, seed=2)
    tr, cal, te = slice(0, 4000), slice(4000, 7000), slice(7000, 9000)
    aware = LogisticRegression().fit(X[tr], y[tr])
    blind = LogisticRegression().fit(X[tr], y_blind[tr])   # ignores the region (rc coef ~ 0)
    good = CalibratedModel(aware, Platt()).fit(X[cal], y[cal])
    global_only = CalibratedModel(blind, Platt()).fit(X[cal], y[cal])  # right on average only
    holdout = X[te].reset_index(drop=True)
    holdout["region"] = region[te]
    holdout["y"] = y[te]
    return good, global_only, holdout


def _register(model, holdout):
    import mlcal.mlflow as mlcal_mlflow

    with mlflow.start_run() as run:
        info = mlcal_mlflow.log_model(model, name="model", registered_model_name=NAME,
                                      input_example=holdout[["x1", "x2", "rc"]].iloc[:2], **FAST)
    return str(info.registered_model_version), run.info.run_id


def test_registry_gate_refuses_a_model_miscalibrated_in_one_segment(sqlite_tracking, models,
                                                                   tmp_path, capsys):
    from mlcal.cli import main
    from mlcal.mlflow.gate import SegmentsNeedDataError, gate_history, promote

    good, global_only, holdout = models
    X = holdout[["x1", "x2", "rc"]]
    y = holdout["y"].to_numpy()
    client = mlflow.MlflowClient()
    v1, run1 = _register(global_only, holdout)
    seg = dict(segment_columns=["region"], min_segment_rows=100)

    # refused by the segment criterion alone ('region' is not a model input: not passed)
    d = promote(NAME, v1, max_ece=0.05, data=holdout, max_segment_citl=0.03, **seg)
    assert not d.promoted
    assert [c.name for c in d.criteria if c.passed is False] == ["segment_citl"], d.explain()
    p = global_only.predict_proba(X)[:, 1]
    ref = segment_report(y, p, holdout["region"], simultaneous=True)
    dec = d.as_dict()
    assert dec["segments"]["worst"]["label"] == ref.worst["label"] in ("north", "south")
    assert dec["segments"]["worst"]["citl"] == pytest.approx(ref.worst["citl"], abs=1e-12)
    assert dec["segments"]["n_eligible"] == 2 and dec["segments"]["n_segments"] == 3
    assert "worst segment" in d.explain() and ref.worst["label"] in d.explain()
    entry = gate_history(NAME)[-1]
    assert entry["segments"]["worst"]["label"] == ref.worst["label"]
    assert entry["policy"]["segment_columns"] == ["region"]
    tags = client.get_model_version(NAME, v1).tags
    assert tags["mlcal.gate.segment_worst"] == ref.worst["label"]
    assert tags["mlcal.gate.segment_citl.verdict"] == "fail"
    # the HTML gate report on the candidate's run has the per-segment table
    (path,) = [f.path for f in client.list_artifacts(run1, "gate")]
    html = open(client.download_artifacts(run1, path, str(tmp_path)), encoding="utf-8").read()
    assert "Segments by region" in html and "too small, not used" in html

    # the same model passes without the criterion: it is calibrated overall (without
    # segment columns every column but the label is a model input, as before)
    features = holdout.drop(columns=["region"])
    d = promote(NAME, v1, max_ece=0.05, data=features, report=False)
    assert d.promoted, d.explain()
    assert "segments" not in d.as_dict()

    # segments by a column the signature names (rc) are also passed to the model
    d = promote(NAME, v1, max_ece=0.05, data=features, max_segment_citl=0.03, report=False,
                segment_columns=["rc"], min_segment_rows=100)
    assert d.as_dict()["segments"]["worst"]["key"]["rc"] in (-1.0, 1.0)
    assert next(c for c in d.criteria if c.name == "segment_citl").passed is False

    # the region-aware model passes, though the tiny region is wildly off: it is too small
    v2, _ = _register(good, holdout)
    off = holdout.copy()
    off.loc[off["region"] == "tiny", "y"] = 1
    assert (off["region"] == "tiny").sum() < 100
    loose = dict(max_log_loss_increase=1.0, max_brier_increase=1.0, max_auc_decrease=1.0)
    d = promote(NAME, v2, max_ece=0.05, data=off, max_segment_citl=0.03, report=False,
                **seg, **loose)
    crit = next(c for c in d.criteria if c.name == "segment_citl")
    assert crit.passed and "1 smaller not used" in crit.note, d.explain()
    # ... though the tiny region alone would fail the limit if it were used
    tiny = next(t for t in d.as_dict()["segments"]["table"] if t["label"] == "tiny")
    assert not tiny["eligible"] and tiny["citl_excess"] > 0.03
    assert d.as_dict()["segments"]["worst"]["label"] != "tiny"

    # named errors, nothing recorded: no data, a missing column, no segment large enough
    n_before = len(gate_history(NAME))
    with pytest.raises(SegmentsNeedDataError):
        promote(NAME, v2, max_ece=0.05, max_segment_citl=0.03, **seg)
    with pytest.raises(ValueError, match="no segment column"):
        promote(NAME, v2, max_ece=0.05, data=holdout, max_segment_citl=0.03,
                segment_columns=["country"])
    with pytest.raises(NoEligibleSegmentError):
        promote(NAME, v2, max_ece=0.05, data=holdout, max_segment_citl=0.03,
                segment_columns=["region"], min_segment_rows=5000)
    assert len(gate_history(NAME)) == n_before

    # the CLI
    csv = tmp_path / "holdout.csv"
    holdout.to_csv(csv, index=False)
    base = ["promote", "--model-name", NAME, "--version", v1, "--max-ece", "0.05",
            "--data", str(csv), "--no-report", "--json", "--alias", "cli"]
    assert main(base + ["--segment-columns", "region", "--max-segment-citl", "0.03",
                        "--min-segment-rows", "100"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in out["criteria"] if c["passed"] is False] == ["segment_citl"]
    assert out["segments"]["worst"]["label"] == ref.worst["label"]
    assert main(["promote", "--model-name", NAME, "--version", v1, "--max-ece", "0.05",
                 "--segment-columns", "region", "--max-segment-citl", "0.03"]) == 2
    assert "max_segment_citl needs the evaluation rows" in capsys.readouterr().err
