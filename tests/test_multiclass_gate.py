"""The promotion gate for multiclass models on a real sqlite model registry (no mocks):
top-label ECE, multiclass log loss and Brier against the holder, label checks, and refusal of
a binary or differently-classed rival."""

import re

import numpy as np
import pandas as pd
import pytest

mlflow = pytest.importorskip("mlflow")

from sklearn.datasets import make_classification  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.metrics import log_loss  # noqa: E402

import mlcal.mlflow as mlcal_mlflow  # noqa: E402
from mlcal import CalibratedModel, HistogramBinning  # noqa: E402
from mlcal.cli import main  # noqa: E402
from mlcal.mlflow.gate import gate_history  # noqa: E402
from support.gate import promote_without_report as promote  # noqa: E402
from mlcal.metrics.multiclass import multiclass_brier, top_label_ece  # noqa: E402

NAME = "mc-clf"


CLASSES = np.array(["a", "b", "c"])
FAST = dict(pip_requirements=["scikit-learn"], bundle_mlcal=False)


@pytest.fixture()
def registry(sqlite_tracking):
    return mlflow.MlflowClient()


@pytest.fixture(scope="module")
def models():
    X, y = make_classification(3000, n_features=5, n_informative=4, n_redundant=0,
                               n_classes=3, n_clusters_per_class=1, random_state=12)
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(5)])
    labels = CLASSES[y]
    tr, cal, te = slice(0, 1000), slice(1000, 2000), slice(2000, 3000)
    base = LogisticRegression(C=0.01).fit(frame[tr], labels[tr])    # under-confident
    good = CalibratedModel(base, "matrix").fit(frame[cal], labels[cal])
    # one-vs-rest two-bin histograms: few output values, poor log loss
    coarse = CalibratedModel(base, HistogramBinning(n_bins=2)).fit(frame[cal], labels[cal])
    four = np.where(frame["x0"][cal] > 2.5, "d", labels[cal])           # a fourth class
    wide = CalibratedModel(LogisticRegression().fit(frame[cal], four), "temperature")
    wide.fit(frame[cal], four)
    binary = CalibratedModel(LogisticRegression().fit(frame[tr], labels[tr] == "a"),
                             "platt").fit(frame[cal], labels[cal] == "a")
    holdout = frame[te].copy()
    holdout["y"] = labels[te]
    return {"good": good, "coarse": coarse, "wide": wide, "binary": binary,
            "holdout": holdout}


def register(model, holdout, logged=None):
    with mlflow.start_run():
        if logged is not None:
            mlflow.log_metrics(logged)
            mlflow.set_tag("mlcal.metrics_source", "held-out")
        mlcal_mlflow.log_model(model, name="model", registered_model_name=NAME,
                               input_example=holdout.iloc[:2, :5], **FAST)
    client = mlflow.MlflowClient()
    return str(max(int(v.version) for v in client.search_model_versions(f"name='{NAME}'")))


def holder(client):
    try:
        return str(client.get_model_version_by_alias(NAME, "champion").version)
    except mlflow.exceptions.MlflowException:
        return None


def _xy(holdout):
    return holdout.drop(columns=["y"]), holdout["y"].to_numpy()


def test_multiclass_gate_on_data_against_independent_metrics(registry, models):
    good, coarse, holdout = models["good"], models["coarse"], models["holdout"]
    X, y = _xy(holdout)
    yi = np.searchsorted(CLASSES, y)
    pg, pc = good.predict_proba(X), coarse.predict_proba(X)
    v_good, v_coarse = register(good, holdout), register(coarse, holdout)
    first = promote(NAME, v_good, max_ece=0.05, data=holdout)
    assert first.promoted and holder(registry) == v_good
    assert first.criteria[0].value == pytest.approx(top_label_ece(yi, pg, 10), abs=1e-12)
    assert first.criteria[0].note == "top-label ECE"
    assert {c.name for c in first.criteria} == {
        "ece", "log_loss_vs_holder", "brier_vs_holder", "log_loss_vs_constant",
        "brier_vs_constant", "log_loss_vs_base", "brier_vs_base"}
    crit = {c.name: c for c in first.criteria}
    # against the constant class-frequency predictor of these rows, paired (sklearn's loss)
    freq = np.bincount(yi, minlength=3) / len(yi)
    const = np.tile(freq, (len(yi), 1))
    assert crit["log_loss_vs_constant"].value == pytest.approx(
        log_loss(y, pg, labels=CLASSES.tolist()) - log_loss(y, const, labels=CLASSES.tolist()),
        abs=1e-12)
    assert crit["log_loss_vs_constant"].passed and crit["brier_vs_constant"].passed
    # against its own uncalibrated base (predict_proba of the under-confident LR)
    pb = good.base_estimator.predict_proba(X)
    assert crit["log_loss_vs_base"].value == pytest.approx(
        log_loss(y, pg, labels=CLASSES.tolist()) - log_loss(y, pb, labels=CLASSES.tolist()),
        abs=1e-12)
    assert crit["log_loss_vs_base"].value < 0 and crit["log_loss_vs_base"].passed
    assert any("multiclass model (3 classes)" in n for n in first.notes)

    second = promote(NAME, v_coarse, max_ece=1.0, data=holdout)
    assert not second.promoted and holder(registry) == v_good
    crit = {c.name: c for c in second.criteria}
    # independent: scikit-learn's log loss and a one-hot Brier
    assert crit["log_loss_vs_holder"].value == pytest.approx(
        log_loss(y, pc, labels=CLASSES.tolist()) - log_loss(y, pg, labels=CLASSES.tolist()),
        abs=1e-12)
    onehot = (yi[:, None] == np.arange(3)).astype(float)
    assert crit["brier_vs_holder"].value == pytest.approx(
        np.mean(((pc - onehot) ** 2).sum(1)) - np.mean(((pg - onehot) ** 2).sum(1)), abs=1e-12)
    assert crit["log_loss_vs_holder"].passed is False
    assert multiclass_brier(yi, pc) > multiclass_brier(yi, pg)
    assert [d["result"] for d in gate_history(NAME)] == ["promoted", "refused"]


