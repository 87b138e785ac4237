"""Multiclass calibration: fit time against scikit-learn in the same run, and quality.

    python benchmarks/bench_multiclass.py [--quick] [--skip-timing] [--skip-quality]
        [--rows N ...] [--classes K ...] [--uncapped]

Timing: simulated probabilities (see ``simulate``) for K = 3, 10, 100 classes and N = 1e5, 1e6
rows (``--quick``: N = 2e4). mlcal's one-vs-rest isotonic and Platt, temperature, vector and
matrix scaling are timed against scikit-learn's ``CalibratedClassifierCV`` (isotonic, sigmoid
and, where the installed version has it, temperature) with a prefit base model
(``FrozenEstimator``). So that sklearn's time is the calibration, its base model is a stub whose
``predict_proba`` returns the stored score rows (one gather of the (N, K) matrix);
``CalibratedClassifierCV``'s time still includes its own per-class loop over that output and
its checks. Each fit runs once (numba kernels are compiled beforehand); ``x skl-iso`` is the
time over scikit-learn isotonic at the same K and N. Fits that would take minutes each on a
shared 2-core machine are skipped, with the reason printed (``--uncapped`` runs them): matrix
scaling (K^2 + K parameters, each objective evaluation costs N K^2, its exact Hessian
N K^4 / 2) above N K^2 = 1e8, vector scaling above N K = 1e8, and scikit-learn sigmoid (about 25 us per row and class here) above
N K = 2e6.

Quality (test split, mean over ``--splits`` random train/calibration/test splits with fixed
seeds): digits (K = 10) and wine (K = 3) from scikit-learn with a logistic regression base model,
and simulated data with known class probabilities, where the mean |p - p_true| over all rows
and classes is printed too; digits also with naive-Bayes and random-forest bases (exact and
underflowed zeros). Columns: log loss (true-class probability clipped at 1e-15), Brier,
top-label ECE and classwise ECE (15 equal-width bins, ``mlcal.metrics.multiclass``), and the
number of test rows (over all splits) whose true class gets a probability below 1e-15.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_digits, load_wine
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn.ensemble import RandomForestClassifier
from sklearn.naive_bayes import GaussianNB

from mlcal.calibrators.multiclass import (MatrixScaling, OneVsRest, TemperatureScaling,
                                          VectorScaling)
from mlcal.calibrators.structured_scaling import (StructuredMatrixScaling,
                                                  StructuredVectorScaling, TemperatureMixScaling)
from mlcal.metrics.multiclass import (classwise_ece, multiclass_brier, multiclass_log_loss,
                                      top_label_ece)

MLCAL_METHODS = {
    "mlcal ovr-isotonic": lambda: OneVsRest("isotonic", input_kind="probabilities"),
    "mlcal ovr-platt": lambda: OneVsRest("platt", input_kind="probabilities"),
    "mlcal temperature": lambda: TemperatureScaling(input_kind="probabilities"),
    "mlcal vector": lambda: VectorScaling(input_kind="probabilities"),
    "mlcal matrix": lambda: MatrixScaling(input_kind="probabilities"),
    "mlcal ts-mix": lambda: TemperatureMixScaling(input_kind="probabilities"),
    "mlcal svs": lambda: StructuredVectorScaling(input_kind="probabilities"),
    "mlcal sms": lambda: StructuredMatrixScaling(input_kind="probabilities"),
}
#: method -> (cost measure, its limit) above which the timing grid skips the fit
WORK_CAPS = {"sklearn sigmoid": ("N K", lambda n, k: n * k, 2e6),
             "mlcal vector": ("N K", lambda n, k: n * k, 1e8),
             "mlcal matrix": ("N K^2", lambda n, k: n * k * k, 1e8),
             "mlcal svs": ("N K", lambda n, k: n * k, 1e8),
             "mlcal sms": ("N K^2", lambda n, k: n * k * k, 1e8)}
SKLEARN_METHODS = [m for m in ("isotonic", "sigmoid", "temperature")
                   if m in CalibratedClassifierCV._parameter_constraints["method"][0].options]


class StoredScores(ClassifierMixin, BaseEstimator):
    """A "classifier" whose input is a column of row indices into a stored score matrix, so
    that a prefit ``CalibratedClassifierCV`` spends its time calibrating, not predicting."""

    def __init__(self, proba=None):
        self.proba = proba

    def fit(self, X, y):
        self.classes_ = np.arange(self.proba.shape[1])
        return self

    def predict_proba(self, X):
        return self.proba[np.asarray(X)[:, 0].astype(np.int64)]

    def predict(self, X):  # required by the cross_val_predict that sklearn runs on frozen models
        return np.argmax(self.predict_proba(X), axis=1)


def simulate(n: int, k: int, seed: int = 0, power: float = 2.0):
    """True class probabilities ``p ~ Dirichlet(1)``, labels drawn from them, and overconfident
    scores ``p ** power`` renormalised. Returns (scores, y, p_true)."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(k), n)
    # inverse-CDF draw of one label per row
    y = np.minimum((np.cumsum(p, axis=1) < rng.random(n)[:, None]).sum(axis=1), k - 1)
    s = p ** power
    s /= s.sum(axis=1, keepdims=True)
    return s, y, p


