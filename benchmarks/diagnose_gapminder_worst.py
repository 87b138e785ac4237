"""Gapminder's worst segment against probcal (issue #30, docs/segments.md "Tenth round").

Per random split of the gapminder set (``bench_segments_report.real_draws``: thirds for the base
model, calibration and held out), fits mlcal's default ``SegmentedCalibrator`` and the variants
that swap one of its differences from probcal's ``SegmentedCalibrator`` at a time (and all of
them together), plus probcal itself, and records per segment: the held-out rows, the held-out
``O - E`` of every fit, and the fitted adjustment (mlcal: slope and offset of the map, the
offset's maximum-likelihood estimate and variance; probcal: ``delta_hat_``, ``se_``,
``delta_tilde_``). mlcal's differences from probcal on five segments:

* ``beta``: the shared map is ``auto``'s choice (``method="beta"`` swaps in probcal's map kind);
* ``in-sample``: the offsets are estimated against cross-fitted shared predictions
  (``n_folds=None`` swaps in probcal's in-sample ones);
* ``marginal``: a common within-segment slope (``shared_slope="marginal"``: none, as probcal);
* ``plugin``: with fewer than 10 segments the offsets are averaged over ``tau`` with a flat
  prior on their centre (``tau="plugin"`` with the default ``shrinkage="moments"`` swaps in
  probcal's DerSimonian-Laird plug-in shrunk toward 0; ``heterogeneity_alpha=None`` so that no
  test intervenes);
* ``probcal-like``: all four swaps;
* ``segcv`` (not a swap, a candidate fix): the shared map chosen among ``auto``'s candidates by
  the cross-validated held-out log loss of the whole segmented model (each candidate's
  ``SegmentedCalibrator(candidate, select="cv")`` ``cv_log_loss_["offsets"]``: its out-of-fold
  shared predictions plus offsets estimated on the other folds) instead of ``auto``'s choice by
  the shared map's own loss; then the default fit with that map.

``slopes100`` (``min_rows_for_slope=100``) is a diagnostic of the within-segment slopes only.
``segcv`` and ``slopes100`` run only when named in ``--variants``.

Results are saved per split to ``--json`` (resumable); ``--summarize`` prints, over the splits
every fit has, the mean worst |O-E| (segments with at least 30 held-out rows), its paired
difference to probcal's and to the default's, how often each segment is the worst, the mean
fitted offsets per segment, and the worst ECE with each segment's mean ECE and median held-out
calibration slope.

    python benchmarks/diagnose_gapminder_worst.py --json out.json [--splits 0-199]
        [--variants default marginal slopes100] [--no-probcal] [--summarize]
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mlcal  # noqa: E402
from bench_segmented import log_loss  # noqa: E402
from bench_segments_report import load_records, parse_draws, real_draws, save_records  # noqa: E402
from mlcal.metrics import segment_report  # noqa: E402

MIN_ROWS = 30
PLUGIN = {"tau": "plugin", "shrinkage": "moments", "heterogeneity_alpha": None}
VARIANTS = {
    "default": {},
    "beta": {"method": "beta"},
    "in-sample": {"n_folds": None},
    "marginal": {"shared_slope": "marginal"},
    "plugin": PLUGIN,
    "probcal-like": {"method": "beta", "n_folds": None, "shared_slope": "marginal", **PLUGIN},
    "segcv": None,
    # per-segment slopes (shrunk) for the segments with at least 100 calibration rows: a
    # diagnostic of the within-segment slopes, not a candidate default (the threshold is
    # gapminder's segment size)
    "slopes100": {"min_rows_for_slope": 100},
}


def segmented_choice(s, y, g):
    """``auto``'s candidate whose segmented model has the lowest cross-validated log loss."""
    auto = mlcal.AutoCalibrator()
    best, best_loss = None, np.inf
    for name in auto.candidate_names():
        try:
            cal = mlcal.SegmentedCalibrator(auto.candidate(name), select="cv").fit(s, y, g)
        except (ValueError, ArithmeticError, np.linalg.LinAlgError):
            continue
        if cal.cv_log_loss_ is not None and cal.cv_log_loss_["offsets"] < best_loss:
            best, best_loss = name, cal.cv_log_loss_["offsets"]
    return auto.candidate(best)


