"""Selection rules of the binary ``auto`` compared on the bench_quality binary suite.

For every task (bench_quality.py's linear/NB/SVM and tree bases, optionally the simulations)
this script cross-validates every candidate once per fold seed exactly as ``auto`` does
(:meth:`AutoCalibrator.cv_units`, :meth:`AutoCalibrator._out_of_fold`) and fits every candidate
on the whole calibration set (as ``auto`` refits it) to score it on the held-out test set. A
selection rule then only picks a candidate from the recorded CV losses, so many rules are
compared on the same fits:

* ``one-se(m)``: the simplest candidate within ``m`` standard errors of the lowest CV loss
  (``m = 0``: the lowest CV log loss);
* ``xR``: the CV repeated over ``R`` fold seeds (per-unit losses averaged over the repeats);
* ``+quad``: quadratic scaling added to the seven candidates (after beta, as ``auto`` would
  order it; its fold fits are ``auto``'s own, :meth:`AutoCalibrator._out_of_fold`);
* ``+va``: Venn-Abers added to the candidates.

Printed per rule: auto's mean held-out log loss and Brier per group, its mean log-loss rank
among the candidates and itself (per task, ties averaged), and the largest margin by which it
loses to a fixed candidate's mean log loss (``<= 0`` is the goal: never worse than its own best
candidate on average). Then the per-fold-seed tables of docs/auto.md for the seven candidates
and for the seven plus quadratic scaling, and the two ``auto`` variants ranked together per
task among the eight candidates and each other.

    PYTHONPATH=. python benchmarks/tune_auto_rule.py --sizes 200 1000 --seeds 2
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
import warnings

import numpy as np
from scipy.stats import rankdata

import mlcal
from mlcal.calibrators.auto import cv_statistics, select_one_se
from mlcal.metrics import brier, log_loss

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from bench_quality import real_tasks, sim_tasks  # noqa: E402

#: the seven defaults of auto before quadratic scaling was measured (fixed here so the
#: comparison does not move when DEFAULT_CANDIDATES does)
SEVEN = ("platt", "platt-logit", "temperature", "beta", "spline", "isotonic", "elite")
#: every candidate collected: the seven, quadratic scaling (after beta, as in auto's
#: preference order) and Venn-Abers
CANDIDATES = ("platt", "platt-logit", "temperature", "beta", "quadratic", "spline", "isotonic",
              "elite", "venn-abers")
N_REPEATS = 3


def collect(tasks, candidates=CANDIDATES, n_repeats=N_REPEATS):
    auto = mlcal.AutoCalibrator(candidates=list(candidates))
    out = []
    for i, task in enumerate(tasks):
        s = np.asarray(task.s_cal, dtype=float)
        z = np.asarray(task.y_cal, dtype=float)
        order = np.argsort(s, kind="stable")
        s, z = s[order], z[order]
        w = np.ones_like(s)
        reps = []
        for seed in range(n_repeats):
            x, pos, neg, folds, k, unit, _ = auto.cv_units(s, z, w, seed)
            cv = {}
            for name in candidates:
                lp, ln, sizes, err = auto._out_of_fold(name, x, pos, neg, folds, k)
                cv[name] = err if err is not None else ((lp, ln), float(np.mean(sizes)))
            reps.append({"x": x, "pos": pos, "neg": neg, "cv": cv})
        held = {}
        for name in candidates:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    p = auto.candidate(name).fit(s, z).predict(task.s_test)
                held[name] = (log_loss(task.y_test, p), brier(task.y_test, p))
            except Exception as exc:   # noqa: BLE001  recorded, not fatal
                held[name] = (np.inf, np.inf)
                print(f"  {name} failed on {task.name}: {exc}", file=sys.stderr)
        out.append({"task": task.name, "n": task.n_cal, "group": task.group, "reps": reps,
                    "held": held})
        print(f"[{i + 1}/{len(tasks)}] {task.name} N={task.n_cal}", file=sys.stderr)
    return out


def combine(reps, n_repeats, names):
    """Per-unit CV losses over the first ``n_repeats`` fold seeds: averaged when the units
    coincide (points, cells), else stacked with weights divided by the repeats."""
    reps = reps[:n_repeats]
    same = all(np.array_equal(r["x"], reps[0]["x"]) for r in reps)
    results = {}
    for name in names:
        outs = [r["cv"][name] for r in reps]
        if any(isinstance(o, str) for o in outs):
            results[name] = next(o for o in outs if isinstance(o, str))
            continue
        size = float(np.mean([o[1] for o in outs]))
        if same:
            lp = np.mean([o[0][0] for o in outs], axis=0)
            ln = np.mean([o[0][1] for o in outs], axis=0)
        else:
            lp = np.concatenate([o[0][0] for o in outs])
            ln = np.concatenate([o[0][1] for o in outs])
        results[name] = ((lp, ln), size)
    if same:
        weights = (reps[0]["pos"], reps[0]["neg"])
    else:
        weights = (np.concatenate([r["pos"] for r in reps]) / len(reps),
                   np.concatenate([r["neg"] for r in reps]) / len(reps))
    return results, weights


def choose(record, names, se_rule, n_repeats):
    results, weights = combine(record["reps"], n_repeats, names)
    return select_one_se(names, results, weights, se_rule)["chosen"]


RULES = {}
BASE = list(SEVEN)
QUAD = [c for c in CANDIDATES if c != "venn-abers"]
for m in (0.0, 0.25, 0.5, 1.0):
    for r in (1, 3):
        RULES[f"one-se({m:g}) x{r}"] = (BASE, m, r)
        RULES[f"one-se({m:g}) x{r} +quad"] = (QUAD, m, r)
        RULES[f"one-se({m:g}) x{r} +va"] = (BASE + ["venn-abers"], m, r)
        RULES[f"one-se({m:g}) x{r} +quad+va"] = (list(CANDIDATES), m, r)


def analyse(data, groups):
    print("| rule | group | mean log loss | mean Brier | LL rank | worst margin to a "
          "candidate (which) | chosen most |")
    print("|---|---|---|---|---|---|---|")
    for rule, (names, m, r) in RULES.items():
        for group in groups:
            recs = [d for d in data if d["group"] == group]
            if not recs:
                continue
            ll, br, ranks, counts = [], [], [], {}
            cand_ll = {n: [] for n in CANDIDATES}
            for d in recs:
                c = choose(d, names, m, r)
                counts[c] = counts.get(c, 0) + 1
                ll.append(d["held"][c][0])
                br.append(d["held"][c][1])
                for n in CANDIDATES:
                    cand_ll[n].append(d["held"][n][0])
                row = [d["held"][n][0] for n in names] + [d["held"][c][0]]
                ranks.append(rankdata(row)[-1])
            margins = {n: np.mean(ll) - np.mean(v) for n, v in cand_ll.items() if n in names}
            worst = max(margins, key=margins.get)
            top = max(counts, key=counts.get)
            print(f"| {rule} | {group} ({len(recs)}) | {np.mean(ll):.5f} | {np.mean(br):.5f} | "
                  f"{np.mean(ranks):.2f} of {len(names) + 1} | {margins[worst]:+.5f} "
                  f"({worst}) | {top} {counts[top]} |")
    print("\nfixed candidates (mean held-out log loss per group):")
    for group in groups:
        recs = [d for d in data if d["group"] == group]
        if recs:
            print(group, {n: round(float(np.mean([d["held"][n][0] for d in recs])), 5)
                          for n in CANDIDATES})


def by_fold_seed(data, groups, multipliers=(0.0, 0.1, 0.25, 0.5, 0.75, 1.0), names=BASE,
                 label="the seven candidates"):
    """The tables of docs/auto.md: per multiplier and group, auto's mean held-out log loss minus
    the best fixed candidate's (of ``names``) under each fold seed alone, auto's mean held-out
    log loss and its mean log-loss rank among ``names`` and itself (both averaged over the fold
    seeds)."""
    print(f"\n{label}: {', '.join(names)}")
    print("| se_rule | group | margin to the best candidate per fold seed | log loss (mean) | "
          "rank (mean) |")
    print("|---|---|---|---|---|")
    n_seeds = len(data[0]["reps"])
    for m in multipliers:
        for group in groups:
            recs = [d for d in data if d["group"] == group]
            if not recs:
                continue
            best = min(np.mean([d["held"][n][0] for d in recs]) for n in names)
            margins, ranks, lls = [], [], []
            for j in range(n_seeds):
                ll, rk = [], []
                for d in recs:
                    c = choose(dict(d, reps=d["reps"][j:j + 1]), names, m, 1)
                    ll.append(d["held"][c][0])
                    rk.append(rankdata([d["held"][n][0] for n in names] + [ll[-1]])[-1])
                margins.append(np.mean(ll) - best)
                lls.append(np.mean(ll))
                ranks.append(np.mean(rk))
            print(f"| {m:g} | {group} | " + " / ".join(f"{v:+.4f}" for v in margins) +
                  f" | {np.mean(lls):.5f} | {np.mean(ranks):.2f} of {len(names) + 1} |")


def shared_rank(data, groups, multipliers=(0.25, 0.5, 1.0)):
    """auto with and without quadratic scaling ranked together, per task, among the eight
    candidates and both auto variants (per fold seed, then averaged): the rank that compares
    the two variants on one scale."""
    print("\n| se_rule | group | rank of auto (7) | rank of auto (+quadratic) | of |")
    print("|---|---|---|---|---|")
    n_seeds = len(data[0]["reps"])
    for m in multipliers:
        for group in groups:
            recs = [d for d in data if d["group"] == group]
            if not recs:
                continue
            r7, r8 = [], []
            for j in range(n_seeds):
                for d in recs:
                    one = dict(d, reps=d["reps"][j:j + 1])
                    a7 = d["held"][choose(one, BASE, m, 1)][0]
                    a8 = d["held"][choose(one, QUAD, m, 1)][0]
                    rk = rankdata([d["held"][n][0] for n in QUAD] + [a7, a8])
                    r7.append(rk[-2])
                    r8.append(rk[-1])
            print(f"| {m:g} | {group} | {np.mean(r7):.2f} | {np.mean(r8):.2f} | "
                  f"{len(QUAD) + 2} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[200, 1000])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--groups", nargs="+", default=["linear", "trees"],
                    choices=("sim", "linear", "trees"))
    ap.add_argument("--save", metavar="PATH", help="pickle the collected fits to PATH")
    ap.add_argument("--load", metavar="PATH",
                    help="analyse a collection saved by --save instead (a pickle: load only "
                         "files this script wrote)")
    args = ap.parse_args(argv)
    if args.load:
        with open(args.load, "rb") as fh:
            data = pickle.load(fh)
    else:
        start = time.perf_counter()
        sizes = [int(n) for n in args.sizes]
        tasks = list(sim_tasks(sizes, args.seeds, 20_000)) if "sim" in args.groups else []
        families = [g for g in args.groups if g != "sim"]
        if families:
            tasks += list(real_tasks(sizes, args.seeds, families))
        data = collect(tasks)
        print(f"collected {len(tasks)} tasks in {time.perf_counter() - start:.0f} s",
              file=sys.stderr)
        if args.save:
            with open(args.save, "wb") as fh:
                pickle.dump(data, fh)
    analyse(data, args.groups)
    by_fold_seed(data, args.groups)
    by_fold_seed(data, args.groups, names=QUAD, label="with quadratic scaling")
    shared_rank(data, args.groups)


if __name__ == "__main__":
    main()
