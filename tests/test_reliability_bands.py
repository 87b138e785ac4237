"""CORP reliability curves and their consistency bands: the band's refits against a brute-force
isotonic regression on the same resampled labels, its behaviour on calibrated and miscalibrated
forecasters, the cost bound, and the diagrams read back from the figures."""

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from mlcal.metrics import reliability_curve
from mlcal.metrics.decomposition import isotonic_recalibration
from mlcal.plotting import corp_reliability_diagram, plot_multiclass_corp_reliability
from mlcal.metrics.reliability_bands import consistency_band, corp_curve


def test_band_is_the_quantile_of_isotonic_refits_on_labels_drawn_from_the_forecasts():
    # few distinct forecasts with ties: each draw is Binomial(count, p) per distinct value
    rng = np.random.default_rng(3)
    p = np.round(rng.uniform(0.05, 0.95, 60), 1)
    x, lower, upper = consistency_band(p, level=0.8, n_resamples=50, seed=7)
    u, c = np.unique(p, return_counts=True)
    np.testing.assert_array_equal(x, u)
    draws = np.random.default_rng(7).binomial(c[None, :], u[None, :], size=(50, u.size))
    refits = []
    for k in draws:   # brute force: expand to rows, fit scikit-learn's isotonic regression
        xs = np.repeat(u, c)
        ys = np.concatenate([np.r_[np.ones(kk), np.zeros(cc - kk)] for kk, cc in zip(k, c)])
        fit = IsotonicRegression().fit(xs, ys)
        refits.append(fit.predict(u))
    lo, hi = np.quantile(np.array(refits), [0.1, 0.9], axis=0)
    np.testing.assert_allclose(lower, lo, atol=1e-12)
    np.testing.assert_allclose(upper, hi, atol=1e-12)


def _data(n, seed, power=1.0):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.98, n)
    return (rng.uniform(size=n) < p ** power).astype(int), p


def test_calibrated_forecasts_stay_in_the_band_miscalibrated_ones_leave_it():
    y, p = _data(4000, 0)
    c = corp_curve(y, p, seed=1)
    # the band surrounds the diagonal, and a calibrated curve leaves it only as often as the
    # pointwise 90 % level allows (with a margin for the curve's own autocorrelation)
    inside = (c.band_lower <= c.band_x + 1e-12) & \
        (c.band_x - 1e-12 <= c.band_upper)
    assert inside.mean() > 0.9
    assert c.outside_band() < 0.3
    y2, p2 = _data(4000, 0, power=2.0)
    assert corp_curve(y2, p2, seed=1).outside_band() > 0.7
    # the curve itself is the CORP recalibration
    x, fitted, w = isotonic_recalibration(y, p)
    np.testing.assert_array_equal(c.x, x)
    np.testing.assert_array_equal(c.fitted, fitted)


def test_band_cost_is_bounded_by_pooling_cells_and_is_reproducible():
    y, p = _data(30000, 2)
    c = corp_curve(y, p, max_cells=500, n_resamples=40, seed=5)
    assert c.n_cells <= 500 and c.band_x.size == c.n_cells
    assert np.all(np.diff(c.band_x) > 0)
    assert c.band_x[0] >= p.min() and c.band_x[-1] <= p.max()
    again = corp_curve(y, p, max_cells=500, n_resamples=40, seed=5)
    np.testing.assert_array_equal(c.band_lower, again.band_lower)
    np.testing.assert_array_equal(c.band_upper, again.band_upper)
    # bands narrow like 1/sqrt(n): 30 000 rows give a narrower band than 300
    small = corp_curve(y[:300], p[:300], n_resamples=40, seed=5)
    mid = lambda b: np.median(b.band_upper - b.band_lower)  # noqa: E731
    assert mid(c) < 0.5 * mid(small)


@pytest.mark.parametrize("kwargs,match", [({"level": 1.0}, "level"),
                                          ({"n_resamples": 5}, "n_resamples"),
                                          ({"max_cells": 1}, "max_cells")])
def test_band_settings_are_checked(kwargs, match):
    with pytest.raises(ValueError, match=match):
        consistency_band([0.1, 0.5], **kwargs)


def test_binary_diagram_draws_curve_band_and_counted_bins_per_series():
    y, p = _data(1500, 4, power=1.5)
    pa = p ** 1.5
    fig = corp_reliability_diagram(y, p, pa, n_resamples=30)
    panels = [a for a in fig.axes if a.get_ylabel().startswith("observed")]
    assert len(panels) == 2
    for ax, q in zip(panels, (p, pa)):
        curve = ax.lines[1]   # after the diagonal
        x, fitted, _ = isotonic_recalibration(y, q)
        xd, yd = curve.get_xdata(), curve.get_ydata()
        # every drawn vertex lies on the CORP curve, and both ends are drawn
        np.testing.assert_allclose(yd, fitted[np.searchsorted(x, xd)])
        assert xd[0] == x[0] and xd[-1] == x[-1]
        b = reliability_curve(y, q)
        assert sorted(int(t.get_text()) for t in ax.texts) == sorted(b["count"].astype(int))
        assert len(ax.collections) == 1   # the band
    logit = corp_reliability_diagram(y, p, scale="logit", n_resamples=30)
    assert logit.axes[0].get_xscale() == "logit"


def test_multiclass_diagram_has_top_label_and_one_panel_per_class():
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(4), 800)
    y = np.array([rng.choice(4, p=r) for r in proba])
    fig = plot_multiclass_corp_reliability(y, proba, proba ** 2 / (proba ** 2).sum(1)[:, None],
                                           class_names=list("abcd"), n_resamples=20)
    titles = [a.get_title() for a in fig.axes if a.get_title()]
    assert titles[0].startswith("top label") and len(titles) == 5
    assert [t.split(" vs rest")[0] for t in titles[1:]] == list("abcd")
    only = plot_multiclass_corp_reliability(y, proba, panels="top_label", n_resamples=20)
    assert len([a for a in only.axes if a.get_title()]) == 1
    with pytest.raises(ValueError, match="panels"):
        plot_multiclass_corp_reliability(y, proba, panels="some")
