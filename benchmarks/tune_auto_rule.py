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

With ``--peers-json PATH --repeated --fold-seeds 7`` only auto's default candidates are
collected, under fold seeds 0-6, and :data:`REPEAT_RULES` (repeated K-fold CV with R = 1-5
partitions, a majority vote over partitions, the oracle choice) are ranked against the peers'
entries per starting fold seed 0 / 1 / 2 and per half of the tasks (docs/auto.md, "Repeated
cross-validation"); ``--skip-splits 2`` with ``--seeds 4`` ranks on tasks outside that suite.

With ``--peers-json PATH`` (the ``--json`` of ``bench_quality.py --peers`` on the same tasks),
each rule of :data:`PEER_RULES` is put in place of ``auto`` in that per-task table and ranked
against every other entry (ours and the peers'), per fold seed and averaged: the tables of
docs/auto.md, "Ranks against the peers". Candidates named ``"method:key=value,..."`` are that
method with those parameters on top of auto's own (e.g. the smoothed targets auto used before).

    PYTHONPATH=. python benchmarks/tune_auto_rule.py --sizes 200 1000 --seeds 2
    PYTHONPATH=. python benchmarks/tune_auto_rule.py --sizes 200 1000 --seeds 2 \
        --groups linear trees --peers-json /tmp/autobin_peers.json --save /tmp/tune.pkl
    PYTHONPATH=. python benchmarks/tune_auto_rule.py --sizes 200 1000 --seeds 2 \
        --groups linear trees --peers-json /tmp/autobin_peers.json --repeated --fold-seeds 7
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
import warnings

import numpy as np
from scipy.stats import rankdata
from sklearn.metrics import roc_auc_score

import mlcal
from mlcal.calibrators.auto import (AutoCalibrator, cv_statistics, select_one_se,
                                    select_preferred)
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
#: auto's candidates before the peers' comparison: temperature and Platt on the log-odds on
#: Platt's smoothed targets without the identity prior
OLD_TEMPERATURE = "temperature:smooth_targets=true"
OLD_PLATT_LOGIT = "platt-logit:smooth_targets=true,identity_prior=0"
#: collected with --peers-json: the default candidates, the two old variants, Venn-Abers
PEER_CANDIDATES = ("temperature", "platt-logit", "beta", "quadratic", "platt", "spline",
                   "isotonic", "elite", OLD_TEMPERATURE, OLD_PLATT_LOGIT, "venn-abers")
FLEXIBLE = ["spline", "isotonic", "elite"]
#: auto's default candidates (listed order), fixed here
DEFAULT_8 = PEER_CANDIDATES[:8]
#: rules ranked against the peers: (candidates in listed order, "listed" or "simplest", se_rule)
PEER_RULES = {
    "before (7 smoothed, simplest, 0.5)": (["platt", OLD_PLATT_LOGIT, OLD_TEMPERATURE, "beta"]
                                           + FLEXIBLE, "simplest", 0.5),
    "7 smoothed, listed smooth first, 0.5": ([OLD_TEMPERATURE, OLD_PLATT_LOGIT, "beta",
                                             "platt"] + FLEXIBLE, "listed", 0.5),
    "new candidates, lowest CV": (list(PEER_CANDIDATES[:8]), "listed", 0.0),
    "new candidates, simplest, 0.5": (list(PEER_CANDIDATES[:8]), "simplest", 0.5),
    "new candidates, listed, 0.5": (list(PEER_CANDIDATES[:8]), "listed", 0.5),
    "new candidates, listed, 1": (list(PEER_CANDIDATES[:8]), "listed", 1.0),
    "new: listed, 0.25 (default)": (list(PEER_CANDIDATES[:8]), "listed", 0.25),
    "new without quadratic, listed, 0.25": ([c for c in PEER_CANDIDATES[:8]
                                             if c != "quadratic"], "listed", 0.25),
    "new + Venn-Abers, listed, 0.25": (list(PEER_CANDIDATES[:8]) + ["venn-abers"], "listed",
                                       0.25),
}


class _Auto(AutoCalibrator):
    """auto whose candidate names may carry parameters: ``"method:key=value,..."``."""

    def candidate(self, name):
        method, _, spec = name.partition(":")
        params = self.candidate_params(method)
        for item in filter(None, spec.split(",")):
            key, _, value = item.partition("=")
            params[key] = json.loads(value)
        return mlcal.get_calibrator(method, **params)

    def fold_fit_points(self, name):
        return super().fold_fit_points(name.partition(":")[0])


def collect(tasks, candidates=CANDIDATES, n_repeats=N_REPEATS):
    auto = _Auto()
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
        auc_before = roc_auc_score(task.y_test, task.s_test)
        for name in candidates:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    p = auto.candidate(name).fit(s, z).predict(task.s_test)
                held[name] = (log_loss(task.y_test, p), brier(task.y_test, p),
                              roc_auc_score(task.y_test, p) - auc_before)
            except Exception as exc:   # noqa: BLE001  recorded, not fatal
                held[name] = (np.inf, np.inf, np.nan)
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


def choose(record, names, se_rule, n_repeats, prefer="simplest"):
    results, weights = combine(record["reps"], n_repeats, names)
    select = select_one_se if prefer == "simplest" else select_preferred
    return select(names, results, weights, se_rule)["chosen"]


def load_peer_table(data, peers_json):
    """The peers' per-task table, the collected non-simulated tasks in the same order (checked)
    and the table's entries other than ``auto``'s."""
    with open(peers_json) as fh:
        table = json.load(fh)
    recs = [d for d in data if d["group"] != "sim"]
    if len(recs) != len(table) or any(d["task"] != t["task"] or d["n"] != t["n_cal"]
                                      for d, t in zip(recs, table)):
        raise SystemExit(f"{peers_json}: not the tasks collected here")
    return table, recs, [m for m in table[0]["results"] if not m.startswith("auto")]


def peer_ranks(data, peers_json, groups, rules=PEER_RULES):
    """Each rule's auto in place of ``auto`` in the peers' per-task table (tasks in the same
    order), ranked per task against every other entry (``auto`` variants of that table
    left out), per fold seed; mean ranks, mean log loss and Brier per group."""
    table, recs, others = load_peer_table(data, peers_json)
    n_seeds = len(recs[0]["reps"])
    print(f"\nranked against {len(others)} entries of {peers_json} ({', '.join(others)}); "
          "per fold seed 0 / 1 / 2, then the mean")
    print("| rule | group | log-loss rank | mean log loss | Brier rank | mean Brier | best "
          "other (LL rank, Brier rank) |")
    print("|---|---|---|---|---|---|---|")
    for label, (names, prefer, m) in rules.items():
        for group in groups:
            idx = [i for i, d in enumerate(recs) if d["group"] == group]
            if not idx:
                continue
            ranks = {"log_loss": [], "brier": []}
            other_ranks = {"log_loss": [], "brier": []}
            vals = {"log_loss": [], "brier": []}
            for j in range(n_seeds):
                per = {"log_loss": [], "brier": []}
                for i in idx:
                    d = recs[i]
                    c = choose(dict(d, reps=d["reps"][j:j + 1]), names, m, 1, prefer)
                    for k, met in enumerate(("log_loss", "brier")):
                        v = d["held"][c][k]
                        vals[met].append(v)
                        row = rankdata([table[i]["results"][o][met] for o in others] + [v])
                        per[met].append(row)
                for met in per:
                    mean_row = np.mean(per[met], axis=0)
                    ranks[met].append(mean_row[-1])
                    other_ranks[met].append(mean_row[:-1])
            best = {met: min(zip(np.mean(other_ranks[met], axis=0), others))
                    for met in other_ranks}
            print(f"| {label} | {group} ({len(idx)}) | "
                  + " / ".join(f"{r:.2f}" for r in ranks["log_loss"])
                  + f" ({np.mean(ranks['log_loss']):.2f}) | {np.mean(vals['log_loss']):.5f} | "
                  + " / ".join(f"{r:.2f}" for r in ranks["brier"])
                  + f" ({np.mean(ranks['brier']):.2f}) | {np.mean(vals['brier']):.5f} | "
                  f"{best['log_loss'][1]} {best['log_loss'][0]:.2f}, {best['brier'][1]} "
                  f"{best['brier'][0]:.2f} |")


#: repeated K-fold CV ranked against the peers: (mode, se_rule, R) with auto's default
#: candidates, listed order; ("mean", 0.25, 1) is the default rule. "mean": the CV losses per
#: point averaged over R partitions (AutoCalibrator(cv_repeats=R)); "vote": the rule applied
#: to each partition alone, the candidate chosen most often wins (ties: listed order);
#: "oracle": the candidate with the lowest held-out log loss (a bound for any selection rule)
REPEAT_RULES = ([("mean", m, r) for r in (1, 2, 3, 4, 5) for m in (0.0, 0.1, 0.25, 0.5, 1.0)]
                + [("vote", m, r) for r in (3, 5) for m in (0.1, 0.25, 0.5)]
                + [("oracle", 0.0, 1)])
METRICS = ("log_loss", "brier")


def halves(recs):
    """Half A (docs/auto.md, "Overfitting check"): breast cancer and digits with split seed 0
    (the first task of each name) and the make_classification tasks with 200 rows; B: the
    rest. Returns one label per record."""
    seen, out = set(), []
    for d in recs:
        if d["task"].startswith("mc-"):
            out.append("A" if d["n"] == 200 else "B")
        else:
            out.append("B" if d["task"] in seen else "A")
            seen.add(d["task"])
    return out


def choose_vote(record, names, se_rule, n_repeats, prefer="listed"):
    """The candidate the rule picks most often over the first ``n_repeats`` partitions, each
    alone (ties: the first in ``names``)."""
    picks = [choose(dict(record, reps=record["reps"][i:i + 1]), names, se_rule, 1, prefer)
             for i in range(n_repeats)]
    top = max(picks.count(n) for n in picks)
    return next(n for n in names if picks.count(n) == top)


def choose_oracle(record, names, se_rule, n_repeats, prefer="listed"):
    """The candidate with the lowest held-out log loss (not a rule: what the best possible
    choice among ``names`` would reach)."""
    return min(names, key=lambda n: (record["held"][n][0], names.index(n)))


def kept_tasks(data, peers_json, skip_splits=0):
    """:func:`load_peer_table` and the halves of the tasks, without the first ``skip_splits``
    splits of breast cancer and digits (the tasks of the tuning suite when --seeds is larger;
    the make_classification tasks are kept)."""
    table, recs, others = load_peer_table(data, peers_json)
    half = halves(recs)
    if skip_splits:
        seen, keep = {}, []
        for i, d in enumerate(recs):
            seen[d["task"]] = seen.get(d["task"], 0) + 1
            if d["task"].startswith("mc-") or seen[d["task"]] > skip_splits:
                keep.append(i)
        recs, table = [recs[i] for i in keep], [table[i] for i in keep]
        half = [half[i] for i in keep]
        print(f"\n{len(recs)} tasks kept (splits 0-{skip_splits - 1} of breast cancer and "
              "digits left out)")
    return table, recs, others, half


def repeated_ranks(data, peers_json, groups, rules=REPEAT_RULES, skip_splits=0):
    """Each (se_rule, R) auto (R partitions from fold seeds j, j+1, ..., j+R-1: the CV losses
    per point averaged as AutoCalibrator(cv_repeats=R, seed=j) does) in place of ``auto`` in
    the peers' per-task table, per starting fold seed j = 0, 1, 2 and per half of the tasks:
    auto's mean rank against the best other entry's in the same tables, the (seed, group,
    metric) cells where auto is first, mean log loss, Brier and AUC change."""
    table, recs, others, half = kept_tasks(data, peers_json, skip_splits)
    n_start = 3
    print(f"\nrepeated CV ranked against {len(others)} entries of {peers_json}; per starting "
          "fold seed 0 / 1 / 2: auto's rank and the best other's (mean over the group's "
          "tasks); 'first' counts the (seed, metric) cells where auto's rank is the lowest")
    print("| mode | se_rule | R | group | LL rank: auto vs best other, seeds 0 / 1 / 2 | Brier "
          "rank, seeds 0 / 1 / 2 | first (of 6) | log loss | Brier | AUC change | half A: LL, "
          "Brier (auto vs best other) | half B: LL, Brier |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    summary = {}
    for mode, m, r in rules:
        pick = {"mean": choose, "vote": choose_vote, "oracle": choose_oracle}[mode]
        for group in groups:
            idx = [i for i, d in enumerate(recs) if d["group"] == group]
            if not idx:
                continue
            cells = {met: [] for met in METRICS}
            rows = {met: [] for met in METRICS}   # per seed: per task rank rows
            ll, br, auc = [], [], []
            for j in range(n_start):
                per = {met: [] for met in METRICS}
                for i in idx:
                    d = recs[i]
                    if len(d["reps"]) < j + r:
                        raise SystemExit(f"collect {j + r} fold seeds (--fold-seeds)")
                    c = pick(dict(d, reps=d["reps"][j:j + r]), list(DEFAULT_8), m, r,
                             "listed")
                    held = d["held"][c]
                    ll.append(held[0])
                    br.append(held[1])
                    auc.append(held[2] if len(held) > 2 else np.nan)
                    for k, met in enumerate(METRICS):
                        per[met].append(rankdata([table[i]["results"][o][met] for o in others]
                                                 + [held[k]]))
                for met in METRICS:
                    mean_row = np.mean(per[met], axis=0)
                    cells[met].append((mean_row[-1], mean_row[:-1].min()))
                    rows[met].append(np.array(per[met]))
            first = sum(a < b for met in METRICS for a, b in cells[met])
            hv = {}
            for h in ("A", "B"):
                sel = [t for t, i in enumerate(idx) if half[i] == h]
                hv[h] = []
                for met in METRICS:
                    mean_row = np.mean([rows[met][j][sel] for j in range(n_start)],
                                       axis=(0, 1))
                    hv[h].append((mean_row[-1], mean_row[:-1].min()))
            summary[(mode, m, r, group)] = {"cells": cells, "halves": hv, "log_loss": np.mean(ll),
                                      "brier": np.mean(br), "auc": np.nanmean(auc)}
            fmt = lambda v: " / ".join(f"{a:.2f} vs {b:.2f}" for a, b in v)  # noqa: E731
            print(f"| {mode} | {m:g} | {r} | {group} ({len(idx)}) | {fmt(cells['log_loss'])} | "
                  f"{fmt(cells['brier'])} | {first} | {np.mean(ll):.5f} | {np.mean(br):.5f} | "
                  f"{np.nanmean(auc):+.5f} | "
                  + " | ".join(", ".join(f"{a:.2f} vs {b:.2f}" for a, b in hv[h])
                               for h in ("A", "B")) + " |")
    print("\ntotals over the groups: cells (seed, group, metric) where auto is first (of "
          f"{6 * len(groups)}), halves x groups x metrics first (of {4 * len(groups)}), mean "
          "log loss per group")
    print("| mode | se_rule | R | cells first | cells first, fold seeds 1 and 2 | half cells "
          "first | " + " | ".join(f"{g} log loss" for g in groups) + " |")
    print("|---|---|---|---|---|---|" + "---|" * len(groups))
    for mode, m, r in rules:
        keys = [(mode, m, r, g) for g in groups if (mode, m, r, g) in summary]
        cells = sum(a < b for k in keys for met in METRICS
                    for a, b in summary[k]["cells"][met])
        hcells = sum(a < b for k in keys for h in ("A", "B")
                     for a, b in summary[k]["halves"][h])
        later = sum(a < b for k in keys for met in METRICS
                    for a, b in summary[k]["cells"][met][1:])
        print(f"| {mode} | {m:g} | {r} | {cells} | {later} | {hcells} | " +
              " | ".join(f"{summary[k]['log_loss']:.5f}" for k in keys) + " |")
    return summary


#: quadratic scaling's variants collected with --add-candidates (docs/auto.md, "The quadratic
#: candidate and the 'both' rule"): 0/1 labels, the identity prior (rows), the ridge. The
#: collections of that section were made before ``quadratic_prior``: their ``"quadratic"`` is
#: the candidate on Platt's smoothed targets (now ``OLD_QUADRATIC``); collected now,
#: ``"quadratic"`` is auto's candidate with ``quadratic_prior=10`` (``ADOPTED_QUADRATIC``)
Q01 = "quadratic:smooth_targets=false"
OLD_QUADRATIC = "quadratic:smooth_targets=true,identity_prior=0"
ADOPTED_QUADRATIC = Q01 + ",identity_prior=10"
QUAD_VARIANTS = (Q01, Q01 + ",identity_prior=3", Q01 + ",identity_prior=10",
                 Q01 + ",identity_prior=30", Q01 + ",identity_prior=100",
                 Q01 + ",identity_prior=30,penalty=10", "quadratic:identity_prior=30",
                 Q01 + ",penalty=0", Q01 + ",penalty=0,identity_prior=1",
                 Q01 + ",penalty=0,identity_prior=3", Q01 + ",penalty=0,identity_prior=10",
                 Q01 + ",penalty=0.1,identity_prior=3", OLD_QUADRATIC)


#: beta calibration shrunk toward the identity map (docs/auto.md, "A regularised beta
#: candidate"): 0/1 labels plus ``identity_prior`` rows, collected with --add-candidates
BETA_VARIANTS = tuple(f"beta:smooth_targets=false,identity_prior={k}"
                      for k in (1, 3, 10, 30, 100, 300))


def beta_variant_rules():
    """(label, candidates, criterion, se_rule) of the default rule with beta calibration
    replaced by each of :data:`BETA_VARIANTS`, with the variant added after beta, and with it
    added first; then the variants as fixed methods."""
    rules = []
    for v in BETA_VARIANTS:
        k = v.rpartition("=")[2]
        for where, names in (("replaces beta", [v if n == "beta" else n for n in DEFAULT_8]),
                             ("after beta", [m for n in DEFAULT_8
                                             for m in ([n, v] if n == "beta" else [n])]),
                             ("first", [v] + list(DEFAULT_8))):
            rules.append((f"log-loss 0.25, beta prior {k} {where}", names, "log-loss", 0.25))
    return rules + [(f"fixed {v}", [v], "fixed", 0.0) for v in BETA_VARIANTS]


def cv_brier(results):
    """Per-unit CV Brier arrays (positive rows, negative rows) of each candidate that did not
    fail, from its per-unit out-of-fold log losses ``-log p`` and ``-log(1 - p)`` (``p`` is
    ``exp(-loss)``, the clipped out-of-fold probability)."""
    out = {}
    for name, outcome in results.items():
        if not isinstance(outcome, str):
            p = np.exp(-outcome[0][0])
            out[name] = ((1.0 - p) ** 2, p ** 2)
    return out


def choose_rule(record, names, criterion, se_rule):
    """auto's choice on the record's first fold seed: ``"log-loss"`` (select_preferred on CV
    log loss, the default), ``"both"`` (passed over only when worse by more than ``se_rule``
    paired SE on both CV log loss and CV Brier), ``"fixed"`` (always ``names[0]``) or
    ``"oracle"`` (lowest held-out log loss)."""
    if criterion == "fixed":
        return names[0]
    if criterion == "oracle":
        return choose_oracle(record, names, se_rule, 1)
    results, weights = combine(record["reps"], 1, names)
    brier = cv_brier(results) if criterion == "both" else None
    return select_preferred(names, results, weights, se_rule, brier=brier)["chosen"]


#: the peers' tables' entries of our logit family (bench_quality.py's registered defaults) and
#: the collected candidate that is the same method with the same parameters: with
#: ``--refresh-entries`` the entries are replaced by the collection's held-out figures (maps
#: changed since the table was written: the data-taken clamp, issue 26)
REFRESH = {"beta": "beta", "platt-logit": OLD_PLATT_LOGIT, "temperature": OLD_TEMPERATURE}
#: the logit family as fixed methods: auto's forms and the registered defaults
FIXED_LOGIT = ("temperature", "platt-logit", "beta", "quadratic", OLD_TEMPERATURE,
               OLD_PLATT_LOGIT, OLD_QUADRATIC)


def refresh_entries(table, recs):
    """Replace the table's :data:`REFRESH` entries by the collection's held-out log loss,
    Brier and AUC change of the same method, in place; print per entry the tasks where the
    figures moved (by more than 1e-12 in log loss) and the largest move."""
    for entry, cand in REFRESH.items():
        moved, worst = [], 0.0
        for row, d in zip(table, recs):
            if cand not in d["held"]:
                raise SystemExit(f"--refresh-entries: {cand} not collected")
            ll, br, auc = d["held"][cand]
            delta = ll - row["results"][entry]["log_loss"]
            if abs(delta) > 1e-12:
                moved.append(f"{d['task']} N={d['n']} {delta:+.5f}")
                worst = max(worst, abs(delta))
            row["results"][entry] = dict(row["results"][entry], log_loss=ll, brier=br,
                                         auc_change=auc)
        print(f"refreshed {entry} from {cand}: moved on {len(moved)} of {len(recs)} tasks "
              f"(largest |log loss change| {worst:.5f})" + "".join(f"\n    {m}" for m in moved))


def variant_rules():
    """(label, candidates in listed order, criterion, se_rule): the default, the 'both'
    criterion, the default candidates with quadratic scaling replaced by a variant, the
    quadratic variants as fixed methods, and :func:`beta_variant_rules`."""
    rules = []
    for label, q in [("default", "quadratic")] + [(v.partition(":")[2], v)
                                                  for v in QUAD_VARIANTS]:
        names = [q if n == "quadratic" else n for n in DEFAULT_8]
        for crit in ("log-loss", "both"):
            for m in (0.25, 0.5, 1.0):
                rules.append((f"{crit} {m:g}, quadratic {label}", names, crit, m))
    rules.append(("oracle", list(DEFAULT_8), "oracle", 0.0))
    for q in dict.fromkeys(FIXED_LOGIT + QUAD_VARIANTS):
        rules.append((f"fixed {q}", [q], "fixed", 0.0))
    return rules + beta_variant_rules()


def check_auto(data, tasks, names=None):
    """``AutoCalibrator()`` (the implementation, default parameters) fitted on each task
    against the replay's choice under fold seed 0 (the default rule, auto's candidates with
    quadratic scaling as ``ADOPTED_QUADRATIC`` in older collections): the number of tasks
    where the chosen method or the held-out log loss differ."""
    # collections made before quadratic_prior hold auto's quadratic as ADOPTED_QUADRATIC;
    # collected since, "quadratic" is auto's own candidate
    adopted = ADOPTED_QUADRATIC if ADOPTED_QUADRATIC in data[0]["held"] else "quadratic"
    names = [adopted if n == "quadratic" else n for n in DEFAULT_8] if names is None else names
    if len(tasks) != len(data) or any(t.name != d["task"] for t, d in zip(tasks, data)):
        raise SystemExit("--check-auto: not the tasks of the loaded collection")
    differ = 0
    for task, d in zip(tasks, data):
        want = choose_rule(dict(d, reps=d["reps"][:1]), names, "log-loss", 0.25)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cal = AutoCalibrator().fit(np.asarray(task.s_cal, dtype=float), task.y_cal)
        got = adopted if cal.chosen_ == "quadratic" else cal.chosen_
        ll = log_loss(task.y_test, cal.predict(task.s_test))
        if got != want or abs(ll - d["held"][want][0]) > 1e-9:
            differ += 1
            print(f"  {task.name} N={task.n_cal}: auto {got} {ll:.6f}, replay {want} "
                  f"{d['held'][want][0]:.6f}")
    print(f"check-auto: {len(tasks) - differ} of {len(tasks)} tasks agree (choice and "
          "held-out log loss)")
    return differ


def variant_ranks(data, peers_json, groups, rules=None, skip_splits=0, summary_json=None,
                  refresh=False):
    """Each rule's auto (one fold partition, fold seeds 0 / 1 / 2) in place of ``auto`` in the
    peers' per-task table, ranked per task against every other entry: per rule and group the
    (seed, metric) cells where it is first, its mean log loss, Brier and AUC change; and for
    the fixed methods their held-out log loss and Brier against probmetrics' quadratic
    scaling task by task. ``summary_json``: the per-rule summary written there (for
    :func:`combine_suites`). ``refresh``: :func:`refresh_entries` first. A fixed method is
    not ranked against its own refreshed entry."""
    rules = variant_rules() if rules is None else rules
    table, recs, all_others, _ = kept_tasks(data, peers_json, skip_splits)
    if refresh:
        refresh_entries(table, recs)
    same = {cand: entry for entry, cand in REFRESH.items()} if refresh else {}
    print(f"\n{len(recs)} tasks; ranked against {len(all_others)} entries of {peers_json}; per "
          "fold seed 0 / 1 / 2: the rule's rank and the best other's")
    print("| rule | group | LL rank, seeds 0 / 1 / 2 | Brier rank, seeds 0 / 1 / 2 | first "
          "(of 6) | log loss | Brier | AUC change | v pm-quadratic: LL, Brier (tasks better) |")
    print("|---|---|---|---|---|---|---|---|---|")
    summary = {}
    for label, names, crit, m in rules:
        own = same.get(names[0]) if crit == "fixed" else None
        others = [o for o in all_others if o != own]
        for group in groups:
            idx = [i for i, d in enumerate(recs) if d["group"] == group]
            if not idx or any(n not in recs[idx[0]]["held"] for n in names):
                continue
            cells = {met: [] for met in METRICS}
            ll, br, auc, wins = [], [], [], [0, 0]
            for j in range(3):
                per = {met: [] for met in METRICS}
                for i in idx:
                    d = recs[i]
                    held = d["held"][choose_rule(dict(d, reps=d["reps"][j:j + 1]), names,
                                                 crit, m)]
                    ll.append(held[0])
                    br.append(held[1])
                    auc.append(held[2])
                    pq = table[i]["results"]["pm-quadratic"]
                    wins[0] += held[0] < pq["log_loss"]
                    wins[1] += held[1] < pq["brier"]
                    for k, met in enumerate(METRICS):
                        per[met].append(rankdata([table[i]["results"][o][met] for o in others]
                                                 + [held[k]]))
                for met in METRICS:
                    row = np.mean(per[met], axis=0)
                    cells[met].append((float(row[-1]), float(row[:-1].min())))
            pm_ll = np.mean([table[i]["results"]["pm-quadratic"]["log_loss"] for i in idx])
            pm_br = np.mean([table[i]["results"]["pm-quadratic"]["brier"] for i in idx])
            first = sum(a < b for met in METRICS for a, b in cells[met])
            summary[f"{label} | {group}"] = {
                "label": label, "group": group, "n_tasks": len(idx), "cells": cells,
                "first": int(first), "log_loss": float(np.mean(ll)), "brier": float(np.mean(br)),
                "auc": float(np.nanmean(auc))}
            fmt = lambda v: " / ".join(f"{a:.2f} v {b:.2f}" for a, b in v)  # noqa: E731
            print(f"| {label} | {group} ({len(idx)}) | {fmt(cells['log_loss'])} | "
                  f"{fmt(cells['brier'])} | {first} | {np.mean(ll):.5f} | {np.mean(br):.5f} | "
                  f"{np.nanmean(auc):+.5f} | {np.mean(ll) - pm_ll:+.5f}, {np.mean(br) - pm_br:+.5f}"
                  f" ({wins[0] / 3:.1f}, {wins[1] / 3:.1f} of {len(idx)}) |")
    if summary_json:
        with open(summary_json, "w") as fh:
            json.dump(summary, fh, indent=1)
    return summary


def combine_suites(paths, groups=("linear", "trees")):
    """The summaries of :func:`variant_ranks` on several suites: per rule the cells where it is
    first per suite and in total, fold seeds 1 and 2, the mean log loss per group averaged over
    the suites and the mean AUC change."""
    sums = []
    for path in paths:
        with open(path) as fh:
            sums.append(json.load(fh))
    labels = list(dict.fromkeys(v["label"] for v in sums[0].values()))
    print("| rule | " + " | ".join(f"cells {i + 1} (seeds 1, 2)" for i in range(len(paths)))
          + " | cells, total | " + " | ".join(f"{g} log loss" for g in groups)
          + " | AUC change (" + ", ".join(groups) + ") |")
    print("|---|" + "---|" * (len(paths) + 2 + len(groups)))
    for label in labels:
        keys = [f"{label} | {g}" for g in groups]
        if not all(k in s for s in sums for k in keys):
            continue
        per = [sum(s[k]["first"] for k in keys) for s in sums]
        later = [sum(a < b for k in keys for met in METRICS for a, b in s[k]["cells"][met][1:])
                 for s in sums]
        ll = [np.mean([s[k]["log_loss"] for s in sums]) for k in keys]
        auc = [np.mean([s[k]["auc"] for s in sums]) for k in keys]
        print(f"| {label} | " + " | ".join(f"{a} ({b})" for a, b in zip(per, later))
              + f" | {sum(per)} | " + " | ".join(f"{v:.5f}" for v in ll) + " | "
              + ", ".join(f"{v:+.5f}" for v in auc) + " |")


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


def make_tasks(args):
    """The tasks of ``--sizes``, ``--seeds`` and ``--groups`` (simulations first)."""
    sizes = [int(n) for n in args.sizes]
    tasks = list(sim_tasks(sizes, args.seeds, 20_000)) if "sim" in args.groups else []
    families = [g for g in args.groups if g != "sim"]
    if families:
        tasks += list(real_tasks(sizes, args.seeds, families))
    return tasks


def add_candidates(data, tasks, names, n_repeats):
    """Collect ``names`` on ``tasks`` (the tasks ``data`` was collected on, checked: names,
    sizes and the CV units of every fold seed) and add their CV losses and held-out scores to
    ``data`` in place, for the first ``n_repeats`` fold seeds."""
    if len(tasks) != len(data) or any(t.name != d["task"] or t.n_cal != d["n"]
                                      for t, d in zip(tasks, data)):
        raise SystemExit("--add-candidates: not the tasks of the loaded collection")
    new = collect(tasks, tuple(names), n_repeats)
    for d, e in zip(data, new):
        for rep, extra in zip(d["reps"], e["reps"]):
            if not np.array_equal(rep["x"], extra["x"]):
                raise SystemExit(f"--add-candidates: other CV units on {d['task']}")
            rep["cv"].update(extra["cv"])
        d["held"].update(e["held"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[200, 1000])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--groups", nargs="+", default=["linear", "trees"],
                    choices=("sim", "linear", "trees"))
    ap.add_argument("--peers-json", metavar="PATH",
                    help="rank the rules of PEER_RULES against the entries of this "
                         "bench_quality.py --peers --json table (same tasks; collects "
                         "PEER_CANDIDATES)")
    ap.add_argument("--fold-seeds", type=int, default=N_REPEATS,
                    help="fold seeds 0, 1, ... cross-validated per task (default 3; "
                         "--repeated needs 3 + the largest R - 1)")
    ap.add_argument("--repeated", action="store_true",
                    help="with --peers-json: collect only auto's default candidates and rank "
                         "repeated K-fold CV (REPEAT_RULES) against the peers per starting "
                         "fold seed and per half of the tasks")
    ap.add_argument("--skip-splits", type=int, default=0,
                    help="with --repeated: leave out the first N splits of breast cancer and "
                         "digits (those of the tuning suite when --seeds is larger)")
    ap.add_argument("--add-candidates", nargs="+", metavar="NAME",
                    help="with --load: collect these candidates (names as in PEER_CANDIDATES, "
                         "'method:key=value,...') on the same tasks under the first "
                         "--fold-seeds fold seeds and add them to the loaded collection "
                         "(then --save it), so a collection is extended, not redone; "
                         "without --load: collect them too")
    ap.add_argument("--variants", action="store_true",
                    help="with --peers-json: rank the 'both' criterion and quadratic "
                         "scaling's variants (variant_rules; collect them with "
                         "--add-candidates QUAD_VARIANTS) against the peers")
    ap.add_argument("--check-auto", action="store_true",
                    help="with --load: fit AutoCalibrator() on every task and compare its "
                         "choice with the replay's (fold seed 0, the default rule)")
    ap.add_argument("--refresh-entries", action="store_true",
                    help="with --variants: replace the peers' table's entries of REFRESH "
                         "(beta, platt-logit, temperature) by this collection's figures of the "
                         "same methods (collect them: --add-candidates of REFRESH's values)")
    ap.add_argument("--summary-json", metavar="PATH",
                    help="with --variants: write the per-rule summary to PATH")
    ap.add_argument("--combine", nargs="+", metavar="PATH",
                    help="print the --summary-json files of several suites together and exit")
    ap.add_argument("--save", metavar="PATH", help="pickle the collected fits to PATH")
    ap.add_argument("--load", metavar="PATH",
                    help="analyse a collection saved by --save instead (a pickle: load only "
                         "files this script wrote)")
    args = ap.parse_args(argv)
    if args.combine:
        combine_suites(args.combine)
        return
    if args.load:
        with open(args.load, "rb") as fh:
            data = pickle.load(fh)
        if args.add_candidates:
            start = time.perf_counter()
            add_candidates(data, make_tasks(args), args.add_candidates, args.fold_seeds)
            print(f"added {len(args.add_candidates)} candidates in "
                  f"{time.perf_counter() - start:.0f} s", file=sys.stderr)
            if args.save:
                with open(args.save, "wb") as fh:
                    pickle.dump(data, fh)
    else:
        start = time.perf_counter()
        tasks = make_tasks(args)
        names = (DEFAULT_8 if args.repeated else PEER_CANDIDATES) if args.peers_json \
            else CANDIDATES
        names = tuple(names) + tuple(n for n in args.add_candidates or () if n not in names)
        data = collect(tasks, names, args.fold_seeds)
        print(f"collected {len(tasks)} tasks in {time.perf_counter() - start:.0f} s",
              file=sys.stderr)
        if args.save:
            with open(args.save, "wb") as fh:
                pickle.dump(data, fh)
    if args.check_auto:
        check_auto(data, make_tasks(args))
        return
    if args.peers_json and args.variants:
        variant_ranks(data, args.peers_json, [g for g in args.groups if g != "sim"],
                      skip_splits=args.skip_splits, summary_json=args.summary_json,
                      refresh=args.refresh_entries)
        return
    if args.peers_json and args.repeated:
        repeated_ranks(data, args.peers_json, [g for g in args.groups if g != "sim"],
                       skip_splits=args.skip_splits)
        return
    if args.peers_json:
        peer_ranks(data, args.peers_json, [g for g in args.groups if g != "sim"])
        return
    analyse(data, args.groups)
    by_fold_seed(data, args.groups)
    by_fold_seed(data, args.groups, names=QUAD, label="with quadratic scaling")
    shared_rank(data, args.groups)


if __name__ == "__main__":
    main()
