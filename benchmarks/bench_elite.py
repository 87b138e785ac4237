"""ELiTE fit time against scikit-learn's isotonic regression and mlcal's ENIR, same run, same data.

    python benchmarks/bench_elite.py [--sizes 1e4 1e5 1e6] [--repeats 3] [--no-thin]
    python benchmarks/bench_elite.py --accuracy [--accuracy-sizes 2e5 1e6]

Targets (issue 5): at N = 1e6, ``ELiTE().fit`` <= 10x ``IsotonicRegression.fit`` and <= 3x
``ENIR().fit``. Times are the best of ``--repeats`` runs after a warm-up (numba compilation
excluded). Two score distributions:

* ``beta``: Beta(2, 3) scores rounded to 7 digits with labels ~ Bernoulli(s^1.6) (the data of
  ``bench_calibrators.py``);
* ``margin``: sigmoid of N(0, 2^2) margins with labels ~ Bernoulli(sigmoid(1.5 f - f^2 / 6)), i.e.
  scores piled up near 0 and 1 like a confident classifier's.

``points`` is the number of points the trend-filtering path runs on (after tie collapsing and
the default 1e-5 thinning); ``AS iter`` the active-set iterations over the 50 lambdas and
``events`` the exact homotopy events walked (fallback). ``--no-thin`` adds ELiTE with
``thin_tol=None`` (ties only) as an extra column.

``--accuracy`` (issue 15) instead compares held-out log loss and mean ``|p - p_true|`` of ELiTE,
isotonic regression, ENIR and the uncalibrated scores on imbalanced data with known true
probabilities (about 6 % positives), fitted on one sample and scored on another of the same
size:

* ``compressed``: scores ``sigmoid(0.4 f + 0.5)`` (rounded to 6 digits) of the true logit
  ``f ~ N(-3.4, 1.2^2)``: a strongly convex calibration curve;
* ``gbm``: scores of a deliberately overfitted scikit-learn gradient-boosted tree model
  (400 trees of 255 leaves, no early stopping) trained on a third sample of 10 features
  whose true logit is known.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.special import expit
from sklearn.isotonic import IsotonicRegression

from mlcal.calibrators.elite import ELiTE
from _timing import best_time  # noqa: E402  (benchmarks/ is on sys.path)

try:  # written by another contributor; compared against when present
    from mlcal.calibrators.enir import ENIR
except ImportError:  # pragma: no cover
    ENIR = None


def make_beta(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    s = np.round(rng.beta(2.0, 3.0, n), 7)
    return s, (rng.random(n) < s ** 1.6).astype(np.float64)


def make_margin(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    f = 2.0 * rng.standard_normal(n)
    return expit(f), (rng.random(n) < expit(1.5 * f - f * f / 6.0)).astype(np.float64)




def make_compressed(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    f = rng.normal(-3.4, 1.2, n)
    p = expit(f)
    return np.round(expit(0.4 * f + 0.5), 6), (rng.random(n) < p).astype(np.float64), p


def _gbm_sample(n: int, rng):
    X = rng.standard_normal((n, 10))
    f = -4.0 + X[:, 0] - 0.8 * X[:, 1] + 0.5 * X[:, 2] * X[:, 3] + 0.6 * np.abs(X[:, 4])
    p = expit(f)
    return X, (rng.random(n) < p).astype(np.float64), p


def make_gbm_splits(n: int, seed: int = 0):
    """(calibration, test) pairs of (scores, labels, p_true) from an overfitted boosted model."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(seed)
    X, y, _ = _gbm_sample(n, rng)
    model = HistGradientBoostingClassifier(max_iter=400, max_leaf_nodes=255, learning_rate=0.3,
                                           min_samples_leaf=5, l2_regularization=0.0,
                                           early_stopping=False, random_state=0).fit(X, y)
    out = []
    for _ in range(2):
        Xs, ys, ps = _gbm_sample(n, rng)
        out.append((model.predict_proba(Xs)[:, 1], ys, ps))
    return out


def log_loss(p, y) -> float:
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


