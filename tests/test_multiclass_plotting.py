import re

import numpy as np
import pytest

from mlcal.calibrators.multiclass import TemperatureScaling
from mlcal.metrics import ece
from mlcal.metrics.multiclass import top_label_ece
from mlcal.plotting import plot_multiclass_reliability
from support.synthetic import multiclass_set


def _legend_eces(ax) -> list[float]:
    return [float(re.search(r"ECE ([0-9.]+)", t.get_text()).group(1))
            for t in ax.get_legend().get_texts() if "ECE" in t.get_text()]


def test_panels_per_class_and_top_label(tmp_path):
    z, p, y = multiclass_set(1500, 4, seed=2)
    after = TemperatureScaling().fit(p, y).predict_proba(p)
    path = tmp_path / "mc.png"
    fig = plot_multiclass_reliability(y, p, after, class_names=list("abcd"), n_bins=8,
                                      path=str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    panels = [ax for ax in fig.axes if ax.get_legend() is not None]
    assert [ax.get_title() for ax in panels] == ["a vs rest", "b vs rest", "c vs rest",
                                                 "d vs rest", "top label (confidence vs accuracy)"]
    assert len(fig.axes) == 2 * len(panels)   # each panel has its histogram
    for k in range(4):   # legends carry each series' one-vs-rest ECE (4 decimals)
        expect = [ece((y == k).astype(float), q[:, k], 8) for q in (p, after)]
        np.testing.assert_allclose(_legend_eces(panels[k]), expect, atol=5e-5)
    np.testing.assert_allclose(_legend_eces(panels[4]),
                               [top_label_ece(y, q, 8) for q in (p, after)], atol=5e-5)
    # one curve per series plus the diagonal; counts in the top panel add up to n per series
    counts = [int(t.get_text()) for t in panels[4].texts]
    assert sum(counts) == 2 * y.size


def test_bad_input_is_named():
    z, p, y = multiclass_set(200, 3, seed=0)
    with pytest.raises(ValueError, match="do not sum to 1"):
        plot_multiclass_reliability(y, p * 0.9)
    with pytest.raises(ValueError, match="3 classes"):
        plot_multiclass_reliability(y, p, class_names=["a", "b"])
    with pytest.raises(ValueError, match="class indices"):
        plot_multiclass_reliability(y + 5, p)
