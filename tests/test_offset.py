"""The re-offset stage (issue #29, item 2): formula, fits, composition, documents, serving.

References are independent of the code under test: the Saerens/Elkan prior formula as written,
evaluated in 60-digit mpmath; scipy's root finder and minimiser on the offset likelihood;
scipy's expit/logit; real onnxruntime; a real MLflow save and pyfunc load."""

from __future__ import annotations

import json

import mpmath
import numpy as np
import pytest
from scipy.optimize import brentq, minimize_scalar
from scipy.special import expit, logit

import mlcal
from mlcal.calibrators.base import CalibratorFormatError
from mlcal.maps import BetaMap, LinearMap, MapFormatError, SigmoidMap, StepMap, map_from_dict
from mlcal.maps.offset import OffsetMap, offset_probabilities
from mlcal.maps.reoffset import fit_delta, prior_shift_delta, reoffset
from tests.support.synthetic import calibration_set


def _bits(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64).view(np.int64)


# -- the prior formula ---------------------------------------------------------------------
def _saerens_exact(p: float, train: float, target: float) -> float:
    """p' = (pi'/pi) p / ((pi'/pi) p + ((1 - pi')/(1 - pi)) (1 - p)), in 60-digit arithmetic."""
    with mpmath.workdps(60):
        p, a, b = mpmath.mpf(p), mpmath.mpf(target), mpmath.mpf(train)
        r, r0 = a / b, (1 - a) / (1 - b)
        return float(r * p / (r * p + r0 * (1 - p)))


@pytest.mark.parametrize("train,target", [(0.5, 0.1), (0.5, 0.9), (0.02, 0.3), (0.37, 0.0011)])
def test_prior_shift_is_the_saerens_formula_within_its_rounding(train, target):
    rng = np.random.default_rng(1)
    p = np.concatenate([[1e-300, 5e-324, 1e-12, 0.5, 1 - 2.0 ** -52, 0.25, 0.75],
                        rng.random(300), 10.0 ** rng.uniform(-30, 0, 100)])
    delta = prior_shift_delta(train, target)
    got = offset_probabilities(p, delta)
    exact = np.array([_saerens_exact(v, train, target) for v in p])
    # the logit of p and the sum z carry ~u |logit p| of rounding each, which the expit passes
    # on scaled by p'(1 - p'); the rest is within a few ulps of the correctly rounded result
    lp = np.abs(np.log(p) - np.log1p(-p))
    bound = 4 * np.spacing(exact) + 2.0 ** -50 * (lp + abs(delta) + 2) * exact * (1 - exact)
    assert (np.abs(got - exact) <= bound).all()
    moderate = (p > 1e-6) & (p < 1 - 1e-6)
    ulps = np.abs(got - exact)[moderate] / np.spacing(exact[moderate])
    assert ulps.max() <= 16
    # the formula as written in float64 agrees too (it rounds four times itself)
    r, r0 = target / train, (1 - target) / (1 - train)
    written = r * p / (r * p + r0 * (1 - p))
    np.testing.assert_allclose(got[moderate], written[moderate], rtol=1e-13, atol=0)


def test_prior_shift_delta_and_bad_rates():
    assert prior_shift_delta(0.3, 0.3) == 0.0
    assert prior_shift_delta(0.5, 0.1) == pytest.approx(np.log(0.1 / 0.9), abs=1e-15)
    assert prior_shift_delta(0.1, 0.5) == -prior_shift_delta(0.5, 0.1)
    for bad in (0.0, 1.0, -0.2, 1.5, float("nan")):
        with pytest.raises(ValueError, match="strictly between 0 and 1"):
            prior_shift_delta(bad, 0.5)
    with pytest.raises(TypeError, match="target_rate must be a number"):
        prior_shift_delta(0.5, "0.1")


# -- the maximum-likelihood offset ------------------------------------------------------------
def _loglik(d, l, y, w):
    q = expit(l + d)
    return float(np.sum(w * (y * np.log(q) + (1 - y) * np.log1p(-q))))


