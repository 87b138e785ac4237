"""Throughput of the Java evaluator (``jvm/``) on multicalibration maps against Python
``Multicalibration.predict``, same rows, same run.

    python benchmarks/bench_jvm_multicalibration.py [--n 1e6] [--repeats 3]

Builds the jar with ``jvm/build.sh`` (needs a JDK), fits ``Multicalibration`` (default
parameters: early stopping on held-out log loss) on 100 000 synthetic rows with two numeric
and two categorical features, at two tree depths, then scores the same ``--n`` fresh rows with
Python ``predict`` (numba tree walk) and with the JVM reading them from CSV (``--time``: the
best of ``--repeats`` in-process predictions after a warm-up, so JVM start, JIT warm-up and
reading the CSV are excluded; ``jvm wall s`` is the whole command including them).
``ratio`` = Python time / Java time (above 1: Java is faster). Every Java output is checked to
be bit-identical to Python's before its row is printed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import mlcal
from mlcal.multicalibration import Multicalibration
from _timing import best_time  # noqa: E402  (benchmarks/ is on sys.path)

ROOT = Path(__file__).resolve().parents[1]


def rows(n: int, seed: int):
    """Scores miscalibrated by region, a region x device cell and an age threshold."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "region": rng.choice(["north", "south", "east", "west", "centre"], n),
        "device": rng.choice(["ios", "android", "web"], n, p=[0.3, 0.5, 0.2]),
        "age": rng.uniform(18, 80, n).round(1),
        "income": rng.lognormal(10.0, 0.6, n)})
    t = rng.normal(scale=1.5, size=n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-t))).astype(float)
    shift = (frame["region"].map({"north": 0.0, "south": 0.6, "east": -0.5, "west": 0.2,
                                  "centre": 0.0}).to_numpy()
             + 0.7 * ((frame["region"] == "centre") & (frame["device"] == "web")).to_numpy()
             + 0.5 * (frame["age"].to_numpy() > 55))
    s = 1.0 / (1.0 + np.exp(-(1.3 * t + shift)))
    return s, y, frame


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=float, default=1e6)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_jvm_mc_") as tmp:
        run(int(args.n), args.repeats, Path(tmp))


def run(n: int, repeats: int, tmp: Path) -> None:
    jar = subprocess.run(["bash", str(ROOT / "jvm" / "build.sh"), str(tmp)], check=True,
                         capture_output=True, text=True).stdout.strip()
    java = ["java", "-Xmx4g", "-jar", jar]
    s_fit, y_fit, f_fit = rows(100_000, seed=0)
    s, _, frame = rows(n, seed=1)
    csv = tmp / "rows.csv"
    frame.assign(score=s).to_csv(csv, index=False, float_format="%.17g")
    head = (f"{'max_depth':>9} {'trees':>6} {'nodes':>6} {'rows':>8} {'python s':>9} "
            f"{'py Mrow/s':>9} {'java s':>8} {'java Mrow/s':>11} {'ratio':>6} "
            f"{'jvm wall s':>10}")
    print(f"N = {n} rows (score + 4 features), fitted on 100000 rows")
    print(head)
    print("-" * len(head))
    for depth in (3, 5):
        cal = Multicalibration(max_depth=depth).fit(s_fit, y_fit, f_fit)
        doc, out = tmp / "mc.json", tmp / "out.bin"
        mlcal.save_calibrator(cal, doc, overwrite=True)
        p = cal.predict(s, frame)
        t_py = best_time(lambda: cal.predict(s, frame), repeats)
        start = time.perf_counter()
        proc = subprocess.run([*java, str(doc), str(csv), "--input", "csv", "--output",
                               "f64le", "--out", str(out), "--overwrite", "--time",
                               str(repeats)], capture_output=True, text=True, check=True)
        wall = time.perf_counter() - start
        t_java = float(re.search(r"predict_seconds=(\S+)", proc.stderr).group(1))
        got = np.fromfile(out, dtype="<f8")
        assert np.array_equal(got.view(np.uint64), p.view(np.uint64)), depth
        print(f"{depth:>9} {cal.n_iter_:>6} {cal.map_.size:>6} {n:>8} {t_py:>9.3f} "
              f"{n / t_py / 1e6:>9.2f} {t_java:>8.3f} {n / t_java / 1e6:>11.2f} "
              f"{t_py / t_java:>6.2f} {wall:>10.2f}", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
