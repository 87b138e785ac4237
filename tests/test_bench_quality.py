"""The quality benchmark's measuring instruments: the true probabilities of its simulations
(checked against Monte Carlo label frequencies) and the per-task metric rows."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_quality as bq  # noqa: E402


@pytest.mark.parametrize("kind", ["sim-beta", "sim-overconfident", "sim-imbalanced"])
def test_true_probability_matches_the_label_frequencies(kind):
    # 400,000 draws in 8 groups of equal size by true probability: the mean label of each
    # group is within 4.5 binomial standard errors of the mean true probability
    s, y = bq.simulated(kind, 400_000, np.random.default_rng(11))
    p = bq.true_probability(kind, s)
    assert np.all((p > 0) & (p < 1))
    order = np.argsort(p)
    for group in np.array_split(order, 8):
        mean_p = p[group].mean()
        se = np.sqrt(np.mean(p[group] * (1 - p[group])) / group.size)
        assert abs(y[group].mean() - mean_p) < 4.5 * se


def test_latent_posterior_is_not_the_naive_inverse():
    # E[expit(t) | s] shrinks towards the prior: it is not expit((logit(s) - B) / A)
    s = np.array([0.02, 0.5, 0.98])
    a, b = bq.LATENT["sim-overconfident"][:2]
    naive = 1.0 / (1.0 + np.exp(-(np.log(s / (1 - s)) - b) / a))
    p = bq.true_probability("sim-overconfident", s)
    assert p[1] == pytest.approx(0.5, abs=1e-12)
    assert abs(p[0] - naive[0]) > 1e-3 and abs(p[2] - naive[2]) > 1e-3


def test_simulated_tasks_carry_an_oracle_row():
    task = next(bq.sim_tasks([500], 1, 2000))
    rows = bq.run_task(task, ["platt", "sk-isotonic"])
    assert rows["oracle"]["true_error"] == 0.0
    assert rows["platt"]["true_error"] > 0.0
    for name in ("platt", "sk-isotonic", "oracle"):
        assert set(rows[name]) >= {"log_loss", "brier", "ece", "debiased_ece", "auc_change"}
    summary = bq.summarise([rows], ["platt", "sk-isotonic"])
    assert summary["platt"]["true_error"] == rows["platt"]["true_error"]
