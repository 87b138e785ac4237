"""Cold vs warm first fit: what numba compilation costs a new process, with and without
``mlcal warmup``.

    python benchmarks/bench_warmup.py [--n 2000] [--methods elite enir ...]

For each method, three fresh Python processes fit it on the same N rows (probabilities, as the
quickstart's naive Bayes gives):

* ``cold``: an empty ``NUMBA_CACHE_DIR``, as right after ``pip install`` (the first fit compiles);
* ``warm``: the same kind of process after ``mlcal warmup`` filled the cache;
* ``steady``: the second fit inside the warm process, the reference (nothing left to load).

Each figure is the wall time of one ``fit`` call (imports excluded). Ratios are against
``steady`` of the same method measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

_CHILD = r"""
import json, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
import mlcal
name, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
s = rng.random(n)
y = (rng.random(n) < s).astype(int)
times = []
for _ in range(2):
    start = time.perf_counter()
    mlcal.get_calibrator(name).fit(s, y)
    times.append(time.perf_counter() - start)
print(json.dumps(times))
"""


def _first_fits(name: str, n: int, cache: str) -> list[float]:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", _CHILD, name, str(n)], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def main() -> None:
    import mlcal

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--methods", nargs="+", default=mlcal.available_calibrators())
    args = parser.parse_args()

    print(f"first fit of a new process on {args.n} rows; ratio = time / steady-state fit")
    print(f"{'method':<10} {'cold s':>8} {'warm s':>8} {'steady s':>9} {'cold ratio':>11} "
          f"{'warm ratio':>11}")
    print("-" * 62)
    for name in args.methods:
        with tempfile.TemporaryDirectory(prefix="mlcal-bench-numba-") as cache:
            cold = _first_fits(name, args.n, cache)[0]
            subprocess.run([sys.executable, "-m", "mlcal", "warmup", "--methods", name],
                           env=dict(os.environ, NUMBA_CACHE_DIR=cache), check=True,
                           capture_output=True)
            warm, steady = _first_fits(name, args.n, cache)
        print(f"{name:<10} {cold:8.3f} {warm:8.3f} {steady:9.4f} {cold / steady:11.0f} "
              f"{warm / steady:11.1f}")


if __name__ == "__main__":
    main()
