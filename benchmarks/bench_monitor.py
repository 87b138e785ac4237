"""Calibration monitoring: false alarms, detection delay, recommendation and re-offset quality
of :class:`mlcal.monitor.CalibrationMonitor`, with probcal 0.4's ``CalibrationMonitor``
(dev-only reference, defaults) on the same streams in the same run.

    python benchmarks/bench_monitor.py [--stable 1000] [--stable-ref 100] [--shifted 100]

Streams: 60 batches of 200 rows, checked after every batch. The deployed forecast is
``p = sigmoid(x)`` with ``x ~ N(-1.5, 1.2^2)`` (about 23 % positives). Stable: ``y ~
Bernoulli(p)``. From batch 20 on (batches 20..60 shifted):

* prevalence shift: ``logit P(y=1) = x + 0.5`` (base rate about 0.23 -> 0.31);
* slope change: ``logit P(y=1) = 0.6 x + c`` with ``c`` set so the base rate is unchanged
  (a pure shape change).

Stream ``s`` of every scenario uses ``numpy.random.default_rng([scenario, s])``; both monitors
see identical batches. A stream stops at its first alarm (alarms are sticky). Delay = alarm
batch - 19 (shifted batches seen); an alarm before batch 20 is a false alarm and not a
detection. probcal is slower (its plug-ins refit on all past batches), so by default it runs
on the first ``--stable-ref`` stable streams; ``--stable-ref 1000`` matches them all.
The re-offset rows: on prevalence-shift streams that alarm, the offset fitted at the alarm
(``offset_estimate``) is applied to the batches after the alarm; its log loss there is
compared with an oracle logistic refit ``(a, b)`` fitted in-sample on those same batches, and
so is the offset-only refit on those batches (the re-offset with the oracle's data).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit

from mlcal.metrics import proportion_interval
from mlcal.metrics.curves import _fit_joint
from mlcal.monitor import CalibrationMonitor

N_BATCHES, BATCH, CHANGE = 60, 200, 20
SCENARIOS = {"stable": 0, "prevalence": 1, "slope": 2}
SLOPE = 0.6


def _slope_intercept() -> float:
    """c with E sigmoid(0.6 x + c) = E sigmoid(x) for x ~ N(-1.5, 1.2^2) (quadrature)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    x = -1.5 + 1.2 * nodes
    base = weights @ expit(x)
    return brentq(lambda c: weights @ expit(SLOPE * x + c) - base, -5, 5, xtol=1e-12)


SLOPE_C = _slope_intercept()


def stream(scenario: str, seed: int):
    rng = np.random.default_rng([SCENARIOS[scenario], seed])
    for t in range(1, N_BATCHES + 1):
        x = rng.normal(-1.5, 1.2, BATCH)
        eta = x
        if t >= CHANGE and scenario == "prevalence":
            eta = x + 0.5
        elif t >= CHANGE and scenario == "slope":
            eta = SLOPE * x + SLOPE_C
        y = (rng.random(BATCH) < expit(eta)).astype(np.float64)
        yield t, expit(x), y


def run_mlcal(scenario: str, seed: int) -> dict:
    monitor = CalibrationMonitor(alpha=0.05)
    batches = []
    for t, p, y in stream(scenario, seed):
        batches.append((p, y))
        monitor.update(p, y)
        if monitor.alarm:
            return {"alarm": t, "rec": monitor.recommendation,
                    "offset": monitor.offset_estimate, "batches": batches, "seed": seed}
    return {"alarm": None, "rec": "none", "offset": None, "batches": batches, "seed": seed}


def run_probcal(scenario: str, seed: int) -> dict:
    from probcal.monitor import CalibrationMonitor as ProbcalMonitor

    monitor = ProbcalMonitor(alpha=0.05)
    for t, p, y in stream(scenario, seed):
        if monitor.update(y, p).alarm:
            return {"alarm": t, "rec": monitor.report().recommendation}
    return {"alarm": None, "rec": "none"}


def rate(k: int, n: int) -> str:
    lo, hi = proportion_interval([k], [n], method="clopper-pearson")
    return f"{k / n:.3f} [{lo[0]:.3f}, {hi[0]:.3f}]"


def summarise(runs: list[dict], scenario: str) -> dict:
    alarms = [r["alarm"] for r in runs]
    early = sum(a is not None and a < CHANGE for a in alarms)
    delays = [a - (CHANGE - 1) for a in alarms if a is not None and a >= CHANGE]
    right = {"prevalence": "re-offset", "slope": "re-fit"}.get(scenario)
    correct = sum(r["rec"] == right for r in runs
                  if r["alarm"] is not None and r["alarm"] >= CHANGE)
    return {"n": len(runs), "early": early, "detected": len(delays),
            "median_delay": float(np.median(delays)) if delays else float("nan"),
            "p90_delay": float(np.percentile(delays, 90)) if delays else float("nan"),
            "correct": correct}


