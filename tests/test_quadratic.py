"""Quadratic scaling (``quadratic``, :class:`mlcal.maps.QuadraticMap`): the fit against an
independent optimiser of the same penalised objective, its relations to ``platt-logit``,
weights, row order, margins, the output floor, JSON, ONNX (onnxruntime) and the document
rules. Spark SQL and Java parity run in tests/test_spark.py and tests/test_java_evaluator.py,
which enumerate every map kind and registered method."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest
from scipy.optimize import minimize
from scipy.special import expit

import mlcal
from mlcal._solvers.beta_fit import fit_quadratic
from mlcal._solvers.platt_newton import platt_targets
from mlcal.calibrators.quadratic import DEFAULT_PENALTY, Quadratic
from mlcal.maps import BETA_EPS, MapFormatError, QuadraticMap, map_from_dict
from mlcal.onnx import error_bound, to_onnx


def _data(n=400, seed=0, bend=True):
    """Scores over-confident in one tail and under-confident in the other: a quadratic
    calibration curve in the log-odds."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 2.0, n)
    true = 0.2 + 0.8 * z - (0.12 * z * z if bend else 0.0)
    y = (rng.random(n) < expit(true)).astype(int)
    return expit(z), z, y


def _logit(s):
    sc = np.clip(s, BETA_EPS, 1 - BETA_EPS)
    return np.log(sc) - np.log1p(-sc)


