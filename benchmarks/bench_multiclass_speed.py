"""Fit time of mlcal's softmax scalings against scikit-learn's temperature scaling in the same
run (issue 26: the structured scalings at N = 1e5, K = 100 within 2x of scikit-learn).

    python benchmarks/bench_multiclass_speed.py                  # N = 1e5, K = 10 and 100
    python benchmarks/bench_multiclass_speed.py --rows 10000 --classes 10 100 --repeats 1

Scores: the ``sim-K`` probabilities of ``bench_quality_multiclass.simulated`` (overconfident,
with class offsets). Reference: ``CalibratedClassifierCV(FrozenEstimator(stub),
method="temperature")`` where the installed scikit-learn has it (1.8+), else ``"sigmoid"``
(named in the table); the stub returns the stored rows, so its time is the calibration. After
one untimed warm-up of each (numba compilation excluded), ``--repeats`` rounds each time the
reference and every method once, interleaved, so a change in the machine's load hits all of
them alike. A fit slower than ``--cap`` seconds in its warm-up is not repeated (its one time is
printed). Columns: the best seconds over the rounds, their ratio to the reference's best, and
the median and range of the per-round ratios (each fit against the reference of its round).
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


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def time_case(n: int, k: int, repeats: int, cap: float) -> dict[str, list[float]]:
    """Seconds per fit of the scikit-learn reference and every method on n rows, k classes:
    one list per fit, one entry per round (a single entry when the warm-up exceeded ``cap``)."""
    s, y, _ = simulated(n, k, seed=0)
    idx = np.arange(n)[:, None]

    def reference():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            CalibratedClassifierCV(FrozenEstimator(StoredScores(s).fit(None, y)),
                                   method=REFERENCE).fit(idx, y)

    fits = {f"sklearn-{REFERENCE}": reference}
    for name in METHODS:
        fits[name] = lambda name=name: MULTICLASS_METHODS[name](
            input_kind="probabilities").fit(s, y)
    warm = {name: _seconds(fn) for name, fn in fits.items()}
    out: dict[str, list[float]] = {name: [] for name in fits}
    for _ in range(repeats):
        for name, fn in fits.items():
            if warm[name] <= cap:
                out[name].append(_seconds(fn))
    return {name: times or [warm[name]] for name, times in out.items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--classes", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cap", type=float, default=60.0)
    args = ap.parse_args(argv)
    ref = f"sklearn-{REFERENCE}"
    print(f"{'N':>8}{'K':>5}  {'method':<22}{'best s':>9}{'best/best':>11}"
          f"{'median ratio':>14}{'ratio range':>16}")
    for k in args.classes:
        times = time_case(args.rows, k, args.repeats, args.cap)
        for name, secs in times.items():
            paired = [a / b for a, b in zip(secs, times[ref])]
            print(f"{args.rows:>8}{k:>5}  {name:<22}{min(secs):>9.3f}"
                  f"{min(secs) / min(times[ref]):>11.2f}{float(np.median(paired)):>14.2f}"
                  f"{min(paired):>8.2f}-{max(paired):<7.2f}", flush=True)


if __name__ == "__main__":
    main()
