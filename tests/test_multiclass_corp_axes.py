"""Log-odds axes and zoom in the multiclass reliability diagrams (CORP and binned), panel by
panel: every panel (top label and each class) gets the axis scale, and a rare class's panel
spreads over its own small probabilities instead of the corner of [0, 1]."""

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from mlcal.metrics.decomposition import isotonic_recalibration  # noqa: E402
from mlcal.plotting import plot_multiclass_reliability  # noqa: E402
from mlcal.plotting.corp import plot_multiclass_corp_reliability  # noqa: E402


def rare_class_data(n=6000, seed=0):
    """Three classes; class 2 is rare (forecasts of 0.5-8 %), drawn from the forecasts."""
    rng = np.random.default_rng(seed)
    p2 = rng.uniform(0.005, 0.08, n)
    p0 = (1 - p2) * rng.uniform(0.2, 0.8, n)
    proba = np.column_stack([p0, 1 - p2 - p0, p2])
    y = (rng.random(n)[:, None] > np.cumsum(proba, axis=1)).sum(axis=1)
    return y, proba


def reliability_axes(fig):
    """The reliability panels (the axes with a y label 'observed frequency...'), in order."""
    return [ax for ax in fig.axes if ax.get_ylabel().startswith(("observed", "fraction"))]


def test_logit_scale_on_every_corp_panel_with_limits_around_each_panels_forecasts():
    y, proba = rare_class_data()
    fig = plot_multiclass_corp_reliability(y, proba, scale="logit", n_resamples=20)
    panels = reliability_axes(fig)
    assert len(panels) == 4                                  # top label + 3 classes
    assert all(ax.get_xscale() == "logit" and ax.get_yscale() == "logit" for ax in panels)
    for ax, (yy, p) in zip(panels[1:], [(y == k, proba[:, k]) for k in range(3)]):
        x, fitted, _ = isotonic_recalibration(yy.astype(float), p)
        inside = np.concatenate([x, fitted])
        inside = inside[(inside > 0) & (inside < 1)]
        lo, hi = ax.get_xlim()
        assert 0 < lo < inside.min() and inside.max() < hi < 1
    # the rare class's panel starts where its forecasts do (>= 0.5 %), far below the others
    assert panels[3].get_xlim()[0] < 0.005 and min(ax.get_xlim()[0] for ax in panels[:3]) > 0.01
    assert "log-odds" in fig._suptitle.get_text()


def test_zoom_gives_each_panel_its_own_linear_range_and_default_stays_unit_square():
    y, proba = rare_class_data()
    plain = reliability_axes(plot_multiclass_corp_reliability(y, proba, n_resamples=20))
    assert all(ax.get_xlim() == (0.0, 1.0) and ax.get_ylim() == (0.0, 1.0) for ax in plain)
    zoomed = reliability_axes(plot_multiclass_corp_reliability(y, proba, zoom=True,
                                                               n_resamples=20))
    assert all(ax.get_xscale() == "linear" for ax in zoomed)
    rare = zoomed[3]
    lo, hi = rare.get_xlim()
    x, fitted, _ = isotonic_recalibration((y == 2).astype(float), proba[:, 2])
    # the whole curve is shown, padded by at most 8 % of its range: not the unit square
    top = max(x.max(), fitted.max())
    assert 0 <= lo <= min(x.min(), fitted.min()) and top <= hi <= top + 0.08 < 1
    assert rare.get_ylim() == (lo, hi)


def test_binned_multiclass_diagram_takes_the_same_options():
    y, proba = rare_class_data()
    fig = plot_multiclass_reliability(y, proba, scale="logit")
    panels = reliability_axes(fig)
    assert len(panels) == 4 and all(ax.get_xscale() == "logit" for ax in panels)
    zoomed = reliability_axes(plot_multiclass_reliability(y, proba, zoom=True))
    assert zoomed[2].get_xlim()[1] < 0.3        # class 2 panel (classes first, then top label)


@pytest.mark.parametrize("plot", [plot_multiclass_corp_reliability, plot_multiclass_reliability])
def test_unknown_scale_is_refused_by_name(plot):
    y, proba = rare_class_data(300)
    with pytest.raises(ValueError, match="scale must be one of .*'log'"):
        plot(y, proba, scale="log")
