"""BetaMap and the beta-family calibrators (beta, platt-logit, temperature).

Oracles: the reference package ``betacal`` (Kull et al.'s own implementation; unweighted, plain
maximum likelihood), scipy.optimize on the same weighted likelihood written independently here
in numpy, mpmath for the map's formula, and fits on repeated rows / permuted rows.
"""

from __future__ import annotations

import json

import mpmath
import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar
from scipy.special import expit, logit

import mlcal
from mlcal.calibrators._params import InvalidParameterError
from mlcal.calibrators.multiclass import OneVsRest
from mlcal.maps import BETA_EPS, BetaMap, MapFormatError, SigmoidMap, map_from_dict, reduce_map
from support.synthetic import beta_link_set, calibration_set

betacal = pytest.importorskip("betacal")


# -- an independent statement of the model and its likelihood -------------------------------
def features(s):
    sc = np.clip(np.asarray(s, dtype=np.float64), BETA_EPS, 1 - BETA_EPS)
    return np.log(sc), -np.log1p(-sc)


def nll(a, b, c, s, y, w=None):
    """Weighted negative log-likelihood of expit(a ln s - b ln(1-s) + c)."""
    l1, l2 = features(s)
    z = a * l1 + b * l2 + c
    w = np.ones_like(z) if w is None else w
    return float(np.sum(w * (np.logaddexp(0.0, z) - y * z)))


def scipy_beta(s, y, w, parameters):
    """The generic optimiser on the same problem (a, b >= 0 as bounds)."""
    if parameters == "abm":
        def unpack(v):
            return v[0], v[1], v[2]
        x0, bounds = np.zeros(3), [(0, None), (0, None), (None, None)]
    elif parameters == "am":
        def unpack(v):
            return v[0], v[0], v[1]
        x0, bounds = np.zeros(2), [(0, None), (None, None)]
    else:
        def unpack(v):
            return v[0], v[1], (v[0] - v[1]) * np.log(2.0)
        x0, bounds = np.zeros(2), [(0, None), (0, None)]
    res = minimize(lambda v: nll(*unpack(v), s, y, w), x0, method="L-BFGS-B", bounds=bounds,
                   options={"ftol": 1e-15, "gtol": 1e-11, "maxiter": 10_000})
    return unpack(res.x)


def data(n=3000, seed=0):
    return calibration_set(n, seed, beta=(2, 3), link_power=2.0)


# -- the map ----------------------------------------------------------------------------------
def test_map_evaluates_the_formula_with_its_clamp():
    m = BetaMap(1.7, 0.6, -0.4)
    s = np.concatenate([np.linspace(0, 1, 201), [1e-300, 5e-13, 1 - 1e-13, -3.0, 7.0]])
    out = m(s)
    with mpmath.workdps(40):
        for si, pi in zip(s, out):
            sc = min(max(mpmath.mpf(float(si)), mpmath.mpf(BETA_EPS)), 1 - mpmath.mpf(BETA_EPS))
            z = 1.7 * mpmath.log(sc) - 0.6 * mpmath.log(1 - sc) - 0.4
            exact = float(1 / (1 + mpmath.exp(-z)))
            # relative error of p is about the absolute rounding error of z (a few ulps of its
            # terms) when p is small, plus expit's own rounding
            terms = float(abs(1.7 * mpmath.log(sc)) + abs(0.6 * mpmath.log(1 - sc)) + 0.4)
            assert abs(pi - exact) <= (8 * terms + 4) * 2.0 ** -53 * exact
    # the clamp: anything at or beyond an end reads as that end
    assert m([-3.0, 0.0, 1e-300])[0] == m([BETA_EPS])[0] == m([0.0])[0]
    assert m([7.0])[0] == m([1.0])[0] == m([1 - BETA_EPS])[0]
    # a, b >= 0: non-decreasing
    assert np.all(np.diff(m(np.linspace(0, 1, 10001))) >= 0)


