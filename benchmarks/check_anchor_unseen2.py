"""A second held-out check of the temperature anchor (issue 26; docs/auto.md, 'A second unseen
check'): ``AutoCalibrator(anchor="beta-temperature", anchor_se=1.0, anchor_prior=300)`` against
the released default ``AutoCalibrator()`` on tasks no earlier collection used.

The tasks (:func:`unseen2_tasks`), both groups (linear: LR, NB, SVM; trees: HGB, XGB, LGBM, RF):

* breast cancer and digits < 5, split seeds 6-9 of ``bench_quality.real_tasks`` (the suites
  and the first unseen check used split seeds 0-5);
* digits, odd vs even (a target no collection used), split seeds 0-1, split as ``real_tasks``
  splits;
* make_classification at random states 23 (balanced) and 29 (imbalanced, 5% positives, 5%
  flipped labels), 300 and 1,500 calibration rows (every earlier collection used random
  state 11, at 200-1,000,000 rows), base models seeded 1.

Three steps, as ``tune_auto_smsbin.py --unseen-*`` (the second in the peers' environment):

    PYTHONPATH=. python benchmarks/check_anchor_unseen2.py --collect /tmp/unseen2.pkl
    PYTHONPATH=. /work/peers/bin/python benchmarks/check_anchor_unseen2.py \\
        --peers /tmp/unseen2_peers.json
    PYTHONPATH=. python benchmarks/check_anchor_unseen2.py --rank /tmp/unseen2.pkl \\
        /tmp/unseen2_peers.json --out benchmarks/results/auto_smsbin

``--collect`` is ``tune_auto_smsbin.unseen_collect`` (auto's candidates and the K = 300
temperature-centred beta, ``tune_auto_rule.collect``, fold seeds 0 / 1 / 2) plus, per task and
fold seed j, the real ``AutoCalibrator(seed=j)`` and ``AutoCalibrator(anchor=..., seed=j)``
fitted on the calibration rows; it prints where they disagree with the replay (chosen method,
held-out log loss to 1e-9). ``--rank`` ranks, per group x metric x fold seed, the released
default, the anchored auto and the oracle against the peers' 17 other entries
(``tune_auto_rule.variant_ranks``, as ``--unseen-rank`` does).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import pickle
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits, make_classification
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import tune_auto_rule as T  # noqa: E402
import tune_auto_smsbin as S  # noqa: E402
from bench_quality import Task, base_models, family, model_scores, real_tasks  # noqa: E402
from mlcal import AutoCalibrator  # noqa: E402

K = 300
ANCHOR_SE = 1.0
V = f"{S.TB}{K}"
#: auto's chosen_ -> the collection's candidate name
ALIAS = {"beta": S.K100, "beta-temperature": V}
MC = {"mc2-easy": (23, {}), "mc2-imbalanced": (29, {"weights": [0.95], "flip_y": 0.05})}
MC_SIZES = (300, 1500)


def split_tasks(name, X, y, seeds):
    """Tasks from one data set: half train, a quarter calibration, a quarter test, stratified,
    per split seed (the splits of ``bench_quality.real_tasks``)."""
    for seed in seeds:
        X_tr, X_rest, y_tr, y_rest = train_test_split(X, y, test_size=0.5, stratify=y,
                                                      random_state=seed)
        X_cal, X_te, y_cal, y_te = train_test_split(X_rest, y_rest, test_size=0.5,
                                                    stratify=y_rest, random_state=seed)
        for mname, est in base_models(seed).items():
            model = make_pipeline(StandardScaler(), est).fit(X_tr, y_tr)
            yield Task(f"{name}/{mname}", len(y_cal), model_scores(model, X_cal), y_cal,
                       model_scores(model, X_te), y_te, group=family(mname))


def unseen2_tasks():
    """The tasks of the second unseen check (module docstring), in a fixed order."""
    # breast cancer and digits < 5 come first in real_tasks, 10 split seeds x the base models
    # each; without sizes its make_classification tasks are never built
    n_small = 2 * 10 * len(base_models(0))
    seen = {}
    for t in itertools.islice(real_tasks([], 10), n_small):
        seen[t.name] = seen.get(t.name, 0) + 1
        if seen[t.name] > 6:
            yield t
    digits = load_digits()
    yield from split_tasks("digits-odd", digits.data, digits.target % 2, (0, 1))
    for name, (state, kw) in MC.items():
        n_total = 4000 + 20_000 + max(MC_SIZES)
        X, y = make_classification(n_samples=n_total, n_features=20, n_informative=6,
                                   random_state=state, **kw)
        for mname, est in base_models(1).items():
            model = make_pipeline(StandardScaler(), est).fit(X[:4000], y[:4000])
            s_te = model_scores(model, X[4000:24_000])
            for n in MC_SIZES:
                yield Task(f"{name}/{mname}", n, model_scores(model, X[24_000:24_000 + n]),
                           y[24_000:24_000 + n], s_te, y[4000:24_000], group=family(mname))


def real_fits(task, record):
    """The real default and anchored ``AutoCalibrator`` per fold seed, fitted on the task's
    calibration rows: held-out (log loss, Brier, AUC change) under ``held["real-default@j"]``
    and ``held["real-anchor@j"]`` (``@0`` also without the suffix), the choices under
    ``record["real"]``; returns the disagreements with the replay."""
    s, y = np.asarray(task.s_cal, dtype=float), task.y_cal
    auc_before = roc_auc_score(task.y_test, task.s_test)
    record["real"], bad = {}, []
    for j in range(len(record["reps"])):
        record["reps"][j]["fold_seed"] = j
        one = dict(record, reps=record["reps"][j:j + 1])
        want = {"default": T.choose_rule(one, S.DEF, "log-loss", 0.25),
                "anchor": S.choose(one, [V] + S.DEF, "anchor-guarded", ANCHOR_SE)}
        for kind, params in (("default", {}), ("anchor", {"anchor": "beta-temperature",
                                                           "anchor_se": ANCHOR_SE,
                                                           "anchor_prior": float(K)})):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cal = AutoCalibrator(seed=j, **params).fit(s, y)
            p = cal.predict(task.s_test)
            held = (T.log_loss(task.y_test, p), T.brier(task.y_test, p),
                    roc_auc_score(task.y_test, p) - auc_before)
            record["held"][f"real-{kind}@{j}"] = held
            if j == 0:
                record["held"][f"real-{kind}"] = held
            got = ALIAS.get(cal.chosen_, cal.chosen_)
            guard = cal.selection_["anchor"]["guard"] if kind == "anchor" else None
            record["real"][f"{kind}@{j}"] = (cal.chosen_, guard)
            if got != want[kind] or abs(held[0] - record["held"][want[kind]][0]) > 1e-9:
                bad.append(f"  {task.name} N={task.n_cal} seed {j} {kind}: auto {got} "
                           f"{held[0]:.6f}, replay {want[kind]} "
                           f"{record['held'][want[kind]][0]:.6f}")
    return bad


def collect(path):
    tasks = list(unseen2_tasks())
    start = time.process_time()
    data = T.collect(tasks, tuple(S.DEF) + (V,), 3)
    bad = []
    for task, d in zip(tasks, data):
        bad += real_fits(task, d)
    print("\n".join(bad))
    n = 3 * len(data)
    anchored = sum(c == "beta-temperature" for d in data for k, (c, _) in d["real"].items()
                   if k.startswith("anchor"))
    guarded = sum(g is not None for d in data for k, (_, g) in d["real"].items()
                  if k.startswith("anchor"))
    print(f"check: {2 * n - len(bad)} of {2 * n} fits agree with the replay ({len(data)} "
          f"tasks x 3 fold seeds x default/anchor; choice and held-out log loss to 1e-9); "
          f"anchor chosen on {anchored} of {n}, guard applied on {guarded}; "
          f"CPU {time.process_time() - start:.0f} s")
    with open(path, "wb") as fh:
        pickle.dump(data, fh)


def peers(path):
    """The peers' per-task table (peers' environment), as ``tune_auto_smsbin.unseen_peers``."""
    from bench_quality import run_task
    start = time.process_time()
    rows = []
    for i, t in enumerate(unseen2_tasks()):
        rows.append({"task": t.name, "n_cal": t.n_cal, "results": run_task(t, S.UNSEEN_METHODS)})
        print(f"[{i + 1}] {t.name} N={t.n_cal}", file=sys.stderr)
    with open(path, "w") as fh:
        json.dump(rows, fh, indent=1)
    print(f"{len(rows)} tasks, CPU {time.process_time() - start:.0f} s")


def choose(record, names, criterion, se_rule, _orig=S.choose):
    """``tune_auto_smsbin.choose`` plus ``"real"``: the real fit ``names[0]`` of the record's
    fold seed."""
    if criterion == "real":
        return f"{names[0]}@{record['reps'][0]['fold_seed']}"
    return _orig(record, names, criterion, se_rule)


RULES = [("released auto (AutoCalibrator())", ["real-default"], "real", 0.0),
         ("anchored auto (anchor, 1 SE, K=300)", ["real-anchor"], "real", 0.0),
         ("replay: default", S.DEF, "log-loss", 0.25),
         ("replay: guarded anchor K=300, 1 SE", [V] + S.DEF, "anchor-guarded", ANCHOR_SE),
         ("oracle", S.DEF, "oracle", 0.0)]


def rank(collection, table, out=None):
    with open(collection, "rb") as fh:
        data = pickle.load(fh)   # written by --collect
    T.choose_rule = choose
    with contextlib.redirect_stdout(io.StringIO()):
        summ = T.variant_ranks(data, table, ["linear", "trees"], rules=RULES, refresh=False)
    with open(table) as fh:
        others = [m for m in json.load(fh)[0]["results"] if not m.startswith("auto")]
    groups = {g: sum(d["group"] == g for d in data) for g in ("linear", "trees")}
    f = lambda c: " / ".join(f"{a:.2f} v {b:.2f}" for a, b in c)  # noqa: E731
    lines = [f"{len(data)} tasks ({groups['linear']} linear, {groups['trees']} trees); ranked "
             f"against {len(others)} other entries: {', '.join(sorted(others))}", "",
             "| rule | group | LL rank v best other, seeds 0 / 1 / 2 | Brier rank v best other | "
             "first (of 6) | log loss | Brier | AUC change |", "|---|---|---|---|---|---|---|---|"]
    for label, *_ in RULES:
        for g in ("linear", "trees"):
            x = summ[f"{label} | {g}"]
            lines.append(f"| {label} | {g} | {f(x['cells']['log_loss'])} | "
                         f"{f(x['cells']['brier'])} | {x['first']} | {x['log_loss']:.5f} | "
                         f"{x['brier']:.5f} | {x['auc']:+.5f} |")
    lines.append("")
    for label, *_ in RULES:
        lines.append(f"{label}: first on {sum(summ[f'{label} | {g}']['first'] for g in groups)}"
                     " of 12 cells")
    # the best entries per group x metric on fold seed 0, the released auto in the table's place
    with open(table) as fh:
        rows = json.load(fh)
    recs = [d for d in data if d["group"] != "sim"]
    for g in groups:
        idx = [i for i, d in enumerate(recs) if d["group"] == g]
        for k, met in enumerate(T.METRICS):
            names = others + ["auto"]
            ranks = np.mean([T.rankdata([rows[i]["results"][o][met] for o in others]
                                        + [recs[i]["held"]["real-default@0"][k]]) for i in idx],
                            axis=0)
            top = sorted(zip(ranks, names))[:5]
            lines.append(f"{g} {met} {len(idx)} tasks, best mean ranks (auto = released, seed 0): "
                         + ", ".join(f"{n} {r:.2f}" for r, n in top))
    lines += ["", *by_data_set(recs)]
    print("\n".join(lines))
    if out:
        with open(f"{out}/unseen2_summary.json", "w") as fh:
            json.dump(summ, fh, indent=1)
    return summ, lines


def by_data_set(recs):
    """Per data set and group, over the 3 fold seeds: the real fits' mean held-out log loss,
    Brier and AUC change, default -> anchor, the fits where the anchor is chosen or the guard
    applies, and the fits where the anchored auto's log loss is lower / higher."""
    out = ["| data set | group | tasks | log loss, default -> anchor | Brier | AUC change | "
           "anchor chosen / guarded (fits) | anchor LL lower / higher (fits) |",
           "|---|---|---|---|---|---|---|---|"]
    keys = dict.fromkeys((d["task"].partition("/")[0], d["group"]) for d in recs)
    for ds, g in keys:
        sel = [d for d in recs if d["task"].partition("/")[0] == ds and d["group"] == g]
        dv = np.array([d["held"][f"real-default@{j}"] for d in sel for j in range(3)])
        av = np.array([d["held"][f"real-anchor@{j}"] for d in sel for j in range(3)])
        chosen = sum(d["real"][f"anchor@{j}"][0] == "beta-temperature" for d in sel
                     for j in range(3))
        guard = sum(d["real"][f"anchor@{j}"][1] is not None for d in sel for j in range(3))
        out.append(f"| {ds} | {g} | {len(sel)} | {dv[:, 0].mean():.5f} -> {av[:, 0].mean():.5f} | "
                   f"{dv[:, 1].mean():.5f} -> {av[:, 1].mean():.5f} | "
                   f"{np.nanmean(dv[:, 2]):+.5f} -> {np.nanmean(av[:, 2]):+.5f} | "
                   f"{chosen} / {guard} | "
                   f"{int(np.sum(av[:, 0] < dv[:, 0] - 1e-12))} / "
                   f"{int(np.sum(av[:, 0] > dv[:, 0] + 1e-12))} |")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--collect", metavar="PKL")
    ap.add_argument("--peers", metavar="JSON")
    ap.add_argument("--rank", nargs=2, metavar=("PKL", "JSON"))
    ap.add_argument("--out", default=None, help="directory for unseen2_summary.json")
    ap.add_argument("--list", action="store_true", help="list the tasks and stop")
    args = ap.parse_args(argv)
    if args.list:
        for t in unseen2_tasks():
            print(t.name, t.group, t.n_cal, len(t.y_test), f"{np.mean(t.y_cal):.3f}")
        return None
    if args.collect:
        return collect(args.collect)
    if args.peers:
        return peers(args.peers)
    if args.rank:
        return rank(*args.rank, out=args.out)
    ap.error("one of --collect, --peers, --rank, --list")


if __name__ == "__main__":
    main()
