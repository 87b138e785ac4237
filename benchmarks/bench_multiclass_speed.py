"""Fit time of mlcal's softmax scalings against scikit-learn's temperature scaling in the same
run (issue 26: the structured scalings at N = 1e5, K = 100 within 2x of scikit-learn).

    python benchmarks/bench_multiclass_speed.py                  # N = 1e5, K = 10 and 100
    python benchmarks/bench_multiclass_speed.py --rows 10000 --classes 10 100 --repeats 1

Scores: the ``sim-K`` probabilities of ``bench_quality_multiclass.simulated`` (overconfident,
with class offsets). Reference: ``CalibratedClassifierCV(FrozenEstimator(stub),
method="temperature")`` where the installed scikit-learn has it (1.8+), else ``"sigmoid"``
(named in the table); the stub returns the stored rows, so its time is the calibration. Each
fit is timed as the best of ``--repeats`` after one untimed warm-up (numba compilation
excluded). A fit slower than ``--cap`` seconds in its warm-up is not repeated (its one time is
printed). Columns: seconds, and the ratio to the reference at the same N and K.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.calibration import CalibratedClassifierCV
from sklearn.frozen import FrozenEstimator

from bench_multiclass import StoredScores
from bench_quality_multiclass import simulated
from mlcal.calibrators.multiclass_catalog import MULTICLASS_METHODS

METHODS = ("temperature", "ts-mix", "svs", "sms", "vector", "matrix")
REFERENCE = ("temperature" if "temperature" in
             CalibratedClassifierCV._parameter_constraints["method"][0].options else "sigmoid")


def _timed(fn, repeats: int, cap: float) -> float:
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    if first > cap:
        return first
    best = first
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def time_case(n: int, k: int, repeats: int, cap: float) -> dict[str, float]:
    """Seconds per fit of every method and of the scikit-learn reference on n rows, k classes."""
    s, y, _ = simulated(n, k, seed=0)
    idx = np.arange(n)[:, None]

    def reference():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            CalibratedClassifierCV(FrozenEstimator(StoredScores(s).fit(None, y)),
                                   method=REFERENCE).fit(idx, y)

    out = {f"sklearn-{REFERENCE}": _timed(reference, repeats, cap)}
    for name in METHODS:
        out[name] = _timed(lambda name=name: MULTICLASS_METHODS[name](
            input_kind="probabilities").fit(s, y), repeats, cap)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--classes", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--cap", type=float, default=60.0)
    args = ap.parse_args(argv)
    ref = f"sklearn-{REFERENCE}"
    print(f"{'N':>8}{'K':>5}  {'method':<22}{'seconds':>10}{'x ' + ref:>26}")
    for k in args.classes:
        times = time_case(args.rows, k, args.repeats, args.cap)
        for name, sec in times.items():
            print(f"{args.rows:>8}{k:>5}  {name:<22}{sec:>10.3f}{sec / times[ref]:>26.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