def test_map_special_cases_are_platt_on_log_odds_and_temperature():
    s = np.linspace(0.01, 0.99, 99)
    np.testing.assert_allclose(BetaMap(1.3, 1.3, 0.2)(s), expit(1.3 * logit(s) + 0.2),
                               rtol=1e-14)
    np.testing.assert_allclose(BetaMap(0.5, 0.5, 0.0)(s), expit(logit(s) / 2.0), rtol=1e-14)
    np.testing.assert_array_equal(BetaMap(1.0, 1.0, 0.0)(np.array([0.5])), [0.5])


def test_map_sigmoid_transform_takes_margins():
    m = BetaMap(2.0, 0.5, 0.1, input_transform="sigmoid")
    x = np.linspace(-8, 8, 33)
    np.testing.assert_array_equal(m(x), BetaMap(2.0, 0.5, 0.1)(mlcal.maps.apply_input_transform(
        x, "sigmoid")))


def test_map_json_round_trip_is_bit_exact_and_validated():
    m = BetaMap(0.1 + 0.2, 1 / 3, -np.pi, input_transform="sigmoid", domain=(-2.0, 3.0))
    doc = json.loads(json.dumps(m.to_dict()))
    back = map_from_dict(doc)
    assert back == m and (back.a, back.b, back.c) == (m.a, m.b, m.c)
    assert doc["type"] == "beta"
    for bad, msg in [({**doc, "c": None}, "'c' must be a finite number"),
                     ({k: v for k, v in doc.items() if k != "b"}, "'b' must be"),
                     ({**doc, "a": 1e400}, "finite"), ({**doc, "a": True}, "'a' must be")]:
        with pytest.raises(MapFormatError, match=msg):
            map_from_dict(bad)
    with pytest.raises(MapFormatError, match="finite"):
        BetaMap(np.nan, 1.0, 0.0)


def test_reduce_map_leaves_a_beta_map_alone():
    m = BetaMap(1.0, 2.0, 3.0)
    out, red = reduce_map(m, 2)
    assert out is m and not red.reduced and red.max_error == 0.0


def test_plot_map_draws_a_beta_calibrator(tmp_path):
    pytest.importorskip("matplotlib")
    from mlcal.plotting import plot_map

    s, y = data(500)
    cal = mlcal.get_calibrator("beta").fit(s, y)
    plot_map(cal, scores=s, y=y, path=str(tmp_path / "beta.png"))
    assert (tmp_path / "beta.png").stat().st_size > 1000


# -- beta calibration: optimality against betacal and scipy ----------------------------------
@pytest.mark.parametrize("parameters", ["abm", "ab", "am"])
@pytest.mark.parametrize("seed", [0, 1])
def test_beta_matches_betacal_and_scipy(parameters, seed):
    # a beta-link truth with a, b > 0 and midpoint 1/2, so no variant's unconstrained optimum
    # (betacal constrains only "abm") has a negative coefficient
    s, y = beta_link_set(3000, seed, a=1.6, b=1.1, c=0.5 * np.log(2.0), beta=(2, 3))
    ours = mlcal.get_calibrator("beta", parameters=parameters, smooth_targets=False).fit(s, y)
    m = ours.map_
    ref = betacal.BetaCalibration(parameters=parameters).fit(s, y)
    a_ref, b_ref = ref.calibrator_.map_[:2]
    assert a_ref >= 0 and b_ref >= 0   # the data keep betacal away from its own constraint
    ab_ref = (a_ref, b_ref)
    if parameters == "ab":
        c_ref = (a_ref - b_ref) * np.log(2.0)
    else:
        c_ref = float(ref.calibrator_.lr_.intercept_[0])
    ours_nll = nll(m.a, m.b, m.c, s, y)
    # betacal stops at lbfgs's default tolerance (its parameters are off by up to ~0.06 on
    # these sets): we must be at least as good, and predict nearly the same
    assert ours_nll <= nll(*ab_ref, c_ref, s, y) + 1e-9
    grid = np.linspace(0.001, 0.999, 999)
    assert np.abs(ours.predict(grid) - ref.predict(grid)).max() < 5e-3
    # and the generic optimiser, run tight, finds nothing better; parameters agree closely
    a, b, c = scipy_beta(s, y, None, parameters)
    assert ours_nll <= nll(a, b, c, s, y) + 1e-9
    np.testing.assert_allclose([m.a, m.b, m.c], [a, b, c], rtol=0, atol=1e-5)


