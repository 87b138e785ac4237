"""Reproduce Table 1 of the histogram-binning / KDE paper (Naeini, Cooper & Hauskrecht,
arXiv 1401.3390) on the simulated circular data, with BBQ added, and time BBQ and KDE.

Setup (docs/paper-reproduction.md, 'Protocol'): 1000 training points (the base SVM and every
calibrator are fitted on them) and 1000 test points from ``mlcal.datasets.make_circular``;
features standardised with the training mean and sd; scikit-learn ``SVC(kernel="linear", C=1)`` or
``SVC(kernel="poly", degree=2, gamma=1, coef0=1, C=1)`` (MATLAB ``svmtrain`` defaults); the score
is the logistic sigmoid of the decision value. Averages over 10 seeds.

Metrics as the authors' code computed them: RMSE, AUC reported as max(AUC, 1 - AUC) (their
``getAUC.m``), accuracy at 0.5, and ECE/MCE over 10 equal-count bins (``strategy="quantile"``).

Columns: SVM (the sigmoid scores), Hist (``HistogramBinning``, B = round(N^(1/3)) = 10), Platt
(fitted on the [0, 1] scores, as the papers did), IsoReg (``Isotonic``, interpolating), KDE
(``KDECalibrator``: boxcar, Silverman bandwidth) and BBQ. Published values in parentheses:
Table 1 of arXiv 1401.3390 for SVM/Hist/Platt/IsoReg/KDE, and KAIS 2018 Table 1 for BBQ (the
histogram paper has no BBQ column).

Run: ``python benchmarks/paper_histogram_kde.py [--seeds 10] [--no-speed]``.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.special import expit
from sklearn.isotonic import IsotonicRegression
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from mlcal import metrics
from mlcal.calibrators.bbq import BBQ
from mlcal.calibrators.histogram import HistogramBinning
from mlcal.calibrators.isotonic import Isotonic
from mlcal.calibrators.kde import KDECalibrator
from mlcal.calibrators.platt import Platt
from mlcal.datasets import make_circular
from _timing import best_time  # noqa: E402  (benchmarks/ is on sys.path)

METHODS = ["SVM", "Hist", "Platt", "IsoReg", "KDE", "BBQ"]
ROWS = ["RMSE", "AUC", "ACC", "MCE", "ECE"]

# arXiv 1401.3390 Table 1 (SVM..KDE) and KAIS 2018 Table 1 (BBQ)
PUBLISHED = {
    "linear": {
        "RMSE": [.50, .39, .50, .46, .38, .39], "AUC": [.50, .84, .50, .65, .85, .85],
        "ACC": [.48, .78, .52, .64, .78, .78], "MCE": [.52, .19, .54, .58, .09, .13],
        "ECE": [.28, .07, .28, .35, .03, .05]},
    "quadratic": {
        "RMSE": [.21, .09, .19, .08, .09, .10], "AUC": [1.00] * 6, "ACC": [.99] * 6,
        "MCE": [.35, .04, .32, .03, .07, .05], "ECE": [.14, .01, .15, .00, .01, .01]},
}


def make_svm(kind: str) -> SVC:
    if kind == "linear":
        return SVC(kernel="linear", C=1.0)
    return SVC(kernel="poly", degree=2, gamma=1.0, coef0=1.0, C=1.0)


def evaluate(y: np.ndarray, p: np.ndarray) -> dict[str, float]:
    a = metrics.auc(y, p)
    return {"RMSE": metrics.rmse(y, p), "AUC": max(a, 1.0 - a), "ACC": metrics.accuracy(y, p),
            "MCE": metrics.mce(y, p, n_bins=10, strategy="quantile"),
            "ECE": metrics.ece(y, p, n_bins=10, strategy="quantile")}


def one_run(kind: str, seed: int) -> dict[str, dict[str, float]]:
    X_tr, y_tr = make_circular(1000, seed=10_000 + seed)
    X_te, y_te = make_circular(1000, seed=20_000 + seed)
    scaler = StandardScaler().fit(X_tr)
    svm = make_svm(kind).fit(scaler.transform(X_tr), y_tr)
    s_tr = expit(svm.decision_function(scaler.transform(X_tr)))
    s_te = expit(svm.decision_function(scaler.transform(X_te)))
    calibrators = {"Hist": HistogramBinning(), "Platt": Platt(), "IsoReg": Isotonic(),
                   "KDE": KDECalibrator(), "BBQ": BBQ()}
    out = {"SVM": evaluate(y_te, s_te)}
    for name, cal in calibrators.items():
        out[name] = evaluate(y_te, cal.fit(s_tr, y_tr).predict(s_te))
    return out


def paper_table(n_seeds: int) -> None:
    for kind in ("linear", "quadratic"):
        runs = [one_run(kind, seed) for seed in range(n_seeds)]
        print(f"\nSVM {kind} kernel: mean over {n_seeds} seeds (published value)")
        print(f"{'':5s}" + "".join(f"{m:>16s}" for m in METHODS))
        for row in ROWS:
            cells = []
            for j, m in enumerate(METHODS):
                mean = np.mean([r[m][row] for r in runs])
                cells.append(f"{mean:.3f} ({PUBLISHED[kind][row][j]:.2f})")
            print(f"{row:5s}" + "".join(f"{c:>16s}" for c in cells))
        sd = {m: {row: np.std([r[m][row] for r in runs], ddof=1) for row in ROWS}
              for m in METHODS}
        print(f"{'sd':5s}" + "".join(f"{'ECE ' + format(sd[m]['ECE'], '.3f'):>16s}"
                                     for m in METHODS))




def speed_table() -> None:
    print("\nFit time, best of 3, same data and run; ratio = time / sklearn IsotonicRegression.fit")
    rng = np.random.default_rng(0)
    warm_s = rng.random(200)
    warm_y = (rng.random(200) < warm_s).astype(float)
    for cal in (BBQ(), KDECalibrator(), KDECalibrator(kernel="gaussian")):
        cal.fit(warm_s, warm_y)                                      # numba compile / cache load
    print(f"{'N':>9s}{'isotonic s':>12s}{'BBQ s':>9s}{'ratio':>7s}{'KDE box s':>11s}{'ratio':>7s}"
          f"{'KDE gauss s':>13s}{'ratio':>7s}{'box steps':>11s}{'gauss knots':>13s}")
    for n in (10_000, 100_000, 1_000_000):
        margin = rng.normal(0.0, 2.0, n)
        s = expit(margin)
        y = (rng.random(n) < expit(1.5 * margin - 0.3)).astype(float)
        t_iso = best_time(lambda: IsotonicRegression(out_of_bounds="clip").fit(s, y))
        t_bbq = best_time(lambda: BBQ().fit(s, y))
        box = KDECalibrator()
        t_box = best_time(lambda: box.fit(s, y))
        gauss = KDECalibrator(kernel="gaussian")
        t_gauss = best_time(lambda: gauss.fit(s, y))
        print(f"{n:9d}{t_iso:12.3f}{t_bbq:9.3f}{t_bbq / t_iso:7.2f}{t_box:11.3f}"
              f"{t_box / t_iso:7.2f}{t_gauss:13.3f}{t_gauss / t_iso:7.2f}"
              f"{box.map_.thresholds.size:11d}{gauss.map_.knots.size:13d}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--no-speed", action="store_true", help="skip the timing table")
    args = parser.parse_args()
    paper_table(args.seeds)
    if not args.no_speed:
        speed_table()


if __name__ == "__main__":
    main()
