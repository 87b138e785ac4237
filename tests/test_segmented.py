"""SegmentedCalibrator and the segmented map (#30): estimation against independent references
(scipy on the exact likelihoods, the REML criterion in matrix form), recovery of simulated
per-segment offsets, the unseen policy, the JSON format and its validation, sample weights,
and a comparison with probcal's SegmentedCalibrator on held-out log loss."""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize, minimize_scalar
from scipy.special import expit, log_expit

import mlcal
from mlcal.calibrators.base import CalibratorFormatError
from mlcal.maps import MapFormatError, SigmoidMap, map_from_dict
from mlcal.maps.offset import OffsetMap
from mlcal.maps.segment_keys import SegmentKeyError
from mlcal.maps.segmented import SegmentedMap, UnseenSegmentError


def _simulate(sizes, true_offsets, seed=0, slope=0.8):
    """Scores miscalibrated by a common slope, labels with a per-segment logit offset."""
    rng = np.random.default_rng(seed)
    code = np.repeat(np.arange(len(sizes)), sizes)
    x = rng.normal(0.0, 1.5, code.size)
    y = (rng.random(code.size) < expit(x + np.asarray(true_offsets)[code])).astype(int)
    return expit(slope * x), y, code


def _loglik(l, y, w, d):
    z = l + d
    return float(np.sum(w * (y * log_expit(z) + (1 - y) * log_expit(-z))))


def _marginal(*args, **params):
    """A SegmentedCalibrator whose offsets are estimated against the shared map's own logits
    (``shared_slope="marginal"``): the tests of the offsets' estimation and shrinkage compare
    with references on those logits (the common within-segment slope has its own tests).
    Slopes are fitted only when asked, and then not tested (``slope_alpha=None``; the test of
    the slopes, the default since the eleventh round, has its own tests)."""
    params.setdefault("shared_slope", "marginal")
    params.setdefault("min_rows_for_slope", None)
    params.setdefault("slope_alpha", None)
    return mlcal.SegmentedCalibrator(*args, **params)


def _in_sample_logits(cal, s):
    q = cal.shared_calibrator_.predict(s)
    return np.log(q) - np.log1p(-q)


# -- estimation against independent references -----------------------------------------------
def test_offsets_are_the_exact_likelihood_maxima_and_variances_the_curvature():
    s, y, code = _simulate([150, 400, 60, 900], [0.6, -0.4, 0.0, 0.25], seed=1)
    seg = np.array(["a", "b", "c", "d"])[code]
    w = np.random.default_rng(2).integers(1, 4, s.size).astype(float)
    cal = _marginal("platt", n_folds=None).fit(s, y, seg, sample_weight=w)
    l = _in_sample_logits(cal, s)
    for g, key in enumerate(cal.segments_):
        rows = seg == key[0]
        res = minimize_scalar(lambda d: -_loglik(l[rows], y[rows], w[rows], d),
                              bounds=(-5, 5), method="bounded", options={"xatol": 1e-10})
        assert cal.offset_mle_[g] == pytest.approx(res.x, abs=1e-6)
        # the variance is the inverse curvature of the log-likelihood (central differences)
        h = 1e-4
        def f(d):
            return _loglik(l[rows], y[rows], w[rows], d)

        curv = -(f(res.x + h) - 2 * f(res.x) + f(res.x - h)) / h**2
        assert cal.offset_var_[g] == pytest.approx(1.0 / curv, rel=1e-4)


def test_shrinkage_is_the_posterior_mean_under_the_reml_prior():
    s, y, code = _simulate([40, 80, 300, 1500, 120, 60], [0.8, -0.6, 0.3, -0.2, 0.0, 0.5],
                           seed=3)
    cal = mlcal.SegmentedCalibrator("platt", n_folds=None, tau="plugin",
                                    shrinkage="reml").fit(s, y, code)
    d, v = cal.offset_mle_, cal.offset_var_
    mu, tau2 = cal.offset_prior_

    # REML in matrix form, maximised independently over a grid then refined
    def neg_reml(tau2):
        V = np.diag(tau2 + v)
        Vi = np.linalg.inv(V)
        X = np.ones((d.size, 1))
        XtViX = X.T @ Vi @ X
        beta = np.linalg.solve(XtViX, X.T @ Vi @ d)
        r = d - X @ beta
        return 0.5 * (np.linalg.slogdet(V)[1] + np.linalg.slogdet(XtViX)[1] + r @ Vi @ r)

    grid = np.linspace(0, 2, 4001)
    best = grid[np.argmin([neg_reml(t) for t in grid])]
    ref = minimize_scalar(neg_reml, bounds=(max(0, best - 1e-3), best + 1e-3),
                          method="bounded").x if best > 0 else 0.0
    assert tau2 == pytest.approx(ref, abs=1e-6)
    assert tau2 > 0
    prec = 1 / (tau2 + v)
    assert mu == pytest.approx(np.sum(prec * d) / np.sum(prec), rel=1e-12)
    # the stored offsets by hand
    by_hand = [mu + tau2 / (tau2 + vg) * (dg - mu) for dg, vg in zip(d, v)]
    np.testing.assert_allclose(cal.map_.offsets, by_hand, rtol=0, atol=1e-15)
    # smaller segments (larger variance) are shrunk more
    order = np.argsort(v)
    assert np.all(np.diff(cal.offset_shrinkage_[order]) < 0)


def test_one_class_segments_get_finite_shrunk_offsets():
    s, y, code = _simulate([500, 700, 600], [0.4, -0.3, 0.1], seed=4)
    rng = np.random.default_rng(5)
    s = np.concatenate([s, rng.uniform(0.2, 0.6, 12), rng.uniform(0.3, 0.7, 5)])
    y = np.concatenate([y, np.zeros(12, int), np.ones(5, int)])
    seg = np.concatenate([code.astype(str), ["neg"] * 12, ["pos"] * 5])
    cal = _marginal("platt", n_folds=None, weak_prior_sd=10.0).fit(s, y, seg)
    offsets = dict(zip([k[0] for k in cal.segments_], cal.map_.offsets))
    mle = dict(zip([k[0] for k in cal.segments_], cal.offset_mle_))
    assert all(np.isfinite(list(offsets.values())))
    mu = cal.offset_prior_[0]
    assert mle["neg"] < -2 and mle["pos"] > 2          # far out: the likelihood is one-sided
    assert mu - 0.5 < offsets["neg"] < mu and mu < offsets["pos"] < mu + 0.5   # shrunk back
    # the one-class estimate is the mode of likelihood x N(0, 10^2), found independently
    l = _in_sample_logits(cal, s)
    rows = seg == "neg"
    res = minimize_scalar(lambda d: -_loglik(l[rows], y[rows], 1.0, d) + d * d / 200.0,
                          bounds=(-30, 30), method="bounded", options={"xatol": 1e-10})
    assert mle["neg"] == pytest.approx(res.x, abs=1e-6)
    p = cal.predict(s[-17:], seg[-17:])
    assert np.all((p > 0) & (p < 1))


def test_simulated_offsets_are_recovered_and_small_segments_shrunk():
    true = np.array([0.8, -0.7, 0.4, -0.3, 0.0, 0.6, -0.5, 0.2])
    sizes = [4000, 4000, 3000, 3000, 30, 25, 20, 40]
    s, y, code = _simulate(sizes, true, seed=6)
    cal = mlcal.SegmentedCalibrator("platt-logit").fit(s, y, code)
    assert cal.cross_fitted_
    # the shared map absorbs the average offset: compare offsets relative to the large
    # segments' weighted mean
    shift = np.average(true[:4], weights=sizes[:4]) - np.average(cal.map_.offsets[:4],
                                                                 weights=sizes[:4])
    np.testing.assert_allclose(cal.map_.offsets[:4] + shift, true[:4], atol=0.12)
    mu = cal.offset_prior_[0]
    for g in range(4, 8):   # small segments: pulled toward the prior mean
        assert abs(cal.map_.offsets[g] - mu) < 0.75 * abs(cal.offset_mle_[g] - mu) + 1e-12
    assert np.all(cal.offset_shrinkage_[:4] > 0.97) and np.all(cal.offset_shrinkage_[4:] < 0.75)