def _scipy_fit(z, y, w, lam, smooth, prior=0.0, base=None):
    """The penalised objective minimised by scipy (BFGS then Newton-CG polish), written
    independently: weighted cross-entropy against Platt's targets (per row: a row's target is
    its label's smoothed value) plus lam/2 (b sd_w(z^2))^2, plus (``identity_prior``)
    ``prior / W`` times the weighted cross-entropy against the base probabilities ``base``
    (``prior`` rows labelled with the base model's own probabilities)."""
    if smooth:
        n_pos = float(np.sum(w * y))
        n_neg = float(np.sum(w)) - n_pos
        t = np.where(y == 1, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    else:
        t = y.astype(float)
    q = z * z
    sd = np.sqrt(np.sum(w * (q - np.sum(w * q) / np.sum(w)) ** 2) / np.sum(w))
    X = np.column_stack([z, q, np.ones_like(z)])

    r_prior = prior / np.sum(w)
    base = np.zeros_like(z) if base is None else base

    def f(theta):
        eta = X @ theta
        return (np.sum(w * (np.logaddexp(0.0, eta) - t * eta))
                + r_prior * np.sum(w * (np.logaddexp(0.0, eta) - base * eta))
                + 0.5 * lam * (theta[1] * sd) ** 2)

    def g(theta):
        p = expit(X @ theta)
        r = w * (p - t) + r_prior * w * (p - base)
        out = X.T @ r
        out[1] += lam * sd * sd * theta[1]
        return out

    def h(theta):
        p = expit(X @ theta)
        H = X.T @ (X * ((1 + r_prior) * w * p * (1 - p))[:, None])
        H[1, 1] += lam * sd * sd
        return H

    r = minimize(f, np.zeros(3), jac=g, method="BFGS", options={"gtol": 1e-10})
    r = minimize(f, r.x, jac=g, hess=h, method="trust-exact", options={"gtol": 1e-12})
    return r.x


@pytest.mark.parametrize("lam", [0.0, DEFAULT_PENALTY, 25.0])
@pytest.mark.parametrize("smooth", [True, False])
def test_fit_is_the_minimum_of_the_penalised_objective(lam, smooth):
    s, _, y = _data(300, seed=3)
    w = np.random.default_rng(4).uniform(0.2, 3.0, s.size)
    a, b, c = fit_quadratic(s, y, w, smooth=smooth, penalty=lam, on_logit=True)
    want = _scipy_fit(_logit(s), y, w, lam, smooth)
    np.testing.assert_allclose([a, b, c], want, rtol=1e-6, atol=1e-6)
    # through the calibrator: the same coefficients in the map
    m = Quadratic(penalty=lam, smooth_targets=smooth).fit(s, y, sample_weight=w).map_
    assert (m.a, m.b, m.c) == (a, b, c) and m.on == "logit"


@pytest.mark.parametrize("prior", [3.0, 30.0, 300.0])
def test_identity_prior_is_the_minimum_of_the_objective_with_pseudo_rows(prior):
    s, _, y = _data(300, seed=13)
    w = np.random.default_rng(14).uniform(0.2, 3.0, s.size)
    m = Quadratic(smooth_targets=False, identity_prior=prior).fit(s, y, sample_weight=w).map_
    base = np.clip(s, BETA_EPS, 1 - BETA_EPS)
    want = _scipy_fit(_logit(s), y, w, DEFAULT_PENALTY, False, prior=prior, base=base)
    np.testing.assert_allclose([m.a, m.b, m.c], want, rtol=1e-6, atol=1e-6)
    # on margins the base probability is the sigmoid of the margin
    _, z, y = _data(300, seed=15)
    m = Quadratic(smooth_targets=False, identity_prior=prior).fit(z, y).map_
    want = _scipy_fit(z, y, np.ones(z.size), DEFAULT_PENALTY, False, prior=prior,
                      base=expit(z))
    assert m.on == "margin"
    np.testing.assert_allclose([m.a, m.b, m.c], want, rtol=1e-6, atol=1e-6)


def test_identity_prior_limits_and_separable_labels():
    s, _, y = _data(200, seed=16)
    plain = Quadratic(smooth_targets=False).fit(s, y).map_
    assert Quadratic(smooth_targets=False, identity_prior=0.0).fit(s, y).map_ == plain
    big = Quadratic(smooth_targets=False, identity_prior=1e12).fit(s, y).map_
    np.testing.assert_allclose([big.a, big.b, big.c], [1.0, 0.0, 0.0], atol=1e-6)
    sep = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    lab = np.array([0, 0, 0, 1, 1, 1])
    with pytest.raises(ValueError, match="separable"):
        Quadratic(smooth_targets=False).fit(sep, lab)
    m = Quadratic(smooth_targets=False, identity_prior=100.0).fit(sep, lab).map_
    assert np.all(np.isfinite([m.a, m.b, m.c])) and 1.0 < m.a < 50.0


def test_fit_on_margins_is_the_same_objective_in_the_margin():
    _, z, y = _data(300, seed=5)
    m = Quadratic().fit(z * 3.0, y).map_
    assert m.on == "margin" and m.input_transform == "identity"
    want = _scipy_fit(z * 3.0, y, np.ones(z.size), DEFAULT_PENALTY, True)
    np.testing.assert_allclose([m.a, m.b, m.c], want, rtol=1e-6, atol=1e-6)


def test_penalty_shrinks_the_square_and_a_huge_one_gives_platt_logit():
    s, _, y = _data(120, seed=6)
    w = np.ones(s.size)
    bs = [abs(fit_quadratic(s, y, w, smooth=True, penalty=lam, on_logit=True)[1])
          for lam in (0.0, 1.0, 10.0, 1e3, 1e9)]
    assert all(x > y_ for x, y_ in zip(bs, bs[1:])), bs
    assert bs[-1] < 1e-8
    a, b, c = fit_quadratic(s, y, w, smooth=True, penalty=1e12, on_logit=True)
    pl = mlcal.get_calibrator("platt-logit").fit(s, y).map_
    np.testing.assert_allclose([a, c], [pl.a, pl.c], rtol=1e-6, atol=1e-8)


def test_square_forced_to_zero_is_platt_logit_bit_for_bit():
    for seed in range(4):
        s, z, y = _data(500, seed=seed)
        w = np.random.default_rng(seed).uniform(0.5, 2.0, s.size)
        for feature, on_logit in ((s, True), (z, False)):
            a, b, c = fit_quadratic(feature, y, w, smooth=True, penalty=1.0, on_logit=on_logit,
                                    square=False)
            pl = mlcal.get_calibrator("platt-logit").fit(feature, y, sample_weight=w).map_
            slope, icpt = (pl.a, pl.c) if on_logit else (-pl.a, -pl.b)
            assert b == 0.0 and slope > 0
            assert (a, c) == (slope, icpt)


def test_integer_weights_are_repeated_rows_and_row_order_does_not_matter():
    s, _, y = _data(200, seed=7)
    s = np.round(s, 3)   # ties too
    k = np.random.default_rng(8).integers(1, 4, s.size)
    weighted = Quadratic().fit(s, y, sample_weight=k).to_json()
    repeated = Quadratic().fit(np.repeat(s, k), np.repeat(y, k)).to_json()
    assert weighted == repeated
    perm = np.random.default_rng(9).permutation(s.size)
    assert Quadratic().fit(s[perm], y[perm], sample_weight=k[perm]).to_json() == weighted


def test_margins_and_probabilities_fit_the_same_model():
    _, z, y = _data(600, seed=10)
    z = np.clip(z, -20, 20)
    on_m = Quadratic(input_transform="sigmoid").fit(z, y)
    on_p = Quadratic(input_transform="identity").fit(expit(z), y)
    assert on_m.map_.on == "margin" and on_p.map_.on == "logit"
    np.testing.assert_allclose([on_m.map_.a, on_m.map_.b, on_m.map_.c],
                               [on_p.map_.a, on_p.map_.b, on_p.map_.c], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(on_m.predict(z), on_p.predict(expit(z)), rtol=0, atol=1e-9)
    # auto: margins because scores leave [0, 1]
    assert Quadratic().fit(z, y).map_ == on_m.map_
    with pytest.raises(ValueError, match="requires scores in"):
        Quadratic(input_transform="identity").fit(z, y)


def test_forest_like_scores_with_exact_zero_and_one_stay_inside_the_floor():
    rng = np.random.default_rng(11)
    s = np.round(rng.random(300) ** 2, 1)          # vote shares: many exact 0.0, some 1.0
    y = (rng.random(300) < np.clip(s, 0.02, 0.98)).astype(int)
    y[s == 1.0] = 1
    cal = Quadratic().fit(s, y)
    floor = 1.0 / (2.0 * (300 + 1.0))
    p = cal.predict(np.array([0.0, 1.0, 0.5, -0.0]))
    assert cal.map_.floor == floor
    assert (p >= floor).all() and (p <= 1 - floor).all()
    # even a map that would saturate is floored: steep hand-made coefficients
    steep = mlcal.calibrators.output_floor.floor_map(QuadraticMap(50.0, 0.5, 0.0), 0.01)
    assert steep.floor == 0.01 and steep(np.array([0.0, 1.0])).tolist() == [0.01, 0.99]
    # a convex map whose only extreme is the vertex: its minimum sets the floor need
    vertex = QuadraticMap(0.0, 0.001, -3.0)   # min at z = 0: expit(-3) > 0.01, max below .99
    assert mlcal.calibrators.output_floor.floor_map(vertex, 0.01).floor == 0.0
    assert mlcal.calibrators.output_floor.floor_map(vertex, 0.05).floor == 0.05
    # margins are unbounded: any slope reaches the floor
    assert mlcal.calibrators.output_floor.floor_map(
        QuadraticMap(0.0, 1e-9, 0.0, on="margin"), 1e-3).floor == 1e-3


def test_json_round_trip_is_exact():
    for scores in (_data(300, seed=12)[0], _data(300, seed=12)[1] * 2):
        y = _data(300, seed=12)[2]
        cal = Quadratic(penalty=3.0).fit(scores, y)
        text = cal.to_json()
        back = mlcal.load_calibrator(text)
        assert back.to_json() == text and back.get_params() == cal.get_params()
        x = np.concatenate([scores, [0.0, 1.0, -5.0, 5.0, 1e300, -1e300]])
        assert np.array_equal(back.predict(x).view(np.uint64), cal.predict(x).view(np.uint64))
        m = map_from_dict(json.loads(json.dumps(cal.map_.to_dict())))
        assert m == cal.map_


def test_hand_written_map_matches_its_formula():
    m = QuadraticMap(1.3, -0.2, 0.4)
    s = np.array([0.0, 1e-20, BETA_EPS, 0.1, 0.5, 0.9, 1 - 1e-13, 1.0, 3.0, -2.0])
    z = _logit(s)
    np.testing.assert_allclose(m(s), expit(1.3 * z - 0.2 * z * z + 0.4), rtol=1e-13)
    mm = QuadraticMap(1.3, -0.2, 0.4, on="margin")
    x = np.array([-30.0, -1.0, 0.0, 2.5, 40.0])
    np.testing.assert_allclose(mm(x), expit(1.3 * x - 0.2 * x * x + 0.4), rtol=1e-13)
    # opposite infinities never give NaN: the map stays in [0, 1]
    big = QuadraticMap(1e300, -1e300, 0.0, on="margin")
    out = big(np.array([1e300, -1e300, 1e200, 1e154, -3.0]))
    assert np.isfinite(out).all() and ((out >= 0) & (out <= 1)).all()


@pytest.mark.parametrize("doc, phrase", [
    ({"a": float("nan")}, "field 'a' must be a finite number"),
    ({"b": "1"}, "field 'b' must be a finite number"),
    ({"c": None}, "field 'c' must be a finite number"),
    ({"floor": -0.1}, "floor must be a number in"),
    ({"floor": 0.5}, "floor must be a number in"),
    ({"on": "probit"}, "field 'on' must be one of"),
    ({"on": None}, "field 'on' must be one of"),
    ({"extra": 1}, "unknown field"),
    ({"on": "margin", "input_transform": "sigmoid"}, "on='margin' takes raw margins"),
])
def test_malformed_maps_are_refused_by_name(doc, phrase):
    base = QuadraticMap(1.0, 0.1, 0.0, floor=0.01).to_dict()
    with pytest.raises(MapFormatError, match=phrase.replace("(", r"\(").replace("[", r"\[")):
        map_from_dict({**base, **doc})
    with pytest.raises(MapFormatError):
        QuadraticMap(1.0, float("inf"), 0.0)


def test_document_rules_allow_non_monotone_maps_and_auto_takes_it_as_a_candidate():
    from mlcal.calibrators.document_rules import method_table

    entry = method_table()["quadratic"]
    assert entry["map_kinds"] == ["quadratic"] and entry["monotone"] is False
    assert "quadratic" in mlcal.available_calibrators()
    assert isinstance(mlcal.get_calibrator("quadratic"), Quadratic)
    s, _, y = _data(400, seed=13)
    cal = Quadratic().fit(s, y)
    assert cal.map_.b < 0   # the curve turns: decreasing beyond the vertex
    doc = cal.to_dict()
    doc["map"]["a"], doc["map"]["b"] = -2.0, -1.0     # decreasing everywhere: still valid
    mlcal.load_calibrator(json.dumps(doc))
    doc["map"]["type"] = "beta"
    with pytest.raises(mlcal.CalibratorFormatError, match="fits 'quadratic' maps"):
        mlcal.load_calibrator(json.dumps(doc))
    auto = mlcal.get_calibrator("auto", candidates=["platt-logit", "quadratic"],
                                anchor=None).fit(s, y)
    assert auto.to_dict()["fit_info"]["chosen"] in ("platt-logit", "quadratic")
    assert mlcal.load_calibrator(auto.to_json()).to_json() == auto.to_json()


def _onnx_predict(m, x, dtype):
    sess = ort.InferenceSession(to_onnx(m, dtype=dtype).SerializeToString())
    return sess.run(None, {sess.get_inputs()[0].name: x.astype(dtype)})[0].astype(np.float64)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_onnx_graph_is_within_its_bound(dtype):
    rng = np.random.default_rng(14)
    s, z, y = _data(500, seed=14)
    maps = {"fit-logit": Quadratic().fit(s, y).map_, "fit-margin": Quadratic().fit(z, y).map_,
            "convex": QuadraticMap(0.4, 0.3, -2.0), "steep": QuadraticMap(40.0, -3.0, 5.0),
            "sigmoid-input": QuadraticMap(0.9, 0.05, -0.4, input_transform="sigmoid"),
            "overflow": QuadraticMap(1e300, -1e300, 1.0, on="margin")}
    probs = np.concatenate([rng.random(20000), rng.random(3000) ** 40, 1 - rng.random(3000) ** 40,
                            [0.0, 1.0, BETA_EPS, 1 - BETA_EPS, 1e-300, 0.5]])
    margins = np.concatenate([rng.normal(0, 6, 20000), [0.0, -700.0, 700.0, 1e300, -1e300]])
    for name, m in maps.items():
        x = margins if (m.on == "margin" or m.input_transform == "sigmoid") else probs
        with np.errstate(over="ignore"):
            x = x.astype(dtype).astype(np.float64)
        x = x[np.isfinite(x)]
        got = _onnx_predict(m, x, dtype)
        want = m(x)
        bound = error_bound(m, dtype)
        assert np.abs(got - want).max() <= bound, (name, np.abs(got - want).max(), bound)
        assert bound < (1e-11 if dtype == "float64" else 1e-7), (name, bound)   # not vacuous
    # NaN and infinite scores give NaN, as predict refuses them
    got = _onnx_predict(maps["fit-logit"], np.array([np.nan, np.inf, -np.inf]), dtype)
    assert np.isnan(got).all()


def test_calibrator_export_predicts_like_predict():
    s, _, y = _data(300, seed=15)
    cal = Quadratic().fit(s, y)
    sess = ort.InferenceSession(to_onnx(cal).SerializeToString())
    got = sess.run(None, {sess.get_inputs()[0].name: s})[0].reshape(-1)
    np.testing.assert_allclose(got, cal.predict(s), rtol=0, atol=error_bound(cal.map_))


def test_mlflow_flavour_serves_the_quadratic_map(tmp_path):
    pytest.importorskip("mlflow")
    import mlflow.pyfunc
    import pandas as pd
    from sklearn.linear_model import LogisticRegression

    from mlcal.mlflow import load_model, save_model

    rng = np.random.default_rng(16)
    X = rng.normal(size=(900, 3))
    y = (rng.random(900) < expit(2.0 * X[:, 0] - 0.8 * X[:, 0] ** 2)).astype(int)
    df = pd.DataFrame(X, columns=["f0", "f1", "f2"])
    base = LogisticRegression().fit(df[:300], y[:300])
    model = mlcal.CalibratedModel(base, "quadratic").fit(df[300:600], y[300:600])
    assert model.calibrator_.map_.kind == "quadratic"
    save_model(model, str(tmp_path / "m"), pip_requirements=["scikit-learn", "numpy", "pandas"],
               bundle_mlcal=False)
    want = model.predict_proba(df[600:])[:, 1]
    native = load_model(str(tmp_path / "m")).predict_proba(df[600:])[:, 1]
    served = mlflow.pyfunc.load_model(str(tmp_path / "m")).predict(df[600:])
    assert np.array_equal(native, want)
    assert np.array_equal(served["p_calibrated"].to_numpy(), want)


def test_reoffset_wraps_the_quadratic_map_and_exports():
    s, _, y = _data(300, seed=17)
    cal = mlcal.reoffset(Quadratic().fit(s, y), 0.7)
    assert cal.map_.kind == "offset" and cal.map_.inner.kind == "quadratic"
    back = mlcal.load_calibrator(cal.to_json())
    assert np.array_equal(back.predict(s), cal.predict(s))
    sess = ort.InferenceSession(to_onnx(cal).SerializeToString())
    got = sess.run(None, {sess.get_inputs()[0].name: s})[0].reshape(-1)
    assert np.abs(got - cal.predict(s)).max() <= error_bound(cal.map_)


def _saturated(n, seed):
    """Naive-Bayes-like scores (issue #26): log-odds spread over hundreds of units, so most
    scores lie below ``BETA_EPS`` or above ``1 - BETA_EPS`` (some are exactly 0 or 1), while
    their order still carries the label's information (the true log-odds is ``z / 20``)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(-20.0, 60.0, n)
    y = (rng.random(n) < expit(z / 20.0)).astype(int)
    return expit(z), y


def test_saturated_scores_lose_auc_to_the_default_clamp_not_to_the_bend():
    """Diagnosis of issue #26, on the default clamp (what every map without a ``clamp`` field
    does): every score below ``BETA_EPS`` (above ``1 - BETA_EPS``) has the same log-odds ``z``
    and so the same calibrated probability, bit for bit, whatever the coefficients; where the
    map is monotone over the clamp range (vertex outside it) the AUC of the calibrated scores
    is exactly that of the clamped scores (sklearn on ``np.clip``), and below that of the raw
    scores."""
    from sklearn.metrics import roc_auc_score
    s, y = _saturated(600, 40)
    s_te, y_te = _saturated(4000, 41)
    assert np.mean((s < BETA_EPS) | (s > 1 - BETA_EPS)) > 0.5
    fitted = Quadratic().fit(s, y).map_
    m = QuadraticMap(fitted.a, fitted.b, fitted.c)   # the same coefficients, default clamp
    z_end = _logit(np.array([0.0, 1.0]))
    vertex = -m.a / (2.0 * m.b)
    assert m.a > 0 and not (z_end[0] < vertex < z_end[1])   # monotone over [0, 1] here
    p = m(s_te)
    low, high = s_te <= BETA_EPS, s_te >= 1 - BETA_EPS
    assert low.sum() > 100 and high.sum() > 100
    assert np.unique(p[low]).size == 1 and np.unique(p[high]).size == 1
    assert p[low][0] == m(np.array([BETA_EPS]))[0]
    clamped = roc_auc_score(y_te, np.clip(s_te, BETA_EPS, 1 - BETA_EPS))
    assert roc_auc_score(y_te, p) == clamped
    assert roc_auc_score(y_te, s_te) > clamped + 0.01


@pytest.mark.parametrize("method", ["quadratic", "beta", "platt-logit", "temperature"])
def test_saturated_scores_keep_their_auc(method):
    """Issue #26's acceptance: on saturated scores the calibrated AUC is within 0.002 of the
    raw scores', for every logit-family map: the fit takes its clamp from the calibration
    scores (the smallest positive one, the largest below 1), so the saturated scores keep
    their order down to the most extreme one seen, and only beyond it (and at exact 0 and 1)
    do they tie."""
    from sklearn.metrics import roc_auc_score
    s, y = _saturated(600, 40)
    s_te, y_te = _saturated(4000, 41)
    cal = mlcal.calibrators.catalog.get_calibrator(method).fit(s, y)
    lo, hi = cal.map_.clamp
    assert lo == s[s > 0].min() < BETA_EPS and hi == s[s < 1].max() > 1 - BETA_EPS
    p = cal.predict(s_te)
    assert roc_auc_score(y_te, p) >= roc_auc_score(y_te, s_te) - 0.002
    # flat beyond the data: a score below lo (and 0) reads as lo, above hi (and 1) as hi
    ends = cal.map_(np.array([lo, lo / 2, 0.0, hi, 1.0]))
    assert ends[0] == ends[1] == ends[2] and ends[3] == ends[4]
    assert 0.0 < ends.min() and ends.max() < 1.0