@pytest.mark.parametrize("parameters", ["abm", "ab", "am"])
def test_beta_weighted_fit_is_optimal(parameters):
    s, y, w = beta_link_set(2000, 3, a=1.5, b=0.7, c=-0.3, beta=(2, 2), weights=True)
    w = w * np.random.default_rng(1).uniform(0.2, 1.0, w.size)   # fractional weights
    m = mlcal.get_calibrator("beta", parameters=parameters, smooth_targets=False).fit(
        s, y, sample_weight=w).map_
    a, b, c = scipy_beta(s, y, w, parameters)
    assert nll(m.a, m.b, m.c, s, y, w) <= nll(a, b, c, s, y, w) + 1e-9
    np.testing.assert_allclose([m.a, m.b, m.c], [a, b, c], rtol=0, atol=1e-5)


@pytest.mark.parametrize("truth,zeroed", [((2.0, -0.8, 0.5), "b"), ((-0.8, 2.0, 0.5), "a")])
def test_negative_coefficient_is_constrained_to_zero_at_the_optimum(truth, zeroed):
    a0, b0, c0 = truth
    s, y = beta_link_set(4000, 5, a=a0, b=b0, c=c0, beta=(1, 1))
    m = mlcal.get_calibrator("beta", smooth_targets=False).fit(s, y).map_
    assert getattr(m, zeroed) == 0.0 and m.a >= 0 and m.b >= 0
    a, b, c = scipy_beta(s, y, None, "abm")
    assert nll(m.a, m.b, m.c, s, y) <= nll(a, b, c, s, y) + 1e-9
    # betacal's own rule (refit without the negative feature) agrees here
    ref = betacal.BetaCalibration(parameters="abm").fit(s, y)
    assert ref.calibrator_.map_[0 if zeroed == "a" else 1] == 0
    np.testing.assert_allclose([m.a, m.b], ref.calibrator_.map_[:2], atol=5e-3)
    assert np.all(np.diff(m(np.linspace(0, 1, 5001))) >= 0)


