"""SBB and ABB: the SDM 2015 circular experiment (Table 1b) and fit timings.

    python benchmarks/paper_sbb_abb.py [--seeds 10] [--skip-speed] [--skip-paper]

Part 1 reproduces Naeini, Cooper & Hauskrecht (SDM 2015) Table 1b: the circular configuration,
logistic regression as the base model, 600 / 600 / 600 train / calibration / test points drawn
from ``mlcal.datasets.make_circular(1800, seed)`` and shuffled, averaged over ``--seeds`` draws.
ECE and MCE use 10 equal-count bins (``strategy="quantile"``), as the authors' code did; AUC is
the plain AUC (the table's LR value .489 < .5 shows it was not folded to max(AUC, 1 - AUC)).
The paper's ACP column needs a confidence interval from the base model and is not reproduced.

Part 2 times the fits against scikit-learn's ``IsotonicRegression.fit`` on the same data in the
same run (best of ``--repeats`` after a warm-up that also compiles the numba kernels).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

from mlcal import metrics
from mlcal.calibrators.bayesian_binning import ABB, SBB, PreAggregationWarning
from mlcal.calibrators.histogram import HistogramBinning
from mlcal.calibrators.isotonic import Isotonic
from mlcal.calibrators.platt import Platt
from mlcal.datasets import make_circular

# SDM 2015 Table 1(b), circular configuration (ACP column omitted)
PAPER = {
    "AUC": {"LR": .489, "IsoReg": .635, "Platt": .489, "Hist": .827, "SBB": .816, "ABB": .838},
    "Acc": {"LR": .500, "IsoReg": .655, "Platt": .500, "Hist": .795, "SBB": .790, "ABB": .773},
    "RMSE": {"LR": .501, "IsoReg": .459, "Platt": .501, "Hist": .394, "SBB": .393, "ABB": .390},
    "MCE": {"LR": .540, "IsoReg": .608, "Platt": .539, "Hist": .121, "SBB": .790, "ABB": .146},
    "ECE": {"LR": .171, "IsoReg": .186, "Platt": .171, "Hist": .074, "SBB": .138, "ABB": .091},
}
COLUMNS = ["LR", "IsoReg", "Platt", "Hist", "SBB", "ABB"]


def calibrators():
    """The paper's calibration columns. Hist uses Zadrozny & Elkan's 10 bins (the paper does
    not state its B); IsoReg is the step (bin) form of PAVA."""
    return {"IsoReg": Isotonic(interpolate=False), "Platt": Platt(),
            "Hist": HistogramBinning(n_bins=10), "SBB": SBB(), "ABB": ABB()}


def scores_of(p, y) -> dict[str, float]:
    return {"AUC": metrics.auc(y, p), "Acc": metrics.accuracy(y, p), "RMSE": metrics.rmse(y, p),
            "MCE": metrics.mce(y, p, 10, "quantile"), "ECE": metrics.ece(y, p, 10, "quantile"),
            # equal-width bins, as the preprint's text states; no published counterpart
            "MCE-w": metrics.mce(y, p, 10, "uniform"), "ECE-w": metrics.ece(y, p, 10, "uniform")}


def run_paper(n_seeds: int) -> None:
    results = {c: {m: [] for m in (*PAPER, "MCE-w", "ECE-w")} for c in COLUMNS}
    lambdas = {"SBB": [], "ABB": []}
    n_bins = {"SBB": [], "ABB": []}
    for seed in range(n_seeds):
        X, y = make_circular(1800, seed)
        idx = np.random.default_rng(1000 + seed).permutation(1800)
        tr, ca, te = idx[:600], idx[600:1200], idx[1200:]
        lr = LogisticRegression(C=1e6, max_iter=1000).fit(X[tr], y[tr])   # ~unregularised
        s_ca, s_te = lr.predict_proba(X[ca])[:, 1], lr.predict_proba(X[te])[:, 1]
        for m, v in scores_of(s_te, y[te]).items():
            results["LR"][m].append(v)
        for name, cal in calibrators().items():
            cal.fit(s_ca, y[ca])
            for m, v in scores_of(cal.predict(s_te), y[te]).items():
                results[name][m].append(v)
            if name in lambdas:
                lambdas[name].append(cal.lambda_)
                n_bins[name].append(cal.n_bins_ if name == "SBB" else cal.expected_n_bins_)
    print(f"SDM 2015 Table 1(b), circular configuration, LR base model, 600/600/600 split; "
          f"mean (sd) over {n_seeds} seeds, published value below")
    print(f"{'':14}" + "".join(f"{c:>15}" for c in COLUMNS))
    for m in results["LR"]:
        means = [np.mean(results[c][m]) for c in COLUMNS]
        sds = [np.std(results[c][m]) for c in COLUMNS]
        print(f"{m + ' mlcal':14}" + "".join(f"{v:>8.3f} ({d:.3f})" for v, d in zip(means, sds)))
        if m in PAPER:
            print(f"{m + ' paper':14}" + "".join(f"{PAPER[m][c]:>8.3f}{'':7}" for c in COLUMNS))
    for name in ("SBB", "ABB"):
        lam = np.array(lambdas[name])
        vals, counts = np.unique(lam, return_counts=True)
        chosen = ", ".join(f"{v:g} x{c}" for v, c in zip(vals, counts))
        print(f"{name}: lam chosen by marginal likelihood: {chosen}")
    sb, ab = np.array(n_bins["SBB"]), np.array(n_bins["ABB"])
    print(f"SBB bins: mean {sb.mean():.1f} (range {sb.min()}-{sb.max()}); "
          f"ABB posterior mean number of bins: {ab.mean():.1f}")
    print(GAP_NOTES)


GAP_NOTES = """
Notes on the gaps (see docs/metrics.md and docs/paper-reproduction.md, 'Known, explained gaps'):
* ECE of LR / IsoReg / Platt: the published .171/.186/.171 are well below the equal-count ECE
  of these near-constant predictors, while the published MCE matches ours. On the same circular
  data the KAIS 2018 and histogram-theory papers report equal-count ECE .28 for a near-chance
  base model and .35 for IsoRegC, as we get here; the SDM table's ECE for these columns must
  have been computed some other way, which the paper does not describe.