def probcal_fit(s, y, g):
    import probcal

    return probcal.SegmentedCalibrator().fit(s, y, segments=g)


def split_record(r: int, s, y, g, fit, test, variants: dict, with_probcal: bool) -> dict:
    labels = sorted(set(g.tolist()))
    gt, yt = g[test], y[test]
    rec = {"split": r, "segments": labels,
           "rows": [int(np.sum(gt == k)) for k in labels], "fits": {}}
    preds = {}
    for name, kw in variants.items():
        if name == "segcv":
            kw = {"method": segmented_choice(s[fit], y[fit], g[fit])}
        cal = mlcal.SegmentedCalibrator(**kw).fit(s[fit], y[fit], g[fit])
        idx = [cal.segments_.index((k,)) for k in labels]
        info = {"slope": [float(cal.map_.slopes[i]) for i in idx],
                "offset": [float(cal.map_.offsets[i]) for i in idx],
                "mle": [float(cal.offset_mle_[i]) for i in idx],
                "var": [float(cal.offset_var_[i]) for i in idx],
                "chosen": str(getattr(cal.shared_calibrator_, "chosen_",
                                      getattr(kw.get("method"), "method_name", "beta")))}
        preds[name] = (np.asarray(cal.predict(s[test], gt), dtype=float), info)
    if with_probcal:
        pc = probcal_fit(s[fit], y[fit], g[fit])
        pos = [pc.segments_.index(k) for k in labels]
        p = np.asarray(pc.predict_proba(s[test], segments=gt), dtype=float)
        preds["probcal"] = (p, {"offset": [float(pc.delta_tilde_[i]) for i in pos],
                                "mle": [float(pc.delta_hat_[i]) for i in pos],
                                "var": [float(pc.se_[i]) ** 2 for i in pos],
                                "slope": [1.0] * len(pos), "chosen": "beta"})
    for name, (p, info) in preds.items():
        info["oe"] = [float(np.mean(yt[gt == k]) - np.mean(p[gt == k])) if np.any(gt == k)
                      else float("nan") for k in labels]
        eces = {x["label"]: x["ece"]
                for x in segment_report(yt, p, gt, min_segment_rows=1).eligible}
        info["ece"] = [float(eces.get(k, float("nan"))) for k in labels]
        info["held_slope"] = [held_out_slope(yt[gt == k], p[gt == k]) for k in labels]
        info["log_loss"] = log_loss(yt, p)
        rec["fits"][name] = info
    return rec


def held_out_slope(y, p) -> float:
    """The held-out calibration slope of one segment: logistic regression of ``y`` on
    ``logit(p)`` with an intercept (nan with one class or fewer than 30 rows)."""
    if y.size < MIN_ROWS or y.min() == y.max():
        return float("nan")
    p = np.clip(p, 1e-12, 1 - 1e-12)
    x = np.log(p) - np.log1p(-p)

    def nll(th):
        z = th[0] + th[1] * x
        return float(np.sum(np.logaddexp(0.0, z) - y * z))

    return float(minimize(nll, np.array([0.0, 1.0]), method="BFGS").x[1])


def nanmedian(a: np.ndarray) -> np.ndarray:
    return np.array([np.median(c[np.isfinite(c)]) if np.isfinite(c).any() else np.nan
                     for c in a.T])


def worst_ece(rec: dict, name: str) -> tuple[float, str]:
    ece = rec["fits"][name]["ece"]
    return max((e, k) for e, k, n in zip(ece, rec["segments"], rec["rows"]) if n >= MIN_ROWS)


def worst(rec: dict, name: str) -> tuple[float, str]:
    oe = rec["fits"][name]["oe"]
    cand = [(abs(o), k) for o, k, n in zip(oe, rec["segments"], rec["rows"]) if n >= MIN_ROWS]
    return max(cand)


