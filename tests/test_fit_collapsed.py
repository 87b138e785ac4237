"""The private fit on tie-collapsed points (``BaseCalibrator._fit_collapsed``) that ``auto`` uses
for its fold fits on cells and for the refit of the chosen method: it must give exactly the
calibrator that the method's own ``fit`` gives on the rows (same JSON, bit for bit)."""

from __future__ import annotations

import numpy as np
import pytest

import mlcal
from mlcal.calibrators.auto import DEFAULT_CANDIDATES, _fit_cells, _rows
from mlcal.calibrators.catalog import calibrator_class
from mlcal._solvers.ties import stable_argsort

#: the default candidates and quadratic scaling (all have a point fit)
METHODS = DEFAULT_CANDIDATES + ("quadratic",)


def _cells(n: int, seed: int):
    """Sorted unique scores in (0, 1) with positive and negative weights, some of them 0
    (cells of one class, and a few empty cells)."""
    rng = np.random.default_rng(seed)
    x = np.unique(rng.beta(2.0, 3.0, size=n))
    p_true = x ** 1.5
    total = rng.choice([0.0, 0.5, 1.0, 3.0, 17.25], size=x.size, p=[0.05, 0.2, 0.4, 0.3, 0.05])
    pos = np.round(total * p_true * 4.0) / 4.0
    pos = np.minimum(pos, total)
    return x, pos, total - pos


def _rows_data(n: int, seed: int, margins: bool = False):
    """Rows with ties, fractional and zero weights (zero-weight rows also at both ends)."""
    rng = np.random.default_rng(seed)
    s = np.round(rng.random(n), 3 if n > 2000 else 2)
    y = (rng.random(n) < s ** 2).astype(float)
    w = rng.choice([0.0, 0.5, 1.0, 2.0], size=n, p=[0.1, 0.2, 0.5, 0.2])
    s[:2], w[:2] = (0.0, 1.0), 0.0   # zero weight at the extremes: still in the domain
    y[:2] = (1.0, 0.0)
    if margins:
        s = 6.0 * s - 3.0
    return s, y, w


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("n", [40, 1500, 12000])
def test_fold_fit_on_cells_equals_the_fit_on_their_rows(method, n):
    assert calibrator_class(method)._fits_points()
    x, pos, neg = _cells(n, seed=n)
    auto = mlcal.AutoCalibrator()
    fast = auto.candidate(method)
    assert _fit_cells(fast, x, pos, neg)
    slow = auto.candidate(method).fit(*_rows(x, pos, neg))
    assert fast.to_json() == slow.to_json()
    probe = np.linspace(-0.1, 1.1, 301)
    np.testing.assert_array_equal(fast.predict(probe), slow.predict(probe))


def test_fold_fit_on_cells_declines_repeated_scores():
    # row folds repeat a score in the training part: the rows path must collapse them
    x = np.array([0.1, 0.2, 0.2, 0.7])
    cal = mlcal.AutoCalibrator().candidate("platt")
    assert not _fit_cells(cal, x, np.array([1.0, 0.0, 1.0, 2.0]), np.array([2.0, 1.0, 0.0, 1.0]))
    assert not hasattr(cal, "map_")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("n, margins", [(300, False), (5000, False), (30000, False),
                                        (3000, True)])
def test_auto_refit_is_the_chosen_methods_own_fit(method, n, margins):
    # forced choice (one candidate, no anchor): auto's refit must be exactly the method's fit
    # on the rows, in any row order (margins: the sigmoid input transform, where the rows
    # path is used)
    s, y, w = _rows_data(n, seed=n + 1, margins=margins)
    order = np.random.default_rng(0).permutation(n)
    auto = mlcal.AutoCalibrator(candidates=[method], anchor=None).fit(s[order], y[order],
                                                                     w[order])
    assert auto.chosen_ == method
    own = auto.candidate(method).fit(s, y, w)
    assert auto.calibrator_.to_json() == own.to_json()
    assert auto.map_ == own.map_


def test_spline_grid_losses_equal_one_cold_qp_per_penalty():
    # the spline's CV: one call per fold, each QP warm-started from the previous penalty's
    # solution, against a cold monotone_qp and held_out_log_loss per penalty (the old loop)
    from mlcal._solvers.pspline import (gram_sums, grid_held_out_losses, held_out_log_loss,
                                        monotone_qp, penalised)
    from mlcal.calibrators.spline import CV_CLIP, DEFAULT_PENALTIES, spline_knots

    grid = np.asarray(DEFAULT_PENALTIES)
    for seed in range(40):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(8, 3000))
        x = np.unique(rng.random(n) ** rng.uniform(0.3, 3.0))
        curve = rng.choice([lambda v: v, lambda v: v ** 3, lambda v: (v > 0.5) * 0.9,
                            lambda v: 0.5 + 0.0 * v])
        ybar = np.clip(curve(x) + rng.normal(0.0, 0.2, x.size), 0.0, 1.0)
        ybar = np.where(rng.random(x.size) < 0.5, np.round(ybar), ybar)
        w = rng.choice([0.5, 1.0, 3.0], size=x.size)
        cv = int(rng.integers(2, 6))
        knots = spline_knots(x, int(rng.integers(2, 25)), cv)
        fold = np.arange(x.size) % cv
        for f in range(cv):
            train, held = fold != f, fold == f
            a, b, _ = gram_sums(x, ybar, w, knots, train)
            start = float(np.sum(b))
            cold = [held_out_log_loss(x, ybar, w, held, knots,
                                      monotone_qp(penalised(a, lam), b, start), CV_CLIP)
                    for lam in grid]
            fast = grid_held_out_losses(a, b, start, grid, x, ybar, w, held, knots, CV_CLIP)
            np.testing.assert_array_equal(fast, np.array(cold))


@pytest.mark.parametrize("kind", ["unique", "few values", "signed zeros", "rounded", "constant"])
def test_stable_argsort_is_numpys_stable_permutation(kind):
    """``auto`` sorts its rows with ``stable_argsort``: the permutation of NumPy's stable sort
    (ties in their input order), whatever the default sort did with the tied rows."""
    rng = np.random.default_rng(len(kind))
    for n in (1, 2, 7, 300, 5000):
        s = {"unique": lambda: rng.random(n),
             "few values": lambda: rng.integers(0, max(1, n // 10), n).astype(float),
             "signed zeros": lambda: rng.choice([-0.0, 0.0, 1.0, -1.0], n),
             "rounded": lambda: np.round(rng.standard_normal(n), 2),
             "constant": lambda: np.full(n, 0.5)}[kind]()
        np.testing.assert_array_equal(stable_argsort(s), np.argsort(s, kind="stable"))
