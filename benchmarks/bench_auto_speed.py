"""Fit time of the binary ``auto`` against mlcal's isotonic regression on the same data, in the
same run, and where ``auto``'s time goes.

CPU time of this process (``time.process_time``: the machine is shared, and other processes'
load should not count), median of ``--repeats`` runs after a warm-up, the methods interleaved
in every repeat so that a slow spell hits all of them. Phases of ``auto``: the CV units
(sort, collapse, cells, folds), each candidate's fold fits, and the refit of the chosen
method on all rows.

    PYTHONPATH=. python benchmarks/bench_auto_speed.py --sizes 10000 100000 --repeats 7
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import mlcal

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from bench_quality import simulated  # noqa: E402


def cpu(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def phases(auto: mlcal.AutoCalibrator, s: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """CPU seconds of each phase of ``auto.fit`` (as fit runs them)."""
    out = {}
    order = np.argsort(s, kind="stable")
    ss, zz, ww = s[order], y[order].astype(float), np.ones(s.size)
    t0 = time.process_time()
    x, pos, neg, folds, k, unit, _ = auto.cv_units(ss, zz, ww, int(auto.seed))
    out["cv units"] = time.process_time() - t0
    for name in auto.candidate_names():
        out[f"cv {name}"] = cpu(lambda: auto._out_of_fold(name, x, pos, neg, folds, k,
                                                                unit == "cells"))
    out[f"refit {auto.chosen_}"] = cpu(lambda: auto.candidate(auto.chosen_).fit(ss, zz, ww))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--kinds", nargs="+", default=["sim-beta", "sim-overconfident"])
    args = ap.parse_args(argv)
    print("| data | N | mlcal isotonic ms | auto ms | auto / isotonic | chosen |")
    print("|---|---|---|---|---|---|")
    breakdown = []
    for kind in args.kinds:
        for n in (int(v) for v in args.sizes):
            s, y = simulated(kind, n, np.random.default_rng(0))
            auto = mlcal.AutoCalibrator()
            auto.fit(s, y)
            mlcal.Isotonic().fit(s, y)   # warm-up (numba kernels, caches)
            iso, aut = [], []
            for _ in range(args.repeats):
                iso.append(cpu(lambda: mlcal.Isotonic().fit(s, y)))
                aut.append(cpu(lambda: auto.fit(s, y)))
            ti, ta = float(np.median(iso)), float(np.median(aut))
            print(f"| {kind} | {n:g} | {ti * 1e3:.1f} | {ta * 1e3:.1f} | {ta / ti:.2f} | "
                  f"{auto.chosen_} |")
            ph = [phases(auto, s, y) for _ in range(3)]
            breakdown.append((kind, n, ti, {key: float(np.median([p[key] for p in ph]))
                                            for key in ph[0]}))
    print("\nphases of auto (median of 3, CPU ms and / isotonic of the same data)\n")
    for kind, n, ti, ph in breakdown:
        print(f"{kind} N={n:g}: " + ", ".join(f"{key} {v * 1e3:.1f} ({v / ti:.2f})"
                                               for key, v in ph.items()))


if __name__ == "__main__":
    main()
