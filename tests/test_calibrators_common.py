"""Contract tests every registered calibrator must pass (new methods are picked up
automatically once they are registered)."""

import json

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

import mlcal
from mlcal.calibrators.base import CalibratorFormatError, load_calibrator, save_calibrator
from support.synthetic import calibration_set

METHODS = mlcal.available_calibrators()


def data(n=400, seed=0):
    return calibration_set(n, seed, beta=(2, 2), decimals=3, link_power=1.5)


def test_foundation_methods_are_registered():
    assert {"platt", "histogram", "isotonic"} <= set(METHODS)


def test_unknown_method_names_the_choices():
    with pytest.raises(ValueError, match="isotonic"):
        mlcal.get_calibrator("nope")


@pytest.mark.parametrize("name", METHODS)
def test_fit_returns_self_and_predicts_probabilities(name):
    s, y = data()
    cal = mlcal.get_calibrator(name)
    assert cal.fit(s, y) is cal
    p = cal.predict(np.linspace(-0.5, 1.5, 101))
    assert p.shape == (101,) and np.all((p >= 0) & (p <= 1))
    assert cal.predict_proba(s).shape == (len(s), 2)
    assert isinstance(cal.map_, (mlcal.StepMap, mlcal.LinearMap, mlcal.SigmoidMap, mlcal.BetaMap,
                                 mlcal.QuadraticMap))


@pytest.mark.parametrize("name", METHODS)
def test_clone_and_get_params(name):
    cal = mlcal.get_calibrator(name)
    params = cal.get_params()
    twin = clone(cal)
    assert twin.get_params() == params and twin is not cal
    assert mlcal.get_calibrator(name, **params).get_params() == params


@pytest.mark.parametrize("name", METHODS)
def test_json_round_trip_is_bit_exact(name, tmp_path):
    s, y = data(seed=1)
    cal = mlcal.get_calibrator(name).fit(s, y)
    back = type(cal).from_json(cal.to_json())
    grid = np.concatenate([np.linspace(-1, 2, 3001), s])
    assert np.array_equal(back.predict(grid), cal.predict(grid))
    assert back.get_params() == cal.get_params()
    path = tmp_path / "cal.json"
    save_calibrator(cal, str(path))
    assert np.array_equal(load_calibrator(str(path)).predict(grid), cal.predict(grid))
    with pytest.raises(FileExistsError):
        save_calibrator(cal, str(path))  # never overwrite without asking


@pytest.mark.parametrize("name", METHODS)
def test_unfitted_calibrator_raises(name):
    cal = mlcal.get_calibrator(name)
    with pytest.raises(NotFittedError, match="not fitted"):
        cal.predict([0.5])
    assert isinstance(NotFittedError("x"), ValueError)


@pytest.mark.parametrize("name", METHODS)
@pytest.mark.parametrize("scores,y,w,msg", [
    ([0.1, np.nan, 0.3], [0, 1, 1], None, "NaN"),
    ([0.1, np.inf, 0.3], [0, 1, 1], None, "non-finite"),
    ([0.1, 0.2, 0.3], [0, 1, 2], None, "labels 0 and 1"),
    ([0.1, 0.2, 0.3], [1, 1, 1], None, "single class"),
    ([0.1, 0.2, 0.3], [0, 1], None, "length mismatch"),
    ([], [], None, "empty"),
    ([0.1, 0.2, 0.3], [0, 1, 1], [1, -1, 1], "negative"),
    ([0.1, 0.2, 0.3], [0, 1, 1], [1, 1], "length mismatch"),
    ([0.1, 0.2, 0.3], [0, 1, 1], [0, 1, 1], "single class"),
])
def test_bad_input_gets_a_named_value_error(name, scores, y, w, msg):
    with pytest.raises(ValueError, match=msg):
        mlcal.get_calibrator(name).fit(scores, y, sample_weight=w)


@pytest.mark.parametrize("name", METHODS)
def test_predict_rejects_nan(name):
    s, y = data()
    cal = mlcal.get_calibrator(name).fit(s, y)
    with pytest.raises(ValueError, match="NaN"):
        cal.predict([0.2, np.nan])


@pytest.mark.parametrize("name", [m for m in METHODS
                                  if mlcal.calibrators.catalog.calibrator_class(m).requires_unit_interval])
def test_unit_interval_methods_squash_or_refuse_raw_scores(name):
    rng = np.random.default_rng(4)
    y = (rng.random(300) < 0.5).astype(float)
    f = rng.normal(2 * y - 1, 1.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        mlcal.get_calibrator(name, input_transform="identity").fit(f, y)
    cal = mlcal.get_calibrator(name).fit(f, y)
    assert cal.map_.input_transform == "sigmoid"
    from scipy.special import expit
    explicit = mlcal.get_calibrator(name, input_transform="identity").fit(expit(f), y)
    grid = np.linspace(-4, 4, 201)
    np.testing.assert_allclose(cal.predict(grid), explicit.predict(expit(grid)), atol=1e-12)


def corrupt(doc_text):
    doc = json.loads(doc_text)
    yield "not json", doc_text[:-5]
    yield "wrong format tag", json.dumps({**doc, "format": "pickle"})
    yield "future version", json.dumps({**doc, "format_version": 2})
    yield "unknown method", json.dumps({**doc, "method": "magic"})
    yield "unknown parameter", json.dumps({**doc, "params": {**doc["params"], "evil": 1}})
    yield "broken map", json.dumps({**doc, "map": {**doc["map"], "type": "tree"}})
    yield "map values not numbers", json.dumps({**doc, "map": {**doc["map"], "values": "x"}})


@pytest.mark.parametrize("case", list(corrupt(mlcal.Isotonic().fit([0.1, 0.5, 0.9], [0, 1, 1]).to_json())),
                         ids=lambda c: c[0])
def test_corrupted_calibrator_documents_are_rejected(case):
    _, text = case
    with pytest.raises(CalibratorFormatError):
        load_calibrator(text)


def test_from_json_on_the_wrong_class_is_rejected():
    text = mlcal.Platt().fit([0.1, 0.5, 0.9], [0, 1, 1]).to_json()
    with pytest.raises(CalibratorFormatError, match="Platt"):
        mlcal.Isotonic.from_json(text)