def test_smooth_targets_default_is_platts_regularised_likelihood():
    s, y = data(800, seed=4)
    m = mlcal.get_calibrator("beta").fit(s, y).map_
    n_pos, n_neg = y.sum(), (1 - y).sum()
    t = np.where(y == 1, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    a, b, c = scipy_beta(s, t, None, "abm")
    assert nll(m.a, m.b, m.c, s, t) <= nll(a, b, c, s, t) + 1e-9


def test_separable_data_need_smoothing():
    s = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    y = np.array([0, 0, 0, 1, 1, 1])
    for name in ("beta", "platt-logit", "temperature"):
        with pytest.raises(ValueError, match="separable"):
            mlcal.get_calibrator(name, smooth_targets=False).fit(s, y)
        p = mlcal.get_calibrator(name).fit(s, y).predict(s)   # smoothed: finite, ordered
        assert np.all(np.isfinite(p)) and np.all(np.diff(p) >= 0) and p[0] < 0.5 < p[-1]


# -- the deterministic-fit rules --------------------------------------------------------------
@pytest.mark.parametrize("name,params", [("beta", {}), ("beta", {"parameters": "ab"}),
                                         ("platt-logit", {}), ("temperature", {})])
def test_integer_weights_equal_repeated_rows_and_row_order_does_not_matter(name, params):
    s, y, w = calibration_set(600, 2, beta=(2, 2), decimals=2, link_power=1.4, weights="integer")
    rep = np.repeat(np.arange(s.size), w.astype(int))
    fitted = mlcal.get_calibrator(name, **params).fit(s, y, sample_weight=w)
    repeated = mlcal.get_calibrator(name, **params).fit(s[rep], y[rep])
    assert fitted.map_.to_dict() == repeated.map_.to_dict()
    perm = np.random.default_rng(9).permutation(s.size)
    permuted = mlcal.get_calibrator(name, **params).fit(s[perm], y[perm], sample_weight=w[perm])
    assert permuted.to_json() == fitted.to_json()


@pytest.mark.parametrize("name", ["beta", "platt-logit", "temperature"])
def test_identity_transform_rejects_scores_outside_unit_interval(name):
    s, y = data(200)
    with pytest.raises(ValueError, match=r"requires scores in \[0, 1\]"):
        mlcal.get_calibrator(name, input_transform="identity").fit(s * 2 - 0.5, y)
    with pytest.raises(InvalidParameterError, match="input_transform"):
        mlcal.get_calibrator(name, input_transform="logit").fit(s, y)


def test_unknown_variant_is_rejected():
    s, y = data(100)
    with pytest.raises(InvalidParameterError, match="parameters"):
        mlcal.get_calibrator("beta", parameters="abc").fit(s, y)


def test_beta_takes_margins_through_the_sigmoid():
    s, y = data(1000, seed=6)
    margins = 2.0 * logit(s)
    cal = mlcal.get_calibrator("beta", smooth_targets=False).fit(margins, y)
    assert cal.map_.input_transform == "sigmoid"
    a, b, c = scipy_beta(expit(margins), y, None, "abm")
    m = cal.map_
    assert nll(m.a, m.b, m.c, expit(margins), y) <= nll(a, b, c, expit(margins), y) + 1e-9


# -- platt-logit and temperature ---------------------------------------------------------------
def test_platt_logit_is_beta_am():
    s, y = data(1500, seed=7)
    for smooth in (True, False):
        pl = mlcal.get_calibrator("platt-logit", smooth_targets=smooth).fit(s, y).map_
        am = mlcal.get_calibrator("beta", parameters="am", smooth_targets=smooth).fit(s, y).map_
        assert isinstance(pl, BetaMap) and (pl.a, pl.b, pl.c) == (am.a, am.b, am.c)


def test_platt_logit_on_margins_is_platt():
    s, y = data(1500, seed=8)
    margins = 3.0 * logit(s) - 1.0
    pl = mlcal.get_calibrator("platt-logit").fit(margins, y).map_
    pt = mlcal.get_calibrator("platt").fit(margins, y).map_
    assert isinstance(pl, SigmoidMap) and pl.input_transform == "identity"
    np.testing.assert_allclose([pl.a, pl.b], [pt.a, pt.b], rtol=1e-7)


@pytest.mark.parametrize("kind", ["proba", "margin"])
def test_temperature_is_the_one_parameter_optimum(kind):
    s, y, w = calibration_set(2000, 10, beta=(2, 2), link_power=2.5, weights="fractional")
    x = s if kind == "proba" else 4.0 * logit(s)
    cal = mlcal.get_calibrator("temperature", smooth_targets=False).fit(x, y, sample_weight=w)
    f = logit(np.clip(s, BETA_EPS, 1 - BETA_EPS)) if kind == "proba" else x

    def loss(k):
        return float(np.sum(w * (np.logaddexp(0.0, k * f) - y * k * f)))

    ref = minimize_scalar(loss, bounds=(0.0, 50.0), method="bounded",
                          options={"xatol": 1e-12}).x
    k = 1.0 / cal.temperature_
    assert loss(k) <= loss(ref) + 1e-9 and k == pytest.approx(ref, abs=1e-6)
    m = cal.map_
    if kind == "proba":
        assert isinstance(m, BetaMap) and m.a == m.b == k and m.c == 0.0
    else:
        assert isinstance(m, SigmoidMap) and (m.a, m.b) == (-k, 0.0)
        assert m.input_transform == "identity"
        np.testing.assert_allclose(cal.predict(x), expit(k * x), rtol=1e-14)
    # the temperature survives a JSON round trip (read off the map)
    assert type(cal).from_json(cal.to_json()).temperature_ == cal.temperature_


def test_temperature_of_anticorrelated_scores_is_infinite():
    s, y = data(500, seed=11)
    cal = mlcal.get_calibrator("temperature").fit(1.0 - s, y)
    assert cal.temperature_ == np.inf
    np.testing.assert_array_equal(cal.predict([0.01, 0.5, 0.99]), [0.5, 0.5, 0.5])


# -- multiclass one-vs-rest ---------------------------------------------------------------------
def test_one_vs_rest_with_beta():
    rng = np.random.default_rng(12)
    n, k = 1500, 3
    logits = rng.normal(0, 1.5, (n, k))
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = np.array([rng.choice(k, p=p ** 2 / (p ** 2).sum()) for p in probs])
    ovr = OneVsRest("beta").fit(probs, y)
    maps = ovr.map_.maps
    assert len(maps) == k and all(isinstance(m, BetaMap) for m in maps)
    out = ovr.predict_proba(probs)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-12)
    # each column is the class's beta map, renormalised
    cols = np.column_stack([m(probs[:, j]) for j, m in enumerate(maps)])
    np.testing.assert_allclose(out, cols / cols.sum(axis=1, keepdims=True), rtol=1e-14)
    back = map_from_dict(json.loads(json.dumps(ovr.map_.to_dict())))
    np.testing.assert_array_equal(back(probs), ovr.map_(probs))


