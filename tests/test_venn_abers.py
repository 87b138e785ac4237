"""Venn--Abers: against the ``venn-abers`` package, against two isotonic fits per test point, and
the map/JSON/interval contract."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.isotonic import IsotonicRegression

import mlcal
from mlcal import StepMap, VennAbers
from mlcal.calibrators.base import CalibratorFormatError
from support.synthetic import calibration_set

va_ref = pytest.importorskip("venn_abers")
from venn_abers.venn_abers import geo_mean  # noqa: E402


def probes(cal_scores, rng, lo=-0.2, hi=1.2, offset=None, n_random=500):
    """Random points, every calibration score and the points just above and below it (the
    neighbouring doubles, or ``+-offset``)."""
    u = np.unique(cal_scores)
    above = np.nextafter(u, np.inf) if offset is None else u + offset
    below = np.nextafter(u, -np.inf) if offset is None else u - offset
    return np.concatenate([rng.uniform(lo, hi, n_random), u, above, below])


def reference_ivap(s, y, t):
    """(p0, p1, point) of the venn-abers package at test scores ``t``."""
    p0, p1, c = va_ref.calc_p0p1(np.column_stack([1 - s, s]), y)
    point, p01 = va_ref.calc_probs(p0, p1, c, np.column_stack([1 - t, t]))
    return p01[:, 0], p01[:, 1], point[:, 1]


@pytest.mark.parametrize("seed,decimals", [(0, None), (1, 2), (2, 3), (3, 1)])
def test_inductive_equals_the_venn_abers_package(seed, decimals):
    s, y = calibration_set(700, seed, beta=(2, 3), decimals=decimals, link_power=1.7)
    rng = np.random.default_rng(seed)
    t = probes(s, rng)
    cal = VennAbers(max_map_size=None).fit(s, y)
    r0, r1, rp = reference_ivap(s, y, t)
    lo, hi = cal.predict_interval(t)
    np.testing.assert_allclose(lo, r0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(hi, r1, rtol=0, atol=1e-12)
    np.testing.assert_allclose(cal.predict(t), rp, rtol=0, atol=1e-12)
    assert isinstance(cal.map_, StepMap) and cal.map_reduction_.max_error == 0.0


def brute_force(s, y, w, t, label):
    """Isotonic fit with the test point (weight 1) added, evaluated at the test point."""
    out = np.empty(t.size)
    for i, ti in enumerate(t):
        iso = IsotonicRegression(out_of_bounds="clip")
        iso.fit(np.append(s, ti), np.append(y, label), sample_weight=np.append(w, 1.0))
        out[i] = iso.predict([ti])[0]
    return out


@pytest.mark.parametrize("seed", range(6))
def test_inductive_equals_two_isotonic_fits_per_test_point(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 25))
    s = np.round(rng.random(n), 1)                      # many ties
    y = (rng.random(n) < s).astype(float)
    y[:2] = [0.0, 1.0]
    w = rng.integers(1, 4, n).astype(float)             # frequency weights
    # scikit-learn merges abscissae within ~1e-15 of each other, so not the next double here
    # (both maps are constant between calibration scores)
    t = probes(s, rng, offset=1e-9, n_random=60)
    cal = VennAbers(max_map_size=None).fit(s, y, sample_weight=w)
    lo, hi = cal.predict_interval(t)
    b0, b1 = brute_force(s, y, w, t, 0.0), brute_force(s, y, w, t, 1.0)
    np.testing.assert_allclose(lo, b0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(hi, b1, rtol=0, atol=1e-12)
    np.testing.assert_allclose(cal.predict(t), b1 / (1 - b0 + b1), rtol=0, atol=1e-12)


def test_integer_weights_equal_repeated_rows():
    s, y, w = calibration_set(300, 4, decimals=2, weights="integer")
    t = probes(s, np.random.default_rng(0))
    weighted = VennAbers().fit(s, y, sample_weight=w)
    reps = w.astype(int)
    repeated = VennAbers().fit(np.repeat(s, reps), np.repeat(y, reps))
    assert np.array_equal(weighted.predict(t), repeated.predict(t))
    for a, b in zip(weighted.predict_interval(t), repeated.predict_interval(t)):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("k", [2, 3, 5])
def test_cross_equals_per_fold_package_predictors_merged(k):
    s, y = calibration_set(900, 10 + k, beta=(2, 2), decimals=3, link_power=1.4)
    t = probes(s, np.random.default_rng(k))
    cal = VennAbers(n_folds=k, max_map_size=None).fit(s, y)
    # the documented folds: i-th smallest distinct score -> fold i mod k
    rank = np.searchsorted(np.unique(s), s)
    p0s, p1s = [], []
    for f in range(k):
        sel = rank % k == f
        r0, r1, _ = reference_ivap(s[sel], y[sel], t)
        p0s.append(r0)
        p1s.append(r1)
    p0s, p1s = np.column_stack(p0s), np.column_stack(p1s)
    expected = geo_mean(p1s) / (geo_mean(1 - p0s) + geo_mean(p1s))
    np.testing.assert_allclose(cal.predict(t), expected, rtol=0, atol=1e-12)
    lo, hi = cal.predict_interval(t)
    np.testing.assert_allclose(lo, p0s.min(axis=1), rtol=0, atol=1e-12)
    np.testing.assert_allclose(hi, p1s.max(axis=1), rtol=0, atol=1e-12)
    p = cal.predict(t)
    assert np.all((lo <= p) & (p <= hi))


def test_cross_needs_as_many_distinct_scores_as_folds():
    with pytest.raises(ValueError, match="n_folds=5.*at least 5 distinct scores"):
        VennAbers(n_folds=5).fit([0.1, 0.1, 0.2, 0.3], [0, 1, 0, 1])
    with pytest.raises(ValueError, match="n_folds"):
        VennAbers(n_folds=1).fit([0.1, 0.2], [0, 1])


@pytest.mark.parametrize("n_folds", [None, 4])
def test_interval_survives_json_bit_exactly(n_folds):
    s, y = calibration_set(500, 3, decimals=3)
    cal = VennAbers(n_folds=n_folds).fit(s, y)
    text = cal.to_json()
    doc = json.loads(text)
    assert doc["map"]["type"] == "step" and set(doc["interval"]) == {"lower", "upper"}
    back = mlcal.load_calibrator(text)
    assert back.to_json() == text
    t = probes(s, np.random.default_rng(1))
    for a, b in zip(back.predict_interval(t), cal.predict_interval(t)):
        assert np.array_equal(a, b)


def test_malformed_interval_is_a_named_format_error():
    s, y = calibration_set(200, 5, decimals=2)
    doc = json.loads(VennAbers().fit(s, y).to_json())
    missing = {k: v for k, v in doc.items() if k != "interval"}
    with pytest.raises(CalibratorFormatError, match="interval"):
        mlcal.load_calibrator(missing)
    linear = dict(doc, interval={"lower": {"type": "linear", "format_version": 1,
                                           "knots": [0.5], "values": [0.5]},
                                 "upper": doc["interval"]["upper"]})
    with pytest.raises(CalibratorFormatError, match="step map"):
        mlcal.load_calibrator(linear)
    bad_values = json.loads(json.dumps(doc))
    bad_values["interval"]["upper"]["values"][0] = 1.5
    with pytest.raises(CalibratorFormatError, match=r"\[0, 1\]"):
        mlcal.load_calibrator(bad_values)


def test_size_cap_reduces_point_and_interval_and_reports_it():
    s, y = calibration_set(3000, 6, link_power=2.0)
    exact = VennAbers(max_map_size=None).fit(s, y)
    capped = VennAbers(max_map_size=30).fit(s, y)
    assert capped.map_.size <= 30 and capped.map_reduction_.reduced
    t = probes(s, np.random.default_rng(2))
    err = np.abs(capped.predict(t) - exact.predict(t)).max()
    assert 0 < err <= capped.map_reduction_.max_error + 1e-15
    for red, m_cap, m_exact in zip(capped.interval_reductions_, capped.interval_maps_,
                                   exact.interval_maps_):
        assert m_cap.size <= 30 and red.reduced
        assert np.abs(m_cap(t) - m_exact(t)).max() <= red.max_error + 1e-15


def test_predict_interval_before_fit_raises():
    with pytest.raises(NotFittedError, match="not fitted"):
        VennAbers().predict_interval([0.5])


def test_raw_margins_need_no_transform():
    # Venn--Abers depends only on the order of the scores: margins and their sigmoid agree
    rng = np.random.default_rng(8)
    m = rng.normal(0, 2, 600)
    y = (rng.random(600) < 1 / (1 + np.exp(-m))).astype(int)
    cal = VennAbers().fit(m, y)
    assert cal.map_.input_transform == "identity"
    from scipy.special import expit
    other = VennAbers().fit(expit(m), y)
    grid = np.linspace(-6, 6, 301)
    grid = grid[np.diff(np.concatenate(([-np.inf], expit(grid)))) > 0]   # expit still injective
    inside = (grid > m.min()) & (grid < m.max())
    np.testing.assert_array_equal(cal.predict(grid[inside]), other.predict(expit(grid[inside])))


def test_cross_json_is_the_same_under_row_permutation():
    s, y, w = calibration_set(2000, 9, beta=(2, 5), decimals=2, weights="fractional")
    texts = set()
    for k in range(3):
        p = np.random.default_rng(k).permutation(s.size) if k else np.arange(s.size)
        texts.add(VennAbers(n_folds=4).fit(s[p], y[p], sample_weight=w[p]).to_json())
    assert len(texts) == 1
