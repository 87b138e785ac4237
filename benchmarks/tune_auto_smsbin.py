"""Binary ``auto`` with beta calibration shrunk toward temperature scaling (issue 26, the tree
log-loss cells; docs/auto.md, "What structured scaling does on trees").

probmetrics' structured matrix scaling (SMS) on two classes is a beta map on the
temperature-scaled, uniform-mixed probabilities with a ridge toward that temperature map. Its
nearest relative among mlcal's map kinds is beta calibration with ``identity_prior=K`` rows of
pseudo-data labelled with the temperature-scaling fit (``prior_center="temperature"``), one
:class:`~mlcal.maps.BetaMap`. This script replays ``auto``'s selection on two collections of
``tune_auto_rule.py`` (``--groups linear trees --fold-seeds 3 --repeated --save``, extended with
``--add-candidates 'beta:smooth_targets=false,prior_center="temperature",identity_prior=K'``)
and ranks each rule's pick against the peers' per-task tables (``variant_ranks``, the logit
family's entries refreshed), per fold seed 0 / 1 / 2:

* the temperature-centred beta in place of auto's beta, after it, first, or in place of
  temperature scaling (default rule: listed order, 0.25 paired SE);
* an anchor rule: the temperature-centred beta whenever its CV log loss is within ``m`` paired
  SE of the lowest, else the default rule's pick;
* the same anchor guarded: the default rule wherever the calibration scores are margins or
  saturate beyond the default clamp (what ``auto`` knows at fit time, :func:`guarded`);
* the candidates as fixed methods, and the held-out oracle.

The default is ``auto`` as released (``beta_prior=100``). Prints, per rule, the 24 cells
(2 suites x 2 groups x 2 metrics x 3 fold seeds) against the default and the adoption test
(keep every won cell, win a lost one, no group's mean log loss or Brier worse, AUC change
>= -0.002), and writes ``--out``/summary.json and cells.md.

    PYTHONPATH=. python benchmarks/tune_auto_smsbin.py --tune /tmp/smsbin/tune2.pkl \\
        --fresh /tmp/smsbin/fresh2.pkl --out benchmarks/results/auto_smsbin

The check on unseen tasks (:func:`unseen_tasks`), in three steps (the second in the peers'
environment; a pm-beta column, if betacal is there, must be dropped to keep the 17 entries):

    PYTHONPATH=. python benchmarks/tune_auto_smsbin.py --unseen-collect /tmp/unseen.pkl
    PYTHONPATH=. /work/peers/bin/python benchmarks/tune_auto_smsbin.py \\
        --unseen-peers /tmp/unseen_peers.json
    PYTHONPATH=. python benchmarks/tune_auto_smsbin.py --unseen-rank /tmp/unseen.pkl \\
        /tmp/unseen_peers.json
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import pickle
import sys

from scipy.stats import rankdata

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import tune_auto_rule as T  # noqa: E402
from mlcal.calibrators.auto import select_preferred  # noqa: E402
from mlcal.maps.binary import DEFAULT_CLAMP, data_clamp  # noqa: E402

K100 = "beta:smooth_targets=false,identity_prior=100"   # auto's beta candidate (beta_prior=100)
TB = 'beta:smooth_targets=false,prior_center="temperature",identity_prior='
DEFAULT = "default (beta_prior=100)"
DEF = [K100 if n == "beta" else n for n in T.DEFAULT_8]
SUITES = {"tuning": ("/tmp/autobin_peers.json", 0), "fresh": ("/tmp/autorobust_fresh_peers.json", 2)}
METS = ("log_loss", "brier")
#: the rules whose 24 cells are printed one by one
DETAIL = ("toward T, K=300, first", "anchor toward T, K=300, 0.5 SE", "anchor toward T, K=100, 1 SE",
          "anchor toward T, K=300, 0.5 SE, not on margins or saturated scores")


def guarded(record):
    """What ``auto`` knows at fit time: the calibration scores are margins (some outside
    [0, 1]), or probabilities saturated beyond the default clamp (the data-taken clamp is
    wider: naive Bayes)."""
    x = record["reps"][0]["x"]
    if x.min() < 0.0 or x.max() > 1.0:
        return True
    return data_clamp(x) != DEFAULT_CLAMP


def choose(record, names, criterion, se_rule, _orig=T.choose_rule):
    """``T.choose_rule`` plus ``"anchor"``: ``names[0]`` when within ``se_rule`` paired SE of
    the lowest CV log loss, else the default rule (0.25 SE, listed order) on ``names[1:]``;
    ``"anchor-guarded"``: the same, but the default rule wherever :func:`guarded`."""
    if criterion == "anchor-guarded":
        if guarded(record):
            return _orig(record, names[1:], "log-loss", 0.25)
        criterion = "anchor"
    if criterion != "anchor":
        return _orig(record, names, criterion, se_rule)
    results, weights = T.combine(record["reps"], 1, names)
    if (not isinstance(results[names[0]], str)
            and select_preferred(names, results, weights, se_rule)["chosen"] == names[0]):
        return names[0]
    return select_preferred(names[1:], results, weights, 0.25)["chosen"]


def rules(ks):
    out = [(DEFAULT, DEF, "log-loss", 0.25)]
    for k in ks:
        v = f"{TB}{k}"
        out += [(f"toward T, K={k}, replaces beta", [v if n == K100 else n for n in DEF], "log-loss", 0.25),
                (f"toward T, K={k}, after beta",
                 [m for n in DEF for m in ([n, v] if n == K100 else [n])], "log-loss", 0.25),
                (f"toward T, K={k}, first", [v] + DEF, "log-loss", 0.25),
                (f"toward T, K={k}, replaces temperature",
                 [v if n == "temperature" else n for n in DEF], "log-loss", 0.25)]
        out += [(f"anchor toward T, K={k}, {m:g} SE", [v] + DEF, "anchor", m)
                for m in (0.25, 0.5, 1.0, 1.5, 2.0)]
        out += [(f"anchor toward T, K={k}, {m:g} SE, not on margins or saturated scores",
                 [v] + DEF, "anchor-guarded", m) for m in (0.25, 0.5, 1.0)]
    nop = [n for n in DEF if n != "platt"]
    out += [("without platt", nop, "log-loss", 0.25), ("platt listed last", nop + ["platt"], "log-loss", 0.25)]
    out += [(f"fixed toward T, K={k}", [f"{TB}{k}"], "fixed", 0.0) for k in ks]
    out += [("fixed beta K=100 (auto's)", [K100], "fixed", 0.0), ("oracle", DEF, "oracle", 0.0)]
    return out


#: the lost tree log-loss cells: suite -> (the best other entry, fold seeds)
LOST = {"tuning": ("pm-ts-mix", (1,)), "fresh": ("pm-sms", (1, 2))}
FLEXIBLE = ("isotonic", "elite", "spline")


def gap(suite, data):
    """Where ``auto`` (the default rule) loses the suite's lost tree log-loss cells: per pick
    kind, the number of tasks and the sum over tasks of auto's log-loss rank minus the rival's,
    over the number of tree tasks (the rank points each kind adds to the cell); and auto's rank
    minus the rank of the best own candidate on the held-out rows (the oracle)."""
    rival, seeds = LOST[suite]
    pj, skip = SUITES[suite]
    with contextlib.redirect_stdout(io.StringIO()):
        table, recs, others, _ = T.kept_tasks(data, pj, skip)
        T.refresh_entries(table, recs)
    idx = [i for i, d in enumerate(recs) if d["group"] == "trees"]
    out = []
    for j in seeds:
        kinds = collections.defaultdict(lambda: [0, 0.0])
        oracle = 0.0
        for i in idx:
            d, row = recs[i], table[i]["results"]
            pick = T.choose_rule(dict(d, reps=d["reps"][j:j + 1]), DEF, "log-loss", 0.25)
            peers = [row[o]["log_loss"] for o in others]
            r = rankdata(peers + [d["held"][pick][0]])
            best = min(DEF, key=lambda n: d["held"][n][0])
            oracle += r[-1] - rankdata(peers + [d["held"][best][0]])[-1]
            name = pick.partition(":")[0]
            kind = (name if name in ("temperature", "platt") else
                    "flexible" if name in FLEXIBLE else "other parametric")
            kinds[kind][0] += 1
            kinds[kind][1] += r[-1] - r[others.index(rival)]
        n = len(idx)
        out.append(f"| {suite}, seed {j} (v {rival}) | {sum(v[1] for v in kinds.values()) / n:+.2f} | "
                   + " | ".join(f"{kinds[k][1] / n:+.2f} ({kinds[k][0]})" for k in
                                ("temperature", "platt", "flexible", "other parametric"))
                   + f" | {oracle / n:+.2f} |")
    return out


#: the entries of the peers' tables (bench_quality.py --peers --methods ...), auto included
UNSEEN_METHODS = ["auto", "beta", "platt-logit", "temperature", "platt", "isotonic", "venn-abers",
                  "spline+bs", "elite+bs", "histogram+bs", "pm-svs", "pm-sms", "pm-ts-mix",
                  "pm-quadratic", "nc-logistic", "nc-beta", "sk-isotonic", "uncalibrated"]


def unseen_tasks():
    """Tasks neither suite holds: breast cancer and digits splits 4-5 (split seeds 4 and 5),
    make_classification at 400 and 800 calibration rows."""
    from bench_quality import real_tasks
    seen = {}
    for t in real_tasks([400, 800], 6, ("linear", "trees")):
        seen[t.name] = seen.get(t.name, 0) + 1
        if t.name.startswith("mc-") or seen[t.name] > 4:
            yield t


def unseen_collect(path, k=300):
    """auto's candidates and the temperature-centred beta (``k`` rows) on :func:`unseen_tasks`
    (``tune_auto_rule.collect``, 3 fold seeds), pickled to ``path``."""
    data = T.collect(list(unseen_tasks()), tuple(DEF) + (f"{TB}{k}",), 3)
    with open(path, "wb") as fh:
        pickle.dump(data, fh)


def unseen_peers(path):
    """The peers' per-task table on :func:`unseen_tasks` (run in the peers' environment)."""
    from bench_quality import run_task
    rows = [{"task": t.name, "n_cal": t.n_cal, "results": run_task(t, UNSEEN_METHODS)}
            for t in unseen_tasks()]
    with open(path, "w") as fh:
        json.dump(rows, fh, indent=1)


def unseen_rank(collection, table, k=300):
    """The default, the (guarded) anchors and the fixed variant ranked on the unseen tasks."""
    with open(collection, "rb") as fh:
        data = pickle.load(fh)   # written by unseen_collect
    v = f"{TB}{k}"
    rules = [(DEFAULT, DEF, "log-loss", 0.25)]
    for m in (0.25, 0.5, 1.0):
        rules += [(f"guarded anchor K={k}, {m:g} SE", [v] + DEF, "anchor-guarded", m),
                  (f"anchor K={k}, {m:g} SE", [v] + DEF, "anchor", m)]
    rules += [(f"fixed K={k} toward T", [v], "fixed", 0.0), ("oracle", DEF, "oracle", 0.0)]
    with contextlib.redirect_stdout(io.StringIO()):
        summ = T.variant_ranks(data, table, ["linear", "trees"], rules=rules, refresh=False)
    for label, *_ in rules:
        for g in ("linear", "trees"):
            x = summ[f"{label} | {g}"]
            f = lambda c: " / ".join(f"{a:.2f} v {b:.2f}" for a, b in c)  # noqa: E731
            print(f"| {label} | {g} | {f(x['cells']['log_loss'])} | {f(x['cells']['brier'])} | "
                  f"{x['first']} | {x['log_loss']:.5f} | {x['brier']:.5f} | {x['auc']:+.5f} |")
    return summ


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tune", help="the tuning suite's collection (pickle)")
    ap.add_argument("--fresh", help="the fresh suite's collection (pickle)")
    ap.add_argument("--unseen-collect", metavar="PKL",
                    help="collect the unseen tasks' candidates to PKL and stop")
    ap.add_argument("--unseen-peers", metavar="JSON",
                    help="the peers' table of the unseen tasks to JSON (peers' venv) and stop")
    ap.add_argument("--unseen-rank", nargs=2, metavar=("PKL", "JSON"),
                    help="rank the rules on the unseen tasks and stop")
    ap.add_argument("--k", type=int, nargs="+", default=[3, 10, 30, 100, 300])
    ap.add_argument("--out", default=None, help="directory for summary.json and cells.md")
    args = ap.parse_args(argv)
    T.choose_rule = choose
    if args.unseen_collect:
        return unseen_collect(args.unseen_collect)
    if args.unseen_peers:
        return unseen_peers(args.unseen_peers)
    if args.unseen_rank:
        return unseen_rank(*args.unseen_rank)
    if not (args.tune and args.fresh):
        ap.error("--tune and --fresh are required")
    sums = {}
    gaps = ["| cell | total | temperature picks | Platt-on-score picks | flexible picks | "
            "other parametric picks | auto minus the best own candidate |",
            "|---|---|---|---|---|---|---|"]
    for suite, path in (("tuning", args.tune), ("fresh", args.fresh)):
        with open(path, "rb") as fh:
            data = pickle.load(fh)   # a collection this project's tune_auto_rule.py wrote
        gaps += gap(suite, data)
        ks = [k for k in args.k if f"{TB}{k}" in data[0]["held"]]
        pj, skip = SUITES[suite]
        with contextlib.redirect_stdout(io.StringIO()):
            sums[suite] = T.variant_ranks(data, pj, ["linear", "trees"], rules=rules(ks),
                                          skip_splits=skip, refresh=True)
    lines = (["Where auto loses the tree log-loss cells (rank points per pick kind, tasks in "
              "brackets)", ""] + gaps + [""] + report(sums))
    print("\n".join(lines))
    if args.out:
        with open(f"{args.out}/summary.json", "w") as fh:
            json.dump(sums, fh, indent=1)
        with open(f"{args.out}/cells.md", "w") as fh:
            fh.write("\n".join(lines) + "\n")


def report(sums):
    def cells(label):
        return {(s, g, met, j): tuple(ab) for s in sums for g in ("linear", "trees")
                for met in METS for j, ab in enumerate(sums[s][f"{label} | {g}"]["cells"][met])}

    def means(label):
        return {(s, g): tuple(sums[s][f"{label} | {g}"][k] for k in ("log_loss", "brier", "auc"))
                for s in sums for g in ("linear", "trees")}

    base, bm = cells(DEFAULT), means(DEFAULT)
    labels = list(dict.fromkeys(v["label"] for v in sums["tuning"].values()))
    out = ["| rule | tuning first | fresh first | total | lost -> won | won -> lost | mean log loss worse | mean Brier worse | passes |",
           "|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda ks: "; ".join(f"{k[0]} {k[1]} {k[2].replace('_', ' ')} s{k[3]}" for k in ks) or "-"  # noqa: E731
    for label in labels:
        if not all(f"{label} | {g}" in sums[s] for s in sums for g in ("linear", "trees")):
            continue
        c, m = cells(label), means(label)
        first = {s: sum(c[k][0] < c[k][1] for k in c if k[0] == s) for s in sums}
        gained = [k for k in c if c[k][0] < c[k][1] and not base[k][0] < base[k][1]]
        lost = [k for k in c if not c[k][0] < c[k][1] and base[k][0] < base[k][1]]
        llw = [f"{k[0]} {k[1]} {m[k][0] - bm[k][0]:+.5f}" for k in m if m[k][0] > bm[k][0] + 1e-12]
        brw = [f"{k[0]} {k[1]} {m[k][1] - bm[k][1]:+.5f}" for k in m if m[k][1] > bm[k][1] + 1e-12]
        ok = bool(gained) and not lost and not llw and not brw and min(v[2] for v in m.values()) >= -0.002
        out.append(f"| {label} | {first['tuning']} | {first['fresh']} | {sum(first.values())} | "
                   f"{fmt(gained)} | {fmt(lost)} | {', '.join(llw) or '-'} | {', '.join(brw) or '-'} | "
                   f"{'yes' if ok else 'no'} |")
    for label in [lb for lb in labels if lb in DETAIL]:
        c, m = cells(label), means(label)
        out += ["", f"Per cell, default -> {label} (auto's rank v the best other entry's, fold seeds 0 / 1 / 2)", "",
                "| suite | group | metric | default | rule | first |", "|---|---|---|---|---|---|"]
        for s in sums:
            for g in ("linear", "trees"):
                for met in METS:
                    ks = [(s, g, met, j) for j in range(3)]
                    f = lambda cc: " / ".join(f"{cc[k][0]:.2f} v {cc[k][1]:.2f}" for k in ks)  # noqa: E731
                    out.append(f"| {s} | {g} | {met.replace('_', ' ')} | {f(base)} | {f(c)} | "
                               f"{sum(base[k][0] < base[k][1] for k in ks)} -> {sum(c[k][0] < c[k][1] for k in ks)} |")
        out += ["", "| suite | group | log loss | Brier | AUC change |", "|---|---|---|---|---|"]
        out += [f"| {k[0]} | {k[1]} | {bm[k][0]:.5f} -> {m[k][0]:.5f} | {bm[k][1]:.5f} -> {m[k][1]:.5f} | "
                f"{bm[k][2]:+.5f} -> {m[k][2]:+.5f} |" for k in bm]
    return out


if __name__ == "__main__":
    main()
