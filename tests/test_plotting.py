"""Reliability diagrams that stay honest on small and imbalanced data, and map plots limited to
the fitted domain: the figure's content is read back and checked against independent values."""

import numpy as np
import pytest
from scipy.stats import binomtest

from mlcal import Isotonic
from mlcal.metrics import proportion_interval, reliability_curve
from mlcal.plotting import plot_map, reliability_diagram


@pytest.mark.parametrize("method,ref", [("wilson", "wilson"), ("clopper-pearson", "exact")])
def test_proportion_interval_equals_scipy(method, ref):
    ks = np.array([0, 1, 3, 7, 10, 0, 50])
    ns = np.array([10, 10, 10, 10, 10, 1, 171])
    for conf in (0.9, 0.95):
        lo, hi = proportion_interval(ks, ns, method=method, confidence=conf)
        for k, n, a, b in zip(ks, ns, lo, hi):
            ci = binomtest(int(k), int(n)).proportion_ci(conf, method=ref)
            assert (a, b) == pytest.approx((ci.low, ci.high), abs=1e-10)
    with pytest.raises(ValueError, match="positives"):
        proportion_interval([3], [2])


def imbalanced(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    p = 1 / (1 + np.exp(-rng.normal(-4, 1.2, n)))
    y = (rng.uniform(size=n) < p ** 0.85).astype(int)
    return y, p


def test_diagram_draws_each_bins_interval_and_count(tmp_path):
    y, p = imbalanced()
    assert 0.03 < y.mean() < 0.08
    fig = reliability_diagram(y, p, path=tmp_path / "rel.png")
    ax = fig.axes[0]
    curve = reliability_curve(y, p)
    lo, hi = proportion_interval(np.round(curve["fraction_positive"] * curve["count"]),
                                 curve["count"])
    bars = ax.containers[0]
    segs = bars.lines[2][0].get_segments()
    np.testing.assert_allclose([s[0][1] for s in segs], lo, atol=1e-12)
    np.testing.assert_allclose([s[1][1] for s in segs], hi, atol=1e-12)
    counts = sorted(int(t.get_text()) for t in ax.texts)
    assert counts == sorted(curve["count"].astype(int).tolist())
    assert (tmp_path / "rel.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_logit_and_zoomed_axes_spread_rare_positives():
    y, p = imbalanced()
    curve = reliability_curve(y, p)
    ax = reliability_diagram(y, p, scale="logit").axes[0]
    assert ax.get_xscale() == "logit" and ax.get_yscale() == "logit"
    lo, hi = ax.get_xlim()
    assert lo < curve["mean_predicted"].min() and hi < 0.9
    ax = reliability_diagram(y, p, zoom=True, strategy="quantile").axes[0]
    q = reliability_curve(y, p, strategy="quantile")
    lo, hi = ax.get_xlim()
    assert hi < 0.5 and lo <= q["mean_predicted"].min() and hi >= q["fraction_positive"].max()
    with pytest.raises(ValueError, match="scale"):
        reliability_diagram(y, p, scale="log")


def test_small_sample_without_intervals_and_171_rows(tmp_path):
    rng = np.random.default_rng(1)
    p = rng.uniform(0, 1, 171)
    y = (rng.uniform(size=171) < p).astype(int)
    ax = reliability_diagram(y, p, interval=None, show_counts=False).axes[0]
    assert not ax.containers and not ax.texts
    ax = reliability_diagram(y, p, interval="clopper-pearson").axes[0]
    assert len(ax.containers) == 1 and "n=171" in ax.get_legend().get_texts()[1].get_text()


def test_map_plot_is_limited_to_the_fitted_domain():
    y, p = imbalanced()
    cal = Isotonic().fit(p, y)
    lo, hi = cal.map_.domain
    ax = plot_map(cal, scores=p, y=y).axes[0]
    assert ax.get_xlim() == pytest.approx((lo, hi))
    line = ax.lines[0].get_xdata()
    assert line.min() == pytest.approx(lo) and line.max() == pytest.approx(hi)
    pts = ax.collections[0].get_offsets()[:, 0]
    assert pts.min() >= lo and pts.max() <= hi


def test_map_legend_names_the_method_the_choice_and_the_kind():
    import mlcal

    y, p = imbalanced()
    iso = Isotonic().fit(p, y)
    texts = [t.get_text() for t in plot_map(iso).axes[0].get_legend().get_texts()]
    assert texts == [f"isotonic ({iso.map_.kind} map)"]
    auto = mlcal.AutoCalibrator().fit(p, y)
    texts = [t.get_text() for t in plot_map(auto).axes[0].get_legend().get_texts()]
    assert texts == [f"auto: {auto.chosen_} ({auto.map_.kind} map)"]
    texts = [t.get_text() for t in plot_map(iso.map_).axes[0].get_legend().get_texts()]
    assert texts == [f"{iso.map_.kind} map"]