* SBB MCE/ECE: SBB predicts only a handful of distinct values. Equal-count bins then cut through
  tie blocks whose labels the authors' sort puts in ascending order, so MCE measures the tie
  order more than calibration (large seed-to-seed sd; equal-width MCE-w is far lower). The paper
  shows the same SBB-only MCE blow-up (.790). Hist (10 levels) is affected the same way.
* lam is not stated in the paper (ours: chosen by marginal likelihood per fit), the paper's ABB
  used an approximate cache of R bins (R unstated) where ours is the exact average, Hist's B is
  unstated (ours 10), and the number of runs is unstated.
* make_circular follows the recipe recovered from the authors' BBQ data.mat; the SDM paper's own
  circular generator is not public. Accuracy/AUC differences of ~.01-.02 are within what the
  draw and these choices move (sd of a 10-seed mean is about sd / 3).
"""


def best_time(fn, repeats: int) -> tuple[float, float]:
    """Best wall-clock and best CPU (process) time of ``repeats`` runs after a warm-up."""
    fn()
    wall = cpu = np.inf
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu


def speed_data(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    s = rng.beta(2.0, 3.0, n)                       # continuous: n unique scores
    y = (rng.random(n) < s ** 1.6).astype(np.float64)
    return s, y


def run_speed(repeats: int) -> None:
    warnings.simplefilter("ignore", PreAggregationWarning)
    print()
    print(f"Fit time (best of {repeats}; wall clock and CPU time), ratio to sklearn "
          "IsotonicRegression.fit on the same data (CPU-time ratio; it is the steadier one on a "
          "shared machine)")
    print(f"{'method':44}{'N':>9}{'wall s':>9}{'cpu s':>9}{'iso wall s':>11}{'iso cpu s':>10}"
          f"{'ratio':>8}")
    rows = [
        ("ABB default (lam auto, aggregated to 5000)", ABB, {}, 10_000, False),
        ("ABB exact, max_unique=None, lam auto (9)", ABB, {"max_unique": None}, 10_000, False),
        ("ABB exact, max_unique=None, lam=10", ABB, {"max_unique": None, "lam": 10.0}, 10_000,
         False),
        ("ABB exact, lam=10, fractional weights", ABB, {"max_unique": None, "lam": 10.0}, 10_000,
         True),
        ("SBB exact, max_unique=None, lam auto (9)", SBB, {"max_unique": None}, 10_000, False),
        ("SBB exact, max_unique=None, lam=10", SBB, {"max_unique": None, "lam": 10.0}, 10_000,
         False),
    ]
    rows += [("SBB default (lam auto, aggregated to 5000)", SBB, {}, n, False)
             for n in (10_000, 100_000, 1_000_000)]
    rows += [("ABB default (lam auto, aggregated to 5000)", ABB, {}, n, False)
             for n in (100_000, 1_000_000)]
    for label, cls, params, n, weighted in rows:
        s, y = speed_data(n)
        w = np.random.default_rng(1).uniform(0.5, 2.0, n) if weighted else None
        wall, cpu = best_time(lambda: cls(**params).fit(s, y, w), repeats)
        iso_wall, iso_cpu = best_time(
            lambda: IsotonicRegression(out_of_bounds="clip").fit(s, y, w), repeats)
        print(f"{label:44}{n:>9}{wall:>9.3f}{cpu:>9.3f}{iso_wall:>11.4f}{iso_cpu:>10.4f}"
              f"{cpu / iso_cpu:>8.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-paper", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    args = ap.parse_args()
    if not args.skip_paper:
        run_paper(args.seeds)
    if not args.skip_speed:
        run_speed(args.repeats)


if __name__ == "__main__":
    main()
