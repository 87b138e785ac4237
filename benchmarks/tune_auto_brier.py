"""Brier-aware selection rules of the binary ``auto``, replayed on saved collections (issue 26).

The binary ``auto`` picks the first listed candidate within ``se_rule = 0.25`` paired SE of the
lowest CV log loss. Against the peers it is first on 18 of 24 (suite, fold seed, group, metric)
cells (docs/auto.md, "With the data-taken clamp"); the fresh suite's linear/NB/SVM Brier rank is
lost under every fold seed to probmetrics' quadratic scaling although ``auto``'s mean Brier
there is lower. This script replays, on the collections of ``tune_auto_rule.py`` (one per
suite: the CV out-of-fold losses of auto's candidates under fold seeds 0-2 and each candidate's
held-out figures), rules that use only what ``auto`` sees at fit time: the candidates' per-unit
out-of-fold log losses (hence their out-of-fold probabilities ``p = exp(-loss)`` and CV Brier),
the listed order and the paired standard errors. Each rule's pick is put in place of ``auto``
in the peers' per-task table of its suite and ranked per task against the 17 other entries
(ours and the peers'), per fold seed, as ``tune_auto_rule.py --variants --refresh-entries``
does (its helpers are reused, so the default rule reproduces that script's ranks).

Printed: per rule the cells where it is first per suite and group (of 6: 3 fold seeds x 2
metrics), the cells it loses or gains against the default, the mean held-out log loss per
suite and group (mean over the three fold seeds), and the fresh suite's linear Brier ranks;
then the per-cell ranks of chosen rules; with ``--diagnose`` the per-task picture of that lost
cell. ``--summary-json`` writes every figure (no pickles).

    PYTHONPATH=. python benchmarks/tune_auto_brier.py \
        --suite tune /tmp/rankclamp/tune.pkl /tmp/autobin_peers.json 0 \
        --suite fresh /tmp/rankclamp/fresh.pkl /tmp/autorobust_fresh_peers.json 2 \
        --diagnose --summary-json benchmarks/results/auto_brier/summary.json

The collections are the ``--save`` pickles of ``tune_auto_rule.py --groups linear trees
--fold-seeds 3 --repeated`` (load only files that script wrote).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import pickle
import sys
from collections import Counter

import numpy as np
from scipy.stats import rankdata

from mlcal.calibrators.auto import _paired_se, cv_statistics, select_one_se, select_preferred

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import tune_auto_rule as T  # noqa: E402

NAMES = list(T.DEFAULT_8)
METRICS = ("log_loss", "brier")
GROUPS = ("linear", "trees")
N_SEEDS = 3


# -- what auto sees at fit time ----------------------------------------------------------------
class CV:
    """The CV statistics of auto's candidates on one task under one fold seed: per candidate
    that did not fail the CV log loss ``ll`` and its paired SE to the lowest (``ll_se``), the
    CV Brier ``br`` (out-of-fold ``p = exp(-loss)``) and its paired SE to the lowest
    (``br_se``), the per-unit arrays and weights."""

    def __init__(self, record: dict, j: int):
        results, weights = T.combine(record["reps"][j:j + 1], 1, NAMES)
        self.results, self.weights = results, weights
        self.ok = [n for n in NAMES if not isinstance(results[n], str)]
        self.losses = {n: results[n][0] for n in self.ok}
        self.brier = T.cv_brier(results)
        self.ll, self.ll_se, self.ll_best = cv_statistics(self.losses, weights, self.ok)
        self.br, self.br_se, self.br_best = cv_statistics(self.brier, weights, self.ok)
        self.total = float(sum(np.sum(w) for w in weights))

    def ll_band(self, m: float) -> list[str]:
        """Candidates (listed order) within ``m`` paired SE of the lowest CV log loss."""
        low = self.ll[self.ll_best]
        return [n for n in self.ok if self.ll[n] - low <= m * self.ll_se[n]]

    def br_band(self, m: float) -> list[str]:
        low = self.br[self.br_best]
        return [n for n in self.ok if self.br[n] - low <= m * self.br_se[n]]

    def brier_gain_se(self, a: str, b: str) -> float:
        """CV Brier of ``a`` minus ``b`` in units of the paired SE of that difference."""
        diffs = [x - y for x, y in zip(self.brier[a], self.brier[b])]
        se = _paired_se(diffs, self.weights, self.total)
        d = self.br[a] - self.br[b]
        return np.inf if se == 0.0 and d > 0 else (0.0 if se == 0.0 else d / se)


# -- the rules ----------------------------------------------------------------------------------
def listed(m):
    """The default rule: first listed within ``m`` SE of the lowest CV log loss."""
    return lambda cv: cv.ll_band(m)[0]


def simplest(m):
    """The rule before the peers' comparison: the smallest map within ``m`` SE (select_one_se)."""
    return lambda cv: select_one_se(cv.ok, {n: cv.results[n] for n in cv.ok}, cv.weights,
                                    m)["chosen"]


