import math

import numpy as np
import pytest
from scipy.special import softmax

from mlcal.metrics.multiclass import (classwise_ece, multiclass_brier, multiclass_log_loss,
                                      top_label_ece)


def _data(n=700, K=4, seed=0):
    rng = np.random.default_rng(seed)
    p = softmax(rng.normal(scale=2, size=(n, K)), axis=1)
    y = rng.integers(0, K, size=n)
    return y, p


def _brute_ece(correct, conf, n_bins):
    """Uniform-bin ECE by explicit loops over bins [i/B, (i+1)/B), the last one closed."""
    total = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        members = [i for i in range(len(conf))
                   if lo <= conf[i] < hi or (b == n_bins - 1 and conf[i] == 1.0)]
        if members:
            acc = sum(correct[i] for i in members) / len(members)
            avg = sum(conf[i] for i in members) / len(members)
            total += len(members) / len(conf) * abs(acc - avg)
    return total


@pytest.mark.parametrize("n_bins", [5, 15])
def test_top_label_and_classwise_ece_match_brute_force(n_bins):
    y, p = _data()
    top = [max(range(p.shape[1]), key=lambda k: (p[i, k], -k)) for i in range(len(y))]
    conf = [p[i, top[i]] for i in range(len(y))]
    correct = [1.0 if top[i] == y[i] else 0.0 for i in range(len(y))]
    assert top_label_ece(y, p, n_bins) == pytest.approx(_brute_ece(correct, conf, n_bins),
                                                        rel=1e-12, abs=1e-15)
    per_class = [_brute_ece([1.0 if v == k else 0.0 for v in y], list(p[:, k]), n_bins)
                 for k in range(p.shape[1])]
    assert classwise_ece(y, p, n_bins) == pytest.approx(sum(per_class) / len(per_class),
                                                        rel=1e-12, abs=1e-15)


def test_brier_and_log_loss_match_brute_force_and_sklearn():
    from sklearn.metrics import log_loss

    y, p = _data(seed=1)
    brute = sum(sum((p[i, k] - (1.0 if y[i] == k else 0.0)) ** 2 for k in range(p.shape[1]))
                for i in range(len(y))) / len(y)
    assert multiclass_brier(y, p) == pytest.approx(brute, rel=1e-12)
    nll = -sum(math.log(p[i, y[i]]) for i in range(len(y))) / len(y)
    assert multiclass_log_loss(y, p) == pytest.approx(nll, rel=1e-12)
    assert multiclass_log_loss(y, p) == pytest.approx(log_loss(y, p, labels=range(4)), rel=1e-9)


def test_a_perfect_one_hot_forecast_scores_zero_and_a_zero_stays_finite():
    y = np.array([0, 1, 2, 1])
    p = np.eye(3)[y]
    assert multiclass_brier(y, p) == 0.0 and top_label_ece(y, p) == 0.0
    assert multiclass_log_loss(y, p) == pytest.approx(0.0, abs=1e-15)
    wrong = np.eye(3)[[1, 2, 0, 0]]
    assert multiclass_brier(y, wrong) == 2.0
    assert multiclass_log_loss(y, wrong) == pytest.approx(-math.log(1e-15))


@pytest.mark.parametrize("y, p, message", [
    ([0, 1], [[0.5, 0.4], [0.5, 0.5]], "do not sum to 1"),
    ([0, 3], [[0.5, 0.5], [0.5, 0.5]], "class indices 0..1"),
    ([0], [[0.5, 0.5], [0.5, 0.5]], "length mismatch"),
    ([0, 1], [0.5, 0.5], r"\(n, K\) matrix"),
    ([0.5, 1], [[0.5, 0.5], [0.5, 0.5]], "class indices"),
])
def test_bad_inputs_are_named(y, p, message):
    for metric in (top_label_ece, classwise_ece, multiclass_brier, multiclass_log_loss):
        with pytest.raises(ValueError, match=message):
            metric(y, p)