def test_slopes_for_large_segments_are_shrunk_and_change_the_fit():
    rng = np.random.default_rng(7)
    sizes = [6000, 6000, 80]
    code = np.repeat(np.arange(3), sizes)
    x = rng.normal(0, 1.5, code.size)
    true_slope = np.array([1.6, 0.7, 1.0])[code]
    y = (rng.random(code.size) < expit(true_slope * x)).astype(int)
    s = expit(x)
    cal = mlcal.SegmentedCalibrator("platt-logit", min_rows_for_slope=1000,
                                    n_folds=None).fit(s, y, code)
    assert cal.map_.slopes[2] == 1.0 and np.isnan(cal.slope_mle_[2])
    assert cal.map_.slopes[0] > 1.3 and cal.map_.slopes[1] < 0.85
    # check the slope MLE against scipy on the exact two-parameter likelihood
    l = _in_sample_logits(cal, s)
    rows = code == 0
    res = minimize(lambda t: -_loglik(t[0] * l[rows], y[rows], 1.0, t[1]), [1.0, 0.0],
                   method="Nelder-Mead", options={"xatol": 1e-9, "fatol": 1e-12})
    assert cal.slope_mle_[0] == pytest.approx(res.x[0], abs=1e-5)
    # with two slope segments REML may set tau2 = 0; the stored slopes are the posterior means
    mu_a, tau2_a = cal.slope_prior_
    va = cal.slope_var_[:2]
    np.testing.assert_allclose(cal.map_.slopes[:2],
                               mu_a + tau2_a / (tau2_a + va) * (cal.slope_mle_[:2] - mu_a),
                               rtol=1e-12)


# -- the map ---------------------------------------------------------------------------------
def _toy_map(unseen="shared"):
    inner = SigmoidMap(-2.0, 0.3, domain=(-3.0, 3.0))
    return SegmentedMap(inner, (("country", "string"), ("tier", "integer")),
                        (("FR", 1), ("DE", 2)), [1.0, 0.7], [0.5, -0.2], unseen)


def test_map_numerics_match_the_offset_map_and_unseen_rows_the_shared_map():
    m = _toy_map()
    s = np.linspace(-3, 3, 41)
    fr = pd.DataFrame({"country": ["FR"] * s.size, "tier": [1] * s.size})
    assert np.array_equal(m(s, fr), OffsetMap(m.inner, 0.5)(s))   # slope 1: offset-map bits
    de = pd.DataFrame({"country": ["DE"] * s.size, "tier": [2.0] * s.size})   # integral float
    q = m.inner(s)
    expected = expit(0.7 * (np.log(q) - np.log1p(-q)) - 0.2)
    np.testing.assert_allclose(m(s, de), expected, rtol=1e-14)
    unseen = pd.DataFrame({"country": ["FR", "XX", None, "DE"], "tier": [2, 1, 1, np.nan]})
    assert np.array_equal(m(s[:4], unseen), q[:4])   # bit for bit the shared map
    with pytest.raises(UnseenSegmentError, match="row 0.*'FR', 2.*not seen"):
        _toy_map("raise")(s[:4], unseen)


def test_segment_values_are_typed():
    m = _toy_map()
    with pytest.raises(SegmentKeyError, match="'tier'.*integer segment column got str '1'"):
        m([0.0], pd.DataFrame({"country": ["FR"], "tier": ["1"]}))
    with pytest.raises(SegmentKeyError, match="integer segment column got bool"):
        m([0.0], pd.DataFrame({"country": ["FR"], "tier": [True]}))
    with pytest.raises(SegmentKeyError, match="integer segment column got float 1.5"):
        m([0.0], pd.DataFrame({"country": ["FR"], "tier": [1.5]}))
    with pytest.raises(SegmentKeyError, match=r"missing from the input"):
        m([0.0], pd.DataFrame({"country": ["FR"]}))
    # fit time: mixed types and missing values are refused by name
    s, y = np.linspace(0.1, 0.9, 8), np.array([0, 1] * 4)
    with pytest.raises(SegmentKeyError, match="mixes value types"):
        mlcal.SegmentedCalibrator("platt").fit(s, y, ["a", 1] * 4)
    with pytest.raises(SegmentKeyError, match="missing value at row 3"):
        mlcal.SegmentedCalibrator("platt").fit(s, y, ["a", "b", "a", None] * 2)
    # 1, "1" and True are different keys: three segments
    cal = mlcal.SegmentedCalibrator("platt", n_folds=None).fit(
        np.tile(s, 3), np.tile(y, 3), pd.DataFrame({"k": [1] * 8 + [2] * 8 + [3] * 8,
                                                    "b": [True] * 12 + [False] * 12}))
    assert cal.map_.columns == (("k", "integer"), ("b", "boolean"))
    assert cal.segments_ == [(1, True), (2, False), (2, True), (3, False)]


def test_map_from_dict_refuses_a_segmented_map():
    with pytest.raises(MapFormatError, match="unknown map type 'segmented'"):
        map_from_dict(_toy_map().to_dict())


# -- JSON --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fitted():
    s, y, code = _simulate([300, 500, 200], [0.5, -0.5, 0.0], seed=8)
    seg = pd.DataFrame({"country": np.array(["FR", "DE", "IT"])[code],
                        "tier": (code % 2).astype(np.int64)})
    cal = mlcal.SegmentedCalibrator("platt", min_rows_for_slope=400).fit(s, y, seg)
    return cal, s, seg


def test_json_round_trip_is_bit_identical(fitted, tmp_path):
    cal, s, seg = fitted
    text = cal.to_json()
    back = mlcal.load_calibrator(text)
    assert isinstance(back, mlcal.SegmentedCalibrator)
    assert back.to_json() == text
    assert np.array_equal(back.predict(s, seg), cal.predict(s, seg))
    path = mlcal.save_calibrator(cal, tmp_path / "seg.json")
    from pathlib import Path
    again = mlcal.load_calibrator(Path(path))
    assert again.to_json() == text
    assert mlcal.SegmentedCalibrator.from_json(text).to_json() == text
    doc = json.loads(text)
    assert doc["method"] == "segmented" and doc["map"]["type"] == "segmented"
    assert doc["map"]["columns"] == [{"name": "country", "type": "string"},
                                     {"name": "tier", "type": "integer"}]


def _tampered(cal, change):
    doc = copy.deepcopy(cal.to_dict())
    change(doc)
    return doc


@pytest.mark.parametrize("change, message", [
    (lambda d: d["map"].update(extra=1), "unknown field.*'extra'"),
    (lambda d: d.update(fit_info={}), "unknown top-level field.*'fit_info'"),
    (lambda d: d["map"].pop("slopes"), r"missing field\(s\) \['slopes'\]"),
    (lambda d: d["map"]["keys"][1].__setitem__(0, "0"), "key of an integer column must be an integer"),
    (lambda d: d["map"]["keys"][1].__setitem__(0, True), "key of an integer column must be an integer"),
    (lambda d: d["map"]["keys"][1].__setitem__(0, 1.0), "key of an integer column must be an integer"),
    (lambda d: d["map"]["keys"][0].__setitem__(0, 5), "key of a string column must be"),
    (lambda d: [d["map"]["keys"][j].__setitem__(1, d["map"]["keys"][j][0]) for j in (0, 1)],
     "appears twice"),
    (lambda d: d["map"]["keys"][0].pop(), "differ in length"),
    (lambda d: d["map"]["slopes"].__setitem__(0, 0.0), "slopes must be > 0"),
    (lambda d: d["map"]["offsets"].pop(), "need as many slopes and offsets"),
    (lambda d: d["map"]["offsets"].__setitem__(0, "0.1"), "'offsets' must be a list of numbers"),
    (lambda d: d["map"]["columns"][0].update(type="float"), "has type 'float'"),
    (lambda d: d["map"]["columns"][1].update(name="country"), "column names repeat"),
    (lambda d: d["map"]["columns"][0].update(extra=1), "exactly the fields 'name' and 'type'"),
    (lambda d: d["map"].update(unseen="ignore"), "unseen must be one of"),
    (lambda d: d["params"].update(unseen="raise"), "params say unseen='raise'"),
    (lambda d: d["params"].update(method="segmented"), "parameter 'method' must be"),
    (lambda d: d["params"].update(n_folds=1), "parameter 'n_folds' must be"),
    (lambda d: d["params"].update(colour="red"), "params must be exactly"),
    (lambda d: d["map"].update(inner={"type": "offset"}), "field 'inner' must be a map of type"),
    (lambda d: d["map"].update(input_transform="sigmoid"), "differ from the inner map's"),
    (lambda d: d["map"].update(inner={"type": "step", "format_version": 1, "thresholds": [],
                                      "values": [0.5], "input_transform": "identity",
                                      "domain": d["map"]["domain"]}),
     "shared map: a 'platt' calibrator fits 'sigmoid' maps, not a 'step' map"),
    (lambda d: d["map"].update(format_version=2), "unsupported format_version 2"),
])
def test_tampered_documents_are_refused_by_name(fitted, change, message):
    cal, _, _ = fitted
    doc = _tampered(cal, change)
    with pytest.raises(CalibratorFormatError, match=message):
        mlcal.load_calibrator(doc)