def sklearn_calibrator(method: str, scores: np.ndarray, y: np.ndarray):
    """CalibratedClassifierCV(FrozenEstimator(stub)) fitted on the first ``len(y)`` rows of
    ``scores``; later rows can be predicted by their index."""
    base = StoredScores(scores).fit(None, y)
    cal = CalibratedClassifierCV(FrozenEstimator(base), method=method)
    return cal.fit(np.arange(len(y))[:, None], y)


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def timing(ks, ns, uncapped: bool) -> None:
    warm_s, warm_y, _ = simulate(2000, 3, seed=99)
    for make in MLCAL_METHODS.values():  # numba compilation is not part of the fit time
        make().fit(warm_s, warm_y)
    print(f"\nfit seconds (one fit each; sklearn {', '.join(SKLEARN_METHODS)} via "
          "CalibratedClassifierCV + FrozenEstimator)")
    head = f"{'method':<22}{'K':>5}{'N':>10}{'fit s':>10}{'x skl-iso':>11}"
    print(head)
    print("-" * len(head))
    for n in ns:
        for k in ks:
            s, y, _ = simulate(n, k, seed=k)
            fits = [(f"sklearn {m}", lambda m=m: sklearn_calibrator(m, s, y))
                    for m in SKLEARN_METHODS]
            fits += [(name, lambda make=make: make().fit(s, y))
                     for name, make in MLCAL_METHODS.items()]
            rows = []
            for name, fit in fits:
                measure, work, limit = WORK_CAPS.get(name, ("", None, None))
                if work is not None and not uncapped and work(n, k) > limit:
                    rows.append((name, f"skipped: {measure} = {work(n, k):.0e} > {limit:.0e}"))
                else:
                    rows.append((name, seconds(fit)))
            ref = rows[0][1]
            for name, t in rows:
                cells = f"  {t}" if isinstance(t, str) else f"{t:>10.3f}{t / ref:>10.2f}x"
                print(f"{name:<22}{k:>5}{n:>10.0e}{cells}", flush=True)
            print()
    if "temperature" not in SKLEARN_METHODS:
        print("sklearn temperature: n/a in this scikit-learn version")


def scores_table(name: str, y, probs: dict[str, np.ndarray], p_true=None) -> None:
    extra = f"{'mean|p-p_true|':>15}" if p_true is not None else ""
    head = (f"{name:<22}{'log loss':>10}{'Brier':>9}{'top ECE':>9}{'cw ECE':>9}"
            f"{'true<1e-15':>11}{extra}")
    print(head)
    print("-" * len(head))
    for method, p in probs.items():
        failed = [q for q in p if isinstance(q, str)]
        if failed:
            print(f"{method:<22}  failed in {len(failed)} of {len(p)} splits: {failed[0][:70]}")
            continue
        line = (f"{method:<22}{np.mean([multiclass_log_loss(t, q) for t, q in zip(y, p)]):>10.4f}"
                f"{np.mean([multiclass_brier(t, q) for t, q in zip(y, p)]):>9.4f}"
                f"{np.mean([top_label_ece(t, q) for t, q in zip(y, p)]):>9.4f}"
                f"{np.mean([classwise_ece(t, q) for t, q in zip(y, p)]):>9.4f}"
                f"{sum(int(np.sum(q[np.arange(len(t)), t] < 1e-15)) for t, q in zip(y, p)):>11d}")
        if p_true is not None:
            line += f"{np.mean([np.abs(q - t).mean() for t, q in zip(p_true, p)]):>15.4f}"
        print(line)
    print()


