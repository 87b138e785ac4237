"""Property and fuzz tests (hypothesis) over every registered calibrator and the loaders.

* fit on arbitrary valid data -> probabilities in [0, 1], and the JSON round trip (text and
  file) predicts bit-identically;
* arbitrary parameter values in a document -> CalibratorFormatError, or a calibrator that can
  also be refitted with them (nothing accepted on load fails later with another error);
* arbitrary text, bytes and mutated documents -> CalibratorFormatError or a working calibrator,
  never any other exception;
* arbitrary MLmodel flavour fields -> CalibratorFormatError or a working model.

Derandomized so CI runs the same examples every time; a few hundred examples in all.
"""

import copy
import json
import os
import shutil
import tempfile
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlcal import available_calibrators, get_calibrator
from mlcal.calibrators.base import CalibratorFormatError, load_calibrator, save_calibrator
from mlcal.calibrators.registry import calibrator_class

FUZZ = settings(derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
METHODS = available_calibrators()
PROBE = np.array([-5.0, 0.0, 0.1, 0.5, 0.9, 1.0, 7.0])


def _quiet_fit(cal, s, y, w=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # SBB/ABB pre-aggregation notices
        return cal.fit(s, y, sample_weight=w)


@st.composite
def fit_data(draw):
    n = draw(st.integers(2, 40))
    unit = draw(st.booleans())
    lo, hi = (0.0, 1.0) if unit else (-30.0, 30.0)
    scores = draw(st.lists(st.floats(lo, hi, allow_nan=False),
                           min_size=n, max_size=n))
    y = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    y[0], y[-1] = 0, 1                                  # both classes present
    weights = draw(st.none() | st.lists(st.integers(1, 5), min_size=n, max_size=n))
    return np.array(scores), np.array(y), None if weights is None else np.array(weights, float)


@pytest.mark.parametrize("method", METHODS)
@settings(FUZZ, max_examples=12)
@given(data=fit_data())
def test_fit_predicts_probabilities_and_round_trips_exactly(method, data):
    s, y, w = data
    cal = _quiet_fit(get_calibrator(method), s, y, w)
    probe = np.concatenate([s, PROBE])
    p = cal.predict(probe)
    assert np.all((p >= 0.0) & (p <= 1.0))
    again = load_calibrator(cal.to_json())
    assert np.array_equal(again.predict(probe), p)
    assert again.get_params() == cal.get_params()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cal.json")
        save_calibrator(cal, path)
        from pathlib import Path

        assert np.array_equal(load_calibrator(Path(path)).predict(probe), p)


@pytest.mark.parametrize("method", ["isotonic", "enir"])
def test_scores_a_subnormal_apart(method):
    # found by this suite: the slope between two knots a subnormal distance apart overflowed and
    # LinearMap refused the fitted map; such scores now count as tied
    cal = get_calibrator(method).fit(np.array([0.0, 2.2250738585e-313, 0.5, 1.0]),
                                     np.array([0, 1, 0, 1]))
    p = cal.predict([0.0, 1e-313, 0.5, 1.0])
    assert np.isfinite(p).all() and ((p >= 0) & (p <= 1)).all()
    assert cal.predict([0.0])[0] == cal.predict([2.2250738585e-313])[0]


json_scalars = (st.none() | st.booleans() | st.integers(-3, 60)
                | st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6)
                | st.sampled_from(["auto", "silverman", "gaussian", "boxcar", "aicc", "bic",
                                   "authors", "beta_mean", "identity", "sigmoid", "x", ""]))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                           max_leaves=8)


@pytest.fixture(scope="module")
def fitted_docs():
    rng = np.random.default_rng(0)
    s = rng.random(120)
    y = (rng.random(120) < s).astype(int)
    return {m: json.loads(_quiet_fit(get_calibrator(m), s, y).to_json()) for m in METHODS}