def test_tampered_text_is_refused_by_the_strict_parser(fitted):
    cal, _, _ = fitted
    text = cal.to_json()
    first = json.dumps(cal.map_.offsets[0])
    with pytest.raises(CalibratorFormatError, match="out of the range of a 64-bit float"):
        mlcal.load_calibrator(text.replace(first, "1e400", 1))
    with pytest.raises(CalibratorFormatError, match="duplicate key 'unseen'"):
        mlcal.load_calibrator(text.replace('"unseen": "shared"}',
                                           '"unseen": "shared", "unseen": "raise"}', 1))


def test_segment_table_size_is_bounded(fitted, monkeypatch):
    import mlcal.maps.segmented as sm

    cal, _, _ = fitted
    monkeypatch.setattr(sm, "MAX_SEGMENTS", 2)
    with pytest.raises(CalibratorFormatError, match="needs 1 to 2 segments, got 3"):
        mlcal.load_calibrator(cal.to_dict())


# -- weights, errors, reference ----------------------------------------------------------------
def test_integer_weights_equal_repeated_rows():
    s, y, code = _simulate([120, 300, 50], [0.4, -0.2, 0.1], seed=9)
    w = np.random.default_rng(10).integers(0, 4, s.size)
    a = mlcal.SegmentedCalibrator("platt", n_folds=None, min_rows_for_slope=200).fit(
        s, y, code, sample_weight=w)
    rep = np.repeat(np.arange(s.size), w)
    b = mlcal.SegmentedCalibrator("platt", n_folds=None, min_rows_for_slope=200).fit(
        s[rep], y[rep], code[rep])
    assert a.segments_ == b.segments_
    np.testing.assert_allclose(a.map_.offsets, b.map_.offsets, rtol=0, atol=1e-9)
    np.testing.assert_allclose(a.map_.slopes, b.map_.slopes, rtol=0, atol=1e-9)
    np.testing.assert_allclose(a.offset_var_, b.offset_var_, rtol=1e-9)


def test_bad_inputs_raise_named_errors():
    s, y = np.linspace(0.1, 0.9, 6), np.array([0, 1, 0, 1, 0, 1])
    with pytest.raises(SegmentKeyError, match="6 scores but 5 segment rows"):
        mlcal.SegmentedCalibrator("platt").fit(s, y, list("aabbc"))
    with pytest.raises(ValueError, match="binary|labels"):   # multiclass is not supported
        mlcal.SegmentedCalibrator("platt").fit(s, [0, 1, 2, 0, 1, 2], list("aabbcc"))
    with pytest.raises(mlcal.calibrators._params.InvalidParameterError, match="'method'"):
        mlcal.SegmentedCalibrator("nope").fit(s, y, list("aabbcc"))
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        mlcal.SegmentedCalibrator().predict(s, list("aabbcc"))


def test_not_worse_than_probcal_on_held_out_log_loss(capsys):
    probcal = pytest.importorskip("probcal")
    from sklearn.metrics import log_loss

    rng = np.random.default_rng(11)
    n_seg = 40
    true = rng.normal(0.0, 0.6, n_seg)
    sizes = rng.integers(15, 600, n_seg)
    s, y, code = _simulate(sizes, true, seed=12)
    seg = np.array([f"g{g}" for g in range(n_seg)])[code]
    train = rng.random(s.size) < 0.5
    ours = mlcal.SegmentedCalibrator("beta").fit(s[train], y[train], seg[train])
    theirs = probcal.SegmentedCalibrator().fit(s[train], y[train], segments=seg[train])
    test = ~train
    p_ours = ours.predict(s[test], seg[test])
    p_theirs = np.asarray(theirs.predict_proba(s[test], segments=seg[test]))
    p_theirs = p_theirs[:, 1] if p_theirs.ndim == 2 else p_theirs
    p_shared = ours.shared_calibrator_.predict(s[test])
    ll = {name: log_loss(y[test], np.clip(p, 1e-15, 1 - 1e-15))
          for name, p in [("mlcal", p_ours), ("probcal", p_theirs), ("shared", p_shared)]}
    with capsys.disabled():
        print(f"\nheld-out log loss ({test.sum()} rows, {n_seg} segments): "
              + ", ".join(f"{k} {v:.5f}" for k, v in ll.items()))
    assert ll["mlcal"] < ll["shared"]
    assert ll["mlcal"] <= ll["probcal"] + 1e-3


def test_the_documented_json_example_loads_and_evaluates_as_documented():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "segments.md").read_text()
    block = re.search(r"```json\n(.*?)```", text, re.S).group(1)
    cal = mlcal.load_calibrator(block)
    assert isinstance(cal, mlcal.SegmentedCalibrator)
    s = np.array([-1.0, 0.5])
    seg = pd.DataFrame({"country": ["DE", "FR"], "tier": [2, 1]})
    q = 1 / (1 + np.exp(-2.0 * s + 0.3))   # the documented sigmoid map 1 / (1 + exp(a s + b))
    z = np.array([0.7, 1.0]) * np.log(q / (1 - q)) + np.array([-0.2, 0.5])
    np.testing.assert_allclose(cal.predict(s, seg), 1 / (1 + np.exp(-z)), rtol=1e-13)


def test_the_command_line_names_what_it_cannot_do_with_a_segmented_calibrator(fitted, tmp_path,
                                                                             capsys):
    from mlcal.cli import main

    cal, s, _ = fitted
    path = mlcal.save_calibrator(cal, tmp_path / "seg.json")
    pd.DataFrame({"score": s[:10], "y": [0, 1] * 5}).to_csv(tmp_path / "d.csv", index=False)
    assert main(["evaluate", "--calibrator", path, "--data", str(tmp_path / "d.csv")]) == 2
    assert "holds a segmented calibrator (segment columns ['country', 'tier'])" in \
        capsys.readouterr().err
    # export-onnx can (the segment lookup graph, tests/test_onnx_segmented.py checks its values)
    assert main(["export-onnx", "--calibrator", path, "--out", str(tmp_path / "x.onnx")]) == 0
    assert (tmp_path / "x.onnx").stat().st_size > 0


# -- the cross-validated choice of the adjustment (select="cv") --------------------------------
def _slopes_data(seed, sizes=(3000, 3000, 3000), slopes=(1.8, 0.55, 1.0), offsets=(0, 0, 0)):
    rng = np.random.default_rng(seed)
    code = np.repeat(np.arange(len(sizes)), sizes)
    x = rng.normal(0.0, 1.5, code.size)
    y = (rng.random(code.size) < expit(np.asarray(slopes)[code] * x
                                       + np.asarray(offsets)[code])).astype(int)
    return expit(x), y, code


