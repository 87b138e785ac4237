"""Compile every numba kernel ahead of time into numba's on-disk cache.

numba compiles a kernel the first time it runs (seconds per method, tens of seconds in all) and
caches the machine code on disk (``NUMBA_CACHE_DIR``, else ``__pycache__`` beside the sources).
:func:`warmup` fits every registered calibrator in each configuration that reaches a different
kernel, on small synthetic data with the argument types real fits use, so later processes load
the cached code instead of compiling. Run it once after installing (``mlcal warmup``); the
Docker image runs it at build time.
"""

from __future__ import annotations

import time
import warnings
from typing import Callable

import numpy as np

# parameter sets that reach kernels the defaults do not
_VARIANTS: dict[str, list[dict]] = {
    "isotonic": [{"interpolate": True}, {"interpolate": False}],
    "enir": [{"interpolate": True}, {"interpolate": False, "smooth_bins": False}],
    "kde": [{"kernel": "boxcar"}, {"kernel": "gaussian"}],
    "sbb": [{}, {"max_unique": 50}],
    "abb": [{}, {"max_unique": 50}],
    "bbq": [{"bin_estimate": "authors"}, {"bin_estimate": "beta_mean"}],
    "venn-abers": [{}, {"n_folds": 3}],
    # the temperature-centred prior (auto's anchor) has a kernel of its own
    "beta": [{}, {"identity_prior": 300.0, "smooth_targets": False,
                  "prior_center": "temperature"}],
}


#: methods whose fits above :data:`~mlcal._solvers.platt_newton.WARM_POINTS` distinct scores
#: first run on row groups (the warm start): their kernels for that path need larger data
_WARM_STARTED = ("platt", "platt-logit", "temperature", "beta", "quadratic")


def _datasets(seed: int = 0, n: int = 400,
              decimals: int = 3) -> list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """Probabilities with ties and integer weights, and raw margins without weights."""
    rng = np.random.default_rng(seed)
    p = np.round(rng.beta(2.0, 2.0, n), decimals)
    y = (rng.random(n) < p).astype(np.float64)
    w = rng.integers(1, 4, n).astype(np.float64)
    margins = rng.normal(0.0, 2.0, n)
    y2 = (rng.random(n) < 1.0 / (1.0 + np.exp(-margins))).astype(np.float64)
    return [(p, y, w), (margins, y2, None)]


def warmup(methods: list[str] | None = None, *, all_variants: bool = True,
           progress: Callable[[str], None] | None = None,
           quiet_below: float = 0.0) -> dict[str, float]:
    """Fit each method in every kernel-relevant configuration once; returns seconds per method.

    Parameters
    ----------
    methods : list of str, optional
        Registered calibrator names (default: all).
    all_variants : bool
        Also the non-default configurations that use other kernels (Gaussian KDE, step ENIR,
        SBB/ABB pre-aggregation, ...); ``False`` warms only the default parameters.
    progress : callable, optional
        Receives one line per method.
    quiet_below : float
        Methods ready in fewer seconds than this (their kernels were cached) get no line.
    """
    from mlcal.calibrators.catalog import available_calibrators, get_calibrator

    names = list(methods or available_calibrators())
    data = _datasets()
    from mlcal._solvers.platt_newton import WARM_POINTS

    # more distinct scores than WARM_POINTS, so the warm start runs
    large = _datasets(n=4 * WARM_POINTS, decimals=5)
    seconds: dict[str, float] = {}
    for name in names:
        start = time.perf_counter()
        for params in (_VARIANTS.get(name, [{}]) if all_variants else [{}]):
            for scores, y, w in (data + large if name in _WARM_STARTED else data):
                with warnings.catch_warnings():   # e.g. SBB/ABB pre-aggregation notices
                    warnings.simplefilter("ignore")
                    cal = get_calibrator(name, **params).fit(scores, y, sample_weight=w)
                cal.predict(scores)
        seconds[name] = time.perf_counter() - start
        if progress is not None and seconds[name] >= quiet_below:
            progress(f"  {name:<10} ready in {seconds[name]:6.2f} s")
    if methods is None and all_variants:
        _warm_segment_kernels()
    return seconds


def _warm_segment_kernels() -> None:
    """The row passes of SegmentedCalibrator's solvers (mlcal._solvers.segment_kernels), with
    the argument types of its fits: float64 rows, int64 segment codes."""
    from mlcal._solvers.segment_kernels import loglik_sum, offset_sums, slope_sums

    rng = np.random.default_rng(0)
    logits, y, w = rng.normal(size=50), (rng.random(50) < 0.5) * 1.0, np.ones(50)
    codes, d = np.arange(50, dtype=np.int64) % 3, np.zeros(3)
    offset_sums(logits, d, codes, w, y, 3)
    slope_sums(1.0, logits, d, codes, w, y, 3)
    loglik_sum(1.0, logits, d, codes, w, y)
