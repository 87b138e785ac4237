"""Multiclass suite of the quality benchmark: held-out log-loss and Brier ranks of mlcal's
multiclass methods, scikit-learn's and the uncalibrated scores. Runs offline.

    python benchmarks/bench_quality.py --multiclass --quick     # under 3 minutes
    python benchmarks/bench_quality.py --multiclass             # 3 seeds, N_cal 200..5000
    python benchmarks/bench_quality_multiclass.py [--quick] [--seeds S] [--sizes N ...]

Tasks (one task = one calibration set and its held-out test set):

* ``digits`` (K = 10, scikit-learn's bundled 1797 rows) split 40/30/30 % into
  train/calibration/test (about 540 calibration rows; also its first 200) with base models
  LogisticRegression (standardised), GaussianNB, RandomForest and HistGradientBoosting;
* ``sim-K`` for K = 5, 10, 20, 50, 100 with known truth: true logits ``z ~ N(0, 2^2)`` per row
  and class, ``p = softmax(z)``, the label drawn from ``p`` (every class on one of the first K
  rows); the scores are ``softmax(a z + c)`` with one overconfidence ``a ~ U(1.5, 2.5)`` per
  task and class offsets ``c ~ N(0, 0.5^2)``: a miscalibration temperature alone cannot undo.
  Calibration sets of every ``--sizes`` N, test set of 20,000 rows (5,000 with ``--quick``).

Methods (all given the probability rows): mlcal ``auto`` (multiclass auto, default
candidates), ``temperature``, ``ts-mix``, ``svs``, ``sms``, ``vector``, ``matrix``,
``ovr-auto`` (one-vs-rest binary auto); scikit-learn's ``CalibratedClassifierCV`` on a frozen
prefit model (``FrozenEstimator``) with ``method="sigmoid"``, ``"isotonic"`` and, where the
installed version has it, ``"temperature"``; ``uncalibrated``; where probmetrics is
installed (an optional peer: it needs torch), its ``svs`` and ``sms`` with their defaults as
``pm-svs`` and ``pm-sms`` (a note is printed when it is missing).

Per task every method is ranked on held-out log loss (true-class probability clipped at 1e-15)
and on the Brier score (1 = best, ties averaged); a method that fails on a task takes the worst
rank there. Printed per group (all tasks; K >= 10; digits): mean log-loss rank, mean Brier
rank, mean log loss relative to the uncalibrated model's (percent) and its worst (largest)
value over the tasks, mean accuracy change against the uncalibrated model and the number of
failures. (Vector and matrix scaling are the penalised fits since issue 26; the unpenalised
ones failed on separable rows and matrix scaling was skipped above N K^2 = 1e7 for its cost.)
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from scipy.stats import rankdata
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_digits
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from bench_multiclass import StoredScores
from mlcal.calibrators.multiclass import MULTICLASS_METHODS, OneVsRest
from mlcal.metrics.multiclass import multiclass_brier, multiclass_log_loss

MLCAL = {"auto": lambda: MULTICLASS_METHODS["auto"](input_kind="probabilities"),
         **{name: (lambda name=name: MULTICLASS_METHODS[name](input_kind="probabilities"))
            for name in ("temperature", "ts-mix", "svs", "sms", "vector", "matrix")},
         "ovr-auto": lambda: OneVsRest("auto", input_kind="probabilities")}
SKLEARN = [m for m in ("sigmoid", "isotonic", "temperature")
           if m in CalibratedClassifierCV._parameter_constraints["method"][0].options]
try:   # optional peer (needs torch): run in the peers environment
    from probmetrics.calibrators import get_calibrator as _probmetrics_calibrator
except ImportError:
    _probmetrics_calibrator = None
#: probmetrics' SVS and SMS with their defaults (quiet), when installed
PEERS = {} if _probmetrics_calibrator is None else {
    f"pm-{m}": (lambda m=m: _probmetrics_calibrator(m, **{f"{m}_print_init_info": False}))
    for m in ("svs", "sms")}
METHODS = list(MLCAL) + list(PEERS) + [f"sk-{m}" for m in SKLEARN] + ["uncalibrated"]
QUICK = {"sizes": (200, 1000), "classes": (5, 10, 20, 50), "seeds": 1, "n_test": 5000,
         "bases": ("LR", "NB")}
FULL = {"sizes": (200, 1000, 5000), "classes": (5, 10, 20, 50, 100), "seeds": 3,
        "n_test": 20_000, "bases": ("LR", "NB", "RF", "HGB")}


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def simulated(n: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scores, labels, true probabilities) of ``n`` rows of the ``sim-K`` model (docstring);
    the task's miscalibration is drawn from ``seed`` alone, so calibration and test share it."""
    task_rng = np.random.default_rng([seed, k])
    a, c = task_rng.uniform(1.5, 2.5), task_rng.normal(0.0, 0.5, k)
    rng = np.random.default_rng([seed, k, n])
    z = rng.normal(0.0, 2.0, (n, k))
    p = _softmax(z)
    y = np.minimum((np.cumsum(p, axis=1) < rng.random(n)[:, None]).sum(axis=1), k - 1)
    y[:k] = np.arange(k)
    return _softmax(a * z + c), y, p


