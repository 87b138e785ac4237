"""The same data gives a bit-identical calibrator JSON on any x86-64 CPU.

An older CPU is emulated on this one by switching off, for a subprocess, everything that picks
code by CPU feature: numpy's SIMD dispatch (``NPY_DISABLE_CPU_FEATURES``), glibc's libm variants
(``GLIBC_TUNABLES`` hwcaps: the FMA/AVX2 versions of exp, log, pow, lgamma), OpenBLAS's kernel
(``OPENBLAS_CORETYPE``) and numba's code generation (``NUMBA_CPU_NAME=x86-64``, baseline
SSE2, with its own cache). Each of these changed the last bits of some results before the fits
were made CPU-independent (see tests/support/determinism_probe.py for what is fitted). On a CPU
that lacks AVX-512 the numpy switch changes nothing, but the libm, BLAS and numba switches still
emulate a different machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

PROBE = Path(__file__).parent / "support" / "determinism_probe.py"

BASELINE_CPU = {
    "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
    "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA,-AVX,-AVX512F",
    "OPENBLAS_CORETYPE": "Nehalem",
    "NUMBA_CPU_NAME": "x86-64",
}


def _probe(env_overrides: dict[str, str]) -> dict[str, str]:
    env = {**os.environ, **env_overrides}
    out = subprocess.run([sys.executable, str(PROBE)], env=env, capture_output=True, text=True,
                         timeout=900, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(line.split() for line in out.stdout.splitlines())


@pytest.fixture(scope="module")
def host_hashes():
    # the host's side in this process (same interpreter, CPU and environment as a fresh
    # process: the probe only fits and hashes): it reuses the numba kernels this worker has
    # already compiled or loaded instead of starting another interpreter to load them again
    import contextlib
    import io

    from support import determinism_probe

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        determinism_probe.main([])
    return dict(line.split() for line in out.getvalue().splitlines())


def test_probe_covers_every_registered_method(host_hashes):
    import mlcal
    fitted = {key.split("/")[1] for key in host_hashes}
    assert set(mlcal.available_calibrators()) <= fitted


def test_json_identical_on_an_emulated_baseline_cpu(host_hashes):
    # numba's cache for the baseline CPU, kept between runs (compiling everything takes ~30 s);
    # one per user (another user's folder is not writable). Concurrent runs may share it: numba
    # writes each cache file to a temporary name and renames it into place.
    user = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    cache = Path(tempfile.gettempdir()) / f"mlcal-tests-numba-x86-64-{user}"
    cache.mkdir(exist_ok=True)
    emulated = _probe({**BASELINE_CPU, "NUMBA_CACHE_DIR": str(cache)})
    differing = sorted(k for k in host_hashes if emulated.get(k) != host_hashes[k])
    assert not differing, f"calibrator JSON depends on the CPU for: {differing}"
