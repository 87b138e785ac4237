"""`mlcal warmup` fills numba's cache so that a new process fits every method without compiling
(numba's own compile events are counted in a fresh process); the Docker image runs it at build
time as the user that runs the image.

The warmup checked here is the one building the wheel runs (build_support/mlcal_build.py: the
same `mlcal warmup`, with the packed cache folder instead of ``NUMBA_CACHE_DIR``) for the
``fresh_install`` fixture (tests/support/fresh_install.py), on the emulated baseline x86-64 CPU:
that one full compile also serves tests/test_dockerfile.py and tests/test_cpu_determinism.py.
Which kernels warmup reaches does not depend on the CPU or the cache folder; the probes run on
the same emulated CPU, since numba keys its cache entries by CPU name."""

import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Fits every method on data unlike the warmup's (2000 rows; probabilities and raw margins,
# with and without weights) and prints how many kernels numba compiled for each.
_COUNT_COMPILES = r"""
import json, sys, warnings
import numpy as np
from numba.core import event
import mlcal

rng = np.random.default_rng(11)
n = 2000
p = rng.random(n)
y = (rng.random(n) < p).astype(int)
m = rng.normal(0, 3, n)
y2 = (rng.random(n) < 1 / (1 + np.exp(-m))).astype(int)
w = rng.integers(1, 3, n).astype(float)
counts = {}
for name in sys.argv[1:]:
    with event.install_recorder("numba:compile") as rec, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mlcal.get_calibrator(name).fit(p, y).predict(p)
        mlcal.get_calibrator(name).fit(m, y2, sample_weight=w).predict(m)
    counts[name] = len(rec.buffer)
print(json.dumps({"counts": counts, "module": mlcal.__file__}))
"""


def _compiles(python: str, env: dict[str, str], methods: list[str],
              cwd: Path) -> tuple[dict, str]:
    # cwd: not the repository, whose ./mlcal would shadow the installed package
    out = subprocess.run([python, "-c", _COUNT_COMPILES, *methods], env=env, cwd=cwd,
                         check=True, capture_output=True, text=True).stdout
    found = json.loads(out.strip().splitlines()[-1])
    return found["counts"], found["module"]


def test_after_warmup_a_new_process_compiles_nothing(fresh_install, tmp_path):
    import mlcal

    methods = mlcal.available_calibrators()
    python, env = str(fresh_install.python), fresh_install.env
    # the probe sees compilation: the same installed package on the same CPU, with an empty
    # cache folder, compiles isotonic's PAVA kernel
    empty = {**env, "NUMBA_CACHE_DIR": str(tmp_path / "empty-cache")}
    counts, module = _compiles(python, empty, ["isotonic"], tmp_path)
    assert module.startswith(str(fresh_install.env_dir)), module
    assert counts["isotonic"] > 0
    # after the warmup that built the wheel, a new process fits every method without compiling
    counts, module = _compiles(python, env, methods, tmp_path)
    assert module.startswith(str(fresh_install.env_dir)), module
    assert counts == {name: 0 for name in methods}
    # the command itself: one line per method
    done = subprocess.run([python, "-m", "mlcal", "warmup"], env=env, cwd=tmp_path,
                          check=True, capture_output=True, text=True)
    for name in methods:
        assert re.search(rf"^\s+{name}\s+ready in", done.stdout, re.M), done.stdout


def test_dockerfile_warms_up_as_the_runtime_user_into_a_cache_it_owns():
    text = (ROOT / "Dockerfile").read_text()
    cache = re.search(r"NUMBA_CACHE_DIR=(\S+)", text).group(1)
    user = re.search(r"^USER (\S+)", text, re.M)
    warm = re.search(r"^RUN mlcal warmup\b", text, re.M)
    assert user and warm and user.start() < warm.start(), "warmup must run after USER"
    # numba silently ignores a cache directory it cannot write to
    assert re.search(rf'chown {user.group(1)} "\$NUMBA_CACHE_DIR"', text)
    assert not cache.startswith("/tmp")   # survives tmpfs mounts over /tmp
