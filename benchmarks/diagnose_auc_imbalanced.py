"""Why ``auto`` loses AUC on imbalanced make_classification with linear bases (issue 26's AUC
goal; docs/auto.md, 'AUC on imbalanced data').

The tasks (:func:`imbalanced_tasks`): make_classification as ``check_anchor_unseen2.py`` builds
its ``mc2-imbalanced`` tasks (5% positives, 5% flipped labels, 20 features, 6 informative; 4,000
training rows, 20,000 test rows, then 300 or 1,500 calibration rows; base models seeded 1),
linear bases only (LR, NB, SVM), at random state 29 (unseen2's, diagnosed, never tuned on) and
31, 37, 41 (no earlier collection used them).

    PYTHONPATH=. python benchmarks/diagnose_auc_imbalanced.py --collect /tmp/aucimb/imb.pkl
    PYTHONPATH=. /work/peers/bin/python benchmarks/diagnose_auc_imbalanced.py \\
        --peers /tmp/aucimb/imb_peers.json
    PYTHONPATH=. python benchmarks/diagnose_auc_imbalanced.py --diagnose /tmp/aucimb/imb.pkl \\
        /tmp/aucimb/imb_peers.json

The opt-in ``AutoCalibrator(strict_order=1e-6)``, replayed (``--add-strict`` refits every
piecewise-linear candidate of a collection with ``auto.strictly_increasing``; ``--replay``
ranks the rules on the two suites as tune_auto_smsbin.py does, then on each ``--check`` set;
``--real-check`` fits the real AutoCalibrator on the imbalanced tasks against the replay):

    PYTHONPATH=. python benchmarks/diagnose_auc_imbalanced.py --add-strict \
        /tmp/smsbin/tune2.pkl tuning /tmp/aucimb/tune_s.pkl     # likewise fresh, unseen2
    PYTHONPATH=. python benchmarks/diagnose_auc_imbalanced.py --add-strict /tmp/aucimb/imb.pkl \
        imbalanced /tmp/aucimb/imb_s.pkl
    PYTHONPATH=. python benchmarks/diagnose_auc_imbalanced.py --real-check /tmp/aucimb/imb_s.pkl
    PYTHONPATH=. python benchmarks/diagnose_auc_imbalanced.py --replay /tmp/aucimb/tune_s.pkl \
        /tmp/aucimb/fresh_s.pkl --check /tmp/aucimb/imb_s.pkl /tmp/aucimb/imb_peers.json \
        --check /tmp/aucimb/unseen2_s.pkl /tmp/unseen2_peers.json

``--collect`` is ``tune_auto_rule.collect`` (auto's candidates and the K = 300
temperature-centred beta, fold seeds 0 / 1 / 2) plus, per candidate, where its held-out AUC
went (:func:`tie_split`). ``--diagnose`` prints per task the choice of the default and anchored
rules per fold seed, each candidate's CV log loss margin over the lowest in paired SE, and
every candidate's held-out log loss and AUC change, and the peers' AUC change.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import pickle
import sys
import time
import warnings

import numpy as np
from sklearn.datasets import make_classification
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import tune_auto_rule as T  # noqa: E402
import tune_auto_smsbin as S  # noqa: E402
from bench_quality import Task, base_models, family, model_scores  # noqa: E402

K = 300
V = f"{S.TB}{K}"
STATES = (29, 31, 37, 41)
SIZES = (300, 1500)


def imbalanced_tasks(states=STATES, sizes=SIZES):
    """Imbalanced make_classification tasks, linear bases (module docstring)."""
    for state in states:
        X, y = make_classification(n_samples=24_000 + max(sizes), n_features=20,
                                   n_informative=6, random_state=state, weights=[0.95],
                                   flip_y=0.05)
        for mname, est in base_models(1, families=("linear",)).items():
            model = make_pipeline(StandardScaler(), est).fit(X[:4000], y[:4000])
            s_te = model_scores(model, X[4000:24_000])
            for n in sizes:
                yield Task(f"mc-imb{state}/{mname}", n,
                           model_scores(model, X[24_000:24_000 + n]), y[24_000:24_000 + n],
                           s_te, y[4000:24_000], group=family(mname))


def tie_split(s, p, y):
    """Where a map's held-out AUC change went, ``(ends, flat, other)``, summing to the AUC of
    ``p`` minus that of the scores ``s``. A non-decreasing map loses AUC only through pairs it
    ties that the scores ordered: ``ends`` is the part from pairs tied at the map's lowest or
    highest output on these rows (clamp, or a flat first/last step), ``flat`` the part from
    ties elsewhere (interior flat steps), ``other`` the remainder (order reversals: none for a
    monotone map)."""
    s, p, y = (np.asarray(a, dtype=float) for a in (s, p, y))
    base = roc_auc_score(y, s)
    full = roc_auc_score(y, p)
    end = (p == p.min()) | (p == p.max())
    ends_broken = roc_auc_score(y, _break(p, s, end))
    all_broken = roc_auc_score(y, _break(p, s, np.ones_like(end)))
    return full - ends_broken, ends_broken - all_broken, all_broken - base


def _break(p, s, where):
    """Ranks of ``p`` with its ties broken by ``s`` on rows ``where`` (others keep ties)."""
    order = np.lexsort((np.where(where, s, 0.0), p))
    ps, ws, ss = p[order], where[order], np.where(where, s, 0.0)[order]
    new = np.r_[True, (ps[1:] != ps[:-1]) | (ws[1:] & (ss[1:] != ss[:-1]))
                | (ws[1:] != ws[:-1])]
    ranks = np.empty(len(p))
    ranks[order] = np.cumsum(new)
    return ranks


def collect(path, states=STATES):
    tasks = list(imbalanced_tasks(states))
    start = time.process_time()
    data = T.collect(tasks, tuple(S.DEF) + (V,), 3)
    auto = T._Auto()
    for task, d in zip(tasks, data):
        d["ties"], d["distinct"] = {}, {}
        d["distinct"]["scores"] = int(np.unique(task.s_test).size)
        for name in tuple(S.DEF) + (V,):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                p = auto.candidate(name).fit(np.asarray(task.s_cal, float),
                                             task.y_cal).predict(task.s_test)
            d["ties"][name] = tie_split(task.s_test, p, task.y_test)
            d["distinct"][name] = int(np.unique(p).size)
        d["pos_cal"] = int(np.sum(task.y_cal))
    print(f"{len(data)} tasks, CPU {time.process_time() - start:.0f} s")
    with open(path, "wb") as fh:
        pickle.dump(data, fh)


def peers(path, states=STATES):
    from bench_quality import run_task
    rows = []
    for t in imbalanced_tasks(states):
        rows.append({"task": t.name, "n_cal": t.n_cal,
                     "results": run_task(t, S.UNSEEN_METHODS)})
        print(f"{t.name} N={t.n_cal}", file=sys.stderr)
    with open(path, "w") as fh:
        json.dump(rows, fh, indent=1)


SHORT = {S.K100: "beta", V: "beta-T300"}
PEER_SHOW = ("pm-sms", "pm-svs", "pm-quadratic", "sk-isotonic", "venn-abers", "isotonic",
             "spline+bs", "elite+bs", "histogram+bs", "temperature", "platt", "nc-beta")


def choices(d):
    """(default, anchored) choice per fold seed, as the released and anchored auto choose."""
    out = []
    for j in range(len(d["reps"])):
        one = dict(d, reps=d["reps"][j:j + 1])
        out.append((T.choose_rule(one, S.DEF, "log-loss", 0.25),
                    S.choose(one, [V] + S.DEF, "anchor-guarded", 1.0)))
    return out


def margins(d, j=0):
    """Per candidate: (CV log loss - lowest) / paired SE on fold seed ``j``, and the lowest."""
    results, weights = T.combine(d["reps"][j:j + 1], 1, S.DEF + [V])
    rec = T.select_one_se(S.DEF + [V], results, weights, 0.0)
    rows = {r["method"]: r for r in rec["candidates"] if "cv_log_loss" in r}
    low = rows[rec["best"]]["cv_log_loss"]
    return {n: (r["cv_log_loss"] - low) / r["se"] if r["se"] > 0 else 0.0
            for n, r in rows.items()}, rec["best"]


def diagnose(collection, peers_json):
    with open(collection, "rb") as fh:
        data = pickle.load(fh)
    with open(peers_json) as fh:
        table = {(r["task"], r["n_cal"]): r["results"] for r in json.load(fh)}
    names = S.DEF + [V]
    for d in data:
        ch = choices(d)
        m, best = margins(d)
        print(f"\n### {d['task']} N={d['n']} ({d['pos_cal']} positives); chosen per fold "
              f"seed (default / anchored): " + ", ".join(f"{SHORT.get(a, a)} / "
                                                        f"{SHORT.get(b, b)}" for a, b in ch))
        print("| candidate | CV LL margin (SE), seed 0 | held-out LL | AUC change | of it: ends "
              "| flat steps | other | distinct test outputs |")
        print("|---|---|---|---|---|---|---|---|")
        for n in names:
            ll, _, auc = d["held"][n]
            e, f, o = d["ties"][n]
            print(f"| {SHORT.get(n, n)} | {m.get(n, float('nan')):.2f} | {ll:.5f} | {auc:+.5f} "
                  f"| {e:+.5f} | {f:+.5f} | {o:+.5f} | {d['distinct'][n]} "
                  f"(scores {d['distinct']['scores']}) |")
        peer = table[(d["task"], d["n"])]
        print("peers, AUC change: " + ", ".join(f"{p} {peer[p]['auc_change']:+.5f}"
                                               for p in PEER_SHOW if p in peer))
    summary(data, table)


def summary(data, table):
    """Means over tasks, per random state and overall."""
    names = S.DEF + [V]
    states = sorted({d["task"].split("/")[0] for d in data})
    print("\n| candidate / rule | " + " | ".join(f"{s} AUC change" for s in states)
          + " | all: AUC change | all: log loss | ends | flat |")
    print("|---|" + "---|" * (len(states) + 4))
    rows = [(SHORT.get(n, n), lambda d, j, n=n: n) for n in names]
    rows += [("default rule", lambda d, j: choices(d)[j][0]),
             ("anchored rule", lambda d, j: choices(d)[j][1]),
             ("oracle (held-out LL)", lambda d, j: T.choose_oracle(d, S.DEF, 0, 1))]
    for label, pick in rows:
        vals = {s: [] for s in states}
        ll, ends, flat = [], [], []
        for d in data:
            for j in range(len(d["reps"])):
                n = pick(d, j)
                vals[d["task"].split("/")[0]].append(d["held"][n][2])
                ll.append(d["held"][n][0])
                ends.append(d["ties"][n][0])
                flat.append(d["ties"][n][1])
        allv = [v for s in states for v in vals[s]]
        print(f"| {label} | " + " | ".join(f"{np.mean(vals[s]):+.5f}" for s in states)
              + f" | {np.mean(allv):+.5f} | {np.mean(ll):.5f} | {np.mean(ends):+.5f} "
                f"| {np.mean(flat):+.5f} |")
    for p in PEER_SHOW + ("auto", "beta", "platt-logit"):
        vals = {s: [] for s in states}
        for d in data:
            r = table[(d["task"], d["n"])]
            if p in r:
                vals[d["task"].split("/")[0]].append(r[p]["auc_change"])
        allv = [v for s in states for v in vals[s]]
        print(f"| peer table: {p} | " + " | ".join(f"{np.mean(vals[s]):+.5f}" for s in states)
              + f" | {np.mean(allv):+.5f} | | | |")


#: candidates whose maps keep the scores' order (strictly increasing in the score, up to the
#: clamp): the one-parameter and two-parameter logit family and Platt scaling
STRICT = ("temperature", "platt-logit", "beta", "platt")
ANCHORED = "anchored (guarded, K=300, 1 SE)"


def choose(record, names, criterion, se_rule, _orig=S.choose):
    """``tune_auto_smsbin.choose`` plus ``"strict|<base>|<loose>"``: the ``base`` rule's pick
    (``default``: listed order, 0.25 SE; ``anchored``: the guarded anchor, 1 SE); when that
    pick is one of the ``loose`` maps (``flat``: spline, isotonic, ELiTE; ``all``: those and
    quadratic scaling), the first listed of :data:`STRICT` (the anchor counts) whose CV log
    loss is within ``se_rule`` paired SE of the lowest, if any."""
    if criterion.startswith("strictmap|"):
        base = criterion.split("|")[1]
        pick = (_orig(record, names, "anchor-guarded", 1.0) if base == "anchored"
                else _orig(record, names, "log-loss", 0.25))
        if criterion.endswith("|monotone") and pick.partition(":")[0] == "elite":
            return pick   # the ramp alone: ELiTE's map left as fitted
        return pick + SUFFIX
    if not criterion.startswith("strict|"):
        return _orig(record, names, criterion, se_rule)
    _, base, loose = criterion.split("|")
    pick = (_orig(record, names, "anchor-guarded", 1.0) if base == "anchored"
            else _orig(record, names, "log-loss", 0.25))
    looser = ("spline", "isotonic", "elite") + (("quadratic",) if loose == "all" else ())
    if pick.partition(":")[0] not in looser:
        return pick
    results, weights = T.combine(record["reps"], 1, names)
    rec = T.select_one_se(names, results, weights, 0.0)
    rows = {r["method"]: r for r in rec["candidates"] if "cv_log_loss" in r}
    low = rows[rec["best"]]["cv_log_loss"]
    anchor_ok = base == "anchored" and not S.guarded(record)
    for n in names:
        strict = n.partition(":")[0] in STRICT and (n != V or anchor_ok)
        if strict and n in rows and rows[n]["cv_log_loss"] - low <= se_rule * rows[n]["se"]:
            return n
    return pick


def replay_rules(ms=(0.5, 1.0, 1.5, 2.0, 3.0)):
    out = [(S.DEFAULT, S.DEF, "log-loss", 0.25), (ANCHORED, [V] + S.DEF, "anchor-guarded", 1.0)]
    for base, names in (("default", S.DEF), ("anchored", [V] + S.DEF)):
        for loose in ("flat", "all"):
            out += [(f"strict {m:g} SE over {loose} maps, {base}", names,
                     f"strict|{base}|{loose}", m) for m in ms]
    out += [(f"strict_order={EPS:g}, default", S.DEF, "strictmap|default", 0.0),
            (f"strict_order={EPS:g}, anchored", [V] + S.DEF, "strictmap|anchored", 0.0),
            ("ramp only (ELiTE as fitted), anchored", [V] + S.DEF,
             "strictmap|anchored|monotone", 0.0)]
    return out + [("oracle", S.DEF, "oracle", 0.0)]


def replay(tune, fresh, checks=()):
    """The rules of :func:`replay_rules` on the two suites (ranked as tune_auto_smsbin.py ranks,
    refreshed entries), the adoption report against the default and against the anchored rule,
    then on each ``(collection, peers table)`` check set."""
    T.choose_rule = choose
    sums = {}
    for suite, path in (("tuning", tune), ("fresh", fresh)):
        with open(path, "rb") as fh:
            data = pickle.load(fh)   # a collection this project's tune_auto_rule.py wrote
        pj, skip = S.SUITES[suite]
        with contextlib.redirect_stdout(io.StringIO()):
            sums[suite] = T.variant_ranks(data, pj, ["linear", "trees"], rules=replay_rules(),
                                          skip_splits=skip, refresh=True)
    lines = ["Against the default:", ""] + S.report(sums)
    default = S.DEFAULT
    S.DEFAULT = ANCHORED
    try:
        lines += ["", "Against the anchored rule:", ""] + S.report(sums)
    finally:
        S.DEFAULT = default
    lines += ["", "| rule | suite | group | log loss | Brier | AUC change |",
              "|---|---|---|---|---|---|"]
    for s in sums:
        for key, v in sums[s].items():
            lines.append(f"| {v['label']} | {s} | {v['group']} | {v['log_loss']:.5f} | "
                         f"{v['brier']:.5f} | {v['auc']:+.5f} |")
    for coll, pj in checks:
        with open(coll, "rb") as fh:
            data = pickle.load(fh)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            T.variant_ranks(data, pj, ["linear", "trees"], rules=replay_rules(), refresh=False)
        lines += ["", f"Check set {coll} ({len(data)} tasks):", out.getvalue()]
    print("\n".join(lines))
    return sums


EPS = 1e-6
SUFFIX = "+strict"
LINEAR = ("spline", "isotonic", "elite")


def suite_tasks(suite):
    """The tasks of a suite's collection, in its order (tune_auto_smsbin.py's docstring:
    ``tune_auto_rule.py --sizes 200 1000 --seeds 2`` and ``--sizes 300 600 --seeds 4``)."""
    from bench_quality import real_tasks
    if suite == "tuning":
        return list(real_tasks([200, 1000], 2, ("linear", "trees")))
    return list(real_tasks([300, 600], 4, ("linear", "trees")))


def add_strict(data, tasks, eps=EPS):
    """Per record, ``held[name + SUFFIX]``: the held-out (log loss, Brier, AUC change) of each
    candidate refitted on the calibration rows with its map through
    ``auto.strictly_increasing(eps)`` (the piecewise-linear ones; the others unchanged). Checks
    the unmodified refit against the collection's held-out log loss (to 1e-9)."""
    from mlcal.calibrators.auto import strictly_increasing
    from mlcal.metrics import brier, log_loss
    if len(tasks) != len(data) or any(t.name != d["task"] or t.n_cal != d["n"]
                                      for t, d in zip(tasks, data)):
        raise SystemExit("not the tasks of the collection")
    auto, bad = T._Auto(), 0
    for task, d in zip(tasks, data):
        auc_before = roc_auc_score(task.y_test, task.s_test)
        for name in list(d["held"]):
            if name.endswith(SUFFIX):
                continue
            if name.partition(":")[0] not in LINEAR:
                d["held"][name + SUFFIX] = d["held"][name]
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cal = auto.candidate(name).fit(np.asarray(task.s_cal, float), task.y_cal)
            p0 = cal.predict(task.s_test)
            bad += abs(log_loss(task.y_test, p0) - d["held"][name][0]) > 1e-9
            cal.map_ = strictly_increasing(cal.map_, eps, np.asarray(task.s_cal, float))
            p = cal.predict(task.s_test)
            d["held"][name + SUFFIX] = (log_loss(task.y_test, p), brier(task.y_test, p),
                                        roc_auc_score(task.y_test, p) - auc_before)
    print(f"add_strict: {bad} refits differ from the collection's held-out log loss",
          file=sys.stderr)
    return data


