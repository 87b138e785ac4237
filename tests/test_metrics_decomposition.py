"""CORP decomposition: against model-diagnostics (dev reference), scikit-learn's isotonic
regression (which pools tied inputs) and the definitions."""

import math

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from mlcal import metrics
from mlcal.metrics.bootstrap import bootstrap_ci
from mlcal.metrics import (classwise_corp_decomposition, corp_decomposition, corp_mcb,
                           isotonic_recalibration, top_label_corp_decomposition)
from mlcal.metrics.multiclass import multiclass_brier


def _data(seed, n=400, decimals=2, weighted=False):
    rng = np.random.default_rng(seed)
    p = np.round(rng.uniform(0.0, 1.0, n), decimals)   # rounding makes many tied forecasts
    y = (rng.uniform(size=n) < p ** 1.4).astype(float)
    w = rng.uniform(0.2, 3.0, n) if weighted else None
    return y, p, w


def _direct_log_loss(y, q, w):
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = -np.where(y == 1, np.log(q), np.log1p(-q))
    return float(np.sum(w * terms) / np.sum(w))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("score", ["brier", "log_loss"])
def test_matches_model_diagnostics(score, weighted):
    md = pytest.importorskip("model_diagnostics.scoring")
    fn = md.SquaredError() if score == "brier" else md.LogLoss()
    for seed in range(3):
        y, p, w = _data(seed, decimals=2, weighted=weighted)
        p = np.clip(p, 0.01, 0.99)          # model-diagnostics' log loss needs 0 < p < 1
        c = corp_decomposition(y, p, score=score, sample_weight=w)
        ref = md.decompose(y, p, weights=w, scoring_function=fn).row(0, named=True)
        assert c.mcb == pytest.approx(ref["miscalibration"], rel=1e-9, abs=1e-13)
        assert c.dsc == pytest.approx(ref["discrimination"], rel=1e-9, abs=1e-13)
        assert c.unc == pytest.approx(ref["uncertainty"], rel=1e-9)
        assert c.score == pytest.approx(ref["score"], rel=1e-9)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("score", ["brier", "log_loss"])
