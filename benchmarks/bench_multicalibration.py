"""Multicalibration against the references, measured in the same run (#30).

    PYTHONPATH=<worktree> /work/peers/bin/python benchmarks/bench_multicalibration.py \
        [--sizes 1e5 1e6] [--test 500000] [--seed 0]

Data: a base model's scores whose log-odds are off by a shift that depends on segments the
calibrator is not told about in advance: two categorical features (``region``, 8 levels;
``device``, 3 levels) and two numeric ones (``age``, ``tenure``); part of the shift is an
interaction (region x device) and part a threshold in ``age``; the scores are also globally
over-confident. Every method fits on the same N rows and is scored on ``--test`` fresh rows.

Columns: ``fit s`` wall time of one fit (numba compilation excluded by a warm-up fit on a
small sample), ``ratio`` = fit time / MCGrad's fit time in this run, ``log loss`` the global
held-out log loss, ``worst seg`` the largest |mean prediction - mean label| over the
evaluation segments (every level of each categorical feature, every region x device cell,
every decile of each numeric feature, and age > 55 within each region; segments of at least
2000 test rows), ``mean seg`` the mean of those gaps.

Run with ``OMP_NUM_THREADS=1`` on a shared machine: LightGBM's threads (inside MCGrad) spin
when the cores are busy and its fit time then measures the load, not the method (MCGrad took
525 s at 1e5 rows with default threads against 68 s with one thread on the same busy
machine); mlcal's fit is single-threaded, so one thread each compares like with like.

Methods: ``raw`` scores; ``auto`` mlcal's global AutoCalibrator; ``segmented`` probcal's
SegmentedCalibrator told the region x device cells (the segments a user would know);
``mcgrad`` MCGrad with its defaults (categorical and numeric features); ``mlcal`` mlcal's
Multicalibration with its defaults. probcal and mcgrad are optional (a note is printed when
one is missing).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from mlcal.calibrators.auto import AutoCalibrator
from mlcal.multicalibration import Multicalibration


def make_data(n: int, rng: np.random.Generator):
    region = rng.integers(0, 8, n)
    device = rng.integers(0, 3, n)
    age = rng.normal(40, 12, n)
    tenure = rng.exponential(3.0, n)
    t = rng.normal(-1.0, 1.6, n) + 0.1 * np.log1p(tenure)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-t))).astype(float)
    region_shift = np.array([0.0, 0.4, -0.5, 0.2, 0.0, -0.3, 0.6, -0.1])[region]
    cell_shift = np.where((region == 3) & (device == 2), -0.8, 0.0)
    age_shift = np.where(age > 55, 0.5, 0.0)
    z = 1.3 * t + region_shift + cell_shift + age_shift   # over-confident globally (slope 1.3)
    s = 1.0 / (1.0 + np.exp(-z))
    frame = pd.DataFrame({"region": np.array([f"r{k}" for k in range(8)])[region],
                          "device": np.array(["ios", "android", "web"])[device],
                          "age": age, "tenure": tenure})
    return s, y, frame


#: smallest evaluation segment: the noise of a segment's mean label (about sqrt(0.2 / rows),
#: 0.01 at 2000 rows) must stay below the gaps being compared
MIN_SEGMENT_ROWS = 2000


def segments(frame: pd.DataFrame) -> list[np.ndarray]:
    out = []
    for col in ("region", "device"):
        out += [(frame[col] == v).to_numpy() for v in np.unique(frame[col])]
    for r in np.unique(frame["region"]):
        for d in np.unique(frame["device"]):
            out.append(((frame["region"] == r) & (frame["device"] == d)).to_numpy())
        out.append(((frame["region"] == r) & (frame["age"] > 55)).to_numpy())
    for col in ("age", "tenure"):
        edges = np.quantile(frame[col], np.linspace(0, 1, 11))
        decile = np.clip(np.searchsorted(edges, frame[col], side="right") - 1, 0, 9)
        out += [decile == k for k in range(10)]
    return [m for m in out if m.sum() >= MIN_SEGMENT_ROWS]


def segment_gaps(p, y, segs) -> np.ndarray:
    return np.array([abs(p[m].mean() - y[m].mean()) for m in segs])


def log_loss(y, p) -> float:
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def cell_labels(frame):
    return (frame["region"] + "|" + frame["device"]).to_numpy()


def methods():
    out = {"raw": (None, lambda s, f: s)}

    def fit_auto(s, y, f):
        return AutoCalibrator().fit(s, y)
    out["auto"] = (fit_auto, lambda m, s, f: m.predict(s))
    try:
        from probcal import SegmentedCalibrator

        def fit_seg(s, y, f):
            return SegmentedCalibrator().fit(s, y, segments=cell_labels(f))
        out["segmented"] = (fit_seg, lambda m, s, f: np.asarray(
            m.predict_proba(s, segments=cell_labels(f))).reshape(-1))
    except ImportError:
        print("note: probcal is not importable; the SegmentedCalibrator reference is skipped")
    try:
        from mcgrad.methods import MCGrad

        def fit_mcgrad(s, y, f):
            df = f.assign(prediction=s, label=y)
            return MCGrad().fit(df, "prediction", "label",
                                categorical_feature_column_names=["region", "device"],
                                numerical_feature_column_names=["age", "tenure"])
        out["mcgrad"] = (fit_mcgrad, lambda m, s, f: np.asarray(m.predict(
            f.assign(prediction=s), "prediction",
            categorical_feature_column_names=["region", "device"],
            numerical_feature_column_names=["age", "tenure"])).reshape(-1))
    except ImportError:
        print("note: mcgrad is not importable; the MCGrad reference and the ratio are skipped")
    out["mlcal"] = (lambda s, y, f: Multicalibration().fit(s, y, f),
                    lambda m, s, f: m.predict(s, f))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[1e5, 1e6])
    ap.add_argument("--test", type=int, default=500_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    s_te, y_te, f_te = make_data(args.test, rng)
    segs = segments(f_te)
    table = methods()
    warm = make_data(5000, np.random.default_rng(1))
    Multicalibration(max_iter=3).fit(*warm)   # numba compilation, not timed
    print(f"{len(segs)} evaluation segments; test rows {args.test}")
    header = f"{'N':>9} {'method':>10} {'fit s':>8} {'ratio':>6} {'log loss':>9} " \
             f"{'worst seg':>9} {'mean seg':>9} {'trees':>6}"
    print(header)
    for n in (int(v) for v in args.sizes):
        s, y, f = make_data(n, rng)
        rows, times = [], {}
        for name, (fit, predict) in table.items():
            if fit is None:
                model, seconds = None, 0.0
                p = predict(s_te, f_te)
            else:
                t0 = time.perf_counter()
                model = fit(s, y, f)
                seconds = time.perf_counter() - t0
                p = predict(model, s_te, f_te)
            times[name] = seconds
            gaps = segment_gaps(p, y_te, segs)
            trees = getattr(model, "n_iter_", "") if name == "mlcal" else ""
            rows.append((name, seconds, log_loss(y_te, p), gaps.max(), gaps.mean(), trees))
        ref = times.get("mcgrad")
        for name, seconds, ll, worst, mean, trees in rows:
            ratio = f"{seconds / ref:6.2f}" if ref and seconds else f"{'':>6}"
            print(f"{n:>9} {name:>10} {seconds:8.2f} {ratio} {ll:9.5f} {worst:9.5f} "
                  f"{mean:9.5f} {trees!s:>6}", flush=True)


if __name__ == "__main__":
    main()