def ordered(order, m):
    """First in ``order`` (another preference order) within ``m`` SE of the lowest CV log
    loss."""
    return lambda cv: next(n for n in order if n in set(cv.ll_band(m)))


#: other preference orders: parametric maps by number of parameters (Platt before beta and
#: quadratic), quadratic scaling first (the peer that wins the target cell is quadratic scaling)
ORDERS = {"by parameters": ["temperature", "platt-logit", "platt", "beta", "quadratic",
                            "spline", "isotonic", "elite"],
          "quadratic first": ["quadratic", "temperature", "platt-logit", "beta", "platt",
                              "spline", "isotonic", "elite"]}


def brier_listed(m):
    """First listed within ``m`` SE of the lowest CV Brier (log loss ignored)."""
    return lambda cv: cv.br_band(m)[0]


def union(m, mb=None):
    """'both' (MulticlassAuto's criterion): first listed within ``m`` SE on CV log loss or
    ``mb`` SE on CV Brier."""
    mb = m if mb is None else mb
    return lambda cv: next(n for n in cv.ok if n in set(cv.ll_band(m)) | set(cv.br_band(mb)))


def intersection(m, mb):
    """First listed within ``m`` SE on CV log loss and ``mb`` SE on CV Brier (the log-loss
    band's first if none is in both)."""
    def rule(cv):
        a, b = cv.ll_band(m), set(cv.br_band(mb))
        return next((n for n in a if n in b), a[0])
    return rule


def band_lowest_brier(m):
    """Within ``m`` SE of the lowest CV log loss: the lowest CV Brier (a Brier tie-break)."""
    return lambda cv: min(cv.ll_band(m), key=lambda n: (cv.br[n], cv.ok.index(n)))


def band_switch(m, k):
    """The default's pick ``c0`` (first listed within ``m`` SE on CV log loss), replaced by
    the band's lowest-CV-Brier candidate when that one's CV Brier is lower than ``c0``'s by more
    than ``k`` paired SE of their difference."""
    def rule(cv):
        band = cv.ll_band(m)
        c0 = band[0]
        c1 = min(band, key=lambda n: (cv.br[n], cv.ok.index(n)))
        return c1 if c1 != c0 and cv.brier_gain_se(c0, c1) > k else c0
    return rule


def zsum(m):
    """First listed whose sum of standardised paired differences (CV log loss to the lowest
    over its SE, plus CV Brier to the lowest over its SE) is within ``m`` of the smallest sum."""
    def rule(cv):
        z = {n: _z(cv.ll[n] - cv.ll[cv.ll_best], cv.ll_se[n])
             + _z(cv.br[n] - cv.br[cv.br_best], cv.br_se[n]) for n in cv.ok}
        low = min(z.values())
        return next(n for n in cv.ok if z[n] - low <= m)
    return rule


def _z(d, se):
    return 0.0 if d == 0.0 else (np.inf if se == 0.0 else d / se)


def rank_sum(cv):
    """Smallest rank on CV log loss plus rank on CV Brier (ties: listed order)."""
    rl = rankdata([cv.ll[n] for n in cv.ok])
    rb = rankdata([cv.br[n] for n in cv.ok])
    return min(cv.ok, key=lambda n: (rl[cv.ok.index(n)] + rb[cv.ok.index(n)], cv.ok.index(n)))


