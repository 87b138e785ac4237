"""Quadratic scaling on saturated scores (issue #26): where the AUC goes, and two candidate fixes.

For bench_quality.py's real tasks (``--groups``, ``--sizes``, ``--seeds``; ``--only NB`` for the
naive-Bayes bases whose scores saturate at 0 and 1), fits in the same run, per task:

* ``quadratic``: the library's ``Quadratic()``. Until the data-taken clamp (issue #26) the map
  clamped the score to ``[BETA_EPS, 1 - BETA_EPS]`` (``|z| <= 27.73``); it now takes the clamp
  from the calibration scores (``mlcal.maps.binary.data_clamp``), which is (a') below done in
  the map (a library fit of the same rule, so ``quadratic`` and ``(a') widen only`` agree to
  the solver's tolerance). Before/after across source trees: ``bench_logit_clamp.py``;
* ``(b) restricted``: the same penalised objective restricted to maps monotone over the
  calibration rows' ``z`` range (:func:`restricted_fit`, benchmark-only code: the library does
  not adopt it, see docs/quadratic.md "Saturated scores (issue #26)");
* ``(a) data clamp``: PROTOTYPE, Python only, not a map kind: ``z`` clamped to the calibration
  scores' finite log-odds range instead of ``BETA_EPS`` (:func:`data_clamp_predict`);
* ``(a') widen only``: the same, the range never narrower than the library's clamp (the map
  differs from today's only where a calibration score lies beyond ``BETA_EPS``).

Printed per task: the test AUC of the raw scores and of the scores clamped to
``[BETA_EPS, 1 - BETA_EPS]`` (what any ``on="logit"`` map sees: every score below the clamp
ties), and the held-out log loss, Brier and AUC of each method; ``act`` marks the tasks where
the unrestricted optimum turns inside the data. With ``--auto``, ``AutoCalibrator()`` is fitted
twice (library quadratic candidate, then with (b) patched in) and its choices compared.

    PYTHONPATH=. python benchmarks/bench_quadratic_saturated.py --sizes 200 300 600 1000 \
        --seeds 4 --only NB --auto
    PYTHONPATH=. python benchmarks/bench_quadratic_saturated.py --sizes 200 300 600 1000 \
        --seeds 4 --groups linear trees
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import numpy as np
from sklearn.metrics import log_loss, roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_quality import real_tasks  # noqa: E402

import mlcal.calibrators.quadratic as quadratic_module  # noqa: E402
from mlcal._solvers import beta_fit  # noqa: E402
from mlcal._solvers.logistic_newton import fit_logistic  # noqa: E402
from mlcal._solvers.platt_newton import standardise  # noqa: E402
from mlcal.calibrators.auto import AutoCalibrator  # noqa: E402
from mlcal.calibrators.quadratic import Quadratic  # noqa: E402
from mlcal.maps import BETA_EPS  # noqa: E402
from mlcal.maps.binary import DEFAULT_CLAMP, logit_clamped  # noqa: E402

LIBRARY_FIT = beta_fit.fit_quadratic_points


def turns_inside(a: float, b: float, z_lo: float, z_hi: float) -> bool:
    """Whether the slope ``a + 2 b z`` has strictly opposite signs at the two ends."""
    d_lo, d_hi = a + 2.0 * b * z_lo, a + 2.0 * b * z_hi
    return (d_lo < 0.0 < d_hi) or (d_hi < 0.0 < d_lo)


def restricted_fit(x, ybar, wsum, *, smooth, penalty, on_logit, square=True,
                   identity_prior=0.0, clamp=DEFAULT_CLAMP):
    """Option (b): :func:`~mlcal._solvers.beta_fit.fit_quadratic_points` restricted to maps
    monotone over the calibration ``z`` range ``[z_lo, z_hi]``.

    The monotone maps (either direction) are the union of two convex cones in ``(a, b)``; when
    the convex objective's unrestricted optimum is outside both, the optimum over each cone is
    on its boundary, where the vertex ``-a / (2 b)`` sits at an end ``z_e``. Those boundaries
    lie on the lines ``a = -2 b z_e``, every point of which is monotone over the range, so the
    restricted optimum is the better of the one-feature fits ``eta = b (z - z_e)^2 + c'``,
    mapped back (``a = -2 b z_e``, ``c = c' + b z_e^2``), with the ridge rescaled by
    ``var_w(z^2) / var_w((z - z_e)^2)`` so both minimise the original objective on their line.
    Checked against scipy's SLSQP with the two slope constraints (to 1e-6); the
    identity prior as the library does."""
    a, b, c = LIBRARY_FIT(x, ybar, wsum, smooth=smooth, penalty=penalty, on_logit=on_logit,
                          square=square, identity_prior=identity_prior, clamp=clamp)
    z = logit_clamped(x, clamp) if on_logit else np.asarray(x, dtype=float)
    z_lo, z_hi = float(np.min(z)), float(np.max(z))
    if not square or not turns_inside(a, b, z_lo, z_hi):
        return a, b, c
    _, t, w, start = beta_fit.point_targets(x, ybar, wsum, smooth)
    if identity_prior > 0.0:   # the library's pseudo-row targets and ridge scaling
        base = np.clip(x, *clamp) if on_logit else beta_fit.det_expit_array(x)
        prior_t = beta_fit.identity_prior_targets(t, w, base, identity_prior)
        if prior_t is not t:
            total = math.fsum(w.tolist())
            penalty = float(penalty) * (total / (total + float(identity_prior)))
        t = prior_t
    sd_sq = standardise(z * z, w)[2]
    best = None
    for z_e in (z_lo, z_hi):
        f = (z - z_e) * (z - z_e)
        lam = penalty * (sd_sq / standardise(f, w)[2]) ** 2
        coef, c1, loss, ok = fit_logistic(f[:, None], t, w, intercept=True,
                                          start_intercept=start, penalty=[lam])
        if ok and (best is None or loss < best[0]):
            bb = float(coef[0])
            best = (float(loss), -2.0 * bb * z_e, bb, float(c1) + bb * z_e * z_e)
    return best[1:]


def data_clamp_predict(s_cal, y_cal, s_test, widen_only=False):
    """Option (a), PROTOTYPE (Python only): ``z = clip(ln(s) - ln(1 - s), z_lo, z_hi)`` with
    ``[z_lo, z_hi]`` the calibration scores' finite log-odds range (scores of exactly 0 or 1
    at its ends, the map constant beyond it), fitted as ``Quadratic()`` fits margins; the
    library's output floor ``1 / (2 (n + 1))``. ``widen_only``: the range is never narrower
    than the library's ``[logit(BETA_EPS), logit(1 - BETA_EPS)]`` (a map that only differs
    from today's where some calibration score lies beyond the clamp)."""
    def logit(s):
        with np.errstate(divide="ignore"):
            return np.log(s) - np.log1p(-s)
    z = logit(np.asarray(s_cal, dtype=float))
    fin = z[np.isfinite(z)]
    lo, hi = float(fin.min()), float(fin.max())
    if widen_only:
        z_eps = logit_clamped(np.array([0.0, 1.0]), DEFAULT_CLAMP)
        lo, hi = min(lo, float(z_eps[0])), max(hi, float(z_eps[1]))
    a, b, c = beta_fit.fit_quadratic(np.clip(z, lo, hi), y_cal, np.ones(z.size), smooth=True,
                                     penalty=1.0, on_logit=False)
    zt = np.clip(logit(np.asarray(s_test, dtype=float)), lo, hi)
    floor = 1.0 / (2.0 * (len(y_cal) + 1))
    return np.clip(1.0 / (1.0 + np.exp(-(a * zt + b * zt * zt + c))), floor, 1.0 - floor)


