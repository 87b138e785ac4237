"""A hedged logit-family map for the binary ``auto``, replayed on saved collections (issue 26).

``auto``'s parametric candidates are nested in the log-odds ``l`` of the clamped score
(probability scores: ``l = ln s - ln(1 - s)`` with the data-taken clamp every member takes from
the same calibration scores; margins: ``l`` is the margin itself):

* temperature ``l / T`` and Platt on the log-odds ``k l + c`` are ``QuadraticMap`` with
  ``b = 0`` and ``BetaMap`` with ``a = b``;
* quadratic scaling is ``QuadraticMap(a, b, c)`` (``a l + b l^2 + c``);
* beta is ``BetaMap(a, b, c)`` (``a ln s - b ln(1 - s) + c``).

A weighted average of the members' output log-odds (before the output floor) is therefore one
``QuadraticMap`` (temperature, Platt on the log-odds, quadratic) or one ``BetaMap``
(temperature, Platt on the log-odds, beta): a hedge that is still one canonical map. On margins
(SVM decision values) beta is a ``BetaMap`` on ``sigmoid(m)`` with its own clamp, not a function
of ``m`` alone in floating point, so there the beta family is not offered (a pick of beta keeps
beta).

This script replays hedge rules on the two collections of docs/auto.md ("With the data-taken
clamp"; ``tune_auto_rule.py --save``). What a rule may use is what ``auto`` sees at fit time: the
candidates' per-unit out-of-fold losses ``-ln p`` and ``-ln(1 - p)`` (so each member's
out-of-fold log-odds ``ln p - ln(1 - p)`` is their difference), the listed order and the paired
standard errors. The held-out predictions are not in the collections: the tasks are rebuilt
with ``tune_auto_rule.make_tasks`` (as ``--check-auto`` does), the four members are fitted on the
calibration rows exactly as ``auto`` refits them (``AutoCalibrator().candidate``) and their
held-out log-odds combined; each member's refit is checked against the collection's held-out log
loss. The hedged map's output is clipped to the data floor ``1 / (2 (n + 1))`` as every fitted
map is. Each rule's ``auto`` is ranked against the 17 other entries of the suite's peers' table
(our logit family refreshed, ``--refresh-entries``) with ``tune_auto_brier``'s helpers, so the
default rule gives back its 18 of 24 cells.

Rules (weights on the members' log-odds):

* ``stack``: convex weights (on the simplex) minimising the out-of-fold log loss of the
  log-odds mixture of the members of one family (the pick's family; for a pick of temperature
  or Platt on the log-odds, the family with the lower stacked out-of-fold loss);
* ``equal``: equal weights over the members of the pick's family within ``m`` paired SE of the
  lowest CV log loss (the band of the default rule);
* applied ``always`` when ``auto``'s pick is parametric, or only when at least two members are
  in the band (``band>=2``);
* stacking on the out-of-fold Brier of the mixture, or on log loss over the lowest CV log loss
  plus Brier over the lowest CV Brier (``sum``), with the same variants;
* ``gain > g SE``: hedged only when the mixture's out-of-fold log loss is lower than the pick's
  by more than ``g`` paired SE of the per-unit difference (the weights are fitted on the same
  out-of-fold predictions, so a small gain is optimistic).

``--beta-candidate NAME`` makes a collected candidate ``auto``'s beta (its CV losses and
held-out figures replace the collection's ``beta`` after the peers' table is refreshed, so the
table's ``beta`` entry stays the registered default): since ``beta_prior`` (docs/auto.md, "A
regularised beta candidate") ``AutoCalibrator()`` fits beta as
``beta:smooth_targets=false,identity_prior=100``, collected in /tmp/regbeta/{tune,fresh}.pkl;
the members' refits (``AutoCalibrator().candidate("beta")``) are then checked against that
candidate's held-out log loss. The replay on top of ``beta_prior`` (docs/auto.md, "The hedge
on top of beta_prior")::

    PYTHONPATH=. nice python benchmarks/tune_auto_hedge.py \
        --suite tune /tmp/regbeta/tune.pkl /tmp/autobin_peers.json 0 "200 1000" 2 \
        --suite fresh /tmp/regbeta/fresh.pkl /tmp/autorobust_fresh_peers.json 2 "300 600" 4 \
        --beta-candidate "beta:smooth_targets=false,identity_prior=100" --cache /tmp/hedge2/cache \
        --summary-json benchmarks/results/auto_hedge/on_beta_prior.json

    PYTHONPATH=. nice python benchmarks/tune_auto_hedge.py \
        --suite tune /tmp/rankclamp/tune.pkl /tmp/autobin_peers.json 0 "200 1000" 2 \
        --suite fresh /tmp/rankclamp/fresh.pkl /tmp/autorobust_fresh_peers.json 2 "300 600" 4 \
        --cache /tmp/hedge_cache --summary-json benchmarks/results/auto_hedge/summary.json

``--cache DIR`` keeps the members' held-out log-odds (a pickle this script writes; the rebuild
of the tasks is the slow part). The hedge as one map is checked on every task: the
:func:`combined_map` of equal weights per family against the members' averaged log-odds.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import types
import warnings

import numpy as np
from scipy.optimize import minimize
from sklearn.metrics import roc_auc_score

from mlcal._solvers.detmath import det_expit_array
from mlcal.calibrators.auto import _paired_se
from mlcal.calibrators.auto import AutoCalibrator
from mlcal.calibrators.output_floor import data_floor
from mlcal.maps import BetaMap, QuadraticMap, SigmoidMap, apply_input_transform
from mlcal.maps.binary import clamped_logs, logit_clamped
from mlcal.metrics import brier, log_loss

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import tune_auto_brier as B  # noqa: E402
import tune_auto_rule as T  # noqa: E402

MEMBERS = ("temperature", "platt-logit", "beta", "quadratic")
#: the two canonical families: members whose log-odds mixture is one map of that kind
FAMILIES = {"quadratic": ("temperature", "platt-logit", "quadratic"),
            "beta": ("temperature", "platt-logit", "beta")}


# -- the members' log-odds ------------------------------------------------------------------
def map_log_odds(m, scores: np.ndarray) -> np.ndarray:
    """The log-odds a parametric map puts out before its output floor (its linear predictor,
    evaluated as the map evaluates it)."""
    s = apply_input_transform(np.asarray(scores, dtype=float), m.input_transform)
    if isinstance(m, SigmoidMap):
        return -(m.a * s + m.b)
    if isinstance(m, BetaMap):
        log_s, log_1ms = clamped_logs(s, m.clamp)
        return m.a * log_s - m.b * log_1ms + m.c
    if isinstance(m, QuadraticMap):
        z = logit_clamped(s, m.clamp) if m.on == "logit" else s
        return m.log_odds(z)
    raise TypeError(f"not a logit-family map: {type(m).__name__}")


def combined_map(maps, weights, family, margins):
    """The one map whose log-odds is the ``weights`` average of the members' ``maps``:
    ``QuadraticMap`` (family "quadratic"; on margins ``on="margin"``) or ``BetaMap`` (family
    "beta", probabilities only). Temperature and Platt on the log-odds contribute ``(k, 0, c)``
    to a QuadraticMap and ``(k, k, c)`` to a BetaMap; every member must share the clamp."""
    a = b = c = 0.0
    for name, w in weights.items():
        m = maps[name]
        if isinstance(m, SigmoidMap):
            co = (-m.a, 0.0, -m.b)
        elif isinstance(m, BetaMap):
            if family != "beta" and m.a != m.b:
                raise ValueError(f"{name}: a BetaMap with a != b is not in the quadratic family")
            co = (m.a, m.b if family == "beta" else 0.0, m.c)
        else:
            co = (m.a, m.b, m.c)
        a, b, c = a + w * co[0], b + w * co[1], c + w * co[2]
    if margins:
        if family == "beta":
            raise ValueError("the beta family is not offered on margins")
        return QuadraticMap(a, b, c, on="margin")
    clamps = {maps[n].clamp for n in weights}
    if len(clamps) != 1:
        raise ValueError(f"the members' clamps differ: {clamps}")
    clamp = clamps.pop()
    return BetaMap(a, b, c, clamp=clamp) if family == "beta" else QuadraticMap(a, b, c,
                                                                                clamp=clamp)


def held_members(task, record):
    """Each member fitted on the task's calibration rows as ``auto`` refits it: its held-out
    log-odds; the data floor; whether the scores are margins. Checked: the member's held-out
    log loss equals the collection's (1e-9)."""
    auto = AutoCalibrator()
    s = np.asarray(task.s_cal, dtype=float)
    order = np.argsort(s, kind="stable")
    s, z = s[order], np.asarray(task.y_cal, dtype=float)[order]
    eta, maps = {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in MEMBERS:
            cal = auto.candidate(name).fit(s, z)
            maps[name] = cal.map_
            eta[name] = map_log_odds(cal.map_, task.s_test)
            floor = data_floor(np.ones_like(s))
            p = np.clip(det_expit_array(eta[name]), floor, 1.0 - floor)
            if not np.allclose(p, cal.predict(task.s_test), rtol=0, atol=1e-12):
                raise SystemExit(f"{task.name}: {name}'s log-odds do not give its predictions")
            ll = log_loss(task.y_test, p)
            if abs(ll - record["held"][name][0]) > 1e-9:
                raise SystemExit(f"{task.name} N={task.n_cal}: refit {name} {ll:.9f}, "
                                 f"collection {record['held'][name][0]:.9f}")
    margins = not (s.min() >= 0.0 and s.max() <= 1.0)
    # the hedge is one canonical map: equal weights per family, combined coefficients against
    # the members' averaged log-odds on the held-out scores (largest |difference| / max(1, |eta|))
    combined_error = 0.0
    for family, members in FAMILIES.items():
        if margins and family == "beta":
            continue
        w = {n: 1.0 / len(members) for n in members}
        mix = sum(v * eta[n] for n, v in w.items())
        got = map_log_odds(combined_map(maps, w, family, margins), task.s_test)
        combined_error = max(combined_error,
                             float(np.max(np.abs(got - mix) / np.maximum(1.0, np.abs(mix)))))
    return {"eta": eta, "combined_error": combined_error, "floor": data_floor(np.ones_like(s)),
            "margins": margins, "auc_before": roc_auc_score(task.y_test, task.s_test)}


def held_figures(task, hm, weights):
    """Held-out log loss, Brier and AUC change of the log-odds mixture ``weights``."""
    eta = sum(w * hm["eta"][n] for n, w in weights.items())
    p = np.clip(det_expit_array(np.ascontiguousarray(eta)), hm["floor"], 1.0 - hm["floor"])
    return (log_loss(task.y_test, p), brier(task.y_test, p),
            roc_auc_score(task.y_test, p) - hm["auc_before"])


# -- what auto sees: out-of-fold log-odds, stacking --------------------------------------------
def oof_log_odds(cv, name):
    """A member's per-unit out-of-fold log-odds: ``-ln(1 - p) - (-ln p)``."""
    lp, ln = cv.losses[name]
    return ln - lp


def mixture_loss(w, L, pos, neg, total, criterion="log-loss", scale=(1.0, 1.0)):
    """Out-of-fold loss of the log-odds mixture ``L @ w`` and its gradient: log loss
    (``criterion="log-loss"``), Brier (``"brier"``) or ``scale[0]`` log loss + ``scale[1]``
    Brier (``"sum"``)."""
    eta = L @ w
    q = 1.0 / (1.0 + np.exp(-eta))
    loss, g = 0.0, np.zeros_like(w)
    if criterion in ("log-loss", "sum"):
        f = scale[0] if criterion == "sum" else 1.0
        loss += f * (pos @ np.logaddexp(0.0, -eta) + neg @ np.logaddexp(0.0, eta)) / total
        g += f * (L.T @ (neg * q - pos * (1.0 - q))) / total
    if criterion in ("brier", "sum"):
        f = scale[1] if criterion == "sum" else 1.0
        loss += f * (pos @ (1.0 - q) ** 2 + neg @ q ** 2) / total
        g += f * (L.T @ (2.0 * (neg * q - pos * (1.0 - q)) * q * (1.0 - q))) / total
    return loss, g


def stack(cv, family, criterion="log-loss"):
    """Convex weights of ``family``'s members minimising the out-of-fold ``criterion``
    (:func:`mixture_loss`; ``"sum"``: log loss over the lowest CV log loss plus Brier over the
    lowest CV Brier) of their log-odds mixture (SLSQP on the simplex, from equal weights); the
    loss at the optimum."""
    L = np.column_stack([oof_log_odds(cv, n) for n in family])
    pos, neg = cv.weights
    scale = (1.0 / cv.ll[cv.ll_best], 1.0 / cv.br[cv.br_best])
    k = len(family)
    res = minimize(mixture_loss, np.full(k, 1.0 / k),
                   args=(L, pos, neg, cv.total, criterion, scale), jac=True,
                   method="SLSQP", bounds=[(0.0, 1.0)] * k,
                   constraints=[{"type": "eq", "fun": lambda w: np.sum(w) - 1.0,
                                 "jac": lambda w: np.ones_like(w)}],
                   options={"ftol": 1e-12, "maxiter": 200})
    w = np.clip(res.x, 0.0, None)
    w /= w.sum()
    return dict(zip(family, w)), mixture_loss(w, L, pos, neg, cv.total, criterion, scale)[0]


def families_for(pick, margins):
    """The families a hedge of ``pick`` may use (none for a non-parametric pick, or beta on
    margins)."""
    if pick not in MEMBERS:
        return []
    fams = [f for f, members in FAMILIES.items() if pick in members]
    if margins:
        fams = [f for f in fams if f != "beta"]
    return fams


def gain_se(cv, weights, pick):
    """How much lower the out-of-fold log loss of the log-odds mixture ``weights`` is than the
    pick's, in paired SE of the per-unit difference (the default rule's SE)."""
    eta = sum(w * oof_log_odds(cv, n) for n, w in weights.items())
    return _gain_z(cv, eta, pick)


def _gain_z(cv, eta, pick):
    """Out-of-fold log loss of the pick minus that of log-odds ``eta``, in paired SE; the
    pick's losses recomputed from its log-odds as the mixture's are (the collected losses
    differ from those in the last bits, which on a mixture equal to the pick would be a
    difference of pure rounding, divided by its own tiny SE)."""
    q = oof_log_odds(cv, pick)
    lp, ln = np.logaddexp(0.0, -eta), np.logaddexp(0.0, eta)
    qp, qn = np.logaddexp(0.0, -q), np.logaddexp(0.0, q)
    pos, neg = cv.weights
    d = float(pos @ (qp - lp) + neg @ (qn - ln)) / cv.total
    se = _paired_se([qp - lp, qn - ln], cv.weights, cv.total)
    return np.inf if se == 0.0 and d > 0 else (0.0 if se == 0.0 else d / se)


def crossfit_gain_se(cv, family, pick, criterion="log-loss", k=5):
    """:func:`gain_se` of the stacked mixture with its weights cross-fitted: the out-of-fold
    units (in score order) dealt to ``k`` groups by index, each group's mixture log-odds from
    weights stacked on the other groups, against the pick's out-of-fold log loss in paired
    SE (an honest estimate of the hedge's gain, where :func:`gain_se` on the stacked weights
    is optimistic)."""
    L = np.column_stack([oof_log_odds(cv, n) for n in family])
    pos, neg = cv.weights
    group = np.arange(L.shape[0]) % k
    eta = np.empty(L.shape[0])
    scale = (1.0 / cv.ll[cv.ll_best], 1.0 / cv.br[cv.br_best])
    for g in range(k):
        tr = group != g
        total = float(pos[tr].sum() + neg[tr].sum())
        res = minimize(mixture_loss, np.full(len(family), 1.0 / len(family)),
                       args=(L[tr], pos[tr], neg[tr], total, criterion, scale), jac=True,
                       method="SLSQP", bounds=[(0.0, 1.0)] * len(family),
                       constraints=[{"type": "eq", "fun": lambda w: np.sum(w) - 1.0,
                                     "jac": lambda w: np.ones_like(w)}],
                       options={"ftol": 1e-12, "maxiter": 200})
        w = np.clip(res.x, 0.0, None)
        eta[~tr] = L[~tr] @ (w / w.sum())
    return _gain_z(cv, eta, pick)


def hedge_rule(kind, m, when, family=None, keep=0.0, criterion="log-loss", gain=None,
               honest=None):
    """A hedge rule: ``kind`` "stack" or "equal", band ``m`` SE, ``when`` "always" or
    "band>=2"; ``family``: only that family for a pick in both; ``keep``: that share of the
    weight stays on the pick; ``criterion``: what the stacking minimises (:func:`stack`);
    ``gain``: hedge only when the mixture's out-of-fold log loss is lower than the pick's by
    more than ``gain`` paired SE (:func:`gain_se`); ``honest``: the same with the stacked
    weights cross-fitted (:func:`crossfit_gain_se`, stacking only). Returns
    ``rule(cv, margins) -> weights or None`` (None: the default pick)."""
    def rule(cv, margins):
        w = choose(cv, margins)
        if w is None or (gain is None and honest is None):
            return w
        pick = cv.ll_band(0.25)[0]
        if gain is not None and not gain_se(cv, w, pick) > gain:
            return None
        if honest is not None and not crossfit_gain_se(cv, tuple(w), pick, criterion) > honest:
            return None
        return w

    def choose(cv, margins):
        band = cv.ll_band(0.25)
        pick = band[0]
        fams = families_for(pick, margins)
        if family is not None and family in fams:
            fams = [family]
        if not fams or any(n not in cv.ok for n in MEMBERS if any(n in FAMILIES[f]
                                                                    for f in fams)):
            return None
        wide = cv.ll_band(m)
        if when == "band>=2" and sum(n in MEMBERS for n in wide if
                                     any(n in FAMILIES[f] for f in fams)) < 2:
            return None
        if kind == "stack":
            fits = [stack(cv, FAMILIES[f], criterion) for f in fams]
            w = min(fits, key=lambda r: r[1])[0]
            return {n: (1.0 - keep) * v + (keep if n == pick else 0.0) for n, v in w.items()}
        # equal weights over the band's members of one family (the one whose band members'
        # lowest CV log loss is lower when the pick is in both)
        choices = [[n for n in wide if n in FAMILIES[f]] for f in fams]
        members = min(choices, key=lambda c: (-len(c), min(cv.ll[n] for n in c)))
        if len(members) < 2:
            return None
        return {n: 1.0 / len(members) for n in members}
    return rule


RULES = ([(f"stack, {when}", hedge_rule("stack", 0.25, when)) for when in ("always", "band>=2")]
         + [(f"stack, band>=2 at {m:g} SE", hedge_rule("stack", m, "band>=2"))
            for m in (0.5, 1.0)]
         + [(f"equal over the band, {m:g} SE", hedge_rule("equal", m, "band>=2"))
            for m in (0.25, 0.5, 1.0)]
         + [(f"stack, always, {f} family for temperature/Platt picks",
             hedge_rule("stack", 0.25, "always", family=f)) for f in FAMILIES]
         + [(f"stack, always, {k:g} kept on the pick", hedge_rule("stack", 0.25, "always",
                                                               keep=k)) for k in (0.25, 0.5)]
         # stacking on CV Brier, or on log loss + Brier (each over the lowest CV value)
         + [(f"stack on {c}, {when}", hedge_rule("stack", 0.25, when, criterion=c))
            for c in ("brier", "sum") for when in ("always", "band>=2")]
         + [(f"stack on {c}, band>=2 at {m:g} SE", hedge_rule("stack", m, "band>=2",
                                                               criterion=c))
            for c in ("brier", "sum") for m in (0.5, 1.0)]
         + [(f"stack on {c}, always, {k:g} kept on the pick",
             hedge_rule("stack", 0.25, "always", keep=k, criterion=c))
            for c in ("brier", "sum") for k in (0.25, 0.5)]
         + [(f"stack on {c}, always, {f} family for temperature/Platt picks",
             hedge_rule("stack", 0.25, "always", family=f, criterion=c))
            for c in ("brier", "sum") for f in FAMILIES]
         # only when the hedge's out-of-fold log loss beats the pick's by more than g SE
         + [(f"stack on {c}, always, gain > {g:g} SE",
             hedge_rule("stack", 0.25, "always", criterion=c, gain=g))
            for c in ("log-loss", "sum") for g in (0.1, 0.25, 0.5, 1.0)]
         + [(f"equal over the band, {m:g} SE, gain > {g:g} SE",
             hedge_rule("equal", m, "band>=2", gain=g)) for m in (0.5, 1.0)
            for g in (0.1, 0.25, 0.5, 1.0)]
         # only when the cross-fitted stacked mixture beats the pick by more than g SE
         + [(f"stack on {c}, always, cross-fitted gain > {g:g} SE",
             hedge_rule("stack", 0.25, "always", criterion=c, honest=g))
            for c in ("log-loss", "sum") for g in (0.0, 0.25, 0.5)])


# -- evaluation with tune_auto_brier's helpers -------------------------------------------------
def kept_task_objects(tasks, skip):
    """The tasks :func:`tune_auto_rule.kept_tasks` keeps, in its order (the same test on names:
    make_classification tasks kept, the first ``skip`` splits of the others left out)."""
    seen, out = {}, []
    for t in tasks:
        seen[t.name] = seen.get(t.name, 0) + 1
        if t.name.startswith("mc-") or seen[t.name] > skip:
            out.append(t)
    return out


def as_auto_beta(suite, beta):
    """Make the collected candidate ``beta`` (e.g. ``beta:smooth_targets=false,
    identity_prior=100``, how ``AutoCalibrator()`` fits beta since ``beta_prior``) auto's
    ``beta`` in place: its CV losses and held-out figures replace the record's ``beta`` after
    the peers' table was refreshed (the table's ``beta`` entry stays the registered default),
    and the CV statistics are recomputed."""
    for d in suite["recs"]:
        if beta not in d["held"]:
            raise SystemExit(f"--beta-candidate: {beta} not collected")
        d["held"]["beta"] = d["held"][beta]
        for r in d["reps"]:
            r["cv"]["beta"] = r["cv"][beta]
    suite["cv"] = [[B.CV(d, j) for j in range(B.N_SEEDS)] for d in suite["recs"]]


def prepare(name, pkl, peers, skip, sizes, seeds, cache=None, beta=None):
    """The suite (tune_auto_brier.load_suite; with ``beta``, :func:`as_auto_beta`), its tasks
    rebuilt and the members' held-out log-odds; every rule's weights and held-out figures per
    (task, fold seed), stored as extra ``held`` entries so tune_auto_brier.evaluate ranks
    them."""
    skip = int(skip)
    suite = B.load_suite(pkl, peers, skip)
    if beta:
        as_auto_beta(suite, beta)
    recs = suite["recs"]
    if cache and os.path.exists(f"{cache}/{name}.pkl"):
        with open(f"{cache}/{name}.pkl", "rb") as fh:   # written below by this script
            tasks, members = pickle.load(fh)
    else:
        args = types.SimpleNamespace(sizes=[float(v) for v in sizes.split()],
                                     seeds=int(seeds), groups=["linear", "trees"])
        tasks = kept_task_objects(T.make_tasks(args), skip)
        members = None
    if len(tasks) != len(recs) or any(t.name != d["task"] or t.n_cal != d["n"]
                                      for t, d in zip(tasks, recs)):
        raise SystemExit(f"{name}: the rebuilt tasks are not the collection's")
    if members is None:
        members = [held_members(task, d) for task, d in zip(tasks, recs)]
        if cache:
            os.makedirs(cache, exist_ok=True)
            light = [types.SimpleNamespace(name=t.name, n_cal=t.n_cal, y_test=t.y_test)
                     for t in tasks]
            with open(f"{cache}/{name}.pkl", "wb") as fh:
                pickle.dump((light, members), fh)
    suite["weights"], suite["members"] = {}, members
    for i, (task, d) in enumerate(zip(tasks, recs)):
        hm = members[i]
        for j in range(B.N_SEEDS):
            cv = suite["cv"][i][j]
            cv.hedge = {}
            for label, rule in RULES:
                w = rule(cv, hm["margins"])
                if w is None:
                    cv.hedge[label] = cv.ll_band(0.25)[0]
                    continue
                key = f"hedge {label} seed {j}"
                d["held"][key] = held_figures(task, hm, w)
                cv.hedge[label] = key
                suite["weights"][(label, i, j)] = {n: round(float(v), 4) for n, v in w.items()}
        print(f"[{name} {i + 1}/{len(recs)}] {task.name} N={task.n_cal}", file=sys.stderr)
    return suite


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", nargs=6, action="append", required=True,
                    metavar=("NAME", "PICKLE", "PEERS_JSON", "SKIP_SPLITS", "SIZES", "SEEDS"),
                    help="a suite: its name, the tune_auto_rule.py --save collection, the "
                         "peers' table, --skip-splits, --sizes (quoted) and --seeds")
    ap.add_argument("--summary-json", metavar="PATH")
    ap.add_argument("--cache", metavar="DIR",
                    help="keep the members' held-out log-odds per suite in DIR (a pickle this "
                         "script writes and reads back; the rebuild of the tasks is the slow "
                         "part)")
    ap.add_argument("--beta-candidate", metavar="NAME",
                    help="the collected candidate that is auto's beta (e.g. "
                         "'beta:smooth_targets=false,identity_prior=100' since beta_prior; "
                         "default: the collection's 'beta')")
    args = ap.parse_args(argv)
    suites = {a[0]: prepare(*a, cache=args.cache, beta=args.beta_candidate) for a in args.suite}
    names = list(suites)
    default = B.RULES[0]
    base_cells, base_means = B.evaluate(suites, *default)
    lost_cells = [k for k in base_cells if not B.won(base_cells[k])]
    print("default rule, cells not first: " + "; ".join(
        f"{B.key_str(k)} {base_cells[k][0]:.2f} v {base_cells[k][2]} {base_cells[k][1]:.2f}"
        for k in lost_cells))
    rows = [(default[0], default[1])] + [
        (label, (lambda lab: lambda cv: cv.hedge[lab])(label)) for label, _ in RULES]
    summary = {}
    print("\n| rule | " + " | ".join(f"{s} {g} (of 6)" for s in names for g in B.GROUPS)
          + " | total (of 24) | lost / gained v default | hedged picks (of "
          + ", ".join(f"{s} {g}" for s in names for g in B.GROUPS) + ") | "
          + " | ".join(f"{s} {g}: log loss, Brier, AUC change" for s in names for g in B.GROUPS)
          + " | lost cells' ranks (best other) |")
    print("|---|" + "---|" * (2 * 2 * len(names) + 4))
    for label, rule in rows:
        cells, means = B.evaluate(suites, label, rule)
        per = {(s, g): sum(B.won(cells[(s, g, j, m)]) for j in range(B.N_SEEDS)
                           for m in B.METRICS) for s in names for g in B.GROUPS}
        lost = [B.key_str(k) for k in cells if B.won(base_cells[k]) and not B.won(cells[k])]
        gained = [B.key_str(k) for k in cells if not B.won(base_cells[k]) and B.won(cells[k])]
        hedged = {k: sum(v for c, v in means[k]["picks"].items() if c.startswith("hedge"))
                  for k in means}
        print(f"| {label} | " + " | ".join(str(per[k]) for k in per)
              + f" | {sum(per.values())} | {len(lost)} / {len(gained)} | "
              + ", ".join(str(hedged[k]) for k in per) + " | "
              + " | ".join(f"{means[k]['log_loss']:.6f}, {means[k]['brier']:.6f}, "
                           f"{means[k]['auc_change']:+.5f}" for k in per) + " | "
              + "; ".join(f"{B.key_str(k)} {cells[k][0]:.2f} ({cells[k][1]:.2f})"
                          for k in lost_cells) + " |")
        summary[label] = {
            "first": {f"{s} {g}": per[(s, g)] for s, g in per}, "total": sum(per.values()),
            "lost": lost, "gained": gained,
            "cells": {B.key_str(k): [round(v[0], 4), round(v[1], 4), v[2]]
                      for k, v in cells.items()},
            "means": {f"{s} {g}": {"log_loss": round(v["log_loss"], 6),
                                   "brier": round(v["brier"], 6),
                                   "auc_change": round(v["auc_change"], 6),
                                   "hedged": hedged[(s, g)]}
                      for (s, g), v in means.items()},
            "keeps_all_won": not lost,
            "wins_lost": len(gained),
            "log_loss_not_worse": all(means[k]["log_loss"] <= base_means[k]["log_loss"]
                                      for k in means),
            "brier_not_worse": all(means[k]["brier"] <= base_means[k]["brier"] for k in means),
            "auc_ok": all(means[k]["auc_change"] >= -0.002 for k in means)}
    err = max(hm["combined_error"] for suite in suites.values() for hm in suite["members"])
    print(f"\nthe hedge as one map (equal weights per family, every task): largest relative "
          f"difference of its log-odds to the members' average {err:.1e}")
    adoptable = [lab for lab, v in summary.items() if lab != default[0] and v["keeps_all_won"]
                 and v["wins_lost"] > 0 and v["log_loss_not_worse"] and v["brier_not_worse"]
                 and v["auc_ok"]]
    print("\nadoptable (keeps every won cell, wins a lost cell, no group's mean log loss or "
          "Brier worse, AUC change >= -0.002): " + (", ".join(adoptable) or "none"))
    weights = {}
    for s, suite in suites.items():
        for (label, i, j), w in suite["weights"].items():
            weights.setdefault(label, []).append(w)
    print("\nmean weights of the hedged picks per rule:")
    for label, ws in weights.items():
        print(f"  {label} ({len(ws)} hedged): " + ", ".join(
            f"{n} {np.mean([w.get(n, 0.0) for w in ws]):.3f}" for n in MEMBERS))
    if args.summary_json:
        with open(args.summary_json, "w") as fh:
            json.dump({"suites": {a[0]: a[1:] for a in args.suite}, "rules": summary,
                       "adoptable": adoptable}, fh, indent=1)


if __name__ == "__main__":
    main()
