"""ECE-sweep against a brute-force sweep over every bin count with exact rational bin means."""

from fractions import Fraction

import numpy as np
import pytest

from mlcal.metrics import (classwise_ece_sweep, ece, ece_sweep, reliability_curve,
                           sweep_n_bins, top_label_ece_sweep)


def _brute_sweep(y, p):
    """First b whose equal-mass bins (mlcal's quantile binning) are not monotone, minus one."""
    best = 1
    for b in range(2, y.size + 1):
        c = reliability_curve(y, p, b, "quantile")
        means = [Fraction(int(round(f * n)), int(n))
                 for f, n in zip(c["fraction_positive"], c["count"])]
        if any(a > b_ for a, b_ in zip(means, means[1:])):
            break
        best = b
    return best


def _brute_lq(y, p, b, q):
    c = reliability_curve(y, p, b, "quantile")
    gap = np.abs(c["fraction_positive"] - c["mean_predicted"]) ** q
    return float(np.sum(c["count"] * gap) / y.size) ** (1 / q)


@pytest.mark.parametrize("seed", range(12))
def test_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 160))
    p = np.round(rng.uniform(0, 1, n), int(rng.integers(1, 4)))   # ties included
    y = (rng.uniform(size=n) < p ** rng.uniform(0.3, 3.0)).astype(float)
    b = _brute_sweep(y, p)
    value, nb = ece_sweep(y, p, return_n_bins=True)
    assert nb == b == sweep_n_bins(y, p)
    assert value == pytest.approx(ece(y, p, b, "quantile"), rel=1e-12, abs=1e-15)
    assert ece_sweep(y, p, norm=2) == pytest.approx(_brute_lq(y, p, b, 2), rel=1e-12)


def test_perfectly_separated_labels_sweep_to_one_row_per_bin():
    p = np.linspace(0.05, 0.95, 40)
    y = (p > 0.5).astype(float)
    value, nb = ece_sweep(y, p, return_n_bins=True)
    assert nb == 40
    assert value == pytest.approx(np.mean(np.abs(y - p)), rel=1e-12)


def test_one_bin_when_two_bins_are_already_decreasing():
    p = np.array([0.1, 0.2, 0.3, 0.4])
    y = np.array([1.0, 1.0, 0.0, 0.0])
    assert ece_sweep(y, p, return_n_bins=True) == (pytest.approx(0.5 - 0.25), 1)


def test_multiclass_forms_and_errors():
    rng = np.random.default_rng(1)
    prob = rng.dirichlet(np.ones(3), 150)
    y = np.array([rng.choice(3, p=r) for r in prob])
    top = np.argmax(prob, axis=1)
    assert top_label_ece_sweep(y, prob) == ece_sweep((top == y) * 1.0, prob.max(axis=1))
    per = [ece_sweep((y == k) * 1.0, prob[:, k], norm=2) for k in range(3)]
    assert classwise_ece_sweep(y, prob, norm=2) == pytest.approx(np.mean(per), rel=1e-14)
    with pytest.raises(ValueError, match="norm"):
        ece_sweep([0, 1], [0.2, 0.7], norm=3)
    with pytest.raises(ValueError, match="labels 0 and 1"):
        ece_sweep([0, 3], [0.2, 0.7])