def calibrate_all(s_cal, y_cal, s_test) -> dict[str, np.ndarray]:
    """Test probabilities, uncalibrated and from every method fitted on (s_cal, y_cal)."""
    out = {"uncalibrated": s_test}
    for name, make in MLCAL_METHODS.items():
        try:
            out[name] = make().fit(s_cal, y_cal).predict_proba(s_test)
        except ValueError as exc:  # e.g. a fit that does not converge: reported, not hidden
            out[name] = str(exc)
    n_cal = len(y_cal)
    both = np.vstack([s_cal, s_test])  # the stub serves calibration and test rows by index
    for method in SKLEARN_METHODS:
        cal = sklearn_calibrator(method, both, y_cal)
        out[f"sklearn {method}"] = cal.predict_proba(np.arange(n_cal, len(both))[:, None])
    return out


def quality(splits: int) -> None:
    print(f"\ntest-split quality, mean over {splits} random splits (train/cal/test 50/25/25 %; "
          "bases: standardised logistic regression LR, Gaussian naive Bayes NB, random forest "
          "RF)")
    bases = {"LR": lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
             "NB": GaussianNB, "RF": lambda: RandomForestClassifier(100, random_state=0)}
    for label, (X, y), base_name in (
            ("digits K=10", load_digits(return_X_y=True), "LR"),
            ("digits K=10", load_digits(return_X_y=True), "NB"),
            ("digits K=10", load_digits(return_X_y=True), "RF"),
            ("wine K=3", load_wine(return_X_y=True), "LR")):
        label = f"{label} {base_name}"
        ys, runs = [], []
        for seed in range(splits):
            X_tr, X_rest, y_tr, y_rest = train_test_split(X, y, train_size=0.5, stratify=y,
                                                          random_state=seed)
            X_cal, X_te, y_cal, y_te = train_test_split(X_rest, y_rest, train_size=0.5,
                                                        stratify=y_rest, random_state=seed)
            base = bases[base_name]()
            base.fit(X_tr, y_tr)
            runs.append(calibrate_all(base.predict_proba(X_cal), y_cal, base.predict_proba(X_te)))
            ys.append(y_te)
        scores_table(label, ys, {m: [r[m] for r in runs] for m in runs[0]})
    for k in (3, 10):
        ys, ps, runs = [], [], []
        for seed in range(splits):
            s, y, p = simulate(25_000, k, seed=1000 + seed)
            runs.append(calibrate_all(s[:5000], y[:5000], s[5000:]))
            ys.append(y[5000:])
            ps.append(p[5000:])
        scores_table(f"simulated K={k}", ys, {m: [r[m] for r in runs] for m in runs[0]}, ps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="N = 2e4 only, 3 quality splits")
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--uncapped", action="store_true",
                    help="also run the fits that WORK_CAPS skips")
    ap.add_argument("--splits", type=int, default=10, help="random splits in the quality part")
    ap.add_argument("--rows", type=float, nargs="+", help="timing row counts N (default 1e5 1e6)")
    ap.add_argument("--classes", type=int, nargs="+", default=[3, 10, 100],
                    help="timing class counts K")
    args = ap.parse_args()
    if not args.skip_timing:
        rows = [int(n) for n in args.rows] if args.rows else (
            [20_000] if args.quick else [100_000, 1_000_000])
        timing(args.classes, rows, args.uncapped)
    if not args.skip_quality:
        quality(3 if args.quick else args.splits)


if __name__ == "__main__":
    main()
