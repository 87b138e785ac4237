"""Speed of ``mlcal.metrics.smooth_ece``: the banded kernel sums against the dense sums they
replaced (mlcal da83df4, reproduced in tests/test_smooth_ece_fast.py as the reference), timed
interleaved in the same run on the same data; the values must agree to 1e-12.

    python benchmarks/bench_smooth_ece.py [--sizes 1000 10000 100000 1000000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_smooth_ece_fast import ref_smooth_ece  # noqa: E402

from mlcal import metrics  # noqa: E402


def _data(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    q = rng.uniform(size=n)
    y = (rng.uniform(size=n) < q).astype(float)
    p = np.clip(0.5 + 1.3 * (q - 0.5), 0.0, 1.0)   # mildly overconfident
    return y, p


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000, 1000000])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    metrics.smooth_ece(*_data(3000))                  # numba compilation / cache load
    print(f"{'N':>9} {'sigma*':>9} {'old s':>8} {'new s':>8} {'new/old':>8} {'|diff|':>9}")
    for n in args.sizes:
        y, p = _data(n)
        t_old, t_new = float("inf"), float("inf")
        for _ in range(args.repeats):                 # interleaved: same machine load
            t0 = time.perf_counter()
            old, s_old = ref_smooth_ece(y, p)
            t1 = time.perf_counter()
            new, s_new = metrics.smooth_ece(y, p, return_bandwidth=True)
            t2 = time.perf_counter()
            t_old, t_new = min(t_old, t1 - t0), min(t_new, t2 - t1)
        assert s_new == s_old and abs(new - old) <= 1e-12
        print(f"{n:>9} {s_new:>9.5f} {t_old:>8.3f} {t_new:>8.4f} {t_new / t_old:>8.4f} "
              f"{abs(new - old):>9.1e}")


if __name__ == "__main__":
    main()
