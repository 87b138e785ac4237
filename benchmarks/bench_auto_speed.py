"""Fit time of the binary ``auto`` against mlcal's isotonic regression on the same data, in the
same run, and where ``auto``'s time goes.

CPU time of this process (``time.process_time``: the machine is shared, and other processes'
load should not count), median of ``--repeats`` runs after a warm-up, the methods interleaved
in every repeat so that a slow spell hits all of them. Phases of ``auto``: the CV units
(sort, collapse, cells, folds), each candidate's fold fits, and the refit of the chosen
method on all rows.

    PYTHONPATH=. python benchmarks/bench_auto_speed.py --sizes 10000 100000 --repeats 7

``--trees A B``: compare source trees (e.g. ``/work/main`` and a branch's worktree) in one run.
Each tree's mlcal runs in a worker process of its own (``PYTHONPATH=<tree>``); every repeat
asks each worker in turn for one isotonic fit and one ``auto`` fit (CPU time of the worker), so
a slow spell of the machine hits both trees alike. Medians per tree, and the ratio of the
trees' ``auto / isotonic``.

``--anchor``: also ``AutoCalibrator(anchor="beta-temperature")`` (the opt-in anchor,
docs/auto.md), interleaved in the same repeats, with its ratio to isotonic and to ``auto``;
with ``--trees``, each worker also fits the anchored ``auto`` in every repeat (its median and
ratio to the pooled isotonic median, and its change in CV log loss against the first tree).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

import mlcal
from mlcal._solvers.ties import sort_and_collapse
from mlcal.calibrators.output_floor import data_floor

try:   # a tree before the shared clamped logs (--trees runs this script on older trees too)
    from mlcal.maps.binary import sharing_clamped_logs
except ImportError:
    from contextlib import nullcontext as sharing_clamped_logs

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
    points = sort_and_collapse(ss, zz, ww)
    x, pos, neg, folds, k, unit, _ = auto.cv_units(ss, zz, ww, int(auto.seed), points=points)
    out["cv units"] = time.process_time() - t0
    train_cells = {}   # shared by the candidates, as in fit (the first one builds them)
    with sharing_clamped_logs():   # as in fit
        for name in auto.candidate_names():
            out[f"cv {name}"] = cpu(lambda: auto._out_of_fold(name, x, pos, neg, folds, k,
                                                                unit == "cells", train_cells))
    # as fit refits: on the collapsed points it already has
    out[f"refit {auto.chosen_}"] = cpu(lambda: auto.candidate(auto.chosen_)._fit_collapsed(
        *points, ss, data_floor(ww)))
    return out


def _record(auto: mlcal.AutoCalibrator) -> dict:
    """The choice, the CV log losses and the chosen map of a fitted ``auto``."""
    return {"chosen": auto.chosen_,
            "cv": {r["method"]: r.get("cv_log_loss") for r in auto.selection_["candidates"]},
            "map": repr(auto.map_)}


def worker() -> None:
    """Serve ``{"kind", "n", "anchor"}`` requests on stdin: one isotonic and one auto fit (and
    with ``anchor`` one anchored auto fit), CPU seconds (and auto's choice) as one JSON line on
    stdout."""
    data = {}
    for line in sys.stdin:
        req = json.loads(line)
        key = (req["kind"], int(req["n"]))
        if key not in data:
            s, y = simulated(key[0], key[1], np.random.default_rng(0))
            mlcal.AutoCalibrator().fit(s, y)   # warm-up (numba kernels, caches)
            mlcal.Isotonic().fit(s, y)
            data[key] = (s, y)
        s, y = data[key]
        auto = mlcal.AutoCalibrator()
        ti = cpu(lambda: mlcal.Isotonic().fit(s, y))
        ta = cpu(lambda: auto.fit(s, y))
        out = {"iso": ti, "auto": ta, **_record(auto)}
        if req.get("anchor"):
            anchored = mlcal.AutoCalibrator(anchor="beta-temperature")
            out["anchor"] = cpu(lambda: anchored.fit(s, y))
            out["anchored"] = _record(anchored)
        print(json.dumps(out), flush=True)


def compare_trees(trees: list[str], kinds: list[str], sizes: list[int], repeats: int,
                  anchor: bool = False) -> None:
    """Interleaved medians of isotonic and auto per source tree (module docstring)."""
    procs = []
    for tree in trees:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                      env=env, cwd=os.path.abspath(tree)))

    def ask(proc, kind, n):
        proc.stdin.write(json.dumps({"kind": kind, "n": n, "anchor": anchor}) + "\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    print("| data | N | tree | isotonic ms | auto ms | auto / isotonic (own) | "
          "auto / isotonic (pooled) | auto vs first tree | chosen | "
          "max CV log-loss change vs first tree |" +
          (" auto+anchor ms | auto+anchor / isotonic (pooled) | auto+anchor vs first tree | "
           "chosen | max CV log-loss change vs first tree | same map as first tree |"
           if anchor else ""))
    print("|---|---|---|---|---|---|---|---|---|---|" + ("---|---|---|---|---|---|"
                                                       if anchor else ""))
    for kind in kinds:
        for n in sizes:
            runs = [[] for _ in trees]
            for proc in procs:
                ask(proc, kind, n)   # warm-up
            for r in range(repeats):
                order = range(len(procs)) if r % 2 == 0 else reversed(range(len(procs)))
                for i in order:
                    runs[i].append(ask(procs[i], kind, n))
            first = None

            def moved(cv, ref):
                return max((abs(cv[m] - ref[m]) for m in cv
                            if cv[m] is not None and ref.get(m) is not None),
                           default=float("nan"))

            # isotonic's code is the same in every tree: the median over all trees' runs is
            # the steadier unit under a varying load
            pooled = float(np.median([v["iso"] for res in runs for v in res]))
            for tree, res in zip(trees, runs):
                ti = float(np.median([v["iso"] for v in res]))
                ta = float(np.median([v["auto"] for v in res]))
                tn = float(np.median([v["anchor"] for v in res])) if anchor else math.nan
                if first is None:
                    first = (ta, res[-1], tn)
                row = (f"| {kind} | {n:g} | {tree} | {ti * 1e3:.1f} | {ta * 1e3:.1f} | "
                       f"{ta / ti:.2f} | {ta / pooled:.2f} | {ta / first[0]:.2f} | "
                       f"{res[-1]['chosen']} | {moved(res[-1]['cv'], first[1]['cv']):.1e} |")
                if anchor:
                    got, ref = res[-1]["anchored"], first[1]["anchored"]
                    row += (f" {tn * 1e3:.1f} | {tn / pooled:.2f} | {tn / first[2]:.2f} | "
                            f"{got['chosen']} | {moved(got['cv'], ref['cv']):.1e} | "
                            f"{got['map'] == ref['map'] and res[-1]['map'] == first[1]['map']} |")
                print(row, flush=True)
    for proc in procs:
        proc.stdin.close()
        proc.wait()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--kinds", nargs="+", default=["sim-beta", "sim-overconfident"])
    ap.add_argument("--trees", nargs="+", default=None,
                    help="source trees to compare in one interleaved run (module docstring)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--anchor", action="store_true",
                    help="also time auto with anchor='beta-temperature' (interleaved)")
    args = ap.parse_args(argv)
    if args.worker:
        worker()
        return
    if args.trees:
        compare_trees(args.trees, args.kinds, [int(v) for v in args.sizes], args.repeats,
                      args.anchor)
        return
    if args.anchor:
        print("| data | N | mlcal isotonic ms | auto ms | auto / isotonic | chosen | "
              "auto+anchor ms | auto+anchor / isotonic | auto+anchor / auto | chosen |")
        print("|---|---|---|---|---|---|---|---|---|---|")
    else:
        print("| data | N | mlcal isotonic ms | auto ms | auto / isotonic | chosen |")
        print("|---|---|---|---|---|---|")
    breakdown = []
    for kind in args.kinds:
        for n in (int(v) for v in args.sizes):
            s, y = simulated(kind, n, np.random.default_rng(0))
            auto = mlcal.AutoCalibrator()
            auto.fit(s, y)
            mlcal.Isotonic().fit(s, y)   # warm-up (numba kernels, caches)
            anchored = mlcal.AutoCalibrator(anchor="beta-temperature")
            if args.anchor:
                anchored.fit(s, y)
            iso, aut, anc = [], [], []
            for r in range(args.repeats):
                iso.append(cpu(lambda: mlcal.Isotonic().fit(s, y)))
                if args.anchor and r % 2:
                    anc.append(cpu(lambda: anchored.fit(s, y)))
                aut.append(cpu(lambda: auto.fit(s, y)))
                if args.anchor and not r % 2:
                    anc.append(cpu(lambda: anchored.fit(s, y)))
            ti, ta = float(np.median(iso)), float(np.median(aut))
            extra = ""
            if args.anchor:
                tn = float(np.median(anc))
                extra = (f" {tn * 1e3:.1f} | {tn / ti:.2f} | {tn / ta:.2f} | "
                         f"{anchored.chosen_} |")
            print(f"| {kind} | {n:g} | {ti * 1e3:.1f} | {ta * 1e3:.1f} | {ta / ti:.2f} | "
                  f"{auto.chosen_} |" + extra, flush=True)
            ph = [phases(auto, s, y) for _ in range(3)]
            breakdown.append((kind, n, ti, {key: float(np.median([p[key] for p in ph]))
                                            for key in ph[0]}))
    print("\nphases of auto (median of 3, CPU ms and / isotonic of the same data)\n")
    for kind, n, ti, ph in breakdown:
        print(f"{kind} N={n:g}: " + ", ".join(f"{key} {v * 1e3:.1f} ({v / ti:.2f})"
                                               for key, v in ph.items()))


if __name__ == "__main__":
    main()
