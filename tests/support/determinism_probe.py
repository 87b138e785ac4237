"""Fit every registered calibrator (and a few variants) on fixed data; print one line per fit:
``name sha1-of-JSON``. Run by tests/test_cpu_determinism.py under different emulated CPUs."""

from __future__ import annotations

import hashlib
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
            "enir-capped": ("enir", {"max_map_size": 16})}


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


def main() -> None:
    names = [(n, n, {}) for n in mlcal.available_calibrators()]
    names += [(k, base, params) for k, (base, params) in VARIANTS.items()]
    only = set(sys.argv[1:])
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


if __name__ == "__main__":
    main()