def test_cv_choice_keeps_the_shared_map_when_segments_do_not_differ():
    s, y, code = _slopes_data(11, sizes=(400, 300), slopes=(1.0, 1.0))
    cal = mlcal.SegmentedCalibrator("platt", min_rows_for_slope=200, select="cv",
                                    slope_alpha=None).fit(s, y, code)
    assert cal.adjustment_ == "none" and set(cal.cv_log_loss_) == {"none", "offsets", "slopes"}
    assert np.all(cal.map_.offsets == 0.0) and np.all(cal.map_.slopes == 1.0)
    # the stored map is then the shared map (slope 1, offset 0: within a few ulps)
    np.testing.assert_allclose(cal.predict(s, code), cal.shared_calibrator_.predict(s),
                               rtol=1e-14)
    # select="off" fits the offsets whatever they cost (the behaviour of old documents)
    off = mlcal.SegmentedCalibrator("platt", min_rows_for_slope=200, select="off",
                                    slope_alpha=None).fit(s, y, code)
    assert off.adjustment_ == "slopes" and off.cv_log_loss_ is None
    assert np.any(off.map_.offsets != 0.0)


def test_cv_choice_finds_offsets_and_slopes_where_they_exist():
    s, y, code = _slopes_data(12, slopes=(1.0, 1.0, 1.0), offsets=(0.7, -0.6, 0.0))
    # (slopes are not offered: pooling offset segments flattens the shared map's slope, so
    # per-segment slopes would be a real, if small, improvement here)
    cal = _marginal("platt-logit", select="cv").fit(s, y, code)
    assert cal.adjustment_ == "offsets" and np.all(cal.map_.slopes == 1.0)
    loss = cal.cv_log_loss_
    assert set(loss) == {"none", "offsets"}
    assert loss["offsets"] < loss["none"] - 50    # a large, real improvement
    s, y, code = _slopes_data(13)
    cal = _marginal("platt-logit", min_rows_for_slope=200, select="cv").fit(s, y, code)
    assert cal.adjustment_ == "slopes"
    assert cal.map_.slopes[0] > 1.5 and cal.map_.slopes[1] < 0.7
    # the choice's held-out losses are those of maps fitted without the scored rows: the
    # held-out loss of the chosen adjustment is above its in-sample loss
    q = cal.predict(s, code)
    in_sample = -float(np.sum(y * np.log(q) + (1 - y) * np.log1p(-q)))
    assert in_sample < cal.cv_log_loss_["slopes"] < cal.cv_log_loss_["offsets"]
    # without cross-fitting nothing is chosen
    ins = _marginal("platt-logit", n_folds=None, select="cv").fit(s, y, code)
    assert ins.adjustment_ == "offsets" and ins.cv_log_loss_ is None


# -- offsets averaged over the posterior of tau (tau="integrated") ------------------------------
def _brute_force_integrated(d, v, scale=1.0):
    """Posterior means of the offsets with a flat prior on mu and a half-Cauchy(scale) prior
    on tau, by adaptive quadrature over tau (scipy) of the normal-normal model written out."""
    from scipy import integrate

    def restricted(tau):   # the marginal likelihood with mu integrated out (flat prior)
        s = tau ** 2 + v
        prec = 1 / s
        mu = np.sum(prec * d) / np.sum(prec)
        ll = -0.5 * (np.sum(np.log(s)) + np.log(np.sum(prec)) + np.sum((d - mu) ** 2 * prec))
        return np.exp(ll) * 2 / (np.pi * scale * (1 + (tau / scale) ** 2)), mu

    def quad(f):
        return integrate.quad(f, 0, np.inf, limit=1000, epsabs=0, epsrel=1e-11)[0]

    z = quad(lambda tau: restricted(tau)[0])

    def mean(g):
        def f(tau):
            dens, mu = restricted(tau)
            return dens * (mu + tau ** 2 / (tau ** 2 + v[g]) * (d[g] - mu))
        return quad(f) / z
    return np.array([mean(g) for g in range(d.size)])


@pytest.mark.parametrize("sizes,offsets", [
    ([120, 150], [0.5, -0.2]),                                        # two segments (diabetes)
    ([40, 80, 300, 1500, 120, 60], [0.8, -0.6, 0.3, -0.2, 0.0, 0.5]),
])
def test_integrated_offsets_are_the_posterior_means_over_tau(sizes, offsets):
    s, y, code = _simulate(sizes, offsets, seed=11)
    cal = _marginal("platt", n_folds=None, tau="integrated").fit(s, y, code)
    d, v = cal.offset_mle_, cal.offset_var_
    np.testing.assert_allclose(cal.map_.offsets, _brute_force_integrated(d, v),
                               rtol=0, atol=2e-7)
    # same MLEs as the plug-in fit; only the shrinkage differs
    plug = _marginal("platt", n_folds=None, tau="plugin").fit(s, y, code)
    np.testing.assert_array_equal(plug.offset_mle_, d)
    assert not np.array_equal(plug.map_.offsets, cal.map_.offsets)
    assert np.all((cal.offset_shrinkage_ > 0) & (cal.offset_shrinkage_ < 1))
    # the default (tau="auto") integrates with fewer than 10 informative segments
    default = _marginal("platt", n_folds=None).fit(s, y, code)
    np.testing.assert_array_equal(default.map_.offsets, cal.map_.offsets)


def test_integrated_offsets_approach_the_plug_in_with_many_segments():
    rng = np.random.default_rng(12)
    sizes = rng.integers(100, 600, 150)
    s, y, code = _simulate(sizes, rng.normal(0, 0.5, 150), seed=13)
    plug = mlcal.SegmentedCalibrator("platt", n_folds=None, tau="plugin",
                                     shrinkage="reml").fit(s, y, code)
    integ = mlcal.SegmentedCalibrator("platt", n_folds=None, tau="integrated").fit(s, y, code)
    # tau's posterior concentrates at the REML estimate: the offsets nearly agree
    gap = np.abs(integ.map_.offsets - plug.map_.offsets)
    assert gap.max() < 0.02 * np.abs(plug.map_.offsets).max()
    # and the default (tau="auto") keeps the plug-in with 10 or more informative segments
    default = mlcal.SegmentedCalibrator("platt", n_folds=None, shrinkage="reml").fit(s, y, code)
    np.testing.assert_array_equal(default.map_.offsets, plug.map_.offsets)


# -- cross-fitting folds fit the method auto chose (fold_shared="chosen") ---------------------
def test_folds_fit_the_method_auto_chose_on_all_rows():
    rng = np.random.default_rng(31)
    s, y, code = _simulate(rng.integers(60, 900, 12), rng.normal(0, 0.5, 12), seed=32)
    cal = _marginal().fit(s, y, code)
    assert cal.fold_shared == "chosen" and cal.cross_fitted_
    auto = cal.shared_calibrator_
    # the same as cross-fitting the chosen method itself (its candidate parameters included)
    direct = _marginal(auto.candidate(auto.chosen_)).fit(s, y, code)
    np.testing.assert_array_equal(direct.offset_mle_, cal.offset_mle_)
    np.testing.assert_array_equal(direct.map_.offsets, cal.map_.offsets)
    assert np.array_equal(direct.predict(s, code), cal.predict(s, code))
    # the offsets are the likelihood maxima against the chosen method's out-of-fold logits
    # (folds stratified by segment and label, rebuilt here as documented)
    keys = np.unique(code)
    codes = np.searchsorted(keys, code)
    r = np.random.default_rng(cal.seed)
    order = np.lexsort((r.random(s.size), y, codes))
    fold = np.empty(s.size, dtype=int)
    fold[order] = np.arange(s.size) % cal.n_folds
    q = np.empty(s.size)
    for f in range(cal.n_folds):
        m = auto.candidate(auto.chosen_).fit(s[fold != f], y[fold != f])
        q[fold == f] = m.predict(s[fold == f])
    l = np.log(q) - np.log1p(-q)
    for g in range(keys.size):
        rows = codes == g
        res = minimize_scalar(lambda d: -_loglik(l[rows], y[rows], np.ones(rows.sum()), d),
                              bounds=(-5, 5), method="bounded", options={"xatol": 1e-10})
        assert cal.offset_mle_[g] == pytest.approx(res.x, abs=1e-6)
    # "repeat": every fold runs auto again (the earlier behaviour)
    old = _marginal(fold_shared="repeat").fit(s, y, code)
    for f in range(cal.n_folds):
        m = mlcal.AutoCalibrator().fit(s[fold != f], y[fold != f])
        q[fold == f] = m.predict(s[fold == f])
    l = np.log(q) - np.log1p(-q)
    rows = codes == 0
    res = minimize_scalar(lambda d: -_loglik(l[rows], y[rows], np.ones(rows.sum()), d),
                          bounds=(-5, 5), method="bounded", options={"xatol": 1e-10})
    assert old.offset_mle_[0] == pytest.approx(res.x, abs=1e-6)
    # a method that chooses nothing fits the same either way
    a = _marginal("beta").fit(s, y, code)
    b = _marginal("beta", fold_shared="repeat").fit(s, y, code)
    np.testing.assert_array_equal(a.map_.offsets, b.map_.offsets)


