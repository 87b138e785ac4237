import numpy as np
import pytest
from sklearn.datasets import load_digits, load_wine
from sklearn.dummy import DummyClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.naive_bayes import GaussianNB
from sklearn.preprocessing import StandardScaler
from sklearn.pipeline import make_pipeline

from mlcal import (CalibratedModel, Isotonic, MatrixScaling, MissingClassError, OneVsRest,
                   TemperatureScaling, TooFewClassesError)

NAMES = np.array(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                  "nine"])


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    idx = np.random.default_rng(0).permutation(len(y))
    tr, cal, te = idx[:700], idx[700:1300], idx[1300:]
    labels = NAMES[y]   # string classes: classes_ of any type
    return X[tr], labels[tr], X[cal], labels[cal], X[te], labels[te]


@pytest.mark.parametrize("calibrator", ["temperature", "vector", "matrix", "isotonic", "platt",
                                        Isotonic(), MatrixScaling(off_diagonal_penalty=1.0)])
def test_multiclass_model_calibrates_the_whole_probability_matrix(digits, calibrator):
    Xtr, ytr, Xc, yc, Xt, yt = digits
    base = make_pipeline(StandardScaler(), LogisticRegression(C=0.01, max_iter=2000))
    base.fit(Xtr, ytr)
    model = CalibratedModel(base, calibrator).fit(Xc, yc)
    assert list(model.classes_) == list(base.classes_)
    p = model.predict_proba(Xt)
    assert p.shape == (len(yt), 10)
    assert np.all(np.abs(p.sum(axis=1) - 1.0) <= 1e-12)
    assert np.all(p >= 0.0)
    # the same calibrator fitted by hand on the base model's probability matrix
    col = {c: k for k, c in enumerate(base.classes_)}
    yi = np.array([col[v] for v in yc])
    if calibrator == "temperature":
        ref = TemperatureScaling(input_kind="probabilities")
    elif calibrator == "isotonic" or isinstance(calibrator, Isotonic):
        ref = OneVsRest("isotonic", input_kind="probabilities")
    else:
        ref = model.calibrator_.__class__(**model.calibrator_.get_params())
    ref.fit(base.predict_proba(Xc), yi)
    assert p.tobytes() == ref.predict_proba(base.predict_proba(Xt)).tobytes()
    pred = model.predict(Xt)
    assert pred.dtype == base.classes_.dtype and set(pred) <= set(NAMES)
    np.testing.assert_array_equal(pred, base.classes_[np.argmax(p, axis=1)])


def test_temperature_scaling_repairs_an_overconfident_model(digits):
    Xtr, ytr, Xc, yc, Xt, yt = digits
    base = GaussianNB().fit(Xtr, ytr)   # naive Bayes is far overconfident on pixel data
    model = CalibratedModel(base, "temperature").fit(Xc, yc)
    assert model.calibrator_.map_.temperature > 1.0
    before = log_loss(yt, base.predict_proba(Xt), labels=base.classes_)
    after = log_loss(yt, model.predict_proba(Xt), labels=model.classes_)
    assert after < 0.5 * before


def test_decision_function_is_read_as_logits():
    X, y = load_wine(return_X_y=True)
    idx = np.random.default_rng(1).permutation(len(y))
    tr, cal = idx[:90], idx[90:]
    base = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(X[tr], y[tr])
    model = CalibratedModel(base, "vector", score="decision_function").fit(X[cal], y[cal])
    assert model.score_source_ == "decision_function"
    assert model.calibrator_.map_.input == "logits"
    z = base.decision_function(X[cal])
    np.testing.assert_array_equal(model.predict_uncalibrated(X[cal]), z)
    assert model.predict_proba(X[cal]).shape == (len(cal), 3)


def test_bad_multiclass_inputs_raise_named_errors(digits):
    Xtr, ytr, Xc, yc, Xt, yt = digits
    base = GaussianNB().fit(Xtr, ytr)
    keep = yc != "seven"
    with pytest.raises(MissingClassError, match=r"class\(es\) \['seven'\]"):
        CalibratedModel(base, "temperature").fit(Xc[keep], yc[keep])
    bad = yc.astype(object)
    bad[3] = "eleven"
    with pytest.raises(ValueError, match="'eleven'"):
        CalibratedModel(base, "isotonic").fit(Xc, bad)
    with pytest.raises(ValueError, match="multiclass methods: temperature"):
        CalibratedModel(base, "nonsense").fit(Xc, yc)
    one = DummyClassifier().fit(Xtr, np.zeros(len(ytr)))
    with pytest.raises(TooFewClassesError, match="1 class"):
        CalibratedModel(one, "isotonic").fit(Xc, np.zeros(len(yc)))


def test_the_mlflow_flavour_saves_a_ten_class_model(digits, tmp_path):
    pytest.importorskip("mlflow")
    from mlcal.mlflow import load_model, save_model

    Xtr, ytr, Xc, yc, Xt, yt = digits
    model = CalibratedModel(GaussianNB().fit(Xtr, ytr), "temperature").fit(Xc, yc)
    save_model(model, str(tmp_path / "m"), pip_requirements=["scikit-learn"])
    loaded = load_model(str(tmp_path / "m"))
    assert loaded.classes_.tolist() == model.classes_.tolist()
    np.testing.assert_array_equal(loaded.predict_proba(Xt), model.predict_proba(Xt))