@pytest.mark.parametrize("seed,shift", [(0, 0.0), (1, 1.3), (2, -2.7), (3, 6.0)])
def test_fit_delta_is_the_likelihood_maximum(seed, shift):
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 3, 800)
    y = (rng.random(800) < expit(logit(p) + shift)).astype(int)
    w = rng.uniform(0.2, 3.0, 800)
    d = fit_delta(p, y, w)
    l = logit(p)
    root = brentq(lambda t: np.sum(w * (y - expit(l + t))), -30, 30, xtol=1e-15, rtol=1e-15)
    assert abs(d - root) <= 1e-10 * max(1.0, abs(root))
    best = minimize_scalar(lambda t: -_loglik(t, l, y, w), bracket=(root - 1, root + 1),
                           tol=1e-10)
    assert _loglik(d, l, y, w) >= -best.fun - 1e-9
    assert abs(d - shift) < 0.5       # the offset that generated the labels, up to noise
    assert _bits([fit_delta(p, y, w)])[0] == _bits([d])[0]      # deterministic


def test_fit_delta_integer_weights_are_repeated_rows_and_edges_are_refused():
    rng = np.random.default_rng(4)
    p = rng.random(200)
    y = (rng.random(200) < p).astype(int)
    w = rng.integers(1, 4, 200)
    d_w = fit_delta(p, y, w)
    d_rep = fit_delta(np.repeat(p, w), np.repeat(y, w))
    assert abs(d_w - d_rep) <= 1e-12
    # rows at exactly 0 or 1 do not move with the offset and are left out
    d_edge = fit_delta(np.concatenate([p, [0.0, 1.0, 1.0]]), np.concatenate([y, [1, 0, 1]]))
    assert d_edge == fit_delta(p, y)
    with pytest.raises(ValueError, match="all have label 1"):
        fit_delta([0.2, 0.4, 1.0], [1, 1, 0])
    with pytest.raises(ValueError, match="no row with 0 < p < 1"):
        fit_delta([0.0, 1.0], [0, 1])
    with pytest.raises(ValueError, match="must lie in"):
        fit_delta([0.2, 1.2], [0, 1])


# -- composition with every binary map kind ---------------------------------------------------
def _kinds():
    return {"step": StepMap([0.2, 0.5, 0.8], [0.0, 0.3, 0.6, 1.0]),
            "linear": LinearMap([0.1, 0.4, 0.9], [0.05, 0.5, 0.97], input_transform="sigmoid"),
            "sigmoid": SigmoidMap(-4.0, 1.5),
            "beta": BetaMap(1.2, 0.8, 0.3)}


@pytest.mark.parametrize("kind", ["step", "linear", "sigmoid", "beta"])
@pytest.mark.parametrize("delta", [0.0, 0.75, -3.5, 40.0])
def test_offset_composes_with_every_map_kind(kind, delta):
    inner = _kinds()[kind]
    m = OffsetMap(inner, delta)
    s = np.concatenate([np.linspace(-3, 3, 301), [0.0, 1.0, 0.2, 0.8, 5e-324]])
    p = inner(s)
    got = m(s)
    assert np.array_equal(_bits(got), _bits(offset_probabilities(p, delta)))
    inside = (p > 0) & (p < 1)
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(got[inside], expit(logit(p[inside]) + delta), rtol=1e-12,
                                   atol=1e-300)
    # exactly 0 and 1 stay put, and order is kept (the offset is increasing in p)
    assert np.array_equal(got[~inside], p[~inside])
    order = np.argsort(p, kind="stable")
    assert (np.diff(got[order]) >= 0).all()
    assert m.input_transform == inner.input_transform and m.size == inner.size + 1


def test_zero_offset_is_the_inner_map_within_its_rounding():
    """Not the identity bit for bit: the logit rounds at ~u |logit p|, which the expit passes
    on relative to p (near 0) or to 1 - p (near 1)."""
    m = OffsetMap(SigmoidMap(-3.0, 0.2), 0.0)
    s = np.linspace(-5, 5, 2001)
    p = m.inner(s)
    ulps = np.abs(m(s) - p) / np.spacing(p)
    assert (ulps <= 2 + 2 * np.abs(logit(p))).all() and (ulps > 0).any()