# -- the plug-in's prior by moments, toward the shared map (shrinkage="moments") --------------
def _dersimonian_laird(d, v):
    """Cochran's Q and its expectation in matrix form: ``Q = d' (W - w w' / 1'w) d`` and
    ``E Q = (k - 1) + tau2 (tr W - tr W^2 / 1'w)``, solved for ``tau2`` (truncated at 0)."""
    keep = np.isfinite(v)
    d, W = d[keep], np.diag(1.0 / v[keep])
    w = np.diag(W)
    P = W - np.outer(w, w) / w.sum()
    q = d @ P @ d
    return max(0.0, (q - (d.size - 1)) / (np.trace(W) - np.trace(W @ W) / w.sum()))


def test_moments_shrinkage_is_dersimonian_laird_toward_the_shared_map():
    rng = np.random.default_rng(41)
    sizes = rng.integers(40, 1500, 14)
    s, y, code = _simulate(sizes, rng.normal(0.1, 0.5, 14), seed=42)
    cal = _marginal("platt").fit(s, y, code)   # 14 segments: the plug-in
    assert cal.shrinkage == "moments" and cal.tau == "auto"
    d, v = cal.offset_mle_, cal.offset_var_
    mu, tau2 = cal.offset_prior_
    assert mu == 0.0 and tau2 > 0
    assert tau2 == pytest.approx(_dersimonian_laird(d, v), rel=1e-12)
    # at that tau2 the moment equation holds: Q equals its expectation
    w = 1 / v
    m = np.sum(w * d) / np.sum(w)
    q = np.sum(w * (d - m) ** 2)
    assert q == pytest.approx(d.size - 1 + tau2 * (w.sum() - (w * w).sum() / w.sum()), rel=1e-12)
    # offsets shrunk toward 0, the shared map, by tau2 / (tau2 + v)
    np.testing.assert_allclose(cal.map_.offsets, tau2 / (tau2 + v) * d, rtol=0, atol=1e-15)
    np.testing.assert_allclose(cal.offset_shrinkage_, tau2 / (tau2 + v), rtol=0, atol=1e-15)
    # the same MLEs as REML's shrinkage; only the prior differs
    reml = _marginal("platt", shrinkage="reml").fit(s, y, code)
    np.testing.assert_array_equal(reml.offset_mle_, d)
    assert reml.offset_prior_[0] != 0.0 and reml.offset_prior_[1] != tau2
    assert not np.array_equal(reml.map_.offsets, cal.map_.offsets)


def test_moments_tau2_edge_cases():
    from mlcal.calibrators.segment_shrinkage import moments_tau2

    # no spread beyond the noise: truncated at 0
    assert moments_tau2(np.array([0.01, -0.01, 0.0, 0.02]), np.full(4, 0.1)) == 0.0
    # segments without information are left out; fewer than two informative: 0
    d, v = np.array([0.9, -0.4, 0.3, 5.0]), np.array([0.01, 0.02, 0.05, np.inf])
    assert moments_tau2(d, v) == pytest.approx(_dersimonian_laird(d, v), rel=1e-12)
    assert moments_tau2(d, v) == moments_tau2(d[:3], v[:3])
    assert moments_tau2(np.array([1.0, 2.0]), np.array([0.1, np.inf])) == 0.0
    assert moments_tau2(np.array([]), np.array([])) == 0.0
    # equal variances: the familiar (sample variance - v)
    d = np.array([0.5, -0.2, 0.1, 0.8, -0.6])
    assert moments_tau2(d, np.full(5, 0.01)) == pytest.approx(np.var(d, ddof=1) - 0.01,
                                                              rel=1e-12)


@pytest.mark.parametrize("shrinkage", ["reml", "regression"])
def test_the_plugin_prior_leaves_the_average_over_tau_unchanged(shrinkage):
    # fewer than 10 informative segments: tau="auto" averages over tau with REML's likelihood,
    # whatever the plug-in's prior (the default's moments, REML's or the regression's)
    s, y, code = _simulate([200, 500, 80, 900, 300], [0.5, -0.3, 0.2, 0.0, 0.4], seed=43)
    a = _marginal("platt").fit(s, y, code)
    b = _marginal("platt", shrinkage=shrinkage).fit(s, y, code)
    np.testing.assert_array_equal(a.map_.offsets, b.map_.offsets)
    assert a.offset_prior_ == b.offset_prior_


# -- the centre moves with the segment's mean shared logit (shrinkage="regression") ----------
def _moments_meta_regression(d, v, x):
    """Independent reference in matrix form: ``Q_E = d' (W - W X (X'WX)^-1 X'W) d`` with
    ``X = [1, x]`` and ``E Q_E = (k - 2) + tau2 (tr W - tr((X'WX)^-1 X'W^2 X))`` solved for
    ``tau2``; the centre's slope by random-effects weighted least squares (numpy's lstsq on
    the square-root-weighted system), the centre 0 at the ``1/v``-weighted mean of ``x``."""
    keep = np.isfinite(v)
    d, v, x = d[keep], v[keep], x[keep]
    X = np.column_stack([np.ones_like(x), x])
    W = np.diag(1.0 / v)
    A = X.T @ W @ X
    P = W - W @ X @ np.linalg.inv(A) @ X.T @ W
    tau2 = max(0.0, (d @ P @ d - (d.size - 2))
               / (np.trace(W) - np.trace(np.linalg.inv(A) @ X.T @ W @ W @ X)))
    r = np.sqrt(1.0 / (tau2 + v))
    coef = np.linalg.lstsq(X * r[:, None], d * r, rcond=None)[0]
    centre = np.zeros(keep.size)
    centre[keep] = coef[1] * (x - np.sum(x / v) / np.sum(1.0 / v))
    return centre, tau2, coef[1]


def test_regression_prior_matches_the_matrix_form():
    from mlcal.calibrators.segment_shrinkage import moments_regression_prior, moments_tau2

    rng = np.random.default_rng(51)
    x = rng.normal(0.0, 0.5, 25)
    v = rng.uniform(0.01, 0.3, 25)
    d = 0.7 * x + rng.normal(0.0, 0.3, 25) + rng.normal(0.0, np.sqrt(v))
    v[3] = np.inf                               # no information: left out, centre 0
    centre, tau2, beta = moments_regression_prior(d, v, x)
    c_ref, t_ref, b_ref = _moments_meta_regression(d, v, x)
    assert tau2 == pytest.approx(t_ref, rel=1e-10) and tau2 > 0
    assert beta == pytest.approx(b_ref, rel=1e-10)
    np.testing.assert_allclose(centre, c_ref, rtol=1e-10, atol=1e-14)
    assert centre[3] == 0.0
    # the covariate explains part of the spread: less is left than without it
    assert tau2 < moments_tau2(d, v)
    # no spread beyond the regression line and the noise: tau2 truncated at 0
    d0 = 0.5 * x
    assert moments_regression_prior(d0, v, x)[1] == 0.0
    assert moments_regression_prior(d0, v, x)[2] == pytest.approx(0.5, rel=1e-12)
    # fewer than three informative segments, or a covariate without spread: plain moments
    # (0.01: equal covariates whose weighted mean does not round back to 0.03 here)
    for dd, vv, xx in ((d[:2], v[:2], x[:2]), (d, v, np.full(25, 0.3)),
                       (d, v, np.full(25, 0.03))):
        c, t, b = moments_regression_prior(dd, vv, xx)
        assert b == 0.0 and not c.any() and t == moments_tau2(dd, vv)