@pytest.mark.parametrize("method", METHODS)
@settings(FUZZ, max_examples=25)
@given(data=st.data())
def test_params_accepted_on_load_can_be_refitted(method, data, fitted_docs):
    names = sorted(calibrator_class(method)._get_param_names())
    doc = copy.deepcopy(fitted_docs[method])
    for name in data.draw(st.lists(st.sampled_from(names), min_size=1, unique=True)):
        doc["params"][name] = data.draw(json_values)
    try:
        cal = load_calibrator(json.dumps(doc))
    except CalibratorFormatError as exc:
        assert "parameter" in str(exc)
        return
    rng = np.random.default_rng(1)
    s = rng.random(60)
    refit = _quiet_fit(get_calibrator(method, **cal.get_params()), s, (s > 0.5).astype(int))
    assert np.all((refit.predict(PROBE) >= 0) & (refit.predict(PROBE) <= 1))


def _nodes(doc, path=()):
    yield path
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _nodes(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            yield from _nodes(v, path + (i,))


def _accepts_or_names_format_error(source):
    try:
        cal = load_calibrator(source)
    except CalibratorFormatError:
        return
    p = cal.predict(PROBE)
    assert np.all((p >= 0.0) & (p <= 1.0))


@settings(FUZZ, max_examples=150)
@given(data=st.data())
def test_mutated_documents_give_format_errors_or_work(data, fitted_docs):
    doc = copy.deepcopy(fitted_docs[data.draw(st.sampled_from(METHODS))])
    path = data.draw(st.sampled_from(list(_nodes(doc))[1:]))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if data.draw(st.booleans()):
        parent[path[-1]] = data.draw(json_values)
    elif isinstance(parent, dict):
        del parent[path[-1]]
    text = json.dumps(doc)
    cut = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.sampled_from(["", "\x00", "\ufeff", "]", "1e400", "-", '"', "{" * 50]))
    variant = data.draw(st.sampled_from(["doc", "text", "bytes", "corrupt"]))
    source = {"doc": doc, "text": text, "bytes": text.encode(),
              "corrupt": text[:cut] + junk + text[cut:]}[variant]
    _accepts_or_names_format_error(source)


@settings(FUZZ, max_examples=60)
@given(raw=st.binary(max_size=200) | st.text(max_size=200).map(lambda t: ("{" + t).encode()))
def test_arbitrary_bytes_give_format_errors(raw):
    _accepts_or_names_format_error(raw)


# -- the MLflow flavour's loader ---------------------------------------------------------------
@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    pytest.importorskip("mlflow")
    from sklearn.linear_model import LogisticRegression

    from mlcal import CalibratedModel
    from mlcal.mlflow import save_model

    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 2))
    y = (X[:, 0] > 0).astype(int)
    model = CalibratedModel(LogisticRegression().fit(X[:150], y[:150]), "platt")
    model.fit(X[150:], y[150:])
    path = tmp_path_factory.mktemp("fuzz_model") / "model"
    save_model(model, str(path), pip_requirements=["scikit-learn"])
    outside = path.parent / "outside.json"
    shutil.copy(path / "calibrator.json", outside)
    return path


mlmodel_values = json_values | st.sampled_from(
    ["calibrator.json", "../outside.json", "/etc/hostname", "MLmodel", "base_model",
     "./calibrator.json", "predict_proba", "decision_function", "platt", [0, 1], ["a", "b"],
     [True, False], 0.5, 1, 0])


@settings(FUZZ, max_examples=40)
@given(data=st.data())
def test_mlmodel_fields_give_format_errors_or_a_working_model(data, model_dir):
    from mlflow.utils.model_utils import _get_flavor_configuration

    from mlcal.mlflow.flavor import _load_local

    conf = _get_flavor_configuration(model_path=str(model_dir), flavor_name="mlcal")
    fields = ["calibrator", "threshold", "classes", "score_source", "calibration_method"]
    for name in data.draw(st.lists(st.sampled_from(fields), min_size=1, unique=True)):
        conf[name] = data.draw(mlmodel_values)
    try:
        model = _load_local(str(model_dir), conf)
    except CalibratorFormatError:
        return
    X = np.zeros((2, 2))
    assert model.predict_proba(X).shape == (2, 2)
    assert set(model.predict(X)) <= set(model.classes_.tolist())