def combined(m, lam):
    """The default rule on a combined per-unit loss: log loss over the best candidate's CV log
    loss plus ``lam`` times Brier over the best candidate's CV Brier (a proper score)."""
    def rule(cv):
        a, b = 1.0 / cv.ll[cv.ll_best], lam / cv.br[cv.br_best]
        res = {n: ((a * cv.losses[n][0] + b * cv.brier[n][0],
                    a * cv.losses[n][1] + b * cv.brier[n][1]), cv.results[n][1])
               for n in cv.ok}
        return select_preferred(cv.ok, res, cv.weights, m)["chosen"]
    return rule


def lowest_brier(cv):
    return cv.br_best


#: (label, rule): the default first; the oracles at the end (``None``: held-out, not a rule)
RULES = ([("default: listed, log loss, 0.25", listed(0.25))]
         + [(f"listed, log loss, {m:g}", listed(m)) for m in (0.0, 0.1, 0.35, 0.5, 0.75, 1.0)]
         + [(f"simplest, log loss, {m:g}", simplest(m)) for m in (0.25, 0.35, 0.5, 0.75, 1.0)]
         + [(f"order {o}, log loss, {m:g}", ordered(ORDERS[o], m)) for o in ORDERS
            for m in (0.25, 0.5)]
         + [("lowest CV Brier", lowest_brier)]
         + [(f"listed, CV Brier, {m:g}", brier_listed(m)) for m in (0.25, 0.5, 1.0)]
         + [(f"'both' (either within), {m:g}", union(m)) for m in (0.1, 0.25, 0.5)]
         + [(f"within {m:g} on log loss and {mb:g} on Brier", intersection(m, mb))
            for m in (0.25, 0.35, 0.5) for mb in (0.25, 0.5, 0.75, 1.0)]
         + [(f"band {m:g}, lowest CV Brier", band_lowest_brier(m)) for m in (0.25, 0.5, 1.0)]
         + [(f"band {m:g}, Brier switch > {k:g} SE", band_switch(m, k))
            for m in (0.25, 0.35, 0.5) for k in (0.5, 0.75, 1.0, 1.5, 2.0)]
         + [(f"z-sum, within {m:g}", zsum(m)) for m in (0.0, 0.25, 0.5, 1.0)]
         + [("rank sum", rank_sum)]
         + [(f"combined (lambda {lam:g}), {m:g}", combined(m, lam))
            for m in (0.25, 0.5) for lam in (0.5, 1.0, 2.0)]
         + [("oracle: lowest held-out log loss", None), ("oracle: lowest held-out Brier", None)])


# -- evaluation ---------------------------------------------------------------------------------
def load_suite(pkl, peers_json, skip):
    """The collection, the peers' table with our logit family refreshed from the collection
    (``tune_auto_rule.refresh_entries``) and the other entries' names."""
    with open(pkl, "rb") as fh:
        data = pickle.load(fh)
    with contextlib.redirect_stdout(io.StringIO()):
        table, recs, others, _ = T.kept_tasks(data, peers_json, skip)
        T.refresh_entries(table, recs)
    cvs = [[CV(d, j) for j in range(N_SEEDS)] for d in recs]
    return {"table": table, "recs": recs, "others": others, "cv": cvs}


def pick(suite, i, j, label, rule):
    d = suite["recs"][i]
    if rule is None:
        k = 0 if "log loss" in label else 1
        return min(NAMES, key=lambda n: (d["held"][n][k], NAMES.index(n)))
    return rule(suite["cv"][i][j])


