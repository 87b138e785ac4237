"""Deterministic elementary functions (``mlcal._solvers.detmath``) against numpy/scipy, same run.

    python benchmarks/bench_detmath.py [--n 1e6] [--repeats 5]

Each ``det_*_array`` kernel (one numba loop over a float64 array) is timed against the ufunc it
replaces on the same ``--n`` inputs: numpy's ``exp``/``log``/``log1p``/``expm1`` (SIMD kernels
chosen at run time), ``scipy.special.expit`` and ``scipy.special.gammaln``. Times are the best of
``--repeats`` runs after a warm-up (numba compilation excluded); ``ratio`` = det / reference.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.special import expit, gammaln

from mlcal._solvers import detmath as dm
from _timing import best_time  # noqa: E402  (benchmarks/ is on sys.path)


def cases(n: int):
    rng = np.random.default_rng(0)
    wide = rng.uniform(-700.0, 700.0, n)
    unit = rng.uniform(-5.0, 5.0, n)
    positive = np.exp(rng.uniform(-30.0, 30.0, n))
    return [
        ("exp", "U(-700, 700)", dm.det_exp_array, np.exp, wide),
        ("exp", "U(-5, 5)", dm.det_exp_array, np.exp, unit),
        ("log", "e^U(-30, 30)", dm.det_log_array, np.log, positive),
        ("log1p", "e^U(-30, 30)", dm.det_log1p_array, np.log1p, positive),
        ("expm1", "U(-5, 5)", dm.det_expm1_array, np.expm1, unit),
        ("expit", "U(-5, 5)", dm.det_expit_array, expit, unit),
        ("lgamma", "e^U(-30, 30)", dm.det_lgamma_array, gammaln, positive),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=float, default=1e6)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    n = int(args.n)
    head = (f"{'function':>8} {'inputs':>13} {'det ms':>8} {'reference':>22} {'ref ms':>8} "
            f"{'ratio':>6}")
    print(f"N = {n}")
    print(head)
    print("-" * len(head))
    for name, label, det_fn, ref_fn, x in cases(n):
        t_det = best_time(lambda: det_fn(x), args.repeats)
        t_ref = best_time(lambda: ref_fn(x), args.repeats)
        module = "scipy.special." if name in ("expit", "lgamma") else "numpy."
        ref_name = module + ref_fn.__name__
        print(f"{name:>8} {label:>13} {1e3 * t_det:>8.2f} {ref_name:>22} {1e3 * t_ref:>8.2f} "
              f"{t_det / t_ref:>6.2f}", flush=True)


if __name__ == "__main__":
    main()