def real_check(data, tasks, eps=EPS):
    """The real ``AutoCalibrator(strict_order=eps, seed=j)``, default and anchored, on every
    task and fold seed, against the replay's pick (``choose(..., "strictmap|...")``): the
    number of fits whose chosen method or held-out log loss (to 1e-9) differ."""
    from mlcal import AutoCalibrator
    from mlcal.metrics import log_loss
    alias = {"beta": S.K100, "beta-temperature": V}
    bad = n = 0
    for task, d in zip(tasks, data):
        for j in range(len(d["reps"])):
            one = dict(d, reps=d["reps"][j:j + 1])
            for base, names, params in (("default", S.DEF, {}),
                                        ("anchored", [V] + S.DEF,
                                         {"anchor": "beta-temperature"})):
                want = choose(one, names, f"strictmap|{base}", 0.0)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    cal = AutoCalibrator(seed=j, strict_order=eps, **params).fit(
                        np.asarray(task.s_cal, float), task.y_cal)
                got = alias.get(cal.chosen_, cal.chosen_) + SUFFIX
                ll = log_loss(task.y_test, cal.predict(task.s_test))
                n += 1
                if got != want or abs(ll - d["held"][want][0]) > 1e-9:
                    bad += 1
                    print(f"  {task.name} N={task.n_cal} seed {j} {base}: auto {got} {ll:.6f}, "
                          f"replay {want} {d['held'][want][0]:.6f}", file=sys.stderr)
    print(f"real_check: {n - bad} of {n} fits agree with the replay")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--collect")
    ap.add_argument("--peers")
    ap.add_argument("--diagnose", nargs=2)
    ap.add_argument("--replay", nargs=2, metavar=("TUNE", "FRESH"))
    ap.add_argument("--real-check", metavar="PKL",
                    help="the imbalanced collection with --add-strict's entries: the real "
                         "AutoCalibrator(strict_order) against the replay")
    ap.add_argument("--add-strict", nargs=3, metavar=("PKL", "SUITE", "OUT"),
                    help="add the strict_order maps' held-out figures to a collection of "
                         "SUITE (tuning, fresh, unseen2, imbalanced) and save it to OUT")
    ap.add_argument("--check", nargs=2, action="append", default=[], metavar=("PKL", "JSON"))
    a = ap.parse_args(argv)
    if a.collect:
        collect(a.collect)
    if a.peers:
        peers(a.peers)
    if a.diagnose:
        diagnose(*a.diagnose)
    if a.add_strict:
        src, suite, dst = a.add_strict
        with open(src, "rb") as fh:
            data = pickle.load(fh)
        if suite == "unseen2":
            from check_anchor_unseen2 import unseen2_tasks
            tasks = list(unseen2_tasks())
        elif suite == "imbalanced":
            tasks = list(imbalanced_tasks())
        else:
            tasks = suite_tasks(suite)
        add_strict(data, tasks)
        with open(dst, "wb") as fh:
            pickle.dump(data, fh)
    if a.real_check:
        with open(a.real_check, "rb") as fh:
            data = pickle.load(fh)
        real_check(data, list(imbalanced_tasks()))
    if a.replay:
        replay(*a.replay, checks=a.check)


if __name__ == "__main__":
    main()