def scores(y, p):
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return (log_loss(y, p, labels=[0, 1]), float(np.mean((p - y) ** 2)),
            float(roc_auc_score(y, p)))


def patched(on: bool) -> None:
    """(b) in place of the library's fit for ``Quadratic`` (and so for auto's candidate)."""
    quadratic_module.fit_quadratic_points = restricted_fit if on else LIBRARY_FIT


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[200, 300, 600, 1000])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--groups", nargs="+", default=["linear"])
    ap.add_argument("--only", nargs="*", default=[], help="base model names (e.g. NB)")
    ap.add_argument("--auto", action="store_true", help="also compare auto's choices")
    args = ap.parse_args(argv)
    methods = ("quadratic", "(b) restricted", "(a) data clamp", "(a') widen only")
    rows = []
    print(f"{'task':18s} {'N':>5s} {'AUCraw':>6s} {'AUCclmp':>7s} {'act':>3s} | "
          + " | ".join(f"{m:^22s}" for m in methods) + "   (log loss / Brier / AUC)")
    for t in real_tasks([int(n) for n in args.sizes], args.seeds, tuple(args.groups)):
        if args.only and t.name.split("/")[1] not in args.only:
            continue
        y = t.y_test
        probs = bool(t.s_cal.min() >= 0 and t.s_cal.max() <= 1 and t.s_test.min() >= 0
                     and t.s_test.max() <= 1)
        row = {"task": t.name, "n": t.n_cal}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib = Quadratic().fit(t.s_cal, t.y_cal)
            row["quadratic"] = scores(y, lib.predict(t.s_test))
            patched(True)
            res = Quadratic().fit(t.s_cal, t.y_cal)
            patched(False)
            row["(b) restricted"] = scores(y, res.predict(t.s_test))
            row["act"] = (res.map_.a, res.map_.b) != (lib.map_.a, lib.map_.b)
            if probs:
                row["(a) data clamp"] = scores(y, data_clamp_predict(t.s_cal, t.y_cal,
                                                                     t.s_test))
                row["(a') widen only"] = scores(y, data_clamp_predict(
                    t.s_cal, t.y_cal, t.s_test, widen_only=True))
            if args.auto:
                for tag in ("library", "with (b)"):
                    patched(tag == "with (b)")
                    au = AutoCalibrator().fit(np.asarray(t.s_cal, dtype=float), t.y_cal)
                    row["auto " + tag] = (au.chosen_, scores(y, au.predict(t.s_test)))
                patched(False)
        auc_raw = roc_auc_score(y, t.s_test)
        auc_cl = roc_auc_score(y, np.clip(t.s_test, BETA_EPS, 1 - BETA_EPS)) if probs \
            else auc_raw
        cells = [" ".join(f"{v:.4f}" for v in row[m]) if m in row else f"{'-':^22s}"
                 for m in methods]
        line = (f"{t.name:18s} {t.n_cal:5d} {auc_raw:6.4f} {auc_cl:7.4f} "
                f"{'yes' if row['act'] else '':>3s} | " + " | ".join(cells))
        if args.auto:
            (cb, sb), (ca, sa) = row["auto library"], row["auto with (b)"]
            line += f"   auto {cb} -> {ca} ({sb[0]:.4f} -> {sa[0]:.4f})"
        print(line, flush=True)
        rows.append(row)
    print()
    keys = list(methods) + (["auto library", "auto with (b)"] if args.auto else [])
    for key in keys:
        sel = [r for r in rows if key in r]
        if not sel:
            continue
        m = np.array([r[key][1] if key.startswith("auto") else r[key] for r in sel]).mean(0)
        print(f"{key:15s} mean over {len(sel):3d} tasks: log loss {m[0]:.5f}  Brier {m[1]:.5f}"
              f"  AUC {m[2]:.5f}")
    sub = [r for r in rows if "(a) data clamp" in r]
    same = sum(np.allclose(r["(a') widen only"], r["quadratic"], rtol=0, atol=1e-6)
               for r in sub)
    print(f"(a') widen only: held-out figures within 1e-6 of quadratic's on {same} of "
          f"{len(sub)} probability tasks")
    if sub:
        m = np.array([r["quadratic"] for r in sub]).mean(0)
        print(f"{'quadratic':15s} mean over {len(sub):3d} tasks ((a)'s): log loss {m[0]:.5f}  "
              f"Brier {m[1]:.5f}  AUC {m[2]:.5f}")
    for base in sorted({r["task"].split("/")[1] for r in sub}):
        sel = [r for r in sub if r["task"].split("/")[1] == base]
        cells = []
        for key in ("quadratic", "(a) data clamp", "(a') widen only"):
            m = np.array([r[key] for r in sel]).mean(0)
            cells.append(f"{key} {m[0]:.4f}/{m[1]:.4f}/{m[2]:.4f}")
        print(f"  {base:5s} ({len(sel):2d} tasks) " + "   ".join(cells))
    print(f"(b) active (the unrestricted optimum turns inside the data) on "
          f"{sum(r['act'] for r in rows)} of {len(rows)} tasks")
    if args.auto:
        same = sum(r["auto library"][0] == r["auto with (b)"][0]
                   and abs(r["auto library"][1][0] - r["auto with (b)"][1][0]) <= 1e-12
                   for r in rows)
        picks = sum(r["auto library"][0] == "quadratic" for r in rows)
        print(f"auto: same choice and held-out log loss on {same} of {len(rows)} tasks; "
              f"library auto chose quadratic on {picks}")


if __name__ == "__main__":
    main()
