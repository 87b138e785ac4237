import numpy as np
import pytest
from scipy.special import expit
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB
from sklearn.svm import LinearSVC

from mlcal import CalibratedModel, Isotonic, MissingClassError, Platt
from mlcal.datasets import make_circular


@pytest.fixture(scope="module")
def split():
    X, y = make_circular(2000, seed=3)
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(y))
    tr, cal, te = idx[:800], idx[800:1400], idx[1400:]
    Xq = np.column_stack([X, (X ** 2).sum(1)])  # a radius feature makes the classes separable
    return Xq[tr], y[tr], Xq[cal], y[cal], Xq[te], y[te]


def test_reads_predict_proba_and_never_refits_the_base(split):
    Xtr, ytr, Xc, yc, Xt, yt = split
    base = GaussianNB().fit(Xtr, ytr)
    before = base.theta_.copy()
    model = CalibratedModel(base, Isotonic()).fit(Xc, yc)
    assert model.score_source_ == "predict_proba"
    np.testing.assert_array_equal(base.theta_, before)
    expected = Isotonic().fit(base.predict_proba(Xc)[:, 1], yc).predict(base.predict_proba(Xt)[:, 1])
    proba = model.predict_proba(Xt)
    np.testing.assert_array_equal(proba[:, 1], expected)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    np.testing.assert_array_equal(model.predict(Xt), (expected >= 0.5).astype(int))


def test_decision_function_is_squashed_for_unit_interval_methods(split):
    Xtr, ytr, Xc, yc, Xt, yt = split
    base = LinearSVC().fit(Xtr, ytr)
    model = CalibratedModel(base, "histogram").fit(Xc, yc)
    assert model.score_source_ == "decision_function"
    platt = CalibratedModel(base, Platt()).fit(Xc, yc)
    direct = Platt().fit(base.decision_function(Xc), yc)
    np.testing.assert_allclose(platt.predict_proba(Xt)[:, 1],
                               direct.predict(base.decision_function(Xt)), atol=1e-15)


def test_string_class_labels_and_threshold(split):
    Xtr, ytr, Xc, yc, Xt, yt = split
    names = np.array(["neg", "pos"])
    base = LogisticRegression().fit(Xtr, names[ytr])
    model = CalibratedModel(base, "platt", threshold=0.8).fit(Xc, names[yc])
    p = model.predict_proba(Xt)[:, 1]
    np.testing.assert_array_equal(model.predict(Xt), np.where(p >= 0.8, "pos", "neg"))


def test_errors_are_clear(split):
    Xtr, ytr, Xc, yc, Xt, yt = split
    with pytest.raises(ValueError, match="not fitted"):
        CalibratedModel(LogisticRegression(), "platt").fit(Xc, yc)
    base = LogisticRegression().fit(Xtr, ytr)
    with pytest.raises(ValueError, match="not among"):
        CalibratedModel(base, "platt").fit(Xc, yc + 5)
    with pytest.raises(ValueError, match="not fitted"):
        CalibratedModel(base, "platt").predict_proba(Xt)
    with pytest.raises(ValueError, match="score"):
        CalibratedModel(base, "platt", score="logits").fit(Xc, yc)
    multi = LogisticRegression().fit(Xtr, np.arange(len(ytr)) % 3)
    # a three-class model is calibrated as such; binary labels lack its class 2
    with pytest.raises(MissingClassError, match=r"class\(es\) \[2\]"):
        CalibratedModel(multi, "platt").fit(Xc, yc)


def test_calibration_improves_a_miscalibrated_model(split):
    from mlcal.metrics import ece

    Xtr, ytr, Xc, yc, Xt, yt = split
    base = LinearSVC().fit(Xtr, ytr)
    raw = expit(base.decision_function(Xt))
    model = CalibratedModel(base, "isotonic").fit(Xc, yc)
    assert ece(yt, model.predict_proba(Xt)[:, 1]) < ece(yt, raw) / 2
