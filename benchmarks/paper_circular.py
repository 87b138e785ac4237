"""ENIR: the KAIS 2018 simulated experiment (Table 1) and fit timings.

    python benchmarks/paper_circular.py [--seeds 10] [--skip-paper] [--skip-speed]
                                        [--sizes 1e4 1e5 1e6] [--repeats 5]

Part 1 reproduces Naeini & Cooper (KAIS 2018) Table 1 (docs/paper-reproduction.md): the circular
configuration, 1000 training and 1000 test points (``mlcal.datasets.make_circular`` with
different seeds), features standardised with the training mean and sd (MATLAB ``svmtrain``
autoscale), a linear SVM (``SVC(kernel="linear", C=1)``) and a quadratic one
(``SVC(kernel="poly", degree=2, gamma=1, coef0=1, C=1)``, i.e. K = (1 + u.v)^2). The score is the
logistic sigmoid of the decision value; every calibrator is fitted on the *training* scores, as
in the paper. Averages over ``--seeds`` draws, next to the published values.

Metrics as the authors' code computed them: AUC folded to max(AUC, 1 - AUC), ACC with p >= 0.5,
RMSE, and ECE / MCE over 10 equal-count bins (``strategy="quantile"``). The equal-width values
(mlcal's default, the papers' wording) are printed too; they have no published counterpart.

The calibrator columns are data-driven: SVM, IsoRegC (``mlcal`` Isotonic, sklearn-style
interpolation) and ENIR always, plus BBQ and ELiTE when their modules are available and
registered. Published values exist for SVM, IsoRegC, BBQ and ENIR only.

Part 2 times ``ENIR().fit`` against scikit-learn's ``IsotonicRegression.fit`` on the same data in
the same run (best of ``--repeats``, after a warm-up that loads the compiled numba kernels), and
measures the peak extra resident memory of each fit in a fresh subprocess.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np
from scipy.special import expit
from sklearn.isotonic import IsotonicRegression
from sklearn.svm import SVC

import mlcal.calibrators.enir  # noqa: F401  (registers "enir")
from mlcal import metrics
from mlcal.calibrators.registry import available_calibrators, get_calibrator
from mlcal.datasets import make_circular

for _module in ("mlcal.calibrators.bbq", "mlcal.calibrators.elite"):
    try:  # written by other contributors; used when present
        __import__(_module)
    except ImportError:
        pass

# KAIS 2018 Table 1 (average of 10 runs). No published ELiTE numbers for this data set.
PAPER = {
    "linear": {
        "SVM": {"AUC": .52, "ACC": .64, "RMSE": .52, "ECE": .28, "MCE": .78},
        "IsoRegC": {"AUC": .65, "ACC": .64, "RMSE": .46, "ECE": .35, "MCE": .60},
        "BBQ": {"AUC": .85, "ACC": .78, "RMSE": .39, "ECE": .05, "MCE": .13},
        "ENIR": {"AUC": .85, "ACC": .79, "RMSE": .38, "ECE": .05, "MCE": .12},
    },
    "quadratic": {
        "SVM": {"AUC": 1.00, "ACC": .99, "RMSE": .21, "ECE": .14, "MCE": .36},
        "IsoRegC": {"AUC": 1.00, "ACC": .99, "RMSE": .09, "ECE": .01, "MCE": .04},
        "BBQ": {"AUC": 1.00, "ACC": .99, "RMSE": .10, "ECE": .01, "MCE": .05},
        "ENIR": {"AUC": 1.00, "ACC": .99, "RMSE": .09, "ECE": .00, "MCE": .03},
    },
}
METRICS = ("AUC", "ACC", "RMSE", "ECE", "MCE", "ECE-w", "MCE-w")
KERNELS = {
    "linear": dict(kernel="linear", C=1.0),
    "quadratic": dict(kernel="poly", degree=2, gamma=1.0, coef0=1.0, C=1.0),
}
# registry name -> column label; optional methods only when registered
CALIBRATORS = [("isotonic", "IsoRegC"), ("bbq", "BBQ"), ("enir", "ENIR"), ("elite", "ELiTE")]


def columns() -> list[tuple[str, str]]:
    names = set(available_calibrators())
    return [(key, label) for key, label in CALIBRATORS if key in names]


def scores_of(y, p) -> dict[str, float]:
    auc = metrics.auc(y, p)
    return {"AUC": max(auc, 1.0 - auc), "ACC": metrics.accuracy(y, p),
            "RMSE": metrics.rmse(y, p),
            "ECE": metrics.ece(y, p, 10, "quantile"), "MCE": metrics.mce(y, p, 10, "quantile"),
            "ECE-w": metrics.ece(y, p, 10, "uniform"), "MCE-w": metrics.mce(y, p, 10, "uniform")}


def svm_scores(kernel: str, seed: int):
    """Sigmoid of the SVM decision value on a fresh train / test draw (positive = class 1)."""
    X_tr, y_tr = make_circular(1000, seed=10_000 + 2 * seed)
    X_te, y_te = make_circular(1000, seed=10_001 + 2 * seed)
    mu, sd = X_tr.mean(axis=0), X_tr.std(axis=0, ddof=1)
    svm = SVC(**KERNELS[kernel]).fit((X_tr - mu) / sd, y_tr)
    return (expit(svm.decision_function((X_tr - mu) / sd)), y_tr,
            expit(svm.decision_function((X_te - mu) / sd)), y_te)


def run_paper(n_seeds: int) -> None:
    cols = columns()
    labels = ["SVM"] + [label for _, label in cols]
    print(f"KAIS 2018 Table 1: circular data, 1000 train / 1000 test, mean of {n_seeds} seeds")
    print("each cell: ours (published); ECE/MCE = 10 equal-count bins as the authors' code; "
          "-w = equal-width bins (no published value)\n")
    gaps = []
    for kernel in KERNELS:
        res = {c: {m: [] for m in METRICS} for c in labels}
        enir_models = []
        for seed in range(n_seeds):
            s_tr, y_tr, s_te, y_te = svm_scores(kernel, seed)
            preds = {"SVM": s_te}
            for key, label in cols:
                cal = get_calibrator(key).fit(s_tr, y_tr)
                preds[label] = cal.predict(s_te)
                if key == "enir":
                    enir_models.append(int(np.count_nonzero(cal.weights_ > 1e-3)))
            for label, p in preds.items():
                for m, v in scores_of(y_te, p).items():
                    res[label][m].append(v)
        print(f"SVM {kernel} kernel")
        print(f"{'':7}" + "".join(f"{label:>16}" for label in labels))
        for m in METRICS:
            row = f"{m:7}"
            for label in labels:
                ours = float(np.mean(res[label][m]))
                pub = PAPER[kernel].get(label, {}).get(m)
                row += f"{ours:>9.3f} ({pub:.2f})" if pub is not None else f"{ours:>9.3f}   (-) "
                if pub is not None and abs(ours - pub) > 0.03:
                    gaps.append((kernel, label, m, ours, pub, float(np.std(res[label][m]))))
            print(row)
        print(f"ENIR models with weight > 1e-3 per seed: {enir_models}\n")
    if gaps:
        print("Gaps to the published values larger than 0.03 (ours, published, sd over seeds):")
        for kernel, label, m, ours, pub, sd in gaps:
            print(f"  {kernel:9} {label:8} {m:5} {ours:.3f} vs {pub:.2f}  (sd {sd:.3f})")
        print(GAP_NOTES)


GAP_NOTES = """
Why some cells differ (see docs/metrics.md and docs/paper-reproduction.md, 'Known, explained gaps'):
* The paper's 10 draws are not public (only one, BBQ/data.mat); a linear SVM on circular data has
  no real signal, so its hyperplane, and with it every linear-SVM number, varies a lot from draw
  to draw (see the sd). The linear-kernel columns can only agree in the mean, roughly.