def _base(name: str, seed: int):
    return {"LR": lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
            "NB": GaussianNB,
            "RF": lambda: RandomForestClassifier(200, random_state=seed),
            "HGB": lambda: HistGradientBoostingClassifier(random_state=seed)}[name]()


def tasks(cfg: dict):
    """(name, K, s_cal, y_cal, s_test, y_test) of every task."""
    X, y = load_digits(return_X_y=True)
    for seed in range(cfg["seeds"]):
        X_tr, X_rest, y_tr, y_rest = train_test_split(X, y, train_size=0.4, stratify=y,
                                                      random_state=seed)
        X_cal, X_te, y_cal, y_te = train_test_split(X_rest, y_rest, train_size=0.5,
                                                    stratify=y_rest, random_state=seed)
        for base_name in cfg["bases"]:
            model = _base(base_name, seed).fit(X_tr, y_tr)
            s_cal, s_te = model.predict_proba(X_cal), model.predict_proba(X_te)
            for n in (200, len(y_cal)):
                yield f"digits/{base_name}", 10, s_cal[:n], y_cal[:n], s_te, y_te
    for k in cfg["classes"]:
        for n in cfg["sizes"]:
            for seed in range(cfg["seeds"]):
                s, y_all, _ = simulated(n + cfg["n_test"], k, seed)
                yield f"sim-{k}", k, s[:n], y_all[:n], s[n:], y_all[n:]


def predict_all(s_cal, y_cal, s_test, only=None
                ) -> tuple[dict[str, np.ndarray | str], dict[str, float]]:
    """Test probabilities of every method (of ``only`` when given) fitted on (s_cal, y_cal) (an
    error message where the fit failed), and the fit seconds."""
    out: dict[str, np.ndarray | str] = {"uncalibrated": s_test}
    seconds = {}
    both = np.vstack([s_cal, s_test])   # the stub serves calibration and test rows by index
    fits = {name: (lambda make=make: make().fit(s_cal, y_cal).predict_proba(s_test))
            for name, make in {**MLCAL, **PEERS}.items()}
    for method in SKLEARN:
        def sk(method=method):
            cal = CalibratedClassifierCV(FrozenEstimator(StoredScores(both).fit(None, y_cal)),
                                         method=method)
            cal.fit(np.arange(len(y_cal))[:, None], y_cal)
            return cal.predict_proba(np.arange(len(y_cal), len(both))[:, None])
        fits[f"sk-{method}"] = sk
    if only is not None:
        fits = {name: fit for name, fit in fits.items() if name in only}
    for name, fit in fits.items():
        start = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out[name] = fit()   # a string: skipped
        except (ValueError, ArithmeticError, RuntimeError, np.linalg.LinAlgError) as exc:
            out[name] = f"{type(exc).__name__}: {exc}"
        seconds[name] = time.perf_counter() - start
    return out, seconds