def test_definitions_with_sklearn_isotonic(score, weighted):
    for seed in range(4):
        y, p, w = _data(seed, n=150, decimals=1, weighted=weighted)
        ww = np.ones_like(p) if w is None else w
        p_hat = IsotonicRegression(y_min=0.0, y_max=1.0).fit(p, y, sample_weight=ww).predict(p)
        r = np.sum(ww * y) / np.sum(ww)
        if score == "brier":
            s = lambda q: float(np.sum(ww * (y - q) ** 2) / np.sum(ww))  # noqa: E731
        else:
            s = lambda q: _direct_log_loss(y, q, ww)  # noqa: E731
        c = corp_decomposition(y, p, score=score, sample_weight=w)
        assert c.mcb == pytest.approx(s(p) - s(p_hat), rel=1e-9, abs=1e-12)
        assert c.dsc == pytest.approx(s(np.full_like(p, r)) - s(p_hat), rel=1e-9, abs=1e-12)
        assert c.unc == pytest.approx(s(np.full_like(p, r)), rel=1e-12)
        assert c.base_rate == pytest.approx(r, rel=1e-12)
        x, fitted, wsum = isotonic_recalibration(y, p, sample_weight=w)
        np.testing.assert_allclose(fitted[np.searchsorted(x, p)], p_hat, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(wsum, [np.sum(ww[p == v]) for v in x], rtol=1e-12)


def test_identity_is_exact_and_score_is_the_mean_score():
    for seed in range(20):
        y, p, w = _data(seed, n=97, decimals=3, weighted=seed % 2 == 1)
        for score in ("brier", "log_loss"):
            c = corp_decomposition(y, p, score=score, sample_weight=w)
            assert c.score == math.fsum((c.mcb, -c.dsc, c.unc))
            ww = np.ones_like(p) if w is None else w
            direct = (np.sum(ww * (y - p) ** 2) / np.sum(ww) if score == "brier"
                      else _direct_log_loss(y, p, ww))
            if np.isfinite(direct):
                assert c.score == pytest.approx(direct, rel=1e-13)
            assert c.mcb >= -1e-15 and c.dsc >= -1e-15
        if w is None:
            assert corp_decomposition(y, p).score == pytest.approx(metrics.brier(y, p), rel=1e-14)


def test_ties_are_pooled_so_p_hat_is_a_function_of_p():
    # the same forecast with labels 1 then 0: unpooled PAV in row order would split them
    p = np.array([0.2, 0.5, 0.5, 0.5, 0.8])
    y = np.array([0.0, 1.0, 0.0, 0.0, 1.0])
    x, fitted, wsum = isotonic_recalibration(y, p)
    np.testing.assert_array_equal(x, [0.2, 0.5, 0.8])
    np.testing.assert_allclose(fitted, [0.0, 1.0 / 3.0, 1.0])
    np.testing.assert_array_equal(wsum, [1.0, 3.0, 1.0])


def test_log_loss_stays_finite_where_p_hat_is_0_or_1():
    # lowest forecasts all 0, highest all 1: p_hat is exactly 0 and 1 there
    p = np.array([0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9])
    y = np.array([0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0])
    x, fitted, _ = isotonic_recalibration(y, p)
    assert fitted[0] == 0.0 and fitted[-1] == 1.0
    c = corp_decomposition(y, p, score="log_loss")
    assert all(np.isfinite([c.score, c.mcb, c.dsc, c.unc]))
    # a certain forecast contradicted by its label: infinite score and miscalibration
    bad = corp_decomposition([1.0, 0.0, 1.0], [0.0, 0.5, 0.9], score="log_loss")
    assert bad.score == math.inf and bad.mcb == math.inf and np.isfinite(bad.dsc)


def test_special_cases():
    y, p, _ = _data(5, n=300)
    # a forecast that is already its own isotonic recalibration has no miscalibration
    x, fitted, _ = isotonic_recalibration(y, p)
    recal = fitted[np.searchsorted(x, p)]
    for score in ("brier", "log_loss"):
        assert corp_decomposition(y, recal, score=score).mcb == pytest.approx(0.0, abs=1e-15)
    # the climatological forecast neither discriminates nor is miscalibrated
    c = corp_decomposition(y, np.full_like(p, y.mean()), score="log_loss")
    assert c.dsc == pytest.approx(0.0, abs=1e-15) and c.mcb == pytest.approx(0.0, abs=1e-15)
    # zero-weight rows count for nothing
    w = np.ones_like(p)
    w[:50] = 0.0
    a = corp_decomposition(y, p, sample_weight=w)
    b = corp_decomposition(y[50:], p[50:])
    assert (a.mcb, a.dsc, a.unc) == pytest.approx((b.mcb, b.dsc, b.unc), rel=1e-12)


def test_multiclass_forms():
    rng = np.random.default_rng(3)
    n, k = 300, 4
    logits = rng.normal(size=(n, k)) * 1.5
    prob = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = np.array([rng.choice(k, p=np.sqrt(r) / np.sqrt(r).sum()) for r in prob])
    cw = classwise_corp_decomposition(y, prob)
    assert cw.score == pytest.approx(multiclass_brier(y, prob), rel=1e-13)
    assert cw.score == math.fsum((cw.mcb, -cw.dsc, cw.unc))
    for j, c in enumerate(cw.per_class):
        ref = corp_decomposition((y == j).astype(float), prob[:, j])
        assert (c.mcb, c.dsc, c.unc) == (ref.mcb, ref.dsc, ref.unc)
    top = np.argmax(prob, axis=1)
    tl = top_label_corp_decomposition(y, prob, score="log_loss")
    ref = corp_decomposition((top == y).astype(float), prob.max(axis=1), score="log_loss")
    assert tl == ref
    assert set(cw.as_dict()) == {"score_name", "score", "mcb", "dsc", "unc", "per_class"}


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="score must be one of"):
        corp_decomposition([0, 1], [0.2, 0.7], score="ece")
    with pytest.raises(ValueError, match="length mismatch"):
        corp_decomposition([0, 1, 1], [0.2, 0.7])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        corp_decomposition([0, 1], [0.2, 1.7])
    with pytest.raises(ValueError, match="labels 0 and 1"):
        corp_decomposition([0, 2], [0.2, 0.7])
    with pytest.raises(ValueError, match="negative"):
        corp_decomposition([0, 1], [0.2, 0.7], sample_weight=[1.0, -1.0])


def test_mcb_as_a_bootstrap_metric():
    y, p, w = _data(11, n=200, weighted=True)
    assert corp_mcb(y, p, w, score="log_loss") == corp_decomposition(
        y, p, score="log_loss", sample_weight=w).mcb
    iv = bootstrap_ci(corp_mcb, y, p, sample_weight=w, n_resamples=30, seed=3, method="basic")
    assert iv.estimate == corp_mcb(y, p, w)
    assert iv.lower < iv.estimate < iv.upper