* The SVM column depends on the solver: MATLAB's svmtrain (SMO, its own stopping rule) and
  libsvm reach different, equally valid, hyperplanes when the classes are not linearly
  separable, and the raw sigmoid of the margin amplifies that in RMSE/ECE/MCE.
* Quadratic SVM column (RMSE .21, ECE .14, MCE .36 published): on the one public draw the
  authors' own MATLAB run gives RMSE 0.1263 and sklearn's SVC 0.1261 (docs/paper-reproduction.md,
  'Base classifiers'), i.e.
  what this script gets. The published average must come from runs whose margins were scaled
  differently (e.g. other svmtrain options); the raw sigmoid of the margin is very sensitive to
  that scale. The calibrated columns hardly depend on it, and their RMSE is lower than published
  by about the same 0.02 for IsoRegC, BBQ and ENIR alike, so the gap is in the base model.
* ECE/MCE with equal-count bins are tie-sensitive: step-like calibrators output many tied values
  and bin boundaries fall inside tie blocks (docs/metrics.md, 'Ties in the predictions': MCE
  moved by 0.02 from 15-digit rounding alone). Compare MCE within about 0.02-0.05.
* IsoRegC: the paper does not say whether its isotonic predictions interpolate (sklearn) or step
  (Zadrozny-Elkan); mlcal's default interpolates, the closer one (docs/histogram-isotonic.md).
