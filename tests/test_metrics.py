import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, log_loss as sk_log_loss, roc_auc_score

from mlcal import metrics


def test_uniform_ece_and_mce_by_hand_with_empty_bins():
    p = np.array([0.05, 0.05, 0.15, 0.95, 0.95, 0.95, 1.0])
    y = np.array([0, 1, 0, 1, 1, 0, 1])
    # bins: [0,.1): p .05,.05 y 0,1 -> |0.5-0.05|=.45 ; [.1,.2): .15 y0 -> .15 ;
    # [.9,1]: .95,.95,.95,1.0 y 1,1,0,1 -> mean p .9625, frac .75 -> .2125 ; bins 2..8 empty
    expected_ece = (2 * 0.45 + 1 * 0.15 + 4 * 0.2125) / 7
    assert metrics.ece(y, p) == pytest.approx(expected_ece, abs=1e-15)
    assert metrics.mce(y, p) == pytest.approx(0.45, abs=1e-15)


def test_quantile_bins_follow_authors_code_sort_and_sizes():
    # 12 items, 5 bins: sizes 3,3,2,2,2; ties in p broken by label ascending
    p = np.array([0.1, 0.1, 0.1, 0.1, 0.3, 0.3, 0.5, 0.5, 0.7, 0.7, 0.9, 0.9])
    y = np.array([1, 0, 1, 0, 1, 0, 0, 1, 1, 1, 0, 1])
    curve = metrics.reliability_curve(y, p, n_bins=5, strategy="quantile")
    np.testing.assert_array_equal(curve["count"], [3, 3, 2, 2, 2])
    # sorted: (0.1,0),(0.1,0),(0.1,1) | (0.1,1),(0.3,0),(0.3,1) | (0.5,0),(0.5,1) | (0.7,1)x2 | (0.9,0),(0.9,1)
    np.testing.assert_allclose(curve["fraction_positive"], [1 / 3, 2 / 3, 0.5, 1.0, 0.5])
    np.testing.assert_allclose(curve["mean_predicted"], [0.1, 0.7 / 3, 0.5, 0.7, 0.9])
    gaps = np.abs(np.array([1 / 3, 2 / 3, 0.5, 1.0, 0.5]) - np.array([0.1, 0.7 / 3, 0.5, 0.7, 0.9]))
    w = np.array([3, 3, 2, 2, 2]) / 12
    assert metrics.ece(y, p, 5, "quantile") == pytest.approx(np.dot(w, gaps), abs=1e-15)
    assert metrics.mce(y, p, 5, "quantile") == pytest.approx(gaps.max(), abs=1e-15)


def test_quantile_uses_at_most_n_bins_for_small_n():
    curve = metrics.reliability_curve([0, 1, 1], [0.2, 0.4, 0.6], n_bins=10, strategy="quantile")
    assert curve["count"].tolist() == [1, 1, 1]


def test_uniform_last_bin_is_closed_and_edges_are_left_closed():
    curve = metrics.reliability_curve([0, 1, 1], [0.1, 0.9, 1.0], n_bins=10)
    assert curve["count"].tolist() == [1, 2]
    assert curve["lower"].tolist() == [0.1, 0.9]


def test_scalar_metrics_agree_with_sklearn():
    rng = np.random.default_rng(0)
    p = np.round(rng.random(500), 2)
    y = (rng.random(500) < p).astype(int)
    assert metrics.brier(y, p) == pytest.approx(brier_score_loss(y, p), abs=1e-15)
    assert metrics.rmse(y, p) == pytest.approx(np.sqrt(brier_score_loss(y, p)), abs=1e-15)
    assert metrics.log_loss(y, p) == pytest.approx(sk_log_loss(y, np.clip(p, 1e-15, 1 - 1e-15)), abs=1e-12)
    assert metrics.auc(y, p) == pytest.approx(roc_auc_score(y, p), abs=1e-12)
    assert metrics.accuracy(y, p) == pytest.approx(np.mean((p >= 0.5) == y))


def test_auc_with_ties_counts_one_half():
    assert metrics.auc([0, 1], [0.5, 0.5]) == 0.5
    assert metrics.auc([0, 0, 1], [0.2, 0.8, 0.8]) == pytest.approx(0.75)


def test_calibration_report_improvement_sign():
    y = np.array([0, 0, 1, 1, 1, 0, 1, 0])
    before = np.array([0.4, 0.45, 0.55, 0.6, 0.6, 0.5, 0.52, 0.48])
    after = np.array([0.1, 0.2, 0.8, 0.9, 0.9, 0.2, 0.7, 0.3])
    r = metrics.calibration_report(y, before, after)
    for m in metrics.METRIC_NAMES:
        assert r["before"][m] == pytest.approx(metrics.compute_all(y, before)[m])
        higher = m in metrics.HIGHER_IS_BETTER
        assert r["improvement"][m] == pytest.approx(
            (r["after"][m] - r["before"][m]) if higher else (r["before"][m] - r["after"][m]))
    assert r["improvement"]["brier"] > 0
    assert "improvement" in metrics.format_report(r)


@pytest.mark.parametrize("y,p,msg", [
    ([0, 1], [0.2, np.nan], "non-finite"),
    ([0, 2], [0.2, 0.3], "labels 0 and 1"),
    ([0, 1, 1], [0.2, 0.3], "length mismatch"),
    ([0, 1], [0.2, 1.3], r"\[0, 1\]"),
    ([], [], "empty"),
])
def test_metrics_reject_bad_input(y, p, msg):
    with pytest.raises(ValueError, match=msg):
        metrics.ece(y, p)


def test_bad_strategy_and_bins():
    with pytest.raises(ValueError, match="strategy"):
        metrics.ece([0, 1], [0.1, 0.9], strategy="width")
    with pytest.raises(ValueError, match="n_bins"):
        metrics.mce([0, 1], [0.1, 0.9], n_bins=0)