# -- documents -------------------------------------------------------------------------------
def test_json_round_trip_is_bit_exact_for_maps_and_calibrators():
    s, y = calibration_set(400, seed=9)
    for method in mlcal.available_calibrators():
        cal = reoffset(mlcal.get_calibrator(method).fit(s, y), 0.1 + 0.2)   # 0.30000000000000004
        text = cal.to_json()
        back = mlcal.load_calibrator(text)
        assert type(back) is type(cal) and back.map_ == cal.map_
        assert back.map_.delta == 0.1 + 0.2 and back.to_json() == text
        assert np.array_equal(_bits(back.predict(s)), _bits(cal.predict(s)))
    m = OffsetMap(BetaMap(0.7, 1.9, -0.3, domain=(0.01, 0.99)), -1e-17)
    back = map_from_dict(json.loads(json.dumps(m.to_dict())))
    assert back == m and back.delta == -1e-17 and back.domain == (0.01, 0.99)


def _good() -> dict:
    return OffsetMap(SigmoidMap(-2.0, 0.1), 0.5).to_dict()


HOSTILE_MAPS = {
    "offset of an offset": ({**_good(), "inner": _good()}, "cannot wrap another offset"),
    "deeply nested": ({**_good(), "inner": {**_good(), "inner": _good()}},
                      "cannot wrap another offset"),
    "inner multiclass": ({**_good(), "inner": {"type": "softmax-affine", "format_version": 1}},
                         "inner map must be one of"),
    "inner a list": ({**_good(), "inner": [1, 2]}, "field 'inner' must be a map object"),
    "inner missing": ({k: v for k, v in _good().items() if k != "inner"},
                      "field 'inner' must be a map object"),
    "delta string": ({**_good(), "delta": "0.5"}, "field 'delta' must be a finite number"),
    "delta true": ({**_good(), "delta": True}, "field 'delta' must be a finite number"),
    "delta huge integer": ({**_good(), "delta": 10 ** 400}, "field 'delta' must be a finite"),
    "delta missing": ({k: v for k, v in _good().items() if k != "delta"},
                      "field 'delta' must be a finite number"),
    "outer transform differs": ({**_good(), "input_transform": "sigmoid"},
                                "differ from the inner map's"),
    "outer domain differs": ({**_good(), "domain": [0.0, 1.0]}, "differ from the inner map's"),
    "inner invalid": ({**_good(), "inner": {**_good()["inner"], "a": float("nan")}},
                      "field 'a' must be a finite number"),
}


@pytest.mark.parametrize("name", list(HOSTILE_MAPS))
def test_hostile_offset_maps_are_refused_by_name(name):
    doc, phrase = HOSTILE_MAPS[name]
    with pytest.raises(MapFormatError, match=phrase):
        map_from_dict(doc)


def test_calibrator_documents_apply_the_method_rules_to_the_inner_map():
    s, y = calibration_set(300, seed=10)
    iso = reoffset(mlcal.get_calibrator("isotonic").fit(s, y), 1.0).to_dict()
    iso["map"]["inner"]["values"] = iso["map"]["inner"]["values"][::-1]
    with pytest.raises(CalibratorFormatError, match="non-decreasing"):
        mlcal.load_calibrator(json.dumps(iso))
    platt = reoffset(mlcal.get_calibrator("platt").fit(s, y), 1.0).to_dict()
    platt["map"]["inner"] = StepMap([0.5], [0.2, 0.8],
                                    domain=tuple(platt["map"]["domain"])).to_dict()
    with pytest.raises(CalibratorFormatError, match="not a 'step' map"):
        mlcal.load_calibrator(json.dumps(platt))
    bad = reoffset(mlcal.get_calibrator("platt").fit(s, y), 1.0).to_dict()
    bad["map"]["delta"] = "x"
    with pytest.raises(CalibratorFormatError, match="delta"):
        mlcal.load_calibrator(json.dumps(bad))
    too_big = reoffset(mlcal.get_calibrator("platt").fit(s, y), 1.0).to_json()
    with pytest.raises(CalibratorFormatError):
        mlcal.load_calibrator(too_big.replace('"delta": 1.0', '"delta": 1e400'))


