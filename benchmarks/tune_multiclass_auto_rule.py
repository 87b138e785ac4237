"""Selection rules of the multiclass ``auto`` replayed on the quality benchmark's tasks.

    python benchmarks/tune_multiclass_auto_rule.py --quick      # 12 tasks (the quick suite)
    python benchmarks/tune_multiclass_auto_rule.py              # the 14-task suite: digits with
                                                                # LR/NB/RF/HGB, sim-K 5/10/20

Per task (``bench_quality_multiclass.tasks``): every structured candidate's out-of-fold losses
(the same stratified folds and ``MulticlassAuto._out_of_fold`` as ``auto``; fold seeds 0 and 1)
and its held-out log loss after the refit on all calibration rows. One-vs-rest ``auto`` is left
out for its fit time (it ranks far behind on the quality benchmark). Each rule then picks a
candidate per task from the CV losses alone, and the table prints the mean held-out log loss
relative to uncalibrated (percent) of every fixed candidate and of every rule, with the choices.
Rules: ``lowest`` (the lowest CV log loss), ``lowest, 2 fold seeds`` (the CV losses of both
fold seeds pooled), and ``richest within c SE`` (the first of matrix, SMS, SVS, ts-mix,
temperature within ``c`` paired standard errors of the lowest: ``MulticlassAuto``'s default
with c = 2). Where no CV is possible the rule's first candidate is used, as ``auto`` does.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import bench_quality_multiclass as B
from mlcal.calibrators.auto import cv_statistics
from mlcal.calibrators.multiclass_auto import (MulticlassAuto, candidate_calibrator,
                                               class_major_order, default_folds,
                                               stratified_folds)
from mlcal.metrics.multiclass import multiclass_log_loss

RICHEST_FIRST = ["matrix", "sms", "svs", "ts-mix", "temperature"]
SIMPLEST_FIRST = RICHEST_FIRST[::-1]
FOLD_SEEDS = (0, 1)


def collect(cfg: dict) -> list[dict]:
    out = []
    for name, k, s_cal, y_cal, s_te, y_te in B.tasks(cfg):
        s, y = np.asarray(s_cal, dtype=np.float64), np.asarray(y_cal)
        w = np.ones(len(y))
        order = class_major_order(s, y, w)
        s, y, w = s[order], y[order], w[order]
        n_folds = default_folds(y, w, k)
        cv = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for seed in FOLD_SEEDS:
                folds = stratified_folds(s, y, w, n_folds, seed)
                shared: dict = {}
                cv[seed] = {n: MulticlassAuto._out_of_fold(n, "probabilities", s, y, w, folds,
                                                           n_folds, shared)
                            for n in RICHEST_FIRST}
            test = {}
            for n in RICHEST_FIRST:
                p = candidate_calibrator(n, "probabilities").fit(s, y).predict_proba(s_te)
                test[n] = multiclass_log_loss(y_te, p)
        test["uncalibrated"] = multiclass_log_loss(y_te, s_te)
        out.append({"name": f"{name} N={len(y)}", "cv": cv, "test": test})
        print(f"  {name} N_cal={len(y)} collected", flush=True)
    return out


def choose(task: dict, seeds: tuple[int, ...], se_rule: float, order: list[str]) -> str:
    losses = {}
    for n in RICHEST_FIRST:
        parts = [task["cv"][s][n] for s in seeds]
        if not any(isinstance(p, str) for p in parts):
            losses[n] = (np.concatenate([p[0][0] for p in parts]),)
    if not losses:
        return order[0]
    w = (np.ones(losses[next(iter(losses))][0].size),)
    mean, se, best = cv_statistics(losses, w, SIMPLEST_FIRST)
    return next(n for n in order if n in losses and mean[n] - mean[best] <= se_rule * se[n])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    cfg = dict(B.QUICK)
    if not args.quick:
        cfg = dict(B.FULL, seeds=1, sizes=(200, 1000), classes=(5, 10, 20))
    data = collect(cfg)

    def rel(t, n):
        return 100.0 * (t["test"][n] / t["test"]["uncalibrated"] - 1.0)

    print(f"\n{len(data)} tasks; mean held-out log loss vs uncalibrated (%), and the choices")
    for n in RICHEST_FIRST:
        print(f"  fixed {n:<34}{np.mean([rel(t, n) for t in data]):+9.3f}")
    rules = {"lowest": ((0,), 0.0, SIMPLEST_FIRST),
             "lowest, 2 fold seeds": (FOLD_SEEDS, 0.0, SIMPLEST_FIRST)}
    for c in (0.5, 1.0, 1.5, 2.0, 3.0):
        rules[f"richest within {c:g} SE"] = ((0,), c, RICHEST_FIRST)
        rules[f"richest within {c:g} SE, 2 fold seeds"] = (FOLD_SEEDS, c, RICHEST_FIRST)
    for label, (seeds, c, order) in rules.items():
        chosen = [choose(t, seeds, c, order) for t in data]
        mean = np.mean([rel(t, n) for t, n in zip(data, chosen)])
        print(f"  rule {label:<35}{mean:+9.3f}   " + " ".join(n[:3] for n in chosen))


if __name__ == "__main__":
    main()
