"""Time and size of the mlcal wheel that ``log_model``/``save_model`` bundle into every model
(``bundle_mlcal=True``, the default): :func:`mlcal.mlflow.bundle.build_wheel`, vs the same
wheel with the file selection it had before numba's kernel cache (``mlcal/_numba_cache/``) was
left out, in one run.

The kernel cache is there in a source tree that has fitted (``pip install -e``) and in a wheel
install (whose build packs it): several times the size of the sources, so every logged model
carried and uploaded it. Calls alternate (reference, current) ``--repeats`` times after one
untimed round; the table shows median seconds, the wheel's size and the ratios to the
reference.

    python benchmarks/bench_bundle_wheel.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import zipfile
from pathlib import Path


def _reference_wheel(dest_dir: str) -> str:
    """The earlier selection: every file of the package but bytecode (kernel cache included),
    written with build_wheel's zip settings (metadata files left out: a few hundred bytes)."""
    import mlcal
    from mlcal.mlflow.bundle import wheel_name

    pkg_root = Path(mlcal.__file__).resolve().parent
    os.makedirs(dest_dir, exist_ok=True)
    path = os.path.join(dest_dir, wheel_name())
    with zipfile.ZipFile(path, "w") as zf:
        for file in sorted(pkg_root.rglob("*")):
            if file.is_dir() or "__pycache__" in file.parts or file.suffix in (".pyc", ".pyo"):
                continue
            zi = zipfile.ZipInfo(f"mlcal/{file.relative_to(pkg_root).as_posix()}",
                                 date_time=(1980, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, file.read_bytes())
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    import numpy as np

    import mlcal
    from mlcal._kernel_cache import CACHE_ROOT
    from mlcal.mlflow.bundle import build_wheel

    # a fit, so that this tree's kernel cache exists (unless NUMBA_CACHE_DIR moves it)
    rng = np.random.default_rng(0)
    s = rng.random(500)
    mlcal.get_calibrator("isotonic").fit(s, (rng.random(500) < s).astype(int))
    cache_bytes = sum(f.stat().st_size for f in CACHE_ROOT.rglob("*") if f.is_file()) \
        if CACHE_ROOT.is_dir() else 0
    print(f"kernel cache in {CACHE_ROOT}: {cache_bytes / 1e6:.1f} MB")
    calls = {"before (cache included)": _reference_wheel, "build_wheel": build_wheel}
    times: dict[str, list[float]] = {k: [] for k in calls}
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.repeats + 1):
            for name, fn in calls.items():
                start = time.perf_counter()
                path = fn(os.path.join(tmp, f"{round_}-{len(sizes)}-{name[:5]}"))
                elapsed = time.perf_counter() - start
                sizes[name] = os.path.getsize(path)
                if round_:
                    times[name].append(elapsed)
    ref = "before (cache included)"
    print(f"{'wheel':<26}{'median s':>9}{'ratio':>7}{'size MB':>9}{'ratio':>7}")
    for name in calls:
        t = statistics.median(times[name])
        print(f"{name:<26}{t:>9.3f}{t / statistics.median(times[ref]):>7.2f}"
              f"{sizes[name] / 1e6:>9.2f}{sizes[name] / sizes[ref]:>7.2f}")


if __name__ == "__main__":
    main()