def score_task(y_test, probs: dict) -> dict[str, dict[str, float]]:
    """Per method: log loss, Brier, accuracy, and its log-loss and Brier ranks on this task."""
    rows = {}
    for name in METHODS:
        p = probs[name]
        if isinstance(p, str):
            rows[name] = {"failed": 1.0}
            continue
        rows[name] = {"log_loss": multiclass_log_loss(y_test, p),
                      "brier": multiclass_brier(y_test, p),
                      "accuracy": float(np.mean(np.argmax(p, axis=1) == y_test)), "failed": 0.0}
    for metric in ("log_loss", "brier"):
        values = [rows[m].get(metric, np.inf) for m in METHODS]   # a failure ranks last
        for m, r in zip(METHODS, rankdata(values)):
            rows[m][f"{metric}_rank"] = float(r)
    return rows


def group_table(title: str, results: list[dict]) -> str:
    """Mean ranks, log loss against uncalibrated and accuracy change of ``results``."""
    lines = [f"\n{title}: {len(results)} tasks",
             f"{'method':<16}{'logloss rank':>13}{'Brier rank':>11}{'LL vs uncal %':>14}"
             f"{'worst %':>9}{'acc change':>11}{'failed':>7}"]
    lines.append("-" * len(lines[-1]))
    stats = []
    for m in METHODS:
        ok = [r for r in results if not r[m]["failed"]]
        rel = [100.0 * (r[m]["log_loss"] / r["uncalibrated"]["log_loss"] - 1.0) for r in ok]
        acc = [r[m]["accuracy"] - r["uncalibrated"]["accuracy"] for r in ok]
        stats.append((np.mean([r[m]["log_loss_rank"] for r in results]),
                      np.mean([r[m]["brier_rank"] for r in results]), m,
                      np.mean(rel) if rel else np.nan, max(rel) if rel else np.nan,
                      np.mean(acc) if acc else np.nan, len(results) - len(ok)))
    for ll_rank, b_rank, m, rel, worst, acc, failed in sorted(stats):
        lines.append(f"{m:<16}{ll_rank:>13.2f}{b_rank:>11.2f}{rel:>+14.2f}{worst:>+9.2f}"
                     f"{acc:>+11.4f}{failed:>7d}")
    return "\n".join(lines)


def run(cfg: dict) -> list[tuple[str, int, int, dict]]:
    out = []
    for name, k, s_cal, y_cal, s_te, y_te in tasks(cfg):
        probs, seconds = predict_all(s_cal, y_cal, s_te)
        out.append((name, k, len(y_cal), score_task(y_te, probs)))
        slow = max(seconds, key=seconds.get)
        print(f"  {name} N_cal={len(y_cal)}: {sum(seconds.values()):.1f} s (slowest {slow} "
              f"{seconds[slow]:.1f} s)", flush=True)
    return out


def report(out) -> str:
    parts = [group_table("all multiclass tasks", [r for *_, r in out]),
             group_table("K >= 10", [r for _, k, _, r in out if k >= 10]),
             group_table("digits (real data, K = 10)",
                         [r for name, *_, r in out if name.startswith("digits")])]
    auto_wins = sum(r["auto"]["log_loss_rank"] <= min(r[m]["log_loss_rank"] for m in METHODS)
                    for *_, r in out)
    parts.append(f"\nauto best (or tied) on log loss in {auto_wins} of {len(out)} tasks")
    return "\n".join(parts)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer tasks: under 3 minutes")
    ap.add_argument("--seeds", type=int, help="repetitions per task")
    ap.add_argument("--sizes", type=int, nargs="+", help="simulated calibration-set sizes")
    ap.add_argument("--classes", type=int, nargs="+", help="simulated class counts K")
    args = ap.parse_args(argv)
    cfg = dict(QUICK if args.quick else FULL)
    for key in ("seeds", "sizes", "classes"):
        if getattr(args, key):
            cfg[key] = getattr(args, key)
    if not PEERS:
        print("note: probmetrics is not installed; its SVS and SMS peers are skipped (run in "
              "the peers environment to include them)")
    start = time.perf_counter()
    out = run(cfg)
    print(report(out))
    print(f"\n{time.perf_counter() - start:.0f} s in all")


if __name__ == "__main__":
    main()
