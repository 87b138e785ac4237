"""Honest metrics by default: without an evaluation set, calibrate_and_log (and `mlcal
calibrate`) hold out a stratified, seeded 25 % of the rows; every logged run says where its
metrics come from (tag mlcal.metrics_source) and on how many rows (mlcal.eval_rows). Real
MLflow on a sqlite store in a temp dir."""

import numpy as np
import pandas as pd
import pytest

from mlcal.holdout import MIN_HELD_OUT_ROWS, holdout_split
from mlcal.metrics import ece, log_loss
from mlcal.model import CalibratedModel

mlflow = pytest.importorskip("mlflow")

from mlcal.mlflow import calibrate_and_log, log_calibration  # noqa: E402
from support.mlflow_store import sqlite_store  # noqa: E402

FAST_REQS = ["scikit-learn", "numpy", "pandas"]
# these tests read the metrics, tags and params; the diagrams and the HTML report (a few CPU
# seconds per run) are checked in test_report_mlflow.py and test_multiclass_mlflow.py
QUIET = {"pip_requirements": FAST_REQS, "html_report": False}


@pytest.mark.parametrize("n_pos,n_neg,fraction", [(30, 90, 0.25), (7, 101, 0.25), (50, 50, 0.3),
                                                  (3, 200, 0.5)])
def test_holdout_split_is_a_stratified_seeded_partition(n_pos, n_neg, fraction):
    y = np.array(["yes"] * n_pos + ["no"] * n_neg, dtype=object)
    fit, held = holdout_split(y, fraction, seed=4)
    assert np.array_equal(np.sort(np.concatenate([fit, held])), np.arange(y.size))
    for label, n in (("yes", n_pos), ("no", n_neg)):
        # exact round-half-up of fraction * n, per label
        expected = int(np.floor(n * fraction + 0.5))
        assert int(np.sum(y[held] == label)) == expected
    again = holdout_split(y, fraction, seed=4)
    assert np.array_equal(again[1], held)
    assert not np.array_equal(holdout_split(y, fraction, seed=5)[1], held)


def test_holdout_split_refuses_too_few_rows_naming_them():
    with pytest.raises(ValueError, match=f"gives 10 rows, fewer than {MIN_HELD_OUT_ROWS}"):
        holdout_split(np.arange(40) % 2, 0.25)
    with pytest.raises(ValueError, match=r"label '1' \(1 rows\) on one side only"):
        holdout_split(np.array([0] * 200 + [1]), 0.25)
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        holdout_split(np.arange(200) % 2, 1.0)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("honest_store")
    with sqlite_store(root, "honest"):
        yield root


@pytest.fixture(scope="module")
def binary():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(1400, 3)), columns=["a", "b", "c"])
    y = np.where(rng.random(1400) < 1 / (1 + np.exp(-2 * X["a"] - X["b"])), "yes", "no")
    base = LogisticRegression(C=0.01).fit(X[:600], y[:600])   # under-confident
    return base, X[600:], y[600:]


def _run(run_id):
    return mlflow.MlflowClient().get_run(run_id)


def test_default_holds_out_a_quarter_and_logs_the_metrics_of_the_logged_model(store, binary):
    base, X, y = binary
    result = calibrate_and_log(base, X, y, calibrator="platt", **QUIET)
    run = _run(result.run_id)
    fit_rows, held = holdout_split(y, 0.25, 0)
    assert run.data.tags["mlcal.metrics_source"] == "held-out"
    assert run.data.tags["mlcal.eval_rows"] == str(held.size)
    assert abs(held.size - 200) <= 1   # a quarter of each label, rounded per label
    assert run.data.params["mlcal.n_calibration"] == str(fit_rows.size) == str(800 - held.size)
    assert run.data.params["mlcal.holdout"] == "0.25"
    expected = CalibratedModel(base, "platt").fit(X.iloc[fit_rows], y[fit_rows])
    np.testing.assert_array_equal(result.model.predict_proba(X), expected.predict_proba(X))
    p_held = expected.predict_proba(X.iloc[held])[:, 1]
    y_held = (y[held] == "yes").astype(float)
    assert run.data.metrics["log_loss_after"] == pytest.approx(log_loss(y_held, p_held), abs=1e-12)
    assert run.data.metrics["ece_after"] == pytest.approx(ece(y_held, p_held), abs=1e-12)
    assert result.report["n_rows"] == {"given": 800, "fit": fit_rows.size, "metrics": held.size}


