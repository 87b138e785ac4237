"""Held-out calibration quality of every registered calibrator, scikit-learn's isotonic and
sigmoid calibration and the uncalibrated scores, on data that ships with scikit-learn and on
simulated scores with known true probabilities. Runs offline.

    python benchmarks/bench_quality.py --quick          # under a minute
    python benchmarks/bench_quality.py                  # full: N_cal up to 1e6, 3 seeds (~3 min)
    python benchmarks/bench_quality.py --ece-check      # how binned ECE ranks the true probabilities
    python benchmarks/bench_quality.py --multiclass [--quick]   # the multiclass suite
    python benchmarks/bench_quality.py --methods auto isotonic platt --sizes 200 1000 1e5

Tasks (one task = one calibration set and its held-out test set):

* simulated scores (calibration set of every ``--sizes`` N, test set of 50,000, 20,000 with
  ``--quick``; no base model):
  ``sim-beta`` scores ~ Beta(2, 5), P(y=1|s) = s^0.6; ``sim-overconfident`` true logit
  t ~ N(0, 1.5^2), score = expit(2.5 t + N(0, 0.5^2)) (boosted-tree-like: pushed to 0 and 1);
  ``sim-imbalanced`` t ~ N(-4.2, 1), about 3 % positives, score = expit(1.5 t + 2 + N(0, 0.3^2));
* scikit-learn data with base models in two groups, each after a StandardScaler: "linear"
  (LogisticRegression, GaussianNB, LinearSVC's decision_function margins) and "trees"
  (HistGradientBoostingClassifier, XGBoost and LightGBM when installed, RandomForestClassifier,
  whose vote shares are often exactly 0.0 or 1.0):
  ``breast_cancer`` (569 rows) and ``digits`` as digit < 5 (1797 rows) split 50/25/25 into
  train/calibration/test, so N_cal is only 142 and 449 (repeated over ``--seeds`` splits);
  ``mc-easy`` / ``mc-imbalanced`` (make_classification, 20 features, the second with 5 %
  positives and 5 % label noise): base model trained on 4,000 rows, calibration set of every
  ``--sizes`` N up to 1e5, test set of 20,000.

Methods: every registered mlcal method with default parameters; ``<method>+bs`` the same with
``bound_smoothing=0.5`` for the methods that can predict exactly 0 or 1 (``--methods`` also
takes ``name:param=value,...``, values in JSON, e.g. ``auto:se_rule=0``); ``sk-isotonic``
(``IsotonicRegression(out_of_bounds="clip")`` on the scores) and ``sk-sigmoid``
(``LogisticRegression`` without penalty on the scores as one feature: Platt scaling without
Platt's target smoothing); ``uncalibrated`` (the score itself if it is a probability, else the
logistic sigmoid of the margin). With ``--peers``, the dev-only peers that import in the running
environment (none is an mlcal dependency; e.g. a separate venv with torch): probmetrics' SVS,
SMS, ts-mix, quadratic scaling and beta (``pm-*``, on the two-column probabilities) and netcal's
logistic and beta calibration (``nc-*``). Every method sees the same scores.

    PYTHONPATH=. /path/to/peers/bin/python benchmarks/bench_quality.py --groups linear trees \
        --peers --quick

``--groups`` picks the task groups (sim, linear, trees); the "by group" tables rank every
method of the run per group, with ``auto``'s place and the methods of ours whose mean log loss
is worse than uncalibrated on the group's tasks with at least 200 calibration rows.

Metrics on the test set: log loss (predictions clipped to [1e-15, 1 - 1e-15]), Brier score, ECE
(15 equal-width bins), debiased L2 calibration error (15 equal-mass bins, Kumar et al. 2019),
on the simulations the true calibration error mean |p - P(y=1|s)| (:func:`true_probability`),
AUC change against the uncalibrated scores, and fit time over ``sk-isotonic``'s on the same data
in the same run (geometric mean over tasks). Ranks are per task (1 = best, ties averaged), then
averaged over tasks. Further tables: mean log-loss rank by calibration-set size, the ranks the
true probabilities themselves would take on the simulated tasks, and ``auto``'s fit time against
isotonic regression at 1e4 and 1e5 rows (best of 3 after a warm-up). ``--ece-check`` instead
runs :func:`ece_bias_table`; ``--multiclass`` the multiclass suite
(``bench_quality_multiclass.py``: digits and simulated K = 5..100 with known truth, multiclass
``auto`` and the other multiclass methods against scikit-learn's).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import time
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.special import expit
from scipy.stats import rankdata
from sklearn.datasets import load_breast_cancer, load_digits, make_classification
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

import mlcal
from _timing import best_time
from mlcal.metrics import brier, debiased_ece, ece, log_loss

BOUND_SMOOTHED = ("histogram", "isotonic", "enir", "elite", "kde", "spline")
REFERENCES = ("sk-isotonic", "sk-sigmoid", "uncalibrated")
QUICK_SIZES = (200, 1000, 10_000)
FULL_SIZES = (200, 1000, 10_000, 100_000, 1_000_000)
MAX_REAL_SIZE = 100_000
METRICS = ("log_loss", "brier", "ece", "debiased_ece", "true_error", "auc_change", "time_ratio")
#: metrics on which the true probabilities are ranked against the methods (simulated tasks)
ORACLE_METRICS = ("log_loss", "brier", "ece", "debiased_ece")


@dataclass
class Task:
    name: str
    n_cal: int
    s_cal: np.ndarray
    y_cal: np.ndarray
    s_test: np.ndarray
    y_test: np.ndarray
    p_true_test: np.ndarray | None = None   # P(y=1 | score) where the simulation knows it
    group: str = "sim"   # "sim", or the base model's family: "linear" (LR, NB, SVM), "trees"


# -- data ----------------------------------------------------------------------------------------
def simulated(kind: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if kind == "sim-beta":
        s = rng.beta(2.0, 5.0, n)
        return s, (rng.random(n) < s ** 0.6).astype(int)
    a, b, mu, sd_t, sd_e = LATENT[kind]
    t = rng.normal(mu, sd_t, n)
    s = expit(a * t + b + rng.normal(0.0, sd_e, n))
    return s, (rng.random(n) < expit(t)).astype(int)


#: simulated score = expit(A t + B + N(0, SIGMA_E^2)) for the true logit t ~ N(MU_T, SIGMA_T^2)
LATENT = {"sim-overconfident": (2.5, 0.0, 0.0, 1.5, 0.5),
          "sim-imbalanced": (1.5, 2.0, -4.2, 1.0, 0.3)}


def true_probability(kind: str, s: np.ndarray) -> np.ndarray:
    """P(y = 1 | score s) of a simulation: s^0.6 for ``sim-beta``; for the latent-logit
    simulations E[expit(t) | s], with t | logit(s) normal (conjugate update), by 80-point
    Gauss-Hermite quadrature."""
    if kind == "sim-beta":
        return s ** 0.6
    a, b, mu, sd_t, sd_e = LATENT[kind]
    l = np.log(s) - np.log1p(-s)
    denom = a * a * sd_t * sd_t + sd_e * sd_e
    mean = mu + a * sd_t * sd_t * (l - a * mu - b) / denom
    sd = np.sqrt(sd_t * sd_t * sd_e * sd_e / denom)
    nodes, weights = np.polynomial.hermite.hermgauss(80)
    return expit(mean[:, None] + np.sqrt(2.0) * sd * nodes) @ weights / np.sqrt(np.pi)


#: base models by family (the groups of the summary); XGBoost and LightGBM when installed
LINEAR_BASES = ("LR", "NB", "SVM")
TREE_BASES = ("HGB", "XGB", "LGBM", "RF")


def base_models(seed: int, families=("linear", "trees")) -> dict:
    models = {}
    if "linear" in families:
        models.update({"LR": LogisticRegression(max_iter=2000),
                       "NB": GaussianNB(),
                       "SVM": LinearSVC(dual="auto", max_iter=5000, random_state=seed)})
    if "trees" in families:
        models["HGB"] = HistGradientBoostingClassifier(random_state=seed)
        try:
            from xgboost import XGBClassifier
            models["XGB"] = XGBClassifier(n_estimators=200, max_depth=4, learning_rate=0.1,
                                          n_jobs=1, random_state=seed, verbosity=0)
        except ImportError:
            print("note: xgboost not installed, no XGB base model", file=sys.stderr)
        try:
            from lightgbm import LGBMClassifier
            models["LGBM"] = LGBMClassifier(n_estimators=200, learning_rate=0.1, n_jobs=1,
                                            random_state=seed, verbose=-1)
        except ImportError:
            print("note: lightgbm not installed, no LGBM base model", file=sys.stderr)
        # a forest's scores are vote shares: many exactly 0.0 and 1.0
        models["RF"] = RandomForestClassifier(n_estimators=100, n_jobs=1, random_state=seed)
    return models


def family(model_name: str) -> str:
    return "trees" if model_name in TREE_BASES else "linear"


def model_scores(model, X: np.ndarray) -> np.ndarray:
    if hasattr(model, "predict_proba"):
        return model.predict_proba(X)[:, 1]
    return model.decision_function(X)


def real_tasks(sizes, n_seeds: int, families=("linear", "trees")):
    digits = load_digits()
    small = {"breast_cancer": load_breast_cancer(return_X_y=True),
             "digits<5": (digits.data, (digits.target < 5).astype(int))}
    for name, (X, y) in small.items():
        for seed in range(n_seeds):
            X_tr, X_rest, y_tr, y_rest = train_test_split(X, y, test_size=0.5, stratify=y,
                                                          random_state=seed)
            X_cal, X_te, y_cal, y_te = train_test_split(X_rest, y_rest, test_size=0.5,
                                                        stratify=y_rest, random_state=seed)
            for mname, est in base_models(seed, families).items():
                model = make_pipeline(StandardScaler(), est).fit(X_tr, y_tr)
                yield Task(f"{name}/{mname}", len(y_cal), model_scores(model, X_cal), y_cal,
                           model_scores(model, X_te), y_te, group=family(mname))
    real_sizes = [n for n in sizes if n <= MAX_REAL_SIZE]
    for name, kw in {"mc-easy": {}, "mc-imbalanced": {"weights": [0.95], "flip_y": 0.05}}.items():
        n_total = 4000 + 20_000 + max(real_sizes, default=0)
        X, y = make_classification(n_samples=n_total, n_features=20, n_informative=6,
                                   random_state=11, **kw)
        X_tr, y_tr = X[:4000], y[:4000]
        X_te, y_te = X[4000:24_000], y[4000:24_000]
        for mname, est in base_models(0, families).items():
            model = make_pipeline(StandardScaler(), est).fit(X_tr, y_tr)
            s_te = model_scores(model, X_te)
            for n in real_sizes:
                X_cal, y_cal = X[24_000:24_000 + n], y[24_000:24_000 + n]
                yield Task(f"{name}/{mname}", n, model_scores(model, X_cal), y_cal, s_te, y_te,
                           group=family(mname))


def sim_tasks(sizes, n_seeds: int, n_test: int):
    for kind in ("sim-beta", "sim-overconfident", "sim-imbalanced"):
        for n in sizes:
            for seed in range(n_seeds):
                rng = np.random.default_rng([seed, n, len(kind)])
                s_cal, y_cal = simulated(kind, n, rng)
                s_te, y_te = simulated(kind, n_test, rng)
                yield Task(kind, n, s_cal, y_cal, s_te, y_te, true_probability(kind, s_te))


# -- methods -------------------------------------------------------------------------------------
def as_probability(s: np.ndarray) -> np.ndarray:
    return s if (s.min() >= 0.0 and s.max() <= 1.0) else expit(s)


def make_method(name: str):
    """``fit(s, y) -> predict`` for a method name of the table."""
    if name == "uncalibrated":
        return lambda s, y: as_probability
    if name == "sk-isotonic":
        def fit_iso(s, y):
            model = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(s, y)
            return model.predict
        return fit_iso
    if name == "sk-sigmoid":
        def fit_sigmoid(s, y):
            model = LogisticRegression(penalty=None).fit(s.reshape(-1, 1), y)
            return lambda t: model.predict_proba(t.reshape(-1, 1))[:, 1]
        return fit_sigmoid
    if name in PEERS:
        return PEERS[name]
    method, _, spec = name.partition(":")
    method, _, variant = method.partition("+")
    params = {"bound_smoothing": 0.5} if variant == "bs" else {}
    # e.g. "auto:se_rule=0,candidates=["platt","isotonic"]": a comma starts a new key=
    for item in filter(None, re.split(r",(?=\w+=)", spec)):
        key, _, value = item.partition("=")
        try:
            params[key] = json.loads(value)
        except json.JSONDecodeError:
            params[key] = value

    def fit_mlcal(s, y):
        return mlcal.get_calibrator(method, **params).fit(s, y).predict
    return fit_mlcal


# -- peers (dev-only, imported when installed: run in an environment that has them) -------------
def _two_columns(p: np.ndarray) -> np.ndarray:
    p = np.clip(as_probability(p), 0.0, 1.0)
    return np.column_stack([1.0 - p, p])


def _probmetrics(method: str, **config):
    """A probmetrics calibrator (``get_calibrator(method)``) on the (n, 2) probabilities."""
    def fit(s, y):
        from probmetrics.calibrators import get_calibrator

        cal = get_calibrator(method, **config)
        cal.fit(_two_columns(s), np.asarray(y))
        return lambda t: np.asarray(cal.predict_proba(_two_columns(t)))[:, 1]
    return fit


def _netcal(cls_name: str, **params):
    """A netcal binary calibrator on the probability scores."""
    def fit(s, y):
        from netcal import binning, scaling

        cls = getattr(scaling, cls_name, None) or getattr(binning, cls_name)
        cal = cls(**params)
        cal.fit(np.clip(as_probability(s), 0.0, 1.0), np.asarray(y))
        return lambda t: np.asarray(cal.transform(np.clip(as_probability(t), 0.0, 1.0)),
                                    dtype=float).reshape(-1)
    return fit


#: peer name -> fit function (``fit(s, y) -> predict``)
PEERS = {
    "pm-svs": _probmetrics("svs", svs_print_init_info=False),
    "pm-sms": _probmetrics("sms", sms_print_init_info=False),
    "pm-ts-mix": _probmetrics("ts-mix"),
    "pm-quadratic": _probmetrics("quadratic-scaling"),
    "pm-beta": _probmetrics("beta"),
    "nc-logistic": _netcal("LogisticCalibration"),
    "nc-beta": _netcal("BetaCalibration"),
}


def available_peers() -> list[str]:
    """The peers whose package imports here (a note on stderr for the others)."""
    out = []
    for pkg, prefix in (("probmetrics", "pm-"), ("netcal", "nc-")):
        try:
            __import__(pkg)
        except Exception as exc:   # torch-based peers: any import failure means "not here"
            print(f"note: {pkg} not importable ({type(exc).__name__}); its methods are "
                  "skipped", file=sys.stderr)
            continue
        out += [name for name in PEERS if name.startswith(prefix)]
    return out


def default_methods() -> list[str]:
    registered = mlcal.available_calibrators()
    return (registered + [f"{m}+bs" for m in BOUND_SMOOTHED if m in registered]
            + list(REFERENCES))


# -- running -------------------------------------------------------------------------------------
def held_out_metrics(task: Task, p: np.ndarray, auc_before: float) -> dict[str, float]:
    row = {"log_loss": log_loss(task.y_test, p), "brier": brier(task.y_test, p),
           "ece": ece(task.y_test, p, n_bins=15),
           "debiased_ece": debiased_ece(task.y_test, p, n_bins=15),
           "auc_change": roc_auc_score(task.y_test, p) - auc_before}
    if task.p_true_test is not None:
        row["true_error"] = float(np.mean(np.abs(p - task.p_true_test)))
    return row


def run_task(task: Task, methods: list[str]) -> dict[str, dict[str, float]]:
    """Test metrics of every method on one task, plus ``"oracle"`` (the true probabilities)
    where the simulation knows them."""
    auc_before = roc_auc_score(task.y_test, task.s_test)
    out: dict[str, dict[str, float]] = {}
    times = {}
    for name in methods:
        fit = make_method(name)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                predict = fit(task.s_cal, task.y_cal)
                times[name] = time.perf_counter() - start
                p = np.clip(predict(task.s_test), 0.0, 1.0)
        except Exception as exc:   # a failing method is reported, not fatal
            print(f"  {name} failed on {task.name} N={task.n_cal}: {exc}", file=sys.stderr)
            continue
        out[name] = held_out_metrics(task, p, auc_before)
    ref = times.get("sk-isotonic")
    for name, row in out.items():
        row["time_ratio"] = times[name] / ref if ref else np.nan
    if task.p_true_test is not None:
        out["oracle"] = held_out_metrics(task, task.p_true_test, auc_before)
    return out


def summarise(results: list[dict[str, dict[str, float]]], methods: list[str]):
    """Mean rank and mean of each metric per method (ranks per task; AUC change: higher is
    better; time ratio: geometric mean; ``true_error`` only over the simulated tasks)."""
    summary = {m: {"n": 0} for m in methods}
    ranks = {m: {k: [] for k in METRICS} for m in methods}
    values = {m: {k: [] for k in METRICS} for m in methods}
    for res in results:
        for key in METRICS:
            present = [m for m in methods if m in res and key in res[m]]
            v = np.array([res[m][key] for m in present])
            r = rankdata(-v if key == "auc_change" else v)
            for m, vi, ri in zip(present, v, r):
                ranks[m][key].append(ri)
                values[m][key].append(vi)
        for m in methods:
            summary[m]["n"] += m in res
    for m in methods:
        for key in METRICS:
            vals = np.array(values[m][key], dtype=float)
            summary[m][key + "_rank"] = float(np.mean(ranks[m][key])) if vals.size else np.nan
            if key == "time_ratio":
                summary[m][key] = float(np.exp(np.mean(np.log(np.maximum(vals, 1e-9)))))
            else:
                summary[m][key] = float(np.mean(vals)) if vals.size else np.nan
    return summary


def markdown_table(summary: dict, methods: list[str]) -> str:
    head = ("| method | log loss rank | log loss | Brier rank | Brier | ECE rank | ECE-15 | "
            "debiased CE rank | debiased CE | true error rank | mean abs(p - p_true) | "
            "mean ΔAUC | fit time / sk-isotonic | tasks |")
    lines = [head, "|" + "---|" * 14]
    order = sorted(methods, key=lambda m: summary[m]["log_loss_rank"])
    for m in order:
        r = summary[m]
        lines.append(f"| {m} | {r['log_loss_rank']:.2f} | {r['log_loss']:.4f} | "
                     f"{r['brier_rank']:.2f} | {r['brier']:.4f} | {r['ece_rank']:.2f} | "
                     f"{r['ece']:.4f} | {r['debiased_ece_rank']:.2f} | {r['debiased_ece']:.4f} | "
                     f"{r['true_error_rank']:.2f} | {r['true_error']:.4f} | "
                     f"{r['auc_change']:+.4f} | {r['time_ratio']:.2f} | {r['n']} |")
    return "\n".join(lines)


def by_size_table(results, tasks_n, methods) -> str:
    """Mean log-loss rank per calibration-set size (sizes as run)."""
    sizes = sorted(set(tasks_n))
    lines = ["| method | " + " | ".join(f"N={n:g}" for n in sizes) + " |",
             "|" + "---|" * (len(sizes) + 1)]
    per = {m: {n: [] for n in sizes} for m in methods}
    for res, n in zip(results, tasks_n):
        present = [m for m in methods if m in res]
        r = rankdata([res[m]["log_loss"] for m in present])
        for m, ri in zip(present, r):
            per[m][n].append(ri)
    for m in sorted(methods, key=lambda m: np.mean([x for n in sizes for x in per[m][n]])):
        lines.append(f"| {m} | " + " | ".join(
            f"{np.mean(per[m][n]):.2f}" if per[m][n] else "-" for n in sizes) + " |")
    return "\n".join(lines)


def goal_check(summary: dict, methods: list[str]) -> str:
    if "auto" not in summary:
        return "auto not in the run"
    out = []
    for key in ("log_loss", "brier", "ece", "debiased_ece", "true_error"):
        order = sorted(methods, key=lambda m: summary[m][key + "_rank"])
        out.append(f"auto is #{order.index('auto') + 1} of {len(order)} on mean {key} rank "
                   f"(best: {order[0]} {summary[order[0]][key + '_rank']:.2f}, auto "
                   f"{summary['auto'][key + '_rank']:.2f})")
    out.append(f"auto mean AUC change {summary['auto']['auc_change']:+.5f} "
               f"(goal: loss <= 0.002)")
    return "\n".join(out)


def group_tables(results, tasks, methods: list[str]) -> str:
    """Per group of tasks (simulations, linear/NB/SVM bases, tree bases): mean log-loss and
    Brier ranks among all methods run (ours and the peers'), mean log loss and AUC change, and
    where ``auto`` stands; then our methods worse than uncalibrated on mean log loss over the
    group's tasks with at least 200 calibration rows."""
    out = []
    peers = set(PEERS) | set(REFERENCES)
    for group in ("sim", "linear", "trees"):
        idx = [i for i, t in enumerate(tasks) if t.group == group]
        if not idx:
            continue
        summ = summarise([results[i] for i in idx], methods)
        order = sorted(methods, key=lambda m: summ[m]["log_loss_rank"])
        out += [f"group {group}: {len(idx)} tasks", "",
                "| method | log-loss rank | Brier rank | log loss | Brier | mean ΔAUC | tasks |",
                "|---|---|---|---|---|---|---|"]
        for m in order:
            r = summ[m]
            out.append(f"| {m} | {r['log_loss_rank']:.2f} | {r['brier_rank']:.2f} | "
                       f"{r['log_loss']:.4f} | {r['brier']:.4f} | {r['auc_change']:+.4f} | "
                       f"{r['n']} |")
        if "auto" in summ:
            by_brier = sorted(methods, key=lambda m: summ[m]["brier_rank"])
            out.append(f"\nauto: #{order.index('auto') + 1} of {len(order)} on log-loss rank, "
                       f"#{by_brier.index('auto') + 1} on Brier rank, mean ΔAUC "
                       f"{summ['auto']['auc_change']:+.4f} (goal: first, first, >= -0.002)")
        big = [i for i in idx if tasks[i].n_cal >= 200 and "uncalibrated" in results[i]]
        worse = []
        for m in methods:
            if m in peers:
                continue
            rows = [i for i in big if m in results[i]]
            if rows:
                ours = np.mean([results[i][m]["log_loss"] for i in rows])
                unc = np.mean([results[i]["uncalibrated"]["log_loss"] for i in rows])
                if ours > unc:
                    worse.append(f"{m} ({ours:.4f} > {unc:.4f})")
        out.append(f"ours worse than uncalibrated on mean log loss (N_cal >= 200, {len(big)} "
                   f"tasks): {', '.join(worse) or 'none'}\n")
    return "\n".join(out)


def oracle_table(results, methods: list[str]) -> str:
    """Mean rank of the true probabilities among all methods, on the simulated tasks."""
    sim = [res for res in results if "oracle" in res]
    if not sim:
        return "no simulated tasks: no oracle ranks"
    lines = [f"rank of the true probabilities P(y=1|s) among the {len(methods)} methods + oracle "
             f"({len(sim)} simulated tasks; 1 = best)", "",
             "| | " + " | ".join(ORACLE_METRICS) + " |", "|" + "---|" * (len(ORACLE_METRICS) + 1)]
    for who in ("oracle", "auto"):
        if who == "auto" and "auto" not in methods:
            continue
        cells = []
        for key in ORACLE_METRICS:
            r = []
            for res in sim:
                names = [m for m in methods if m in res] + ["oracle"]
                ranks = rankdata([res[m][key] for m in names])
                if who in names:
                    r.append(ranks[names.index(who)])
            cells.append(f"{np.mean(r):.2f}")
        lines.append(f"| {who} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


ECE_CHECK_METHODS = ("auto", "sbb", "histogram+bs", "isotonic+bs", "elite+bs", "beta",
                     "platt-logit", "spline+bs")


def ece_bias_table(test_sizes=(143, 20_000), n_cal: int = 1000, reps: int = 30) -> str:
    """How binned ECE ranks the true probabilities: on the three simulations, ``reps``
    calibration sets of ``n_cal`` rows, each method and the true P(y=1|s) scored on a test set
    of each size; mean ranks (1 = best) of binned and debiased ECE, and of the true error."""
    lines = [f"ECE ranks of the true probabilities among {len(ECE_CHECK_METHODS)} methods "
             f"(3 simulations x {reps} repetitions, N_cal = {n_cal}; 1 = best)", "",
             "| test rows | " + " | ".join(ECE_CHECK_METHODS + ("oracle",)) + " |",
             "|" + "---|" * (len(ECE_CHECK_METHODS) + 2)]
    scorers = {"ECE-15": lambda y, p: ece(y, p, n_bins=15),
               "debiased CE": lambda y, p: debiased_ece(y, p, n_bins=15)}
    for n_test in test_sizes:
        ranks = {key: {m: [] for m in ECE_CHECK_METHODS + ("oracle",)} for key in scorers}
        for rep in range(reps):
            for kind in ("sim-beta", "sim-overconfident", "sim-imbalanced"):
                rng = np.random.default_rng([rep, n_test, len(kind)])
                s, y = simulated(kind, n_cal, rng)
                s_te, y_te = simulated(kind, n_test, rng)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    preds = {m: np.clip(make_method(m)(s, y)(s_te), 0.0, 1.0)
                             for m in ECE_CHECK_METHODS}
                preds["oracle"] = true_probability(kind, s_te)
                for key, score in scorers.items():
                    r = rankdata([score(y_te, p) for p in preds.values()])
                    for m, ri in zip(preds, r):
                        ranks[key][m].append(ri)
        for key in scorers:
            lines.append(f"| {n_test} ({key}) | " + " | ".join(
                f"{np.mean(v):.2f}" for v in ranks[key].values()) + " |")
    return "\n".join(lines)


def timing_table(sizes=(10_000, 100_000)) -> str:
    """``auto`` and its candidates against isotonic regression (best of 3 after a warm-up)."""
    lines = ["fit time (best of 3), ratio to mlcal isotonic on the same data",
             "| N | method | ms | / mlcal isotonic |", "|---|---|---|---|"]
    for n in sizes:
        s, y = simulated("sim-beta", n, np.random.default_rng(0))
        ref = best_time(lambda: mlcal.Isotonic().fit(s, y))
        sk = best_time(lambda: IsotonicRegression(out_of_bounds="clip").fit(s, y))
        auto = mlcal.AutoCalibrator()
        lines += [f"| {n:g} | mlcal isotonic | {ref * 1e3:.1f} | 1.00 |",
                  f"| {n:g} | sklearn isotonic | {sk * 1e3:.1f} | {sk / ref:.2f} |"]
        for name in auto.candidate_names():   # each as auto refits it
            t = best_time(lambda: auto.candidate(name).fit(s, y))
            lines.append(f"| {n:g} | {name} | {t * 1e3:.1f} | {t / ref:.2f} |")
        t = best_time(lambda: auto.fit(s, y))
        lines.append(f"| {n:g} | **auto** (chose {auto.chosen_}) | {t * 1e3:.1f} | "
                     f"{t / ref:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="sizes 200..1e4, 1 seed, simulated test sets of 20,000 (~3 min)")
    ap.add_argument("--sizes", type=float, nargs="+", help="calibration-set sizes")
    ap.add_argument("--methods", nargs="+", help="methods (default: all, see the docstring)")
    ap.add_argument("--seeds", type=int, help="repetitions per task (default 1 quick, 3 full)")
    ap.add_argument("--no-real", action="store_true", help="simulated data only")
    ap.add_argument("--groups", nargs="+", choices=("sim", "linear", "trees"),
                    default=["sim", "linear", "trees"],
                    help="task groups: simulations, linear/NB/SVM bases, tree bases (HGB, "
                         "XGBoost, LightGBM, random forest)")
    ap.add_argument("--peers", action="store_true",
                    help="add the dev-only peers that import here (probmetrics SVS/SMS/"
                         "ts-mix/quadratic/beta, netcal logistic/beta)")
    ap.add_argument("--no-timing", action="store_true", help="skip the auto timing table")
    ap.add_argument("--ece-check", action="store_true",
                    help="only the binned-ECE check: how it ranks the true probabilities")
    ap.add_argument("--json", metavar="PATH",
                    help="also write every task's metrics per method to PATH (JSON)")
    ap.add_argument("--multiclass", action="store_true",
                    help="only the multiclass suite (bench_quality_multiclass.py; takes "
                         "--quick, --seeds and --sizes)")
    args = ap.parse_args(argv)
    if args.multiclass:
        import bench_quality_multiclass
        bench_quality_multiclass.main(
            (["--quick"] if args.quick else []) +
            (["--seeds", str(args.seeds)] if args.seeds else []) +
            (["--sizes", *(str(int(n)) for n in args.sizes)] if args.sizes else []))
        return
    if args.ece_check:
        print(ece_bias_table())
        return
    sizes = [int(n) for n in (args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES))]
    seeds = args.seeds or (1 if args.quick else 3)
    methods = args.methods or default_methods()
    if args.peers:
        methods += [m for m in available_peers() if m not in methods]
    for ref in ("sk-isotonic", "uncalibrated"):   # the time and the log-loss references
        if ref not in methods:
            methods.append(ref)
    start = time.perf_counter()
    tasks = list(sim_tasks(sizes, seeds, 20_000 if args.quick else 50_000)) \
        if "sim" in args.groups else []
    families = [g for g in args.groups if g != "sim"]
    if not args.no_real and families:
        tasks += list(real_tasks(sizes, seeds, families))
    results, tasks_n = [], []
    for i, task in enumerate(tasks):
        results.append(run_task(task, methods))
        tasks_n.append(task.n_cal if task.name.startswith(("sim", "mc")) else 0)
        print(f"[{i + 1}/{len(tasks)}] {task.name} N={task.n_cal} "
              f"({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    summary = summarise(results, methods)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([{"task": t.name, "n_cal": t.n_cal, "results": r}
                       for t, r in zip(tasks, results)], fh, indent=1)
    cmd = "python benchmarks/bench_quality.py " + " ".join(argv if argv is not None
                                                            else sys.argv[1:])
    print(f"{cmd.strip()}   ({datetime.date.today()}, {len(tasks)} tasks, "
          f"{time.perf_counter() - start:.0f} s)\n")
    print(markdown_table(summary, methods))
    print("\nby group (ranks among all methods of the run, ours and the peers')\n")
    print(group_tables(results, tasks, methods))
    print("\nmean log-loss rank by calibration-set size (simulated and make_classification; "
          "N=0: breast_cancer and digits, N_cal 142 and 449)\n")
    print(by_size_table(results, tasks_n, methods))
    print("\n" + goal_check(summary, methods))
    print("\n" + oracle_table(results, methods))
    if not args.no_timing:
        print("\n" + timing_table())


if __name__ == "__main__":
    main()