def reoffset_quality(runs: list[dict]) -> tuple[list[float], list[float]]:
    """Relative log-loss excess over the in-sample oracle refit ``(a, b)`` on the batches after
    the alarm, per stream: of the offset fitted at the alarm (out of sample), and of the
    offset-only refit on those same batches (in sample, like the oracle)."""
    from mlcal.metrics.curves import _fit_offset_intercept

    at_alarm, same_window = [], []
    for r in runs:
        if r["alarm"] is None or r["alarm"] < CHANGE or r["alarm"] >= N_BATCHES:
            continue
        rest = list(stream("prevalence", r["seed"]))[r["alarm"]:]
        z = np.concatenate([np.log(p) - np.log1p(-p) for _, p, _ in rest])
        y = np.concatenate([y for _, _, y in rest])
        w = np.ones_like(y)

        def loss(eta):
            return float(np.mean(np.logaddexp(0.0, eta) - y * eta))

        a, b = _fit_joint(z, y, w)
        oracle = loss(a + b * z)
        at_alarm.append(loss(z + r["offset"]) / oracle - 1.0)
        same_window.append(loss(z + _fit_offset_intercept(z, y, w)) / oracle - 1.0)
    return at_alarm, same_window


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stable", type=int, default=1000)
    ap.add_argument("--stable-ref", type=int, default=100)
    ap.add_argument("--shifted", type=int, default=100)
    args = ap.parse_args()
    try:
        import probcal  # noqa: F401
        have_ref = True
    except ImportError:
        have_ref = False
        print("probcal is not installed: reference columns skipped (pip install probcal)")

    print(f"streams of {N_BATCHES} batches x {BATCH} rows, alpha = 0.05, checked after every "
          f"batch; change at batch {CHANGE}; slope-change intercept c = {SLOPE_C:.4f}\n")
    results: dict[str, dict] = {}
    for scenario, n_ours, n_ref in (("stable", args.stable, args.stable_ref),
                                    ("prevalence", args.shifted, args.shifted),
                                    ("slope", args.shifted, args.shifted)):
        start = time.perf_counter()
        ours = [run_mlcal(scenario, s) for s in range(n_ours)]
        t_ours = time.perf_counter() - start
        start = time.perf_counter()
        ref = [run_probcal(scenario, s) for s in range(n_ref)] if have_ref else []
        t_ref = time.perf_counter() - start
        results[scenario] = {"ours": ours, "ref": ref, "t_ours": t_ours, "t_ref": t_ref}

    print("False alarms on stable streams (any alarm within 60 batches; 95 % Clopper-Pearson)")
    print(f"{'monitor':<10} {'streams':>8} {'alarms':>7}  {'rate [95 % CI]':<24} {'s/stream':>9}")
    for name, key, tkey in (("mlcal", "ours", "t_ours"), ("probcal", "ref", "t_ref")):
        runs = results["stable"][key]
        if not runs:
            continue
        k = sum(r["alarm"] is not None for r in runs)
        print(f"{name:<10} {len(runs):>8} {k:>7}  {rate(k, len(runs)):<24} "
              f"{results['stable'][tkey] / len(runs):>9.3f}")
    # the same streams for both: the first stable-ref ones
    n_common = len(results["stable"]["ref"])
    if n_common:
        k = sum(r["alarm"] is not None for r in results["stable"]["ours"][:n_common])
        print(f"{'mlcal':<10} {n_common:>8} {k:>7}  {rate(k, n_common):<24} (probcal's streams)")

    print("\nShifted streams (change at batch 20): detection within batch 60, delay in batches")
    print(f"{'scenario':<11} {'monitor':<8} {'streams':>7} {'early':>6} {'detected':>9} "
          f"{'median delay':>13} {'p90 delay':>10} {'recommendation right':>22}")
    for scenario in ("prevalence", "slope"):
        for name, key in (("mlcal", "ours"), ("probcal", "ref")):
            runs = results[scenario][key]
            if not runs:
                continue
            s = summarise(runs, scenario)
            right = f"{s['correct']}/{s['detected']} = {s['correct'] / max(s['detected'], 1):.3f}"
            print(f"{scenario:<11} {name:<8} {s['n']:>7} {s['early']:>6} "
                  f"{s['detected'] / s['n']:>9.3f} {s['median_delay']:>13.1f} "
                  f"{s['p90_delay']:>10.1f} {right:>22}")

    at_alarm, same_window = reoffset_quality(results["prevalence"]["ours"])
    if at_alarm:
        print("\nRe-offset vs oracle refit (a, b) fitted in-sample on the batches after the alarm "
              "(prevalence shift): log-loss excess in %")
        print(f"{'offset':<36} {'streams':>7} {'median':>8} {'p90':>8} {'max':>8} "
              f"{'within 1 %':>11}")
        for name, excess in (("fitted at the alarm (out of sample)", at_alarm),
                             ("refitted on the same batches", same_window)):
            ex = np.asarray(excess) * 100
            print(f"{name:<36} {ex.size:>7} {np.median(ex):>8.3f} {np.percentile(ex, 90):>8.3f} "
                  f"{ex.max():>8.3f} {np.mean(ex <= 1.0):>11.3f}")

if __name__ == "__main__":
    main()
