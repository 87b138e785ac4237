"""Why mlcal's default SegmentedCalibrator has a larger worst segment than probcal's on the
offsets and slopes scenarios (issue #30, docs/segments.md "Sixth round"): the two fit the same
model (a shared map plus per-segment logit offsets shrunk by empirical Bayes) and differ in

* the shared map: mlcal ``auto`` (default) against probcal's beta map;
* for ``auto``, whether the cross-fitting folds repeat auto's choice among its candidates
  (``auto cv``: mlcal's default before the sixth round of docs/segments.md, ``fold_shared="repeat"``)
  or cross-fit the method auto chose on all rows (``auto cvfix``: what the default
  ``fold_shared="chosen"`` does since);
* the predictions the offsets are estimated against: mlcal's cross-fitted out-of-fold shared
  predictions (``n_folds=5``) against probcal's in-sample ones;
* the prior spread ``tau^2``: mlcal's REML (or, below 10 segments, averaged over ``tau``)
  against probcal's DerSimonian-Laird method of moments (and ``max`` of the two);
* the centre the offsets are shrunk toward: mlcal's REML ``mu`` against probcal's 0.

Since the seventh round of docs/segments.md, mlcal's default plug-in is the moments spread with
centre 0 (``shrinkage="moments"``, the ``auto cvfix dl 0`` rows); the fits here pin
``shrinkage="reml"`` so that every row stays what the sixth round measured.

Per draw this fits ``SegmentedCalibrator(method, n_folds=k)`` for each shared map and fold
setting, takes its per-segment maximum-likelihood offsets and variances (``offset_mle_``,
``offset_var_``) and applies every (tau estimator, centre) combination to the same fit's shared
held-out logits, so each swap is measured on the same draws and the same fits; probcal itself
and mlcal's default predictions are measured as they are (the default's reconstruction is
checked against its own ``predict``). Results are saved per (set, draw, variant) to ``--json``
(resumable); ``--summarize`` prints means and paired differences to ``--reference``.

    python benchmarks/bench_segment_vs_probcal.py --json out.json [--draws 0-19]
        [--scenarios offsets slopes confounded null] [--real-draws 0-29] [--summarize]
        [--reference probcal]
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mlcal  # noqa: E402
from bench_segmented import log_loss, simulate_with_truth  # noqa: E402
from bench_segments_report import (load_records, parse_draws, real_draws,  # noqa: E402
                                   save_records, worst_segment_errors)
from mlcal.calibrators.segment_shrinkage import (reml_prior, shrink_integrated,  # noqa: E402
                                                 tau_posterior)

SHARED = {"auto cv": ("auto", 5), "auto in": ("auto", None), "beta cv": ("beta", 5),
          "beta in": ("beta", None), "auto cvfix": ("auto-chosen", 5)}


def dl_tau2(d: np.ndarray, v: np.ndarray) -> float:
    """DerSimonian-Laird moment estimate of ``tau^2`` (segments with finite variance)."""
    keep = np.isfinite(v)
    t, w = d[keep], 1.0 / v[keep]
    if t.size < 2:
        return 0.0
    m = np.sum(w * t) / np.sum(w)
    q = np.sum(w * (t - m) ** 2)
    return max(0.0, (q - (t.size - 1)) / (np.sum(w) - np.sum(w * w) / np.sum(w)))


def ml_prior(d: np.ndarray, v: np.ndarray) -> tuple[float, float]:
    """Plain maximum likelihood ``(mu, tau^2)`` (no REML correction)."""
    keep = np.isfinite(v)
    t, vv = d[keep], v[keep]

    def mu_of(tau2):
        p = 1.0 / (tau2 + vv)
        return float(np.sum(p * t) / np.sum(p))

    def score(tau2):
        p = 1.0 / (tau2 + vv)
        return float(np.sum((t - mu_of(tau2)) ** 2 * p * p) - np.sum(p))

    if t.size < 2 or not score(0.0) > 0:
        return (mu_of(0.0) if t.size else 0.0), 0.0
    hi = max(float(np.var(t)), 1e-8)
    while score(hi) > 0:
        hi *= 2
    tau2 = brentq(score, 0.0, hi, xtol=1e-14)
    return mu_of(tau2), tau2


def weighted_mean(d, v):
    keep = np.isfinite(v)
    w = 1.0 / v[keep]
    return float(np.sum(w * d[keep]) / np.sum(w)) if keep.any() else 0.0


def offsets_of(d: np.ndarray, v: np.ndarray) -> dict[str, tuple[np.ndarray, float, float]]:
    """Per (tau estimator, centre): the shrunk offsets, tau^2 and centre."""
    keep = np.isfinite(v)
    mu_r, t_r = reml_prior(d, v)
    mu_m, t_m = ml_prior(d, v)
    t_d = dl_tau2(d, v)
    mu_d = weighted_mean(d, v) if t_d == 0 else \
        float(np.sum(d[keep] / (t_d + v[keep])) / np.sum(1 / (t_d + v[keep])))
    t_x = max(t_r, t_d)                       # the larger of REML's and the moments' spread
    mu_x = float(np.sum(d[keep] / (t_x + v[keep])) / np.sum(1 / (t_x + v[keep]))) \
        if keep.any() else 0.0
    out = {}
    for name, mu, t2 in (("reml", mu_r, t_r), ("ml", mu_m, t_m), ("dl", mu_d, t_d),
                         ("max", mu_x, t_x)):
        b = np.where(keep & (t2 > 0), t2 / (t2 + np.where(keep, v, 1.0)), 0.0)
        out[f"{name} mu"] = (np.where(keep, mu + b * (d - mu), 0.0), t2, mu)
        out[f"{name} 0"] = (np.where(keep, b * d, 0.0), t2, 0.0)
    post = tau_posterior(d, v)
    m, _ = shrink_integrated(d, v, post)
    out["int mu"] = (np.where(keep, m, 0.0), float(np.sum(post[0] * post[2])), mu_r)
    return out


def run_probcal(s, y, g, st, gt):
    import probcal

    c = probcal.SegmentedCalibrator().fit(s, y, segments=g)
    p = np.asarray(c.predict_proba(st, segments=gt))
    return (p[:, 1] if p.ndim == 2 else p), float(c.tau2_)


def measure(set_name, draw, s, y, g, tr, min_rows, records, done, path, shared=tuple(SHARED)):
    te = ~tr
    yt, gt = y[te], g[te]

    def add(variant, p, **extra):
        citl, ece = worst_segment_errors(yt, p, gt, min_rows)
        records.append({"set": set_name, "draw": draw, "method": variant,
                        "log_loss": log_loss(yt, p), "worst_oe": citl, "worst_ece": ece,
                        **extra})

    if "probcal" in shared and (set_name, draw, "probcal") not in done:
        p, t2 = run_probcal(s[tr], y[tr], g[tr], s[te], gt)
        add("probcal", p, tau2=t2)
    for label, (method, k) in SHARED.items():
        if label not in shared or (set_name, draw, f"{label} reml mu") in done:
            continue
        if method == "auto-chosen":
            # the method auto chooses on all rows, cross-fitted as that method (the folds do
            # not repeat auto's choice)
            auto = mlcal.AutoCalibrator().fit(s[tr], y[tr])
            method = auto.candidate(auto.chosen_)
        # "auto cv" / "auto in": auto run again in every fold (fold_shared="repeat", the
        # default before the sixth round; "auto cvfix" is what fold_shared="chosen" does)
        # (shrinkage="reml": the stored offsets are the "reml mu" variant, checked below;
        # every other prior is applied to the same fit's offset MLEs)
        cal = mlcal.SegmentedCalibrator(method, n_folds=k, tau="plugin",
                                        fold_shared="repeat", shrinkage="reml").fit(
            s[tr], y[tr], g[tr])
        idx = {key[0]: i for i, key in enumerate(cal.segments_)}
        gi = np.array([idx.get(x, -1) for x in gt])
        q = np.clip(cal.shared_calibrator_.predict(s[te]), 1e-15, 1 - 1e-15)
        lsh = np.log(q) - np.log1p(-q)
        d, v = cal.offset_mle_, cal.offset_var_
        for name, (off, t2, mu) in offsets_of(d, v).items():
            o = np.append(off, 0.0)            # unseen -> shared map
            p = expit(lsh + o[gi])
            if name == "reml mu":             # the reconstruction of mlcal's own predict
                ref = cal.predict(s[te], gt)
                assert np.max(np.abs(p - ref)) < 1e-9, np.max(np.abs(p - ref))
            add(f"{label} {name}", p, tau2=t2, mu=mu)
        if label == "auto cv" and set_name not in ("offsets", "slopes", "confounded", "null"):
            # the default before the sixth round; with 60 segments it is "auto cv reml mu"
            # (tau="auto" is the plug-in)
            add("mlcal default", mlcal.SegmentedCalibrator(fold_shared="repeat",
                                                           shrinkage="reml").fit(
                s[tr], y[tr], g[tr])
                .predict(s[te], gt))
        save_records(path, records)
    print(f"{set_name:11} draw {draw:2d} done", flush=True)


def summarize(path: str, reference: str) -> None:
    records = load_records(path)
    for set_name in dict.fromkeys(r["set"] for r in records):
        rs = [r for r in records if r["set"] == set_name]
        names = list(dict.fromkeys(r["method"] for r in rs))
        by = {(r["method"], r["draw"]): r for r in rs}
        draws = sorted(d for d in {r["draw"] for r in rs} if all((m, d) in by for m in names))
        print(f"\n{set_name}: {len(draws)} draws; paired - {reference}: mean +- SE (draws lower)")
        for m in names:
            v = {k: np.array([by[(m, d)][k] for d in draws]) for k in ("log_loss", "worst_oe")}
            line = f"{m:20} {v['log_loss'].mean():9.5f} {v['worst_oe'].mean():8.4f}"
            if m != reference:
                for k in ("log_loss", "worst_oe"):
                    diff = v[k] - np.array([by[(reference, d)][k] for d in draws])
                    se = diff.std(ddof=1) / math.sqrt(diff.size)
                    line += f"   {k} {diff.mean():+.5f} +- {se:.5f} ({(diff < 0).sum()})"
            t2 = [by[(m, d)].get("tau2") for d in draws]
            if all(x is not None for x in t2):
                line += f"   tau2 {np.mean(t2):.4f}"
            print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", required=True)
    ap.add_argument("--draws", default="0-19")
    ap.add_argument("--scenarios", nargs="*", default=["offsets", "slopes", "confounded",
                                                       "null"])
    ap.add_argument("--real-draws", default=None)
    ap.add_argument("--shared", nargs="*", default=[*SHARED, "probcal"],
                    help="which shared-map settings (and probcal) to run")
    ap.add_argument("--summarize", action="store_true")
    ap.add_argument("--reference", default="probcal")
    args = ap.parse_args()
    if args.summarize:
        summarize(args.json, args.reference)
        return
    records = load_records(args.json)
    done = {(r["set"], r["draw"], r["method"]) for r in records}
    for r in parse_draws(args.draws) if args.scenarios else []:
        for scen in args.scenarios:
            s, y, g, tr, _ = simulate_with_truth(scen, 60, 20_000, r)
            measure(scen, r, s, y, g, tr, 100, records, done, args.json, args.shared)
    if args.real_draws:
        real = parse_draws(args.real_draws)
        for name, draws in real_draws(max(real) + 1):
            for r in real:
                s, y, g, fit, test, _ = draws[r]
                use = fit | test
                measure(name, r, s[use], y[use], g[use], fit[use], 30, records, done,
                        args.json, args.shared)


if __name__ == "__main__":
    main()
