"""Where the time of a temperature / vector / matrix scaling fit goes.

    python benchmarks/profile_multiclass.py [--n 100000] [--k 10 100]

For simulated probabilities (``bench_multiclass.simulate``) prints, per method: the fit's total
time, the input preparation (log of the probabilities, canonical row order), the number of
Newton iterations, the number and mean time of objective evaluations with and without the
Hessian, and the time per score element of an evaluation without the Hessian (one det_exp per
element plus the gradient), next to the time of ``det_exp_array`` alone over the same elements.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_multiclass import simulate

from mlcal._solvers.detmath import det_exp_array
from mlcal._solvers.softmax_affine import canonical_order
from mlcal.calibrators.multiclass import MULTICLASS_METHODS
from mlcal.maps.multiclass import SoftmaxAffineMap


def timed_fit(name: str, s: np.ndarray, y: np.ndarray):
    """Fit with every objective evaluation timed; returns (fit, seconds, {hessian: [seconds]})."""
    cal = MULTICLASS_METHODS[name](input_kind="probabilities")
    calls: dict[bool, list[float]] = {True: [], False: []}
    problem = cal._problem

    def timed_problem(x, y_, w, K):
        evaluate, theta0, build, solver = problem(x, y_, w, K)

        def timed(theta, hessian):
            start = time.perf_counter()
            out = evaluate(theta, hessian)
            calls[bool(hessian)].append(time.perf_counter() - start)
            return out
        return timed, theta0, build, solver

    cal._problem = timed_problem
    start = time.perf_counter()
    cal.fit(s, y)
    return cal, time.perf_counter() - start, calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--k", type=int, nargs="+", default=[10, 100])
    args = ap.parse_args()
    warm_s, warm_y, _ = simulate(2000, 3, seed=99)
    for make in MULTICLASS_METHODS.values():   # numba compilation is not part of the profile
        make().fit(warm_s, warm_y)
    det_exp_array(np.zeros(8))
    head = (f"{'method':<12}{'K':>5}{'fit s':>8}{'iters':>7}{'H evals':>9}{'s each':>8}"
            f"{'f,g evals':>11}{'s each':>8}{'ns/elem':>9}")
    for k in args.k:
        s, y, _ = simulate(args.n, k, seed=k)
        start = time.perf_counter()
        x = SoftmaxAffineMap(np.ones(k), np.zeros(k), input="log-probabilities").transform_input(s)
        t_log = time.perf_counter() - start
        start = time.perf_counter()
        canonical_order(x, y, np.ones(args.n))
        t_order = time.perf_counter() - start
        start = time.perf_counter()
        det_exp_array(np.ascontiguousarray(x.reshape(-1)))
        t_exp = time.perf_counter() - start
        print(f"\nK = {k}, N = {args.n:.0e}: log of probabilities {t_log:.3f} s, canonical order "
              f"{t_order:.3f} s, det_exp_array alone {1e9 * t_exp / x.size:.1f} ns/elem")
        print(head)
        print("-" * len(head))
        for name in ("temperature", "vector", "matrix"):
            if name == "matrix" and k > 22:
                print(f"{name:<12}{k:>5}  skipped (L-BFGS above K = 22)")
                continue
            cal, total, calls = timed_fit(name, s, y)
            hess, plain = calls[True], calls[False]
            each_h = float(np.mean(hess)) if hess else 0.0
            each_f = float(np.mean(plain)) if plain else 0.0
            print(f"{name:<12}{k:>5}{total:>8.2f}{cal.n_iter_:>7}{len(hess):>9}{each_h:>8.3f}"
                  f"{len(plain):>11}{each_f:>8.3f}{1e9 * each_f / x.size:>9.1f}")


if __name__ == "__main__":
    main()