"""


# --------------------------------------------------------------------------------------------
# speed and memory
# --------------------------------------------------------------------------------------------
def _data(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    y = (rng.random(n) < s ** 2).astype(np.float64)
    return s, y


def _fit_enir(s, y):
    from mlcal.calibrators.enir import ENIR

    return ENIR().fit(s, y)


def _fit_sklearn(s, y):
    return IsotonicRegression(out_of_bounds="clip").fit(s, y)


def _peak_memory_child(which: str, n: int) -> None:
    """Subprocess body: print the peak extra resident memory (bytes) of one fit."""
    s, y = _data(n)
    fit = _fit_enir if which == "enir" else _fit_sklearn
    fit(s[:1000], y[:1000])  # load compiled kernels and imports first

    def status(key):
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
        return 0

    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset the peak-RSS high-water mark
    base = status("VmRSS:")
    fit(s, y)
    print(json.dumps({"peak_extra": status("VmHWM:") - base}))


def peak_memory(which: str, n: int) -> float | None:
    try:
        out = subprocess.run([sys.executable, __file__, "--memory-child", which, str(n)],
                             capture_output=True, text=True, check=True, timeout=600)
        return json.loads(out.stdout.strip().splitlines()[-1])["peak_extra"]
    except (subprocess.SubprocessError, OSError, ValueError, KeyError):
        return None  # no /proc (not Linux) or the child failed


def run_speed(sizes: list[int], repeats: int) -> None:
    print("ENIR().fit vs sklearn IsotonicRegression.fit, same data and run; best of "
          f"{repeats} (wall and CPU seconds); peak extra RSS of one fit in a fresh process")
    print(f"{'N':>9} {'ENIR wall':>10} {'sk wall':>9} {'ratio':>6} {'ENIR cpu':>9} {'sk cpu':>8}"
          f" {'ratio':>6} {'ENIR MB':>8} {'sk MB':>7} {'ENIR B/pt':>9}")
    _fit_enir(*_data(1000))
    for n in sizes:
        s, y = _data(n)
        wall = {"enir": [], "sk": []}
        cpu = {"enir": [], "sk": []}
        for _ in range(repeats):  # alternate so both see the same machine load
            for key, fit in (("enir", _fit_enir), ("sk", _fit_sklearn)):
                t0, c0 = time.perf_counter(), time.process_time()
                fit(s, y)
                wall[key].append(time.perf_counter() - t0)
                cpu[key].append(time.process_time() - c0)
        we, ws = min(wall["enir"]), min(wall["sk"])
        ce, cs = min(cpu["enir"]), min(cpu["sk"])
        me, ms = peak_memory("enir", n), peak_memory("sk", n)
        mb = (lambda v: f"{v / 2**20:8.1f}" if v is not None else f"{'n/a':>8}")
        per_pt = f"{me / n:9.0f}" if me is not None else f"{'n/a':>9}"
        print(f"{n:>9} {we:>10.4f} {ws:>9.4f} {we / ws:>6.2f} {ce:>9.4f} {cs:>8.4f} {ce / cs:>6.2f}"
              f" {mb(me)} {mb(ms):>7} {per_pt}")
    print("(data: uniform scores, y ~ Bernoulli(s^2), all scores distinct)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--skip-paper", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--sizes", type=float, nargs="+", default=[1e4, 1e5, 1e6])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--memory-child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_child:
        _peak_memory_child(args.memory_child[0], int(args.memory_child[1]))
        return
    if not args.skip_paper:
        run_paper(args.seeds)
    if not args.skip_speed:
        run_speed([int(n) for n in args.sizes], args.repeats)


if __name__ == "__main__":
    main()