def test_holdout_zero_is_tagged_in_sample_and_an_evaluation_set_held_out(store, binary):
    base, X, y = binary
    inside = calibrate_and_log(base, X, y, calibrator="platt", holdout=0,
                               **QUIET)
    run = _run(inside.run_id)
    assert run.data.tags["mlcal.metrics_source"] == "in-sample"
    assert run.data.tags["mlcal.eval_rows"] == "800"
    assert run.data.params["mlcal.evaluated_on"] == "calibration set"
    separate = calibrate_and_log(base, X[:500], y[:500], calibrator="platt", X_eval=X[500:],
                                 y_eval=y[500:], **QUIET)
    run = _run(separate.run_id)
    assert run.data.tags["mlcal.metrics_source"] == "held-out"
    assert run.data.tags["mlcal.eval_rows"] == "300"
    assert run.data.params["mlcal.n_calibration"] == "500"   # every calibration row fits


def test_default_method_is_auto_and_too_few_rows_is_refused_before_any_run(store, binary):
    base, X, y = binary
    result = calibrate_and_log(base, X, y, **QUIET)
    run = _run(result.run_id)
    assert run.data.params["mlcal.method"] == "auto"
    assert run.data.tags["mlcal.auto_chosen"] == result.model.calibrator_.chosen_
    n_runs = len(mlflow.search_runs(search_all_experiments=True))
    with pytest.raises(ValueError, match="fewer than 20"):
        calibrate_and_log(base, X[:60], y[:60], **QUIET)
    assert len(mlflow.search_runs(search_all_experiments=True)) == n_runs


def test_log_calibration_tags_the_source_it_is_told(store):
    rng = np.random.default_rng(1)
    p = rng.random(300)
    y = (rng.random(300) < p).astype(float)
    with mlflow.start_run() as run:
        log_calibration(y, p, p, html_report=False)
    assert _run(run.info.run_id).data.tags["mlcal.metrics_source"] == "held-out"
    assert _run(run.info.run_id).data.tags["mlcal.eval_rows"] == "300"
    with mlflow.start_run() as run:
        log_calibration(y, p, p, metrics_source="in-sample", prefix="cal_", html_report=False)
    tags = _run(run.info.run_id).data.tags
    assert tags["mlcal.cal_metrics_source"] == "in-sample" and tags["mlcal.cal_eval_rows"] == "300"
    with mlflow.start_run():
        with pytest.raises(ValueError, match="metrics_source must be one of"):
            log_calibration(y, p, p, metrics_source="test")


def test_multiclass_default_holds_out_rows_of_every_class_and_tags_auto(store):
    from sklearn.datasets import make_classification
    from sklearn.linear_model import LogisticRegression

    X, y = make_classification(1200, n_features=5, n_informative=4, n_redundant=0,
                               n_classes=3, random_state=2)
    names = np.array(["ant", "bee", "cat"])[y]
    base = LogisticRegression(C=0.02).fit(X[:400], names[:400])
    result = calibrate_and_log(base, X[400:], names[400:], **QUIET)
    run = _run(result.run_id)
    assert run.data.tags["mlcal.metrics_source"] == "held-out"
    assert run.data.tags["mlcal.eval_rows"] == str(holdout_split(names[400:])[1].size)
    assert run.data.params["mlcal.method"] == "multiclass-auto"
    assert run.data.tags["mlcal.auto_chosen"] == result.model.calibrator_.chosen_
    assert result.report["calibrator"]["fit_info"]["chosen"] == result.model.calibrator_.chosen_


def test_cli_calibrate_takes_pos_label_and_tags_in_sample_metrics(store, binary, tmp_path,
                                                                   capsys):
    from mlcal.cli import main

    base, X, y = binary
    model_dir = tmp_path / "base"
    mlflow.sklearn.save_model(base, str(model_dir), pip_requirements=FAST_REQS)
    csv = tmp_path / "cal.csv"
    X.assign(label=y).to_csv(csv, index=False)
    args = ["calibrate", "--model-uri", str(model_dir), "--data", str(csv), "--label-column",
            "label", "--method", "platt", "--no-html-report"]
    assert main(args + ["--pos-label", "no"]) == 2
    assert "positive class is 'yes'" in capsys.readouterr().err
    assert main(args + ["--pos-label", "maybe"]) == 2
    assert "['no', 'yes'] (2 labels)" in capsys.readouterr().err
    # one logged run only (the CLI lets MLflow infer requirements, which is slow); the default
    # hold-out through the CLI is covered in test_mlflow_flavor.py
    assert main(args + ["--pos-label", "yes", "--holdout", "0"]) == 0
    out = capsys.readouterr().out
    assert "--holdout 0: metrics computed on the calibration rows" in out
    run = _run(out.split("run id: ")[1].split()[0])
    assert run.data.tags["mlcal.metrics_source"] == "in-sample"
    assert run.data.tags["mlcal.eval_rows"] == "800"
    # --no-html-report: the metrics and the JSON report are logged, the CORP diagram and the
    # HTML report are not (the default logs them: test_mlflow_flavor.py's CLI test)
    assert "log_loss_after" in run.data.metrics
    arts = {a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id, "calibration")}
    assert "calibration/calibration_report.json" in arts and not {
        "calibration/calibration_report.html", "calibration/reliability_corp.png"} & arts, arts