# -- the reoffset API ------------------------------------------------------------------------
def test_reoffset_copies_collapses_and_validates():
    s, y = calibration_set(300, seed=11)
    cal = mlcal.get_calibrator("histogram").fit(s, y)
    before = cal.to_json()
    once = reoffset(cal, 0.5)
    twice = reoffset(once, -1.25)
    assert cal.to_json() == before                                 # the original is untouched
    assert isinstance(twice.map_, OffsetMap) and twice.map_.inner == cal.map_
    assert twice.map_.delta == 0.5 + -1.25                          # one stage, deltas added
    prior = reoffset(cal, train_rate=0.5, target_rate=0.2)
    assert prior.map_.delta == prior_shift_delta(0.5, 0.2)
    fitted = reoffset(cal, scores=s, y=1 - y)
    assert fitted.map_.delta == fit_delta(cal.predict(s), 1 - y)
    m = reoffset(cal.map_, 2.0)
    assert m == OffsetMap(cal.map_, 2.0)
    for kwargs, phrase in [({}, "exactly one of"),
                           ({"delta": 1.0, "train_rate": 0.5, "target_rate": 0.2},
                            "exactly one of"),
                           ({"train_rate": 0.5}, "needs both train_rate and target_rate"),
                           ({"scores": s}, "needs both the rows and y"),
                           ({"delta": float("inf")}, "finite"),
                           ({"X": s[:, None], "y": y}, "X is for a CalibratedModel")]:
        with pytest.raises(ValueError, match=phrase):
            reoffset(cal, **kwargs)
    with pytest.raises(TypeError, match="expected a fitted binary calibrator"):
        reoffset("platt", 1.0)


def test_prior_shift_repairs_a_model_trained_on_balanced_resampled_data():
    """A calibrator fitted on a 50/50 resample is calibrated for rate 0.5; on the population
    (rate ~0.1) the known-prior offset restores calibration, and the ML offset fitted on a
    fresh population sample lands next to it."""
    rng = np.random.default_rng(12)
    n = 60000
    x = rng.normal(size=n)
    y = (rng.random(n) < expit(1.5 * x - 2.8)).astype(int)   # population rate ~0.1
    rate = y.mean()
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    k = min(pos.size, neg.size, 3000)
    bal = np.concatenate([rng.choice(pos, k, replace=False), rng.choice(neg, k, replace=False)])
    cal = mlcal.get_calibrator("platt").fit(x[bal], y[bal])
    shifted = reoffset(cal, train_rate=0.5, target_rate=rate)
    test = rng.choice(n, 20000, replace=False)

    def logloss(p):
        t = y[test]
        return -np.mean(t * np.log(p) + (1 - t) * np.log1p(-p))
    assert logloss(shifted.predict(x[test])) < logloss(cal.predict(x[test])) - 0.05
    assert abs(shifted.predict(x[test]).mean() - y[test].mean()) < 0.01
    fresh = rng.choice(n, 20000, replace=False)
    ml = reoffset(cal, scores=x[fresh], y=y[fresh]).map_.delta
    assert abs(ml - shifted.map_.delta) < 0.15


