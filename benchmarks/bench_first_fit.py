"""The first fit of a new process: ``import mlcal; get_calibrator("auto").fit`` on 5,000 rows
vs scikit-learn's sigmoid (Platt) calibration in a new process, as a user meets them right
after installing.

    python benchmarks/bench_first_fit.py [--python VENV/bin/python] [--repeats 3] [--n 5000]
                                         [--no-warmup]

Every figure is the wall time of a whole new process (interpreter start, imports, data, one
fit), the median of ``--repeats`` runs, started from an empty folder so that the ``mlcal``
installed in ``--python``'s environment is imported (not a source checkout). Rows:

* ``scikit-learn sigmoid``: ``sklearn.calibration._SigmoidCalibration().fit`` (what
  ``CalibratedClassifierCV(method="sigmoid")`` fits), the reference of every ratio;
* ``mlcal auto, as installed``: numba's cache as the install left it (a wheel built by
  ``pip install .`` carries the compiled kernels in ``mlcal/_numba_cache/``);
* ``mlcal auto, nothing cached``: ``NUMBA_CACHE_DIR`` set to an empty folder, so every kernel
  is compiled (an install without a usable cache: another CPU, ``MLCAL_BUILD_KERNEL_CACHE=0``);
* ``mlcal auto, after mlcal warmup``: that folder after ``mlcal warmup`` filled it (skip with
  ``--no-warmup``).

``compiled`` is the number of numba compilations the process ran (its last repeat). Set ``--python`` to a fresh
environment's interpreter to measure a fresh install, e.g.::

    python -m venv /tmp/v && /tmp/v/bin/pip install . && \\
        python benchmarks/bench_first_fit.py --python /tmp/v/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

_DATA = r"""
import numpy as np
rng = np.random.default_rng(0)
s = rng.random(N)
y = (rng.random(N) < s).astype(int)
"""

_MLCAL = r"""
from numba.core import event
recording = event.install_recorder("numba:compile")   # kept: closing it unregisters
rec = recording.__enter__()
import mlcal
mlcal.get_calibrator("auto").fit(s, y)
import json, os
print(json.dumps({"compiled": sum(e.is_start for _, e in rec.buffer), "module": mlcal.__file__}))
"""

_SKLEARN = r"""
from sklearn.calibration import _SigmoidCalibration
_SigmoidCalibration().fit(s, y)
import json, sklearn
print(json.dumps({"compiled": None, "module": sklearn.__file__}))
"""


def _cold_run(python: str, body: str, n: int, env: dict, cwd: str) -> tuple[float, dict]:
    code = f"N = {n}\n" + _DATA + body
    start = time.perf_counter()
    out = subprocess.run([python, "-c", code], env=env, cwd=cwd, check=True,
                         capture_output=True, text=True).stdout
    return time.perf_counter() - start, json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter of the environment to measure (default: this one)")
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-warmup", action="store_true",
                        help="leave out the 'after mlcal warmup' row")
    args = parser.parse_args()

    base_env = {k: v for k, v in os.environ.items()
                if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    rows: dict[str, list[float]] = {}
    info: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="mlcal-first-fit-") as tmp:
        cwd = os.path.join(tmp, "cwd")
        os.mkdir(cwd)
        for r in range(args.repeats):
            empty = os.path.join(tmp, f"empty-{r}")   # a new empty cache for each repeat
            runs = [("scikit-learn sigmoid", _SKLEARN, base_env),
                    ("mlcal auto, as installed", _MLCAL, base_env),
                    ("mlcal auto, nothing cached", _MLCAL, dict(base_env, NUMBA_CACHE_DIR=empty))]
            for label, body, env in runs:            # interleaved: load drifts hit all rows
                seconds, meta = _cold_run(args.python, body, args.n, env, cwd)
                rows.setdefault(label, []).append(seconds)
                info[label] = meta
        if not args.no_warmup:
            warm = os.path.join(tmp, "warm")
            env = dict(base_env, NUMBA_CACHE_DIR=warm)
            subprocess.run([args.python, "-m", "mlcal", "warmup", "--methods", "auto"],
                           env=env, cwd=cwd, check=True, capture_output=True)
            label = "mlcal auto, after mlcal warmup"
            for _ in range(args.repeats):
                seconds, info[label] = _cold_run(args.python, _MLCAL, args.n, env, cwd)
                rows.setdefault(label, []).append(seconds)

    print(f"a new process's first fit on {args.n} rows (median wall s of {args.repeats} "
          f"new processes; ratio to scikit-learn sigmoid, same run)")
    print(f"python: {args.python}")
    print(f"mlcal:  {info['mlcal auto, as installed']['module']}")
    print(f"{'process':<32} {'wall s':>8} {'ratio':>7} {'compiled':>9}")
    print("-" * 59)
    reference = statistics.median(rows["scikit-learn sigmoid"])
    for label, times in rows.items():
        median = statistics.median(times)
        compiled = info[label]["compiled"]
        print(f"{label:<32} {median:8.2f} {median / reference:7.1f} "
              f"{'-' if compiled is None else compiled:>9}")


if __name__ == "__main__":
    main()