def test_uninformative_scores_give_a_flat_map_not_a_separability_error():
    # balanced labels that do not depend on the score: the optimum is a ~ b ~ 0, where doubling
    # the coefficients changes the loss by less than its rounding
    s = np.tile(np.linspace(0.05, 0.95, 19), 40)
    y = np.tile([0.0, 1.0], s.size // 2 + 1)[:s.size]
    for name in ("beta", "platt-logit", "temperature"):
        p = mlcal.get_calibrator(name, smooth_targets=False).fit(s, y).predict(s)
        assert np.all(np.abs(p - 0.5) < 0.1)


# -- the MLflow flavour, unchanged ----------------------------------------------------------------
@pytest.mark.parametrize("method", ["beta", "temperature"])
def test_mlflow_flavour_round_trip(method, tmp_path):
    pytest.importorskip("mlflow")
    import mlflow.pyfunc
    import pandas as pd
    from sklearn.naive_bayes import GaussianNB

    from mlcal.mlflow import load_model, save_model
    from mlcal.model import CalibratedModel

    rng = np.random.default_rng(13)
    X = rng.normal(0, 1, (1500, 4))
    y = (X[:, 0] + 0.5 * X[:, 1] ** 2 + rng.normal(0, 1, 1500) > 0.5).astype(int)
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(4)])
    model = CalibratedModel(GaussianNB().fit(df[:500], y[:500]), method).fit(df[500:1000],
                                                                           y[500:1000])
    assert isinstance(model.calibrator_.map_, BetaMap)
    path = str(tmp_path / "model")
    save_model(model, path, pip_requirements=["scikit-learn", "numpy", "pandas"])
    loaded = load_model(path)
    assert loaded.calibrator_.map_ == model.calibrator_.map_
    np.testing.assert_array_equal(loaded.predict_proba(df[1000:]), model.predict_proba(df[1000:]))
    out = mlflow.pyfunc.load_model(path).predict(df[1000:])
    # independent oracle: the method fitted directly on the base model's probabilities
    base = model.base_estimator
    expected = mlcal.get_calibrator(method).fit(base.predict_proba(df[500:1000])[:, 1],
                                                y[500:1000]).predict(
        base.predict_proba(df[1000:])[:, 1])
    np.testing.assert_array_equal(out["p_calibrated"].to_numpy(), expected)
