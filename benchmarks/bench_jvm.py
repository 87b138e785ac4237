"""Throughput of the Java evaluator (``jvm/``) against Python ``predict``, same data, same run.

    python benchmarks/bench_jvm.py [--n 1e7] [--repeats 3]

Builds the jar with ``jvm/build.sh`` (needs a JDK), fits one calibrator per map type on a
synthetic set, then scores the same ``--n`` random scores with Python ``predict`` and with the
JVM (``--time``: the best of ``--repeats`` in-process predictions after a warm-up, so JVM start,
JIT warm-up and file I/O are excluded; ``jvm wall s`` is the whole command including them).
``ratio`` = Python time / Java time (above 1: Java is faster). Every Java output is checked to
be bit-identical to Python's before its row is printed.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import mlcal
from mlcal.calibrators.multiclass import TemperatureScaling
from _timing import best_time  # noqa: E402  (benchmarks/ is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support.synthetic import calibration_set  # noqa: E402


def calibrators():
    s, y = calibration_set(20_000, seed=0, link_power=2.0)
    logits = 1.5 * (np.log(np.clip(s, 1e-9, 1)) - np.log1p(-np.clip(s, 0, 1 - 1e-9)))
    yield "isotonic", mlcal.get_calibrator("isotonic").fit(s, y).map_
    yield "histogram", mlcal.get_calibrator("histogram").fit(s, y).map_
    yield "elite", mlcal.get_calibrator("elite").fit(s, y).map_
    yield "platt", mlcal.get_calibrator("platt").fit(s, y).map_
    yield "isotonic+sigmoid", mlcal.get_calibrator("isotonic").fit(logits, y).map_
    rng = np.random.default_rng(1)
    z = rng.normal(0.0, 2.0, (20_000, 4))
    yc = np.argmax(z + rng.gumbel(size=z.shape), axis=1)
    yield "temperature K=4", TemperatureScaling().fit(z, yc).map_


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=float, default=1e7)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_jvm_") as tmp:
        run(int(args.n), args.repeats, Path(tmp))


def run(n: int, repeats: int, tmp: Path) -> None:
    jar = subprocess.run(["bash", str(ROOT / "jvm" / "build.sh"), str(tmp)], check=True,
                         capture_output=True, text=True).stdout.strip()
    java = ["java", "-Xmx4g", "-jar", jar]
    head = (f"{'map':>18} {'kind':>14} {'values':>9} {'python s':>9} {'py M/s':>7} "
            f"{'java s':>8} {'java M/s':>8} {'ratio':>6} {'jvm wall s':>10}")
    print(f"N = {n} scores per map (multiclass: N/K rows of K)")
    print(head)
    print("-" * len(head))
    rng = np.random.default_rng(2)
    for name, m in calibrators():
        if m.kind.startswith(("multiclass", "softmax")):
            x = rng.normal(0.0, 2.0, (n // m.n_classes, m.n_classes))
        else:
            x = rng.normal(0.0, 3.0, n) if m.input_transform == "sigmoid" else rng.random(n)
        doc, scores, out = tmp / "map.json", tmp / "scores.bin", tmp / "out.bin"
        doc.write_text(json.dumps(m.to_dict()))
        x.astype("<f8").tofile(scores)
        t_py = best_time(lambda: m(x), repeats)
        start = time.perf_counter()
        proc = subprocess.run([*java, str(doc), str(scores), "--input", "f64le", "--output",
                               "f64le", "--out", str(out), "--overwrite", "--time",
                               str(repeats)], capture_output=True, text=True, check=True)
        wall = time.perf_counter() - start
        t_java = float(re.search(r"predict_seconds=(\S+)", proc.stderr).group(1))
        got = np.fromfile(out, dtype="<f8")
        assert np.array_equal(got.view(np.uint64), m(x).reshape(-1).view(np.uint64)), name
        print(f"{name:>18} {m.kind:>14} {x.size:>9} {t_py:>9.3f} {x.size / t_py / 1e6:>7.1f} "
              f"{t_java:>8.3f} {x.size / t_java / 1e6:>8.1f} {t_py / t_java:>6.2f} "
              f"{wall:>10.2f}", flush=True)


if __name__ == "__main__":
    main()