def test_multiclass_gate_on_logged_metrics(registry, models):
    good, coarse, holdout = models["good"], models["coarse"], models["holdout"]
    logged_good = {"top_label_ece_after": 0.02, "log_loss_after": 0.50,
                   "multiclass_brier_after": 0.30}
    logged_coarse = {"top_label_ece_after": 0.01, "log_loss_after": 0.70,
                     "multiclass_brier_after": 0.40}
    v_good = register(good, holdout, logged_good)
    v_coarse = register(coarse, holdout, logged_coarse)
    assert promote(NAME, v_good, max_ece=0.05, data=holdout, min_rows=1000).promoted
    d = promote(NAME, v_good, max_ece=0.05)       # already the holder: re-affirmed
    assert d.promoted and d.criteria[0].value == 0.02
    assert "top_label_ece_after" in d.source
    d = promote(NAME, v_coarse, max_ece=0.05)
    assert not d.promoted and holder(registry) == v_good
    crit = {c.name: c for c in d.criteria}
    assert crit["log_loss_vs_holder"].value == pytest.approx(0.20, abs=1e-12)
    assert "auc_vs_holder" not in crit


def _tags(client, version):
    return {k: v for k, v in client.get_model_version(NAME, version).tags.items()
            if k.startswith("mlcal.gate.")}


@pytest.mark.parametrize("rival", ["binary", "wide"])
def test_a_rival_of_other_classes_is_refused_by_name(registry, models, tmp_path, capsys, rival):
    holdout = models["holdout"]
    v_hold = register(models["good"], holdout)
    assert promote(NAME, v_hold, max_ece=0.05, data=holdout).promoted
    v_new = register(models[rival], holdout)
    message = ("is binary but version" if rival == "binary"
               else r"multiclass with classes \['a', 'b', 'c', 'd'\]")
    with pytest.raises(ValueError, match=message):
        promote(NAME, v_new, max_ece=1.0)
    csv = tmp_path / "holdout.csv"
    holdout.to_csv(csv, index=False)
    code = main(["promote", "--model-name", NAME, "--version", v_new, "--max-ece", "1",
                 "--data", str(csv)])
    assert code == 2
    assert "the gate compares models with the same classes only" in capsys.readouterr().err
    assert holder(registry) == v_hold and _tags(registry, v_new) == {}
    assert len(gate_history(NAME)) == 1


@pytest.mark.parametrize("kind, message", [
    ("nan", "labels are missing"),
    ("unknown", "'zebra'"),
    ("absent", r"class\(es\) \['c'\].*never occur"),
    ("confidence", "binary-only"),
])
def test_garbage_labels_exit_2_and_change_nothing(registry, models, tmp_path, capsys, kind,
                                                  message):
    holdout = models["holdout"].copy()
    holdout["y"] = holdout["y"].astype(object)
    extra = []
    if kind == "nan":
        holdout.loc[holdout.index[4], "y"] = None
    elif kind == "unknown":
        holdout.loc[holdout.index[4], "y"] = "zebra"
    elif kind == "absent":
        holdout = holdout[holdout["y"] != "c"]
    else:
        extra = ["--confidence", "0.9"]
    v = register(models["good"], holdout)
    csv = tmp_path / "data.csv"
    holdout.to_csv(csv, index=False)
    code = main(["promote", "--model-name", NAME, "--version", v, "--max-ece", "1",
                 "--data", str(csv), *extra])
    assert code == 2
    assert re.search(message, capsys.readouterr().err)
    assert holder(registry) is None and _tags(registry, v) == {}
    assert gate_history(NAME) == []
