"""`mlcal warmup` fills numba's cache so that a new process fits every method without compiling
(numba's own compile events are counted in a fresh process); the Docker image runs it at build
time as the user that runs the image.

The warmup checked here is the run of the ``baseline_cpu_warm_cache`` fixture (tests/conftest.py):
`mlcal warmup` into a new ``NUMBA_CACHE_DIR``, as the Dockerfile runs it, on the emulated
baseline x86-64 CPU, whose full compile tests/test_cpu_determinism.py reuses. Which kernels
warmup reaches does not depend on the CPU; the probes run on the same emulated CPU, since numba
keys its cache entries by CPU name."""

import json
import re
import subprocess
import sys
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
print(json.dumps(counts))
"""


def _compiles(env: dict[str, str], methods: list[str]) -> dict[str, int]:
    out = subprocess.run([sys.executable, "-c", _COUNT_COMPILES, *methods], env=env,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_after_warmup_a_new_process_compiles_nothing(baseline_cpu_warm_cache, tmp_path):
    import mlcal

    methods = mlcal.available_calibrators()
    cache, env, stdout = baseline_cpu_warm_cache
    # the probe sees compilation: on the same CPU with an empty cache, isotonic's PAVA kernel
    # is compiled
    empty = {**env, "NUMBA_CACHE_DIR": str(tmp_path / "empty-cache")}
    assert _compiles(empty, ["isotonic"])["isotonic"] > 0
    assert f"into the cache ({cache})" in stdout
    for name in methods:
        assert re.search(rf"^\s+{name}\s+ready in", stdout, re.M), stdout
    assert _compiles(env, methods) == {name: 0 for name in methods}


def test_dockerfile_warms_up_as_the_runtime_user_into_a_cache_it_owns():
    text = (ROOT / "Dockerfile").read_text()
    cache = re.search(r"NUMBA_CACHE_DIR=(\S+)", text).group(1)
    user = re.search(r"^USER (\S+)", text, re.M)
    warm = re.search(r"^RUN mlcal warmup\b", text, re.M)
    assert user and warm and user.start() < warm.start(), "warmup must run after USER"
    # numba silently ignores a cache directory it cannot write to
    assert re.search(rf'chown {user.group(1)} "\$NUMBA_CACHE_DIR"', text)
    assert not cache.startswith("/tmp")   # survives tmpfs mounts over /tmp
