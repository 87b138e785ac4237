"""Selection rules of the multiclass ``auto`` replayed on the quality benchmark's tasks.

    python benchmarks/tune_multiclass_auto_rule.py --quick      # 12 tasks (the quick suite)
    python benchmarks/tune_multiclass_auto_rule.py              # the 14-task suite: digits with
                                                                # LR/NB/RF/HGB, sim-K 5/10/20
    python benchmarks/tune_multiclass_auto_rule.py --full --part 0/2 --out a.json   # collect
    python benchmarks/tune_multiclass_auto_rule.py --full --part 1/2 --out b.json   # (parallel)
    python benchmarks/tune_multiclass_auto_rule.py --replay a.json b.json           # rank rules
    python benchmarks/tune_multiclass_auto_rule.py --check-auto   # replay vs MulticlassAuto

(Parallel parts on a shared machine: set ``OMP_NUM_THREADS=1``; OpenMP threads of the base
models and torch in several processes stalled the run.)

Per task (``bench_quality_multiclass.tasks``): every structured candidate's out-of-fold
probabilities (the same stratified folds, fold fits shared by the pairs that differ only by
the uniform mixture, and per-row CV log loss computed as ``MulticlassAuto._out_of_fold`` does;
fold seed 0, and 1 with ``--two-seeds``), from them the per-row CV log loss and CV Brier; the
held-out log loss and Brier after the refit on all calibration rows (in ``auto``'s class-major
row order); with ``--others`` (default with ``--full``) also every other method of
``bench_quality_multiclass`` (vector, probmetrics' SVS and SMS where installed, scikit-learn's,
uncalibrated; ``auto`` and one-vs-rest ``auto`` are left out for their fit time, and one-vs-rest
``auto`` is not a replayed candidate either). Each rule then picks a candidate per task from
the CV losses alone; ``auto`` under the rule is ranked (held-out log loss and Brier, 1 = best,
ties averaged) against the other methods, per group (all tasks, K >= 10, digits).

Rules (``c`` paired standard errors, ``cv_statistics`` as ``auto``): ``ll c`` (the first of
matrix, SMS, SVS, ts-mix, temperature within ``c`` SE of the lowest CV log loss:
``MulticlassAuto``'s default with c = 2), ``brier c`` (the same on CV Brier), ``both c`` (the
first listed candidate not worse than the best by more than ``c`` SE on both CV log loss and
CV Brier, i.e. within ``c`` SE on either), ``lowest`` (lowest CV log loss), ``fixed X``. Where
no CV is possible the rule's first candidate is used, as ``auto`` does.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import warnings

import numpy as np
from scipy.stats import rankdata

import bench_quality_multiclass as B
from mlcal._solvers.detmath import det_log_array
from mlcal.calibrators.auto import EPS, cv_statistics
from mlcal.calibrators.multiclass_auto import (_no_cv_reason, candidate_calibrator,
                                               class_major_order, default_folds, shared_fit,
                                               stratified_folds)
from mlcal.metrics.multiclass import multiclass_brier_per_row, multiclass_log_loss

RICHEST_FIRST = ["matrix", "sms", "svs", "ts-mix", "temperature"]
SIMPLEST_FIRST = RICHEST_FIRST[::-1]
OTHERS = ["vector", *B.PEERS, *(f"sk-{m}" for m in B.SKLEARN)]


def out_of_fold(name, s, y, w, folds, k, shared):
    """Out-of-fold probabilities of candidate ``name`` (``MulticlassAuto._out_of_fold``'s
    fits), or the error message that stopped it."""
    p_oof = np.empty_like(s)
    key = shared_fit(name)
    for f in range(k):
        train, test = folds != f, folds == f
        try:
            base = shared.get((key, f)) if key else None
            if base is not None:
                cal = candidate_calibrator(name, "probabilities")
                cal.map_ = dataclasses.replace(
                    base.map_, uniform_weight=cal._uniform_weight(w[train]))
                cal.n_classes_ = base.n_classes_
            else:
                cal = candidate_calibrator(name, "probabilities").fit(s[train], y[train],
                                                                      sample_weight=w[train])
                if key:
                    shared[(key, f)] = cal
            p_oof[test] = cal.predict_proba(s[test])
        except (ValueError, ArithmeticError, RuntimeError, np.linalg.LinAlgError) as exc:
            return f"{type(exc).__name__}: {exc}"
    return p_oof


def collect_task(name, k, s_cal, y_cal, s_te, y_te, seeds, others) -> dict:
    s, y = np.asarray(s_cal, dtype=np.float64), np.asarray(y_cal)
    w = np.ones(len(y))
    order = class_major_order(s, y, w)
    s, y, w = s[order], y[order], w[order]
    n_folds = default_folds(y, w, k)
    cv = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in seeds:
            folds = stratified_folds(s, y, w, n_folds, seed)
            if _no_cv_reason(y, w, folds, n_folds, k) is not None:
                continue
            shared: dict = {}
            cv[seed] = {}
            for n in RICHEST_FIRST:
                p = out_of_fold(n, s, y, w, folds, n_folds, shared)
                if isinstance(p, str):
                    cv[seed][n] = p
                    continue
                p_true = p[np.arange(len(y)), y]
                cv[seed][n] = {"ll": (-det_log_array(np.clip(p_true, EPS, 1.0))).tolist(),
                               "brier": multiclass_brier_per_row(y, p).tolist()}
        test = {}
        for n in RICHEST_FIRST:
            p = candidate_calibrator(n, "probabilities").fit(s, y, sample_weight=w
                                                             ).predict_proba(s_te)
            test[n] = p
    if others:
        probs, _ = B.predict_all(s_cal, y_cal, s_te, only=OTHERS)
        test.update({m: probs[m] for m in OTHERS})
    test["uncalibrated"] = s_te
    scores = {}
    for m, p in test.items():
        scores[m] = None if isinstance(p, str) else {
            "log_loss": multiclass_log_loss(y_te, p),
            "brier": float(np.mean(multiclass_brier_per_row(y_te, p)))}
    return {"name": name, "k": k, "n": len(y), "cv": {str(s_): v for s_, v in cv.items()},
            "test": scores}


def seed_major_tasks(cfg: dict):
    """``bench_quality_multiclass.tasks(cfg)``, the same tasks, with all tasks of seed 0 first,
    then seed 1, ...: a run stopped early holds every group."""
    X, y = B.load_digits(return_X_y=True)
    for seed in range(cfg["seeds"]):
        X_tr, X_rest, y_tr, y_rest = B.train_test_split(X, y, train_size=0.4, stratify=y,
                                                        random_state=seed)
        X_cal, X_te, y_cal, y_te = B.train_test_split(X_rest, y_rest, train_size=0.5,
                                                      stratify=y_rest, random_state=seed)
        for base_name in cfg["bases"]:
            model = B._base(base_name, seed).fit(X_tr, y_tr)
            s_cal, s_te = model.predict_proba(X_cal), model.predict_proba(X_te)
            for n in (200, len(y_cal)):
                yield f"digits/{base_name}", 10, s_cal[:n], y_cal[:n], s_te, y_te
        for k in cfg["classes"]:
            for n in cfg["sizes"]:
                s, y_all, _ = B.simulated(n + cfg["n_test"], k, seed)
                yield f"sim-{k}", k, s[:n], y_all[:n], s[n:], y_all[n:]


def collect(cfg: dict, seeds, others, part=(0, 1), out_path=None, start=0) -> list[dict]:
    """Every ``part[1]``-th task from the ``part[0]``-th (in seed-major order; from task
    ``start`` on), written to ``out_path`` after each task."""
    out = []
    for i, task in enumerate(seed_major_tasks(cfg)):
        if i < start or i % part[1] != part[0]:
            continue
        out.append(collect_task(*task, seeds, others))
        print(f"  [{i}] {task[0]} N_cal={len(task[3])} collected", flush=True)
        if out_path:
            with open(out_path, "w") as fh:
                json.dump(out, fh)
    return out


def _stats(task, seed, metric):
    cv = task["cv"].get(str(seed))
    if not cv:
        return None
    losses = {n: (np.asarray(cv[n][metric]),) for n in RICHEST_FIRST
              if not isinstance(cv[n], str)}
    if not losses:
        return None
    w = (np.ones(losses[next(iter(losses))][0].size),)
    return cv_statistics(losses, w, SIMPLEST_FIRST)


def choose(task: dict, rule: tuple, seed: int = 0) -> str:
    """The candidate ``rule`` picks on ``task`` from its CV losses (module docstring)."""
    kind, c = rule
    if kind == "fixed":
        return c
    order = SIMPLEST_FIRST if kind == "lowest" else RICHEST_FIRST
    ll = _stats(task, seed, "ll")
    if ll is None:
        return order[0]
    if kind == "lowest":
        return ll[2]
    br = _stats(task, seed, "brier")

    def within(stats, n):
        mean, se, best = stats
        return mean[n] - mean[best] <= c * se[n]

    for n in order:
        if n not in ll[0]:
            continue
        if ((kind == "ll" and within(ll, n)) or (kind == "brier" and within(br, n))
                or (kind == "both" and (within(ll, n) or within(br, n)))):
            return n
    raise AssertionError("the best candidate is always within")


def ranks(task: dict, chosen: str) -> dict[str, tuple[float, float]]:
    """Per method (``auto`` = ``chosen``'s held-out scores): held-out log-loss and Brier rank."""
    methods = {m: v for m, v in task["test"].items()}
    methods["auto"] = task["test"][chosen]
    names = list(methods)
    out = {m: [] for m in names}
    for metric in ("log_loss", "brier"):
        vals = [np.inf if methods[m] is None else methods[m][metric] for m in names]
        for m, r in zip(names, rankdata(vals)):
            out[m].append(float(r))
    return {m: tuple(v) for m, v in out.items()}


GROUPS = {"all": lambda t: True, "K >= 10": lambda t: t["k"] >= 10,
          "digits": lambda t: t["name"].startswith("digits")}


def replay(data: list[dict], rules: dict, shown=("ll 2", "ll 4", "both 2")) -> None:
    def rel(t, n, metric="log_loss"):
        return 100.0 * (t["test"][n][metric] / t["test"]["uncalibrated"][metric] - 1.0)

    has_others = all(m in data[0]["test"] for m in OTHERS)
    head = f"{'rule':<16}" + "".join(f"{g + ': LL rank':>17}{'Brier rank':>11}"
                                     for g in GROUPS)
    print(f"\n{len(data)} tasks; auto under each rule ranked against "
          f"{len(data[0]['test'])} methods"
          + ("" if has_others else " (structured candidates only: no --others)"))
    print(head + f"{'LL vs unc %':>12}{'Br vs unc %':>12}  choices (m s v t T)")
    print("-" * (len(head) + 44))
    for label, rule in rules.items():
        chosen = [choose(t, rule) for t in data]
        cells = ""
        for g, keep in GROUPS.items():
            rk = [ranks(t, n)["auto"] for t, n in zip(data, chosen) if keep(t)]
            cells += f"{np.mean([r[0] for r in rk]):>17.3f}{np.mean([r[1] for r in rk]):>11.3f}"
        counts = " ".join(str(chosen.count(n)) for n in RICHEST_FIRST)
        print(f"{label:<16}{cells}{np.mean([rel(t, n) for t, n in zip(data, chosen)]):>+12.4f}"
              f"{np.mean([rel(t, n, 'brier') for t, n in zip(data, chosen)]):>+12.4f}  {counts}")
    # the other methods' ranks with auto under a rule among them
    for label in shown:
        print(f"\nall methods, auto under '{label}' among them:")
        all_r = [ranks(t, choose(t, rules[label])) for t in data]
        for m in sorted(all_r[0], key=lambda m: np.mean([r[m][0] for r in all_r])):
            cells = ""
            for g, keep in GROUPS.items():
                rk = [r[m] for t, r in zip(data, all_r) if keep(t)]
                cells += (f"{np.mean([x[0] for x in rk]):>17.3f}"
                          f"{np.mean([x[1] for x in rk]):>11.3f}")
            ok = [t for t in data if t["test"][m if m != "auto" else "matrix"] is not None]
            ch = [choose(t, rules[label]) if m == "auto" else m for t in ok]
            print(f"{m:<16}{cells}{np.mean([rel(t, n) for t, n in zip(ok, ch)]):>+12.4f}"
                  f"{np.mean([rel(t, n, 'brier') for t, n in zip(ok, ch)]):>+12.4f}")
    print("\ntasks where the default rule ('ll 2') does not pick matrix: held-out "
          "(chosen - matrix) relative to matrix, %")
    for t in data:
        n = choose(t, ("ll", 2.0))
        if n == "matrix":
            continue
        d = {m: 100.0 * (t["test"][n][m] / t["test"]["matrix"][m] - 1.0)
             for m in ("log_loss", "brier")}
        r = ranks(t, n)
        print(f"  {t['name']:<12} K={t['k']:<3} N={t['n']:<5} -> {n:<11} LL {d['log_loss']:+7.3f}"
              f"  Brier {d['brier']:+7.3f}  ranks auto {r['auto'][0]:.1f}/{r['auto'][1]:.1f}"
              f", matrix {r['matrix'][0]:.1f}/{r['matrix'][1]:.1f}")


def check_auto(classes=(50, 100), n=1000, seeds=(0, 1), n_test=2000) -> bool:
    """On simulated tasks, the replayed rules ``both 2`` and ``ll 2`` pick what
    ``MulticlassAuto`` (default candidates) picks with ``criterion="both"`` and
    ``"log-loss"``; prints one line per task, returns whether all agree."""
    from mlcal.calibrators.multiclass_auto import MulticlassAuto

    print(f"{'task':<18}{'replay both 2':>14}{'auto both':>11}{'replay ll 2':>13}"
          f"{'auto log-loss':>15}")
    agree = True
    for k in classes:
        for seed in seeds:
            s, y_all, _ = B.simulated(n + n_test, k, seed)
            task = collect_task(f"sim-{k}", k, s[:n], y_all[:n], s[n:], y_all[n:], (0,), False)
            got = []
            for criterion in ("both", "log-loss"):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    auto = MulticlassAuto(criterion=criterion, input_kind="probabilities")
                    got.append(auto.fit(s[:n], y_all[:n]).chosen_)
            want = [choose(task, ("both", 2.0)), choose(task, ("ll", 2.0))]
            agree &= got == want
            print(f"{f'sim-{k} seed {seed}':<18}{want[0]:>14}{got[0]:>11}{want[1]:>13}"
                  f"{got[1]:>15}", flush=True)
    print("all agree" if agree else "DISAGREEMENT")
    return agree


def default_rules() -> dict:
    rules = {f"fixed {n}": ("fixed", n) for n in RICHEST_FIRST}
    rules["lowest"] = ("lowest", 0.0)
    for c in (1.0, 2.0, 3.0, 4.0, 6.0):
        rules[f"ll {c:g}"] = ("ll", c)
    for c in (1.0, 2.0, 3.0):
        rules[f"brier {c:g}"] = ("brier", c)
    for c in (1.0, 2.0, 3.0):
        rules[f"both {c:g}"] = ("both", c)
    return rules


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the quick suite (12 tasks)")
    ap.add_argument("--full", action="store_true", help="the full suite (69 tasks)")
    ap.add_argument("--others", action="store_true",
                    help="also the other methods' held-out scores (default with --full)")
    ap.add_argument("--two-seeds", action="store_true", help="also CV with fold seed 1")
    ap.add_argument("--part", default="0/1", help="i/n: collect every n-th task from the i-th")
    ap.add_argument("--start", type=int, default=0, help="skip the tasks before this one")
    ap.add_argument("--out", help="write the collected tasks to this JSON file")
    ap.add_argument("--replay", nargs="+", help="replay the rules on these collected files")
    ap.add_argument("--check-auto", action="store_true",
                    help="check the replayed rules against MulticlassAuto on simulated tasks")
    args = ap.parse_args(argv)
    if args.check_auto:
        raise SystemExit(0 if check_auto() else 1)
    if args.replay:
        data = [t for f in args.replay for t in json.load(open(f))]
    else:
        cfg = dict(B.QUICK) if args.quick else dict(B.FULL)
        if not (args.quick or args.full):
            cfg = dict(B.FULL, seeds=1, sizes=(200, 1000), classes=(5, 10, 20))
        i, n = (int(x) for x in args.part.split("/"))
        data = collect(cfg, (0, 1) if args.two_seeds else (0,), args.others or args.full,
                       (i, n), args.out, args.start)
    replay(data, default_rules())


if __name__ == "__main__":
    main()