def evaluate(suites, label, rule):
    """Per (suite, group, fold seed, metric): the rule's mean rank, the best other entry's
    mean rank and name; per (suite, group): mean held-out log loss, Brier, AUC change and the
    picks' counts."""
    cells, means = {}, {}
    for s, suite in suites.items():
        table, recs, others = suite["table"], suite["recs"], suite["others"]
        for g in GROUPS:
            idx = [i for i, d in enumerate(recs) if d["group"] == g]
            held, counts = [], Counter()
            for j in range(N_SEEDS):
                per = {met: [] for met in METRICS}
                for i in idx:
                    c = pick(suite, i, j, label, rule)
                    counts[c] += 1
                    h = recs[i]["held"][c]
                    held.append(h[:3])
                    for k, met in enumerate(METRICS):
                        per[met].append(rankdata([table[i]["results"][o][met] for o in others]
                                                 + [h[k]]))
                for met in METRICS:
                    row = np.mean(per[met], axis=0)
                    b = int(np.argmin(row[:-1]))
                    cells[(s, g, j, met)] = (float(row[-1]), float(row[b]), others[b])
            held = np.array(held)
            means[(s, g)] = {"log_loss": float(np.mean(held[:, 0])),
                             "brier": float(np.mean(held[:, 1])),
                             "auc_change": float(np.nanmean(held[:, 2])),
                             "picks": dict(counts.most_common())}
    return cells, means


def won(cell):
    return cell[0] < cell[1]


def key_str(k):
    return f"{k[0]} {k[1]} seed {k[2]} {'LL' if k[3] == 'log_loss' else 'Brier'}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", nargs=4, action="append", required=True,
                    metavar=("NAME", "PICKLE", "PEERS_JSON", "SKIP_SPLITS"),
                    help="a suite: its name, the tune_auto_rule.py --save collection, the "
                         "peers' table of the same tasks and --skip-splits")
    ap.add_argument("--diagnose", action="store_true",
                    help="per-task picture of the lost cell (the suite named 'fresh', linear "
                         "group, Brier)")
    ap.add_argument("--summary-json", metavar="PATH")
    args = ap.parse_args(argv)
    suites = {name: load_suite(pkl, peers, int(skip)) for name, pkl, peers, skip in args.suite}
    names = list(suites)
    base_cells, base_means = evaluate(suites, RULES[0][0], RULES[0][1])
    lost_cells = [k for k in base_cells if not won(base_cells[k])]
    print("default rule, cells not first: " + "; ".join(
        f"{key_str(k)} {base_cells[k][0]:.2f} v {base_cells[k][2]} {base_cells[k][1]:.2f}"
        for k in lost_cells))
    summary = {}
    print("\n| rule | " + " | ".join(f"{s} {g} (of 6)" for s in names for g in GROUPS)
          + " | total (of 24) | lost / gained v default | " + " | ".join(
              f"{s} {g} log loss" for s in names for g in GROUPS)
          + " | target cells: ranks v best other |")
    print("|---|" + "---|" * (2 * len(names) * 2 + 3))
    for label, rule in RULES:
        cells, means = evaluate(suites, label, rule)
        per = {(s, g): sum(won(cells[(s, g, j, m)]) for j in range(N_SEEDS) for m in METRICS)
               for s in names for g in GROUPS}
        lost = [key_str(k) for k in cells if won(base_cells[k]) and not won(cells[k])]
        gained = [key_str(k) for k in cells if not won(base_cells[k]) and won(cells[k])]
        target = [cells[k] for k in lost_cells if k[1] == "linear" and k[3] == "brier"]
        print(f"| {label} | " + " | ".join(str(per[k]) for k in per)
              + f" | {sum(per.values())} | {len(lost)} / {len(gained)} | "
              + " | ".join(f"{means[k]['log_loss']:.5f}" for k in per) + " | "
              + " / ".join(f"{c[0]:.2f} v {c[1]:.2f}" for c in target) + " |")
        not_worse = all(means[k]["log_loss"] <= base_means[k]["log_loss"] for k in means)
        summary[label] = {
            "first": {f"{s} {g}": per[(s, g)] for s, g in per}, "total": sum(per.values()),
            "lost": lost, "gained": gained,
            "cells": {key_str(k): [round(v[0], 4), round(v[1], 4), v[2]]
                      for k, v in cells.items()},
            "means": {f"{s} {g}": {m: round(x, 6) if isinstance(x, float) else x
                                   for m, x in v.items()} for (s, g), v in means.items()},
            "keeps_all_won": not lost,
            "wins_all_target": all(won(cells[k]) for k in lost_cells
                                   if k[1] == "linear" and k[3] == "brier"),
            "improves_all_target": all(cells[k][0] < base_cells[k][0] for k in lost_cells
                                       if k[1] == "linear" and k[3] == "brier"),
            "log_loss_not_worse": not_worse}
    adoptable = [lab for lab, v in summary.items() if not lab.startswith("oracle")
                 and v["keeps_all_won"] and v["log_loss_not_worse"]
                 and (v["wins_all_target"] or v["improves_all_target"])
                 and lab != RULES[0][0]]
    print("\nadoptable by the brief's test (keeps every won cell, wins or improves every target "
          "cell, no group's mean log loss worse): " + (", ".join(adoptable) or "none"))
    if args.diagnose and "fresh" in suites:
        diagnose(suites["fresh"])
    if args.summary_json:
        with open(args.summary_json, "w") as fh:
            json.dump({"suites": {n: a[1:] for n, *a in args.suite}, "rules": summary,
                       "adoptable": adoptable}, fh)


