"""Fit and predict time, peak memory and JSON size of every registered calibrator, against
references measured in the same run.

    python benchmarks/bench_calibrators.py [--sizes 1e4 1e5 1e6 5e6] [--methods isotonic enir ...]
                                           [--uncapped]

For each N the reference is scikit-learn's ``IsotonicRegression(out_of_bounds="clip").fit`` on the
same data; ``fit ratio`` is the calibrator's fit time over that reference. ``predict ratio`` is
mlcal's ``predict`` over a bare numpy evaluation of the same map (``searchsorted`` + gather,
``np.interp``, or the logistic formula) on the same N fresh scores. Times are the best of
``--repeats`` runs after one warm-up (numba compilation is excluded; one run from 5M rows up).

``size`` is the map's size after the size cap (``max_map_size``), ``orig`` its size before and
``cap err`` the measured sup-norm error of the reduction (``map_reduction_``). ``fit MiB`` is the
peak resident-memory growth of one fit and ``+json MiB`` that of the fit followed by
``to_json()``, both measured in a fresh interpreter per method; ``JSON KB`` is the document's
length.
With ``--uncapped`` every method whose map was reduced gets a second row fitted with
``max_map_size=None`` (the map as the method computes it: the "before" figures).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
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


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _memory_child(name: str, params_json: str, n: int) -> None:
    """Run in a fresh interpreter: fit once on the benchmark data and print the peak RSS growth
    (KiB) of the fit and of the fit plus ``to_json()``.

    The warm-up fit loads (or compiles) the numba kernels; the kernel's high-water mark is then
    reset to the current RSS (``/proc/self/clear_refs``), so compilation and imports do not count.
    """
    params = json.loads(params_json)
    s, y, _ = make_data(n)
    mlcal.get_calibrator(name, **params).fit(s[:2000], y[:2000])
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")                                  # VmHWM := VmRSS
    base = _status_kib("VmRSS")
    cal = mlcal.get_calibrator(name, **params).fit(s, y)
    peak_fit = _status_kib("VmHWM")
    cal.to_json()
    peak_json = _status_kib("VmHWM")
    print(peak_fit - base, peak_json - base)


def peak_fit_mib(name: str, params: dict, n: int) -> tuple[float, float]:
    """Peak RSS growth (MiB) of one fit, and of the fit plus ``to_json()``, each method in a
    fresh interpreter: a forked child would inherit the heap the parent's earlier fits left
    resident and under-report."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--memory-child", name,
                          json.dumps(params), str(n)], capture_output=True, text=True, check=True)
    fit_kib, json_kib = (int(v) for v in out.stdout.split()[-2:])
    return fit_kib / 1024, json_kib / 1024


def bench_one(label: str, name: str, params: dict, s, y, fresh, t_ref: float, repeats: int,
              memory: bool):
    """Time, memory and JSON size of one calibrator; prints its row and returns the fitted one."""
    cal = mlcal.get_calibrator(name, **params)
    t_fit = best_time(lambda: cal.fit(s, y), repeats)
    m = cal.map_
    info = cal.map_reduction_
    t_pred = best_time(lambda: cal.predict(fresh), repeats)
    bare = bare_numpy(m)
    t_bare = best_time(lambda: bare(fresh), repeats)
    mem_fit, mem_json = peak_fit_mib(name, params, len(s)) if memory else (float("nan"),) * 2
    json_kb = len(cal.to_json()) / 1000
    print(f"{len(s):>9} {label:<14} {m.kind:<6} {m.size:>6} {info.original_size:>8} "
          f"{info.max_error:>8.1e} {t_fit:>8.3f} {t_fit / t_ref:>6.2f} {t_pred:>9.4f} "
          f"{t_pred / t_bare:>6.2f} {mem_fit:>8.1f} {mem_json:>9.1f} {json_kb:>9.1f}")
    return cal


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e4, 1e5, 1e6])
    parser.add_argument("--methods", nargs="+", default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-memory", action="store_true", help="skip the memory runs")
    parser.add_argument("--uncapped", action="store_true",
                        help="add a max_map_size=None row for every method whose map was reduced")
    parser.add_argument("--memory-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        name, params_json, n = args.memory_child
        _memory_child(name, params_json, int(n))
        return 0
    methods = args.methods or mlcal.available_calibrators()
    print(f"mlcal {mlcal.__version__}, numpy {np.__version__}, {os.cpu_count()} CPUs; "
          f"best of {args.repeats} after a warm-up (1 from 5M rows)")
    header = (f"{'N':>9} {'method':<14} {'map':<6} {'size':>6} {'orig':>8} {'cap err':>8} "
              f"{'fit s':>8} {'ratio':>6} {'predict s':>9} {'ratio':>6} {'fit MiB':>8} "
              f"{'+json MiB':>9} {'JSON KB':>9}")
    print(header)
    print("-" * len(header))
    for n in (int(v) for v in args.sizes):
        s, y, fresh = make_data(n)
        repeats = args.repeats if n < 1_000_000 else max(1, args.repeats - 1)
        if n >= 5_000_000:
            repeats = 1
        t_ref = best_time(lambda: IsotonicRegression(out_of_bounds="clip").fit(s, y), repeats)
        print(f"{n:>9} {'sklearn-iso':<14} {'':<6} {'':>6} {'':>8} {'':>8} {t_ref:>8.3f} "
              f"{1.0:>6.2f}")
        for name in methods:
            cal = bench_one(name, name, {}, s, y, fresh, t_ref, repeats, not args.no_memory)
            if args.uncapped and cal.map_reduction_.reduced:
                bench_one(f"{name} (no cap)", name, {"max_map_size": None}, s, y, fresh, t_ref,
                          repeats, not args.no_memory)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
