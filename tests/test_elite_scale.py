"""ELiTE on large imbalanced data and under row permutation.

The model-scoring regression (issue 15): the authors' R code drops log-0 terms from the
likelihood, which rewarded members that clip to 0 over the low scores (the positives there
vanished from their likelihood); on imbalanced data the straight line took all the weight. The
check is against the true probabilities of a simulation and against isotonic regression fitted
on the same rows, not against numbers produced by ELiTE itself.
"""

import numpy as np
from scipy.special import expit
from sklearn.isotonic import IsotonicRegression

from mlcal.calibrators.elite import ELiTE


def imbalanced(n, seed):
    """~5.9 % positives with known p_true; the scores are a compressed monotone transform of
    the true logit, so the calibration curve is strongly convex and a least-squares line fitted
    to it is negative (clipped to 0) over most low scores, where positives still occur."""
    rng = np.random.default_rng(seed)
    f = rng.normal(-3.4, 1.2, n)
    p = expit(f)
    y = (rng.random(n) < p).astype(float)
    return np.round(expit(0.4 * f + 0.5), 6), y, p


def log_loss(p, y):
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


def test_members_that_clip_are_not_rewarded_on_imbalanced_data():
    s, y, _ = imbalanced(20_000, 0)
    st, yt, pt = imbalanced(20_000, 1)
    cal = ELiTE().fit(s, y)
    iso = IsotonicRegression(out_of_bounds="clip").fit(s, y)
    err_elite = np.mean(np.abs(cal.predict(st) - pt))
    err_iso = np.mean(np.abs(iso.predict(st) - pt))
    # the smoother ensemble should be at least as close to the truth as the step function
    # (before the fix: 0.0175 vs 0.0059, all weight on the clipped straight line)
    assert err_elite <= err_iso
    assert log_loss(cal.predict(st), yt) <= log_loss(iso.predict(st), yt) + 1e-3
    # the line clips over the low scores, which hold positives: it is not the chosen model
    line = 0
    assert cal.n_impossible_[line] > 0
    assert cal.weights_[line] < 1e-6
    assert cal.df_[np.argmax(cal.weights_)] > 4


def test_likelihood_counts_every_instance():
    s, y, _ = imbalanced(5_000, 2)
    cal = ELiTE().fit(s, y)
    assert (cal.n_used_ == s.size).all()
    # a saturated member's likelihood includes its impossible positives at log(1e-12) each
    worst = int(np.argmax(cal.n_impossible_))
    assert cal.n_impossible_[worst] > 0
    assert cal.log_likelihood_[worst] < cal.n_impossible_[worst] * np.log(1e-12) / 2


def test_json_is_bit_identical_under_row_permutations():
    s, y, _ = imbalanced(30_000, 3)
    ref = ELiTE().fit(s, y).to_json()
    rng = np.random.default_rng(4)
    for _ in range(3):
        perm = rng.permutation(s.size)
        assert ELiTE().fit(s[perm], y[perm]).to_json() == ref