def accuracy_table(sizes, datasets=("compressed", "gbm")) -> None:
    """Held-out log loss and mean |p - p_true|: ELiTE against isotonic, ENIR and the raw scores."""
    methods = [("uncal", None), ("ELiTE", lambda: ELiTE()),
               ("isotonic", lambda: IsotonicRegression(out_of_bounds="clip")),
               ("ENIR", (lambda: ENIR()) if ENIR else None)]
    head = (f"{'data':>10} {'N':>8} {'pos %':>6} "
            + " ".join(f"{m + ' LL':>12}" for m, _ in methods) + " "
            + " ".join(f"{m + ' |dp|':>14}" for m, _ in methods) + f" {'LL ELiTE/iso':>12}")
    print(head)
    print("-" * len(head))
    for name in datasets:
        for size in sizes:
            n = int(size)
            if name == "gbm":
                (s, y, _), (st, yt, pt) = make_gbm_splits(n)
            else:
                (s, y, _), (st, yt, pt) = make_compressed(n, 0), make_compressed(n, 1)
            lls, errs = [], []
            for method, make in methods:
                if method == "uncal":
                    q = st
                elif make is None:   # ENIR module absent
                    q = np.full(st.size, np.nan)
                else:
                    q = make().fit(s, y).predict(st)
                lls.append(log_loss(q, yt))
                errs.append(float(np.mean(np.abs(q - pt))))
            print(f"{name:>10} {n:>8d} {100 * y.mean():>6.2f} "
                  + " ".join(f"{v:>12.4f}" for v in lls) + " "
                  + " ".join(f"{v:>14.4f}" for v in errs) + f" {lls[1] / lls[2]:>12.3f}",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", nargs="+", type=float, default=[1e4, 1e5, 1e6])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-thin", action="store_true", help="also time thin_tol=None")
    ap.add_argument("--accuracy", action="store_true",
                    help="held-out accuracy on imbalanced data with known p_true instead")
    ap.add_argument("--accuracy-sizes", nargs="+", type=float, default=[2e5, 1e6])
    ap.add_argument("--accuracy-data", nargs="+", choices=["compressed", "gbm"],
                    default=["compressed", "gbm"])
    args = ap.parse_args()
    if args.accuracy:
        accuracy_table(args.accuracy_sizes, args.accuracy_data)
        return

    ELiTE().fit(*make_beta(2000))  # load the compiled kernels once
    head = (f"{'data':>6} {'N':>8} {'points':>7} {'ELiTE s':>8} {'iso s':>7} {'x iso':>6} "
            f"{'ENIR s':>7} {'x ENIR':>7} {'AS iter':>8} {'events':>7}")
    if args.no_thin:
        head += f" {'no-thin s':>9} {'x iso':>6}"
    print(head)
    print("-" * len(head))
    verdict = []
    for name, make in (("beta", make_beta), ("margin", make_margin)):
        for size in args.sizes:
            n = int(size)
            s, y = make(n)
            cal = ELiTE()
            t_el = best_time(lambda: cal.fit(s, y), args.repeats)
            t_iso = best_time(lambda: IsotonicRegression(out_of_bounds="clip").fit(s, y),
                              args.repeats)
            t_enir = best_time(lambda: ENIR().fit(s, y), args.repeats) if ENIR else np.nan
            path = cal.path_
            row = (f"{name:>6} {n:>8d} {cal.n_points_:>7d} {t_el:>8.3f} {t_iso:>7.3f} "
                   f"{t_el / t_iso:>6.2f} {t_enir:>7.3f} {t_el / t_enir:>7.2f} "
                   f"{path.n_pdas_iter:>8d} {path.n_events:>7d}")
            if args.no_thin:
                t_nt = best_time(lambda: ELiTE(thin_tol=None).fit(s, y), max(1, args.repeats - 2))
                row += f" {t_nt:>9.3f} {t_nt / t_iso:>6.2f}"
            print(row, flush=True)
            if n == 1_000_000:
                verdict.append((name, t_el / t_iso, t_el / t_enir))
    for name, r_iso, r_enir in verdict:
        ok_iso = "OK" if r_iso <= 10 else "MISSED"
        ok_enir = "n/a" if np.isnan(r_enir) else ("OK" if r_enir <= 3 else "MISSED")
        print(f"N = 1e6 ({name}): {r_iso:.2f}x isotonic (target <= 10x: {ok_iso}), "
              f"{r_enir:.2f}x ENIR (target <= 3x: {ok_enir})")


if __name__ == "__main__":
    main()
