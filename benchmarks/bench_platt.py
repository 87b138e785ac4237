"""Platt fit time and Newton iterations at large N, against scikit-learn's logistic regression
on the same single feature in the same run, and the fit's invariance to rescaled scores.

    python benchmarks/bench_platt.py [--sizes 1e6 5e6] [--repeats 2]

Data: margins ``f ~ N(-3.4, 1.2^2)`` with labels ~ Bernoulli(sigmoid(f)) (about 5.9 %
positives), given to the calibrators as ``margin``: ``2 f + 1``, or ``confident``: the
probabilities ``sigmoid(20 f + 60)`` (3 % exactly 1.0), on which the solver before issue 15
hit its 100-iteration cap with 3233 objective evaluations at N = 1e6. ``x sklearn`` is the Platt time over
``LogisticRegression(C=inf, lbfgs)`` on the same data (which fits plain 0/1 targets, so it
is a reference for the cost of one logistic fit, not for the answer). ``max |dp| rescaled``
is the largest prediction difference between the fit on ``s`` and the fit on ``c s`` for
c in {1e-12, 1e-8, 1e8}, evaluated at the same points.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from mlcal import Platt
from _timing import best_time  # noqa: E402  (benchmarks/ is on sys.path)


def make(n: int, kind: str = "margin", seed: int = 0):
    rng = np.random.default_rng(seed)
    f = rng.normal(-3.4, 1.2, n)
    y = (rng.random(n) < expit(f)).astype(np.float64)
    return (2.0 * f + 1.0 if kind == "margin" else expit(20.0 * f + 60.0)), y


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", nargs="+", type=float, default=[1e6, 5e6])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    Platt().fit(*make(1000))  # load the compiled kernels once
    head = (f"{'data':>9} {'N':>9} {'Platt s':>8} {'iter':>5} {'sklearn s':>9} {'x sklearn':>9} "
            f"{'max |dp| rescaled':>18}")
    print(head)
    print("-" * len(head))
    for kind, size in [(k, z) for k in ("margin", "confident") for z in args.sizes]:
        n = int(size)
        s, y = make(n, kind)
        cal = Platt()
        t_p = best_time(lambda: cal.fit(s, y), args.repeats)
        lr = LogisticRegression(C=np.inf, solver="lbfgs")
        t_lr = best_time(lambda: lr.fit(s[:, None], y), args.repeats)
        grid = np.linspace(s.min(), s.max(), 1001)
        ref = cal.predict(grid)
        dev = max(float(np.abs(Platt().fit(c * s, y).predict(c * grid) - ref).max())
                  for c in (1e-12, 1e-8, 1e8))
        print(f"{kind:>9} {n:>9d} {t_p:>8.3f} {cal.n_iter_:>5d} {t_lr:>9.3f} {t_p / t_lr:>9.2f} "
              f"{dev:>18.2e}", flush=True)


if __name__ == "__main__":
    main()
