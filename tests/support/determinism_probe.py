"""Fit every registered calibrator (and a few variants) on fixed data; print one line per fit:
``name sha1-of-JSON``. Run by tests/test_cpu_determinism.py under different emulated CPUs."""

from __future__ import annotations

import hashlib
import json
import sys

import numpy as np

import mlcal

VARIANTS = {"kde-gaussian": ("kde", {"kernel": "gaussian"}),
            "isotonic-step": ("isotonic", {"interpolate": False}),
            "enir-step": ("enir", {"interpolate": False}),
            "bbq-beta": ("bbq", {"bin_estimate": "beta_mean"}),
            # the size cap's reductions (step merging, knot dropping)
            "kde-capped": ("kde", {"max_map_size": 50}),
            "isotonic-capped": ("isotonic", {"max_map_size": 8}),
            "enir-capped": ("enir", {"max_map_size": 16}),
            # cross Venn-Abers merges folds with geometric means (det_log / det_exp)
            "venn-abers-cross": ("venn-abers", {"n_folds": 4})}


def datasets():
    rng = np.random.default_rng(2026)
    n = 3000
    s = rng.beta(2.0, 5.0, n)
    y = (rng.random(n) < s ** 0.7).astype(int)
    yield "unit", s, y, None
    # tied scores and fractional weights
    st = np.round(s, 2)
    yield "ties-weights", st, y, rng.uniform(0.1, 3.0, n)
    # margins (sigmoid input transform where a method needs [0, 1])
    m = rng.normal(0.0, 2.0, n)
    ym = (rng.random(n) < 1.0 / (1.0 + np.exp(-0.7 * m - 0.3))).astype(int)
    yield "margins", m, ym, None


MULTICLASS = {"temperature": lambda: mlcal.TemperatureScaling(),
              "vector": lambda: mlcal.VectorScaling(),
              "matrix": lambda: mlcal.MatrixScaling(),
              "ovr-isotonic": lambda: mlcal.OneVsRest("isotonic"),
              "ovr-platt": lambda: mlcal.OneVsRest("platt"),
              "ts-mix": lambda: mlcal.TemperatureMixScaling(),
              "svs": lambda: mlcal.StructuredVectorScaling(),
              "sms": lambda: mlcal.StructuredMatrixScaling(),
              "svs-rho-0.7": lambda: mlcal.StructuredVectorScaling(class_exponent=0.7)}


def multiclass_datasets():
    rng = np.random.default_rng(2027)
    n, k = 2000, 4
    z = rng.normal(0.0, 2.0, (n, k))
    e = np.exp(0.6 * z)
    u = rng.random((n, 1))
    y = np.minimum((u > np.cumsum(e / e.sum(axis=1, keepdims=True), axis=1)).sum(axis=1), k - 1)
    yield "multiclass-logits", z, y, rng.uniform(0.1, 3.0, n)
    # probabilities built without libm or numpy's SIMD reductions, which round differently on
    # the emulated CPU and would change the input itself
    u = rng.random((n, k)) + 0.01
    u[np.arange(n), y] += 0.5 * rng.random(n)   # informative about the label
    total = u[:, 0] + u[:, 1] + u[:, 2] + u[:, 3]
    yield "multiclass-probabilities", u / total[:, None], y, None
    # exact zeros (as random forests give), some on the true class: the floor is chosen
    v = u.copy()
    off_label = np.arange(k)[None, :] != y[:, None]
    v[(rng.random((n, k)) < 0.4) & (off_label | (rng.random((n, k)) < 0.05))] = 0.0
    total = v[:, 0] + v[:, 1] + v[:, 2] + v[:, 3]
    empty = total == 0.0
    v[empty, y[empty]] = 1.0   # no all-zero row
    total = v[:, 0] + v[:, 1] + v[:, 2] + v[:, 3]
    yield "multiclass-zeros", v / total[:, None], y, rng.uniform(0.1, 3.0, n)


def main(argv: list[str] | None = None) -> None:
    """Print the lines; ``argv`` (default: the command line's) names the only fits to run."""
    names = [(n, n, {}) for n in mlcal.available_calibrators()]
    names += [(k, base, params) for k, (base, params) in VARIANTS.items()]
    only = set(sys.argv[1:] if argv is None else argv)
    for data_name, s, y, w in datasets():
        for label, base, params in names:
            if only and label not in only:
                continue
            cal = mlcal.get_calibrator(base, **params)
            try:
                text = cal.fit(s, y, sample_weight=w).to_json()
            except ValueError as exc:          # a method that refuses this data set: report it
                text = f"refused: {exc}"
            print(f"{data_name}/{label} {hashlib.sha1(text.encode()).hexdigest()}", flush=True)
    for data_name, s, y, w in multiclass_datasets():
        for label, make in MULTICLASS.items():
            if only and label not in only:
                continue
            try:
                text = json.dumps(make().fit(s, y, sample_weight=w).map_.to_dict())
            except ValueError as exc:
                text = f"refused: {exc}"
            print(f"{data_name}/{label} {hashlib.sha1(text.encode()).hexdigest()}", flush=True)
    # segmented calibration: cross-fitted offsets, REML shrinkage, shrunk slopes; segments
    # 6-11 hold positives only (the weak prior), so the offsets differ and tau2 > 0
    for data_name, s, y, w in datasets():
        i = np.arange(s.size)
        seg = i % 6 + 6 * ((i % 4 == 0) & (y == 1))
        for label, make in SEGMENTED.items():
            if only and label not in only:
                continue
            try:
                text = make().fit(s, y, seg, sample_weight=w).to_json()
            except ValueError as exc:
                text = f"refused: {exc}"
            print(f"{data_name}/{label} {hashlib.sha1(text.encode()).hexdigest()}", flush=True)


SEGMENTED = {"segmented-platt-slopes": lambda: mlcal.SegmentedCalibrator(
                 "platt", min_rows_for_slope=300),
             "segmented-isotonic": lambda: mlcal.SegmentedCalibrator("isotonic"),
             # offsets averaged over tau's posterior (quadrature with detmath logs and exps)
             "segmented-beta-integrated": lambda: mlcal.SegmentedCalibrator(
                 "beta", tau="integrated")}


if __name__ == "__main__":
    main()
