"""The report's metric table reuses the before/after bootstrap replicates for the paired change;
it must equal, to the bit, the three independent bootstrap_ci calls it replaced."""

from __future__ import annotations

import numpy as np
import pytest

from mlcal.metrics.bootstrap import bootstrap_ci
from mlcal.report.data import _binary_metrics, _metric_table, _multiclass_metrics


def _old_table(y, p_before, p_after, metrics, *, n_resamples, seed, confidence):
    # mlcal da83df4's _metric_table: before, after and change each bootstrapped on their own
    stacked = np.concatenate([np.reshape(p_before, (len(y), -1)),
                              np.reshape(p_after, (len(y), -1))], axis=1)
    half = stacked.shape[1] // 2

    def unstack(q):
        return q[:, 0] if half == 1 else q

    rows = []
    for key, label, metric, higher, method in metrics:
        def change(yy, q, metric=metric):
            return metric(yy, unstack(q[:, half:])) - metric(yy, unstack(q[:, :half]))

        row = {"key": key, "label": label, "higher_is_better": higher, "interval_method": method}
        for part, fn, data in (("before", metric, p_before), ("after", metric, p_after),
                               ("change", change, stacked)):
            try:
                row[part] = bootstrap_ci(fn, y, data, confidence=confidence,
                                         n_resamples=n_resamples, seed=seed,
                                         method=method).as_dict()
            except ValueError as exc:
                row[part] = {"estimate": None, "error": str(exc)}
        rows.append(row)
    return rows


def _binary(n, seed, positives=None):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.01, 0.99, size=n)
    y = (rng.uniform(size=n) < p ** 1.4).astype(float)
    if positives is not None:           # few positives: AUC resamples with one class redrawn
        y[:] = 0.0
        y[:positives] = 1.0
    q = np.clip(p ** 1.4 + rng.normal(0, 0.02, n), 0.0, 1.0)
    q[:3] = [0.0, 1.0, 0.5][:n]
    return y, p, q


@pytest.mark.parametrize("n,seed,positives,resamples", [
    (40, 0, None, 80), (300, 1, None, 40), (25, 2, 1, 50),   # redraws of single-class resamples
    (1, 3, None, 20),                                           # every interval undefined
    (20000, 4, None, 12)])                                      # beyond numpy's 8192 buffer
def test_binary_table_equals_three_independent_bootstraps(n, seed, positives, resamples):
    y, p, q = _binary(n, seed, positives)
    kw = dict(n_resamples=resamples, seed=seed, confidence=0.9)
    metrics = _binary_metrics(10, "uniform")
    assert _metric_table(y, p, q, metrics, **kw) == _old_table(y, p, q, metrics, **kw)


@pytest.mark.parametrize("n,resamples", [(60, 40), (12000, 10)])
def test_multiclass_table_equals_three_independent_bootstraps(n, resamples):
    rng = np.random.default_rng(n)
    p = rng.dirichlet([1.0, 2.0, 0.5], size=n)
    y = np.array([rng.choice(3, p=row) for row in p])
    q = 0.9 * p + 0.1 / 3
    kw = dict(n_resamples=resamples, seed=5, confidence=0.95)
    metrics = _multiclass_metrics(10, "quantile")
    assert _metric_table(y, p, q, metrics, **kw) == _old_table(y, p, q, metrics, **kw)