def diagnose(suite):
    """The fresh suite's linear Brier cell task by task: auto's picks and Brier rank (of 18),
    pm-quadratic's rank, the candidate with the lowest held-out Brier, and where auto's pick
    is the lowest CV log loss and CV Brier; the fixed candidates' ranks; the counterfactual
    of our quadratic candidate replaced by pm-quadratic's figures."""
    table, recs, others = suite["table"], suite["recs"], suite["others"]
    idx = [i for i, d in enumerate(recs) if d["group"] == "linear"]
    rule = RULES[0][1]

    def rank(i, v, met="brier"):
        return rankdata([table[i]["results"][o][met] for o in others] + [v])[-1]

    print("\nfixed candidates in auto's place, fresh linear Brier rank (of 18) and mean Brier:")
    for n in NAMES:
        print(f"  {n}: {np.mean([rank(i, recs[i]['held'][n][1]) for i in idx]):.2f}, "
              f"{np.mean([recs[i]['held'][n][1] for i in idx]):.5f}")
    print("\n| task | N | auto's picks, fold seeds 0/1/2 | pick = lowest CV log loss / CV "
          "Brier | auto's Brier rank | pm-quadratic's | Brier of auto's seed-0 pick minus pm-quadratic's "
          "| lowest held-out Brier candidate (rank) |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for i in idx:
        d = recs[i]
        picks = [rule(suite["cv"][i][j]) for j in range(N_SEEDS)]
        agree = [f"{int(c == suite['cv'][i][j].ll_best)}/{int(c == suite['cv'][i][j].br_best)}"
                 for j, c in enumerate(picks)]
        ranks = [rank(i, d["held"][c][1]) for c in picks]
        pq = rankdata([table[i]["results"][o]["brier"] for o in others]
                      + [d["held"][picks[0]][1]])[others.index("pm-quadratic")]
        best = min(NAMES, key=lambda n: d["held"][n][1])
        rows.append((np.mean(ranks) - pq, f"| {d['task']} | {d['n']} | {', '.join(picks)} | "
                     f"{' '.join(agree)} | {np.mean(ranks):.2f} | {pq:g} | "
                     f"{d['held'][picks[0]][1] - table[i]['results']['pm-quadratic']['brier']:+.5f} | "
                     f"{best} "
                     f"({rank(i, d['held'][best][1]):g}) |"))
    for _, line in sorted(rows, key=lambda r: -r[0]):
        print(line)
    for label, repl in (("as collected", False), ("auto's quadratic replaced by pm-quadratic's "
                                                  "figures", True)):
        a, b = [], []
        for j in range(N_SEEDS):
            per = []
            for i in idx:
                c = rule(suite["cv"][i][j])
                v = (table[i]["results"]["pm-quadratic"]["brier"] if repl and c == "quadratic"
                     else recs[i]["held"][c][1])
                per.append(rankdata([table[i]["results"][o]["brier"] for o in others] + [v]))
            row = np.mean(per, axis=0)
            a.append(row[-1])
            b.append(row[:-1].min())
        print(f"fresh linear Brier, {label}: auto " + " / ".join(f"{x:.2f}" for x in a)
              + " v best other " + " / ".join(f"{x:.2f}" for x in b))


if __name__ == "__main__":
    main()
