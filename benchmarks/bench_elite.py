"""ELiTE fit time against scikit-learn's isotonic regression and mlcal's ENIR, same run, same data.

    python benchmarks/bench_elite.py [--sizes 1e4 1e5 1e6] [--repeats 3] [--no-thin]

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




def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", nargs="+", type=float, default=[1e4, 1e5, 1e6])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-thin", action="store_true", help="also time thin_tol=None")
    args = ap.parse_args()

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