def summarize(path: str) -> None:
    recs = load_records(path)
    names = list(dict.fromkeys(n for r in recs for n in r["fits"]))
    recs = [r for r in recs if all(n in r["fits"] for n in names)]
    n = len(recs)
    labels = recs[0]["segments"]
    print(f"gapminder: {n} splits; segments {labels}; held-out rows per segment (mean) "
          f"{np.round(np.mean([r['rows'] for r in recs], axis=0), 1)}; "
          f"worst |O-E| among segments with >= {MIN_ROWS} held-out rows")
    ref = {m: np.array([worst(r, m)[0] for r in recs]) for m in names}

    def paired(a, b):
        d = a - b
        se = d.std(ddof=1) / math.sqrt(d.size)
        return f"{d.mean():+.5f} +- {se:.5f} ({int((d < 0).sum())}/{d.size})"

    print(f"{'fit':14} {'worst|O-E|':>10} {'log loss':>9}  {'- probcal':>26}  {'- default':>26}"
          "  worst segment (count)")
    for m in names:
        ll = np.array([r["fits"][m]["log_loss"] for r in recs])
        cnt = {}
        for r in recs:
            cnt[worst(r, m)[1]] = cnt.get(worst(r, m)[1], 0) + 1
        line = f"{m:14} {ref[m].mean():10.5f} {ll.mean():9.5f}  "
        vs_probcal = paired(ref[m], ref["probcal"]) if "probcal" in ref and m != "probcal" \
            else ""
        line += f"{vs_probcal:>26}  "
        line += f"{paired(ref[m], ref['default']) if m != 'default' else '':>26}  "
        line += ", ".join(f"{k} {v}" for k, v in sorted(cnt.items()))
        print(line)
    print("\nper segment, mean over splits: held-out O-E (signed) and |O-E|; fitted offset, "
          "slope; offset MLE")
    for m in names:
        oe = np.array([r["fits"][m]["oe"] for r in recs])
        off = np.array([r["fits"][m]["offset"] for r in recs])
        sl = np.array([r["fits"][m]["slope"] for r in recs])
        mle = np.array([r["fits"][m]["mle"] for r in recs])
        print(f"{m:14} O-E " + " ".join(f"{k[:4]} {a:+.4f}/{b:.4f}" for k, a, b in
                                         zip(labels, np.nanmean(oe, 0), np.nanmean(abs(oe), 0))))
        print(f"{'':14} off " + " ".join(f"{k[:4]} {a:+.3f}" for k, a in zip(labels, off.mean(0)))
              + "  slope " + " ".join(f"{a:.3f}" for a in sl.mean(0))
              + "  mle " + " ".join(f"{a:+.3f}" for a in mle.mean(0)))
    if all("ece" in r["fits"][m] for r in recs for m in names):
        print("\nworst ECE (10 bins) and per segment mean ECE / median held-out slope "
              "(logistic regression of y on logit p within the segment)")
        we = {m: np.array([worst_ece(r, m)[0] for r in recs]) for m in names}
        for m in names:
            ece = np.array([r["fits"][m]["ece"] for r in recs])
            hs = np.array([r["fits"][m]["held_slope"] for r in recs])
            line = f"{m:14} worst ECE {we[m].mean():.4f}"
            if m != "default":
                line += f" (- default {paired(we[m], we['default'])})"
            line += "  " + " ".join(f"{k[:4]} {a:.4f}/{b:.2f}" for k, a, b in
                                    zip(labels, np.nanmean(ece, 0), nanmedian(hs)))
            print(line)
    chosen = {}
    for r in recs:
        c = r["fits"]["default"]["chosen"]
        chosen[c] = chosen.get(c, 0) + 1
    print("\nauto's shared map (default fit):", chosen)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--splits", default="0-49")
    ap.add_argument("--variants", nargs="*",
                    default=[v for v in VARIANTS if v not in ("segcv", "slopes100")])
    ap.add_argument("--no-probcal", action="store_true")
    ap.add_argument("--summarize", action="store_true")
    args = ap.parse_args()
    if args.summarize:
        summarize(args.json)
        return
    records = load_records(args.json)
    done = {r["split"] for r in records}
    splits = parse_draws(args.splits)
    variants = {k: VARIANTS[k] for k in args.variants}
    for name, draws in real_draws(max(splits) + 1):
        if name != "gapminder":
            continue
        for r in splits:
            if r in done:
                continue
            s, y, g, fit, test, _ = draws[r]
            records.append(split_record(r, s, y, g, fit, test, variants,
                                        not args.no_probcal))
            save_records(args.json, records)
            w = {m: worst(records[-1], m) for m in records[-1]["fits"]}
            print(f"split {r:3d} " + "  ".join(f"{m} {v[1][:4]} {v[0]:.4f}"
                                             for m, v in w.items()), flush=True)


if __name__ == "__main__":
    main()