def test_regression_shrinkage_shrinks_toward_the_mean_logit_line():
    # segments whose offset grows with their scores (the "confounded" scenario of
    # docs/segments.md): the centre follows the segment's mean shared logit
    rng = np.random.default_rng(52)
    k = 30
    sizes = rng.integers(30, 1200, k)
    shift = rng.normal(0.0, 0.6, k)
    code = np.repeat(np.arange(k), sizes)
    xs = rng.normal(shift[code], 1.5)
    y = (rng.random(code.size) < expit(xs + 0.8 * shift[code])).astype(int)
    s = expit(0.8 * xs)
    cal = _marginal("platt", n_folds=None, shrinkage="regression").fit(
        s, y, code)
    l = _in_sample_logits(cal, s)
    x = np.bincount(code, weights=l) / np.bincount(code)
    d, v = cal.offset_mle_, cal.offset_var_
    centre, tau2, beta = _moments_meta_regression(d, v, x)
    assert beta > 0.2                           # offsets rise with the segment's scores
    assert cal.offset_prior_ == (0.0, pytest.approx(tau2, rel=1e-9))
    assert cal.offset_centre_slope_ == pytest.approx(beta, rel=1e-9)
    np.testing.assert_allclose(cal.offset_centre_, centre, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(cal.map_.offsets, centre + tau2 / (tau2 + v) * (d - centre),
                               rtol=1e-9, atol=1e-12)
    # the same offset estimates as the other priors; only the prior differs
    mom = _marginal("platt", n_folds=None).fit(s, y, code)
    np.testing.assert_array_equal(mom.offset_mle_, d)
    assert not mom.offset_centre_.any() and mom.offset_centre_slope_ == 0.0
    assert tau2 < mom.offset_prior_[1]
    # written and read back, in Python (the Java evaluator: tests/test_java_segmented.py)
    text = cal.to_json()
    assert json.loads(text)["params"]["shrinkage"] == "regression"
    back = mlcal.load_calibrator(text)
    assert back.shrinkage == "regression" and back.to_json() == text
    assert np.array_equal(back.predict(s, code), cal.predict(s, code))
    # with slopes, the re-estimated offsets of the large segments are shrunk to the same line
    sl = _marginal("platt", n_folds=None, shrinkage="regression",
                                   min_rows_for_slope=800).fit(s, y, code)
    assert sl.offset_centre_slope_ == cal.offset_centre_slope_ and sl.adjustment_ == "slopes"


# parameters added after the format, in order: (name, a value to write that differs from the
# legacy one, the legacy value a document without the parameter loads with, a bad value)
LATER_PARAMS = [("select", "cv", "off", "always"), ("tau", "integrated", "plugin", "reml"),
                ("fold_shared", "chosen", "repeat", "auto"),
                ("shrinkage", "moments", "reml", "dl"),
                ("shared_slope", "within", "marginal", "pooled"),
                ("heterogeneity_alpha", 0.05, None, 1.5),
                ("slope_alpha", 0.05, None, 1.5)]


@pytest.mark.parametrize("k", range(len(LATER_PARAMS)))
def test_a_document_without_a_later_parameter_loads_with_the_legacy_value(fitted, k):
    name, written, legacy, bad_value = LATER_PARAMS[k]
    cal, s, seg = fitted
    default = cal.get_params()[name]
    doc = cal.set_params(**{name: written}).to_dict()
    cal.set_params(**{name: default})
    assert doc["params"][name] == written
    del doc["params"][name]       # as written before the parameter existed
    old = mlcal.load_calibrator(doc)
    assert getattr(old, name) == legacy
    assert np.array_equal(old.predict(s, seg), cal.predict(s, seg))
    assert json.loads(old.to_json())["params"][name] == legacy
    earlier = [p[0] for p in LATER_PARAMS[:k]]
    for gone in earlier:          # as written before every earlier one existed too
        del doc["params"][gone]
    old = mlcal.load_calibrator(doc)
    assert [getattr(old, n) for n in earlier + [name]] == [p[2] for p in LATER_PARAMS[:k + 1]]
    bad = cal.to_dict()
    bad["params"][name] = bad_value
    with pytest.raises(CalibratorFormatError, match=f"parameter '{name}'"):
        mlcal.load_calibrator(bad)
    with pytest.raises(mlcal.calibrators._params.InvalidParameterError, match=f"'{name}'"):
        mlcal.SegmentedCalibrator(**{name: "ml"}).fit(s, np.arange(s.size) % 2, seg)


# -- the shared map's slope fitted with segment intercepts (shared_slope="within") ----------
def _penalised_negloglik(theta, l, y, w, code, centre, tau2):
    a, d = theta[0], theta[1:]
    z = a * l + d[code]
    return -(np.sum(w * (y * log_expit(z) + (1 - y) * log_expit(-z)))
             - np.sum((d - centre) ** 2) / (2 * tau2))


@pytest.mark.parametrize("centre", [0.0, "array"])
def test_common_slope_fit_is_the_penalised_likelihood_maximum(centre):
    from mlcal.calibrators.segment_shrinkage import common_slope_fit

    rng = np.random.default_rng(71)
    k = 7
    sizes = rng.integers(20, 300, k)
    code = np.repeat(np.arange(k), sizes)
    l = rng.normal(0.3 * rng.normal(size=k)[code], 1.2)
    y = (rng.random(code.size) < expit(0.8 * l + rng.normal(0, 0.6, k)[code])).astype(float)
    w = rng.integers(1, 4, code.size).astype(float)
    c = np.zeros(k) if centre == 0.0 else rng.normal(0, 0.2, k)
    n_seg = k + 1                         # one segment without rows: it keeps its centre
    cc = np.append(c, 0.35) if centre != 0.0 else 0.0
    a, d = common_slope_fit(l, y, w, code, n_seg, cc, 0.3)
    ref = minimize(_penalised_negloglik, np.r_[1.0, np.zeros(k)],
                   args=(l, y, w, code, c, 0.3), method="BFGS",
                   options={"gtol": 1e-10, "maxiter": 10_000})
    assert a == pytest.approx(ref.x[0], abs=1e-6)
    np.testing.assert_allclose(d[:k], ref.x[1:], atol=1e-6)
    assert d[k] == (0.35 if centre != 0.0 else 0.0)
    # with every intercept free (a huge tau2) it is the fixed-effects logistic regression:
    # the slope is estimated within segments, unaffected by where the segments sit
    a_free, d_free = common_slope_fit(l, y, w, code, k, 0.0, 1e8)
    ref = minimize(_penalised_negloglik, np.r_[1.0, np.zeros(k)],
                   args=(l, y, w, code, np.zeros(k), 1e8), method="BFGS",
                   options={"gtol": 1e-10, "maxiter": 10_000})
    assert a_free == pytest.approx(ref.x[0], abs=1e-5)
    with pytest.raises(ValueError, match="positive tau2"):
        common_slope_fit(l, y, w, code, k, 0.0, 0.0)


def test_common_slope_fit_without_variation_within_segments():
    from mlcal.calibrators.segment_shrinkage import common_slope_fit

    # every logit 0: the slope is not identified; intercepts alone with a = 1
    code = np.repeat(np.arange(4), 50)
    l = np.zeros(code.size)
    y = (np.arange(code.size) % 3 == 0).astype(float)
    w = np.ones(code.size)
    a, d = common_slope_fit(l, y, w, code, 4, 0.0, 0.5)
    assert a == 1.0
    for g in range(4):
        rows = code == g
        res = minimize_scalar(lambda t: -(_loglik(l[rows], y[rows], w[rows], t) - t * t / 1.0),
                              bounds=(-5, 5), method="bounded", options={"xatol": 1e-11})
        assert d[g] == pytest.approx(res.x, abs=1e-7)


def _confounded(seed, k=30, within=0.8):
    """Segments that sit at different heights of the score with offsets that go with it: the
    shared map fitted on all rows gets a steeper slope than the one within segments."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(200, 1500, k)
    shift = rng.normal(0.0, 0.8, k)
    code = np.repeat(np.arange(k), sizes)
    xs = rng.normal(shift[code], 1.0)
    y = (rng.random(code.size) < expit(within * xs + 0.8 * shift[code])).astype(int)
    return expit(xs), y, code


def test_within_slope_recovers_the_within_segment_slope():
    s, y, code = _confounded(72)
    marginal = _marginal("platt-logit", n_folds=None).fit(s, y, code)
    within = mlcal.SegmentedCalibrator("platt-logit", n_folds=None,
                                       shared_slope="within").fit(s, y, code)
    assert marginal.common_slope_ == 1.0 and np.all(marginal.map_.slopes == 1.0)
    # the shared map (linear in logit(s)) fitted on all rows has a slope that absorbs the
    # between-segment effect (the truth within segments is 0.8); times the common slope it
    # is the within-segment one again
    l = _in_sample_logits(within, s)
    slope_shared = np.polyfit(np.log(s / (1 - s)), l, 1)[0]
    assert slope_shared > 0.9
    assert within.common_slope_ < 0.95
    assert slope_shared * within.common_slope_ == pytest.approx(0.8, abs=0.04)
    # independent reference: the fixed-effects logistic regression on the shared logits
    # (every segment its own intercept) has nearly the same slope (the prior is weak here)
    from scipy.optimize import minimize as _min
    k = int(code.max()) + 1
    ref = _min(_penalised_negloglik, np.r_[1.0, np.zeros(k)],
               args=(l, y.astype(float), np.ones(s.size), code, np.zeros(k), 1e8),
               method="BFGS", options={"gtol": 1e-9, "maxiter": 10_000})
    assert within.common_slope_ == pytest.approx(ref.x[0], abs=0.01)
    # stored as every seen segment's slope, the offsets estimated and shrunk given it
    np.testing.assert_array_equal(within.map_.slopes, np.full(k, within.common_slope_))
    from mlcal.calibrators.segment_shrinkage import moments_tau2, segment_offsets
    d, v = segment_offsets(within.common_slope_ * l, y.astype(float), np.ones(s.size), code,
                           k, np.zeros(k))
    np.testing.assert_array_equal(within.offset_mle_, d)
    tau2 = moments_tau2(d, v)
    np.testing.assert_allclose(within.map_.offsets, tau2 / (tau2 + v) * d, rtol=0, atol=1e-15)
    # the map: expit(a logit f(s) + d_g); an unseen segment keeps the shared map
    p = within.predict(s[:50], code[:50])
    np.testing.assert_allclose(p, expit(within.common_slope_ * l[:50]
                                        + within.map_.offsets[code[:50]]), rtol=1e-12)
    unseen = within.predict(s[:5], np.full(5, 999))
    np.testing.assert_array_equal(unseen, within.shared_calibrator_.predict(s[:5]))
    # written and read back bit for bit
    text = within.to_json()
    assert json.loads(text)["params"]["shared_slope"] == "within"
    back = mlcal.load_calibrator(text)
    assert back.shared_slope == "within" and back.to_json() == text
    assert np.array_equal(back.predict(s, code), within.predict(s, code))


def test_within_slope_is_one_without_a_segment_effect():
    # no spread of the offsets (tau2 = 0): the shared map's slope is the within one
    rng = np.random.default_rng(73)
    code = np.repeat(np.arange(12), 400)
    x = rng.normal(0, 1.5, code.size)
    y = (rng.random(code.size) < expit(x)).astype(int)
    s = expit(0.7 * x)
    a = mlcal.SegmentedCalibrator("platt", n_folds=None).fit(s, y, code)
    b = mlcal.SegmentedCalibrator("platt", n_folds=None, shared_slope="within").fit(s, y, code)
    if a.offset_prior_[1] == 0.0:
        assert b.common_slope_ == 1.0
        np.testing.assert_array_equal(a.map_.offsets, b.map_.offsets)
    # with the test of the effect the offsets are gone, and the slope with them
    c = mlcal.SegmentedCalibrator("platt", n_folds=None, shared_slope="within",
                                  heterogeneity_alpha=0.05).fit(s, y, code)
    assert c.no_effect_detected_ and c.common_slope_ == 1.0
    assert np.all(c.map_.slopes == 1.0) and np.all(c.map_.offsets == 0.0)


# -- a test of the segment effect (heterogeneity_alpha) ------------------------------------
def test_homogeneity_pvalue_is_cochrans_chi_square_test():
    from scipy.stats import chi2

    from mlcal.calibrators.segment_shrinkage import homogeneity_pvalue

    rng = np.random.default_rng(74)
    d, v = rng.normal(0, 0.3, 15), rng.uniform(0.01, 0.2, 15)
    v[4] = np.inf                              # no information: left out
    keep = np.isfinite(v)
    W = np.diag(1.0 / v[keep])
    w = np.diag(W)
    q = d[keep] @ (W - np.outer(w, w) / w.sum()) @ d[keep]
    assert homogeneity_pvalue(d, v) == pytest.approx(chi2.sf(q, keep.sum() - 1), rel=1e-10)
    assert homogeneity_pvalue(np.array([0.2]), np.array([0.1])) == 1.0
    assert homogeneity_pvalue(np.array([0.2, 1.0]), np.array([0.1, np.inf])) == 1.0
    # under the hypothesis (equal true offsets) the p-value is uniform: about 5 % below 0.05
    draws = rng.normal(0.3, np.sqrt(v[keep]), (4000, keep.sum()))
    p = np.array([homogeneity_pvalue(t, v[keep]) for t in draws])
    assert abs(np.mean(p < 0.05) - 0.05) < 0.012 and abs(np.mean(p < 0.5) - 0.5) < 0.03


def test_heterogeneity_alpha_keeps_the_shared_map_when_no_effect_is_detected():
    from mlcal.calibrators.segment_shrinkage import homogeneity_pvalue

    rng = np.random.default_rng(75)
    code = np.repeat(np.arange(20), 300)
    x = rng.normal(0, 1.5, code.size)
    s = expit(0.7 * x)
    found = {True: 0, False: 0}
    for seed in range(6):
        y = (np.random.default_rng(seed).random(code.size) < expit(x)).astype(int)
        plain = mlcal.SegmentedCalibrator("platt").fit(s, y, code)
        tested = mlcal.SegmentedCalibrator("platt", heterogeneity_alpha=0.05).fit(s, y, code)
        np.testing.assert_array_equal(plain.offset_mle_, tested.offset_mle_)
        p = homogeneity_pvalue(plain.offset_mle_, plain.offset_var_)
        assert tested.no_effect_detected_ == (not p < 0.05)
        found[tested.no_effect_detected_] += 1
        if tested.no_effect_detected_:
            assert np.all(tested.map_.offsets == 0.0) and tested.offset_prior_ == (0.0, 0.0)
            # (through logit and back: equal to rounding)
            np.testing.assert_allclose(tested.predict(s, code),
                                       tested.shared_calibrator_.predict(s), rtol=1e-13)
        else:
            np.testing.assert_array_equal(tested.map_.offsets, plain.map_.offsets)
    assert found[True] >= 4                     # no effect: rarely detected
    # a real effect is detected and the fit is the default's bit for bit
    y = (rng.random(code.size) < expit(x + rng.normal(0, 0.5, 20)[code])).astype(int)
    plain = mlcal.SegmentedCalibrator("platt").fit(s, y, code)
    tested = mlcal.SegmentedCalibrator("platt", heterogeneity_alpha=0.05).fit(s, y, code)
    assert not tested.no_effect_detected_
    assert tested.to_dict()["map"] == plain.to_dict()["map"]
    # with fewer than 10 segments the offsets are averaged over tau: no test
    few = code < 4
    t4 = mlcal.SegmentedCalibrator("platt", heterogeneity_alpha=0.5).fit(
        s[few], y[few], code[few])
    p4 = mlcal.SegmentedCalibrator("platt").fit(s[few], y[few], code[few])
    assert not t4.no_effect_detected_
    np.testing.assert_array_equal(t4.map_.offsets, p4.map_.offsets)


def test_the_default_fits_the_within_slope_and_tests_the_effect():
    # adopted in the ninth round (docs/segments.md): the defaults, and what a document written
    # before them loads as (LATER_PARAMS above: "marginal" and None)
    cal = mlcal.SegmentedCalibrator()
    assert cal.shared_slope == "within" and cal.heterogeneity_alpha == 0.05
    s, y, code = _confounded(76)
    fit = mlcal.SegmentedCalibrator("platt-logit").fit(s, y, code)
    pinned = mlcal.SegmentedCalibrator("platt-logit", shared_slope="within",
                                       heterogeneity_alpha=0.05).fit(s, y, code)
    assert fit.to_json() == pinned.to_json()
    assert fit.common_slope_ < 1.0 and not fit.no_effect_detected_


# -- a test of the per-segment slopes (slope_alpha) ------------------------------------------
def _sloped(seed, slopes, k=15):
    """Per-segment slopes ``slopes[g]`` (and offsets) on the logit of a common-slope score."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(300, 1200, k)
    code = np.repeat(np.arange(k), sizes)
    x = rng.normal(0.0, 1.5, code.size)
    d = rng.normal(0.0, 0.4, k)
    y = (rng.random(code.size) < expit(np.asarray(slopes)[code] * x + d[code])).astype(int)
    return expit(0.8 * x), y, code


def _cochran_pvalue(a_hat, a_var):
    """Cochran's Q from the inverse-variance weighted mean, straight from the definition."""
    from scipy.stats import chi2

    keep = np.isfinite(a_var) & np.isfinite(a_hat)
    t, w = a_hat[keep], 1.0 / a_var[keep]
    m = np.sum(w * t) / np.sum(w)
    return chi2.sf(np.sum(w * (t - m) ** 2), keep.sum() - 1)


@pytest.mark.parametrize("method", ["platt", "auto"])
def test_slope_alpha_keeps_clearly_unequal_slopes(method):
    slopes = np.linspace(0.4, 1.8, 15)
    s, y, code = _sloped(81, slopes)
    sl2 = mlcal.SegmentedCalibrator(method, min_rows_for_slope=2).fit(s, y, code)
    tested = mlcal.SegmentedCalibrator(method, min_rows_for_slope=2, slope_alpha=0.05).fit(
        s, y, code)
    assert not tested.slopes_tested_out_ and tested.adjustment_ == "slopes"
    assert tested.slope_pvalue_ < 1e-6
    assert tested.slope_pvalue_ == pytest.approx(
        _cochran_pvalue(tested.slope_mle_, tested.slope_var_), rel=1e-9, abs=1e-300)
    # the fit is the min_rows_for_slope=2 fit bit for bit (map and predictions)
    assert tested.to_dict()["map"] == sl2.to_dict()["map"]
    np.testing.assert_array_equal(tested.predict(s, code), sl2.predict(s, code))
    # the stored slopes follow the truth's order
    assert np.corrcoef(tested.map_.slopes, slopes)[0, 1] > 0.9


def test_slope_alpha_drops_equal_slopes_bit_for_bit():
    dropped = 0
    for seed in range(3):
        s, y, code = _sloped(90 + seed, np.ones(15))
        none = mlcal.SegmentedCalibrator("platt", min_rows_for_slope=None).fit(s, y, code)
        sl2 = mlcal.SegmentedCalibrator("platt", min_rows_for_slope=2).fit(s, y, code)
        tested = mlcal.SegmentedCalibrator("platt", min_rows_for_slope=2,
                                           slope_alpha=0.05).fit(s, y, code)
        # the tested estimates are kept as diagnostics, and the p-value is Cochran's on them
        np.testing.assert_array_equal(tested.slope_mle_, sl2.slope_mle_)
        np.testing.assert_array_equal(tested.slope_var_, sl2.slope_var_)
        p = _cochran_pvalue(tested.slope_mle_, tested.slope_var_)
        assert tested.slope_pvalue_ == pytest.approx(p, rel=1e-9)
        assert tested.slopes_tested_out_ == (not p < 0.05)
        if tested.slopes_tested_out_:
            dropped += 1
            assert tested.adjustment_ == "offsets" and tested.slope_prior_ is None
            assert tested.to_json() != none.to_json()          # the params differ ...
            assert tested.to_dict()["map"] == none.to_dict()["map"]   # ... the map does not
            np.testing.assert_array_equal(tested.predict(s, code), none.predict(s, code))
            np.testing.assert_array_equal(tested.offset_mle_, none.offset_mle_)
            assert tested.common_slope_ == none.common_slope_
        else:
            assert tested.to_dict()["map"] == sl2.to_dict()["map"]
    assert dropped >= 2
    # without min_rows_for_slope nothing is tested
    plain = mlcal.SegmentedCalibrator("platt", min_rows_for_slope=None, slope_alpha=0.05).fit(
        s, y, code)
    assert plain.slope_pvalue_ is None and not plain.slopes_tested_out_
    assert plain.to_dict()["map"] == none.to_dict()["map"]


def test_slope_alpha_applies_in_the_cross_validated_choice():
    # equal slopes: with the test the folds drop them too, so "slopes" never wins by chance
    s, y, code = _sloped(93, np.ones(15))
    tested = mlcal.SegmentedCalibrator("platt", min_rows_for_slope=2, slope_alpha=0.05,
                                       select="cv").fit(s, y, code)
    assert tested.slopes_tested_out_
    assert set(tested.cv_log_loss_) == {"none", "offsets"}
    assert tested.adjustment_ in ("none", "offsets")
    # clearly unequal slopes: the slopes are a candidate and win
    s, y, code = _sloped(81, np.linspace(0.4, 1.8, 15))
    cv = mlcal.SegmentedCalibrator("platt", min_rows_for_slope=2, slope_alpha=0.05,
                                   select="cv").fit(s, y, code)
    assert cv.adjustment_ == "slopes" and "slopes" in cv.cv_log_loss_
    ref = mlcal.SegmentedCalibrator("platt", min_rows_for_slope=2, select="cv").fit(s, y, code)
    assert cv.to_dict()["map"] == ref.to_dict()["map"]


def test_slope_alpha_is_validated():
    s, y, code = _sloped(94, np.ones(4), k=4)
    for bad in (0.0, 1.0, -0.1, "0.05", True):
        with pytest.raises(mlcal.calibrators._params.InvalidParameterError, match="slope_alpha"):
            mlcal.SegmentedCalibrator("platt", slope_alpha=bad).fit(s, y, code)


def test_the_default_tests_per_segment_slopes():
    # adopted in the eleventh round (docs/segments.md): a slope for every segment with both
    # classes, kept only when Cochran's test finds the slopes unequal at 0.05; a document
    # written before loads with its own min_rows_for_slope and slope_alpha None (LATER_PARAMS)
    cal = mlcal.SegmentedCalibrator()
    assert cal.min_rows_for_slope == 2 and cal.slope_alpha == 0.05
    for slopes, kept in ((np.linspace(0.4, 1.8, 15), True), (np.ones(15), False)):
        s, y, code = _sloped(95, slopes)
        fit = mlcal.SegmentedCalibrator("platt").fit(s, y, code)
        pinned = mlcal.SegmentedCalibrator("platt", min_rows_for_slope=2,
                                           slope_alpha=0.05).fit(s, y, code)
        assert fit.to_json() == pinned.to_json()
        assert fit.slopes_tested_out_ == (not kept)
        ninth = mlcal.SegmentedCalibrator("platt", min_rows_for_slope=None).fit(s, y, code)
        assert (fit.to_dict()["map"] == ninth.to_dict()["map"]) == (not kept)
