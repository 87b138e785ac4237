"""probmetrics' SMS taken apart on the binary tree tasks (issue 26; docs/auto.md, "What
structured scaling does on trees"). Dev-only: needs probmetrics (the peers' environment).

On the tree tasks of ``bench_quality.real_tasks`` (the fresh suite of ``tune_auto_rule.py
--sizes 300 600 --seeds 4 --skip-splits 2`` by default), fits and scores on the held-out rows:

* pm-sms with probmetrics' own options: as registered, without its ridge (the three lambdas
  0), ten times the ridge, and with ts-mix replaced by plain temperature scaling inside it
  ("no mix": probmetrics' factory is wrapped while SMS fits, so its pre-step is
  ``temp-scaling``);
* pm-ts-mix and probmetrics' temperature scaling;
* mlcal's temperature scaling and beta as ``auto`` fits them, beta shrunk toward temperature
  scaling (``prior_center="temperature"``), the same with the scores clipped to SMS's floor
  ``[1/(2(n+1)), 1 - 1/(2(n+1))]`` first, and beta fitted on pm-ts-mix's probabilities.

Prints per task the held-out log loss of each, then the means (log loss, Brier), and writes
the per-task figures to ``--json``.

    OMP_NUM_THREADS=1 PYTHONPATH=. /work/peers/bin/python benchmarks/decompose_pm_sms.py \\
        --json benchmarks/results/auto_smsbin/decompose_pm_sms.json
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings

import numpy as np

import mlcal
from mlcal.metrics import brier, log_loss

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from bench_quality import real_tasks  # noqa: E402

B100 = {"smooth_targets": False, "identity_prior": 100.0}
NO_RIDGE = {"sms_lambda_intercept": 0.0, "sms_lambda_diagonal": 0.0,
            "sms_lambda_off_diagonal": 0.0}
RIDGE_X10 = {"sms_lambda_intercept": 10.0, "sms_lambda_diagonal": 10.0,
             "sms_lambda_off_diagonal": 10.0}


def _two(s):
    s = np.asarray(s, dtype=float)
    return np.column_stack((1.0 - s, s))


def pm(method, no_mix=False, **config):
    """A probmetrics calibrator on the (n, 2) probabilities; ``no_mix``: SMS's ts-mix pre-step
    replaced by plain temperature scaling."""
    def fit(s, y):
        import probmetrics.calibrators.factory as factory
        from probmetrics.calibrators import get_calibrator

        orig = factory.get_calibrator
        if no_mix:
            factory.get_calibrator = lambda m, **k: orig("temp-scaling" if m == "ts-mix" else m,
                                                         **k)
        try:
            cal = get_calibrator(method, **config)
            cal.fit(_two(s), np.asarray(y))
        finally:
            factory.get_calibrator = orig
        return lambda t: np.asarray(cal.predict_proba(_two(t)))[:, 1]
    return fit


def ours(method, clip=False, on_ts_mix=False, **params):
    """An mlcal calibrator; ``clip``: scores clipped to SMS's floor first; ``on_ts_mix``: fitted
    on pm-ts-mix's probabilities."""
    def fit(s, y):
        floor = 0.5 / (len(s) + 1)
        pre = (lambda t: np.clip(t, floor, 1.0 - floor)) if clip else (lambda t: t)
        if on_ts_mix:
            pre = pm("ts-mix")(s, y)
        cal = mlcal.get_calibrator(method, **params).fit(pre(s), y)
        return lambda t: cal.predict(pre(t))
    return fit


def toward_t(k):
    return {"smooth_targets": False, "identity_prior": float(k), "prior_center": "temperature"}


METHODS = {
    "pm-sms": pm("sms", sms_print_init_info=False),
    "pm-sms no reg": pm("sms", sms_print_init_info=False, **NO_RIDGE),
    "pm-sms no mix": pm("sms", no_mix=True, sms_print_init_info=False),
    "pm-sms no mix, no reg": pm("sms", no_mix=True, sms_print_init_info=False, **NO_RIDGE),
    "pm-sms reg x10": pm("sms", sms_print_init_info=False, **RIDGE_X10),
    "pm-ts-mix": pm("ts-mix"),
    "pm-temp-scaling (no mix)": pm("temp-scaling"),
    "temperature (auto's)": ours("temperature", smooth_targets=False),
    "beta K=100 (auto's)": ours("beta", **B100),
    "beta K=10 toward T": ours("beta", **toward_t(10)),
    "beta K=30 toward T": ours("beta", **toward_t(30)),
    "temperature, input clip 1/(2(n+1))": ours("temperature", clip=True, smooth_targets=False),
    "beta K=100, input clip": ours("beta", clip=True, **B100),
    "beta K=10 toward T, input clip": ours("beta", clip=True, **toward_t(10)),
    "beta K=10 on pm-ts-mix probs": ours("beta", on_ts_mix=True, smooth_targets=False,
                                         identity_prior=10.0),
    "beta K=100 on pm-ts-mix probs": ours("beta", on_ts_mix=True, **B100),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[300, 600])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--skip-splits", type=int, default=2,
                    help="leave out the first splits of breast cancer and digits (as "
                         "tune_auto_rule.py --skip-splits)")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    seen, rows = {}, []
    for t in real_tasks(args.sizes, args.seeds, ("trees",)):
        seen[t.name] = seen.get(t.name, 0) + 1
        if not t.name.startswith("mc-") and seen[t.name] <= args.skip_splits:
            continue
        s_cal, s_te = np.asarray(t.s_cal, dtype=float), np.asarray(t.s_test, dtype=float)
        row = {"task": t.name, "n": t.n_cal,
               "exact01": int(np.sum((s_cal <= 0.0) | (s_cal >= 1.0)))}
        for name, fit in METHODS.items():
            p = fit(s_cal, t.y_cal)(s_te)
            row[name] = (float(log_loss(t.y_test, p)), float(brier(t.y_test, p)))
        rows.append(row)
        print(f"{t.name} N={t.n_cal} exact 0/1: {row['exact01']} | "
              + " ".join(f"{row[m][0]:.4f}" for m in METHODS), flush=True)
    print(f"\nmean held-out log loss / Brier over {len(rows)} tasks")
    for m in METHODS:
        print(f"{m:40s} {np.mean([r[m][0] for r in rows]):.5f} "
              f"{np.mean([r[m][1] for r in rows]):.5f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
