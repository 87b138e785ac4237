"""Fit and predict time of every registered calibrator, against references measured in the same run.

    python benchmarks/bench_calibrators.py [--sizes 1e4 1e5 1e6] [--methods isotonic enir ...]

For each N the reference is scikit-learn's ``IsotonicRegression(out_of_bounds="clip").fit`` on the
same data; ``fit ratio`` is the calibrator's fit time over that reference. ``predict ratio`` is
mlcal's ``predict`` over a bare numpy evaluation of the same map (``searchsorted`` + gather,
``np.interp``, or the logistic formula) on the same N fresh scores. Times are the best of
``--repeats`` runs after one warm-up (numba compilation is excluded). ``peak MiB`` is the peak
resident-memory growth of one fit, measured in a forked child process.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import warnings

import numpy as np
from scipy.special import expit
from sklearn.isotonic import IsotonicRegression

import mlcal
from mlcal.calibrators.bayesian_binning import PreAggregationWarning
from _timing import best_time  # noqa: E402  (benchmarks/ is on sys.path)

# SBB/ABB announce their documented pre-aggregation above 5000 unique scores on every fit
warnings.simplefilter("ignore", PreAggregationWarning)

def make_data(n: int, seed: int = 0):
    """Beta-distributed scores (ties from 7-digit rounding) with miscalibrated labels."""
    rng = np.random.default_rng(seed)
    s = np.round(rng.beta(2.0, 3.0, n), 7)
    y = (rng.random(n) < s ** 1.6).astype(np.float64)
    return s, y, rng.random(n)




def bare_numpy(m):
    """The map evaluated with plain numpy (input sigmoid included), without mlcal's plumbing."""
    pre = expit if m.input_transform == "sigmoid" else (lambda s: s)
    if m.kind == "step":
        return lambda s: m.values[np.searchsorted(m.thresholds, pre(s), side="right")]
    if m.kind == "linear":
        return lambda s: np.interp(pre(s), m.knots, m.values)
    return lambda s: expit(-(m.a * pre(s) + m.b))


def _rss_kib() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def peak_fit_mib(name: str, s, y) -> float:
    """Peak RSS growth of one fit, in a forked child so earlier runs do not mask it."""
    if not hasattr(os, "fork"):
        return float("nan")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read)
        base = _rss_kib()
        mlcal.get_calibrator(name).fit(s, y)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        os.write(write, str(max(0, peak - base)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        out = fh.read()
    os.waitpid(pid, 0)
    return int(out) / 1024 if out else float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e4, 1e5, 1e6])
    parser.add_argument("--methods", nargs="+", default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-memory", action="store_true", help="skip the forked memory runs")
    args = parser.parse_args(argv)
    methods = args.methods or mlcal.available_calibrators()
    print(f"mlcal {mlcal.__version__}, numpy {np.__version__}, {os.cpu_count()} CPUs; "
          f"best of {args.repeats} after a warm-up")
    header = (f"{'N':>9} {'method':<11} {'map':<8} {'size':>7} {'fit s':>9} {'fit ratio':>10} "
              f"{'predict s':>10} {'pred ratio':>11} {'peak MiB':>9}")
    print(header)
    print("-" * len(header))
    for n in (int(v) for v in args.sizes):
        s, y, fresh = make_data(n)
        repeats = args.repeats if n < 1_000_000 else max(1, args.repeats - 1)
        t_ref = best_time(lambda: IsotonicRegression(out_of_bounds="clip").fit(s, y), repeats)
        print(f"{n:>9} {'sklearn-iso':<11} {'':<8} {'':>7} {t_ref:>9.4f} {1.0:>10.2f}")
        for name in methods:
            cal = mlcal.get_calibrator(name)
            t_fit = best_time(lambda: cal.fit(s, y), repeats)
            m = cal.map_
            t_pred = best_time(lambda: cal.predict(fresh), repeats)
            bare = bare_numpy(m)
            t_bare = best_time(lambda: bare(fresh), repeats)
            mem = float("nan") if args.no_memory else peak_fit_mib(name, s, y)
            print(f"{n:>9} {name:<11} {m.kind:<8} {m.size:>7} {t_fit:>9.4f} {t_fit / t_ref:>10.2f} "
                  f"{t_pred:>10.4f} {t_pred / t_bare:>11.2f} {mem:>9.1f}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