def test_calibrated_model_reoffset_and_mlflow_round_trip(tmp_path):
    from sklearn.linear_model import LogisticRegression

    from mlcal.mlflow import load_model, save_model

    rng = np.random.default_rng(13)
    X = rng.normal(size=(1200, 3))
    y = (rng.random(1200) < expit(X @ [1.0, -0.5, 0.3])).astype(int)
    base = LogisticRegression().fit(X[:400], y[:400])
    model = mlcal.CalibratedModel(base, "isotonic").fit(X[400:800], y[400:800])
    shifted = reoffset(model, 1.2)
    p0, p1 = model.predict_proba(X[800:])[:, 1], shifted.predict_proba(X[800:])[:, 1]
    assert np.array_equal(_bits(p1), _bits(offset_probabilities(p0, 1.2)))
    assert model.calibrator_.map_.kind == "linear"                   # untouched
    refit = reoffset(model, X=X[800:], y=y[800:])
    assert refit.calibrator_.map_.delta == fit_delta(p0, y[800:])
    with pytest.raises(ValueError, match="takes feature rows X, not scores"):
        reoffset(model, scores=p0, y=y[800:])
    save_model(shifted, str(tmp_path / "m"))
    loaded = load_model(str(tmp_path / "m"))
    assert loaded.calibrator_.map_ == shifted.calibrator_.map_
    assert np.array_equal(_bits(loaded.predict_proba(X[800:])[:, 1]), _bits(p1))
    import mlflow

    out = mlflow.pyfunc.load_model(str(tmp_path / "m")).predict(X[800:])
    col = out["p_calibrated"] if hasattr(out, "columns") else out
    assert np.array_equal(_bits(np.asarray(col, dtype=np.float64)), _bits(p1))


def test_multiclass_models_are_refused():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(14)
    X = rng.normal(size=(600, 2))
    y = rng.integers(0, 3, 600)
    model = mlcal.CalibratedModel(LogisticRegression().fit(X[:300], y[:300]),
                                  "temperature").fit(X[300:], y[300:])
    with pytest.raises(ValueError, match="binary only"):
        reoffset(model, 1.0)


# -- ONNX ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_onnx_export_alone_and_fused_within_the_bound(dtype):
    ort = pytest.importorskip("onnxruntime")
    from sklearn.linear_model import LogisticRegression

    from mlcal.onnx import error_bound, to_onnx

    def run(model, feeds):
        return ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, feeds)

    s, y = calibration_set(500, seed=15)
    x = np.concatenate([s, [0.0, 1.0, 0.5, 1e-300]]).astype(dtype)
    for method in ("histogram", "isotonic", "platt", "beta"):
        for delta in (1.5, -4.0):
            cal = reoffset(mlcal.get_calibrator(method).fit(s, y), delta)
            got = run(to_onnx(cal, dtype=dtype), {"scores": x})[0].astype(np.float64)
            want = cal.predict(x.astype(np.float64))
            bound = error_bound(cal.map_, dtype)
            assert np.abs(got - want).max() <= bound, (method, delta)
            assert bound <= (1e-11 if dtype == "float64" else 2.0 ** -23), (method, bound)
    nan = run(to_onnx(reoffset(mlcal.get_calibrator("platt").fit(s, y), 1.0), dtype=dtype),
              {"scores": np.array([np.nan, np.inf, 0.3], dtype=dtype)})[0]
    assert np.isnan(nan[:2]).all() and np.isfinite(nan[2])
    rng = np.random.default_rng(16)
    X = rng.normal(size=(900, 3))
    yy = (rng.random(900) < expit(X @ [1.0, -0.5, 0.3])).astype(int)
    model = mlcal.CalibratedModel(LogisticRegression().fit(X[:300], yy[:300]),
                                  "isotonic").fit(X[300:600], yy[300:600])
    shifted = reoffset(model, train_rate=0.5, target_rate=0.2)
    label, proba = run(to_onnx(shifted, dtype=dtype), {"X": X[600:].astype(dtype)})
    # the base model's own conversion differs from scikit-learn by ~1e-16 (float64) or a
    # float32 rounding, amplified by the map's slope and e^|delta|
    tol = 1e-9 if dtype == "float64" else 1e-5
    assert np.abs(proba[:, 1] - shifted.predict_proba(X[600:])[:, 1]).max() <= tol


def test_plot_breaks_are_the_inner_maps():
    from mlcal.plotting import map_breaks, plot_map

    step = StepMap([0.2, 0.5], [0.1, 0.4, 0.9], domain=(0.0, 1.0))
    m = OffsetMap(step, -1.0)
    assert np.array_equal(map_breaks(m), step.thresholds)
    assert map_breaks(OffsetMap(SigmoidMap(-1.0, 0.0), 2.0)).size == 0
    fig = plot_map(m)
    assert fig.axes and fig.axes[0].lines
