"""The same data gives a bit-identical calibrator JSON on any x86-64 CPU.

An older CPU is emulated on this one by switching off, for a subprocess, everything that picks
code by CPU feature (tests/support/emulated_cpu.py: numpy's SIMD dispatch, glibc's libm variants,
OpenBLAS's kernel and numba's code generation). Each of these changed the last bits of some
results before the fits were made CPU-independent (see tests/support/determinism_probe.py for
what is fitted).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).parent / "support" / "determinism_probe.py"


def _probe(env: dict[str, str]) -> dict[str, str]:
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


def test_json_identical_on_an_emulated_baseline_cpu(host_hashes, fresh_install, tmp_path):
    # on the emulated CPU, with the package the ``fresh_install`` fixture installed and the
    # kernels its wheel packed for that CPU (the probe then compiles only what warmup does not
    # reach, e.g. the multiclass kernels, instead of everything); on a copy of it, so that the
    # kernels compiled here are not added to the shared environment's cache, where they could
    # hide a kernel warmup missed from tests/test_warmup.py
    def module(python: str, env: dict[str, str]) -> Path:
        out = subprocess.run([python, "-c", "import mlcal; print(mlcal.__file__)"], env=env,
                             cwd=tmp_path, check=True, capture_output=True, text=True)
        return Path(out.stdout.strip()).parent

    package = module(str(fresh_install.python), fresh_install.env)
    assert package.is_relative_to(fresh_install.env_dir), package
    assert (package / "_numba_cache").is_dir()
    shutil.copytree(package, tmp_path / "site" / "mlcal")
    env = {**fresh_install.env, "PYTHONPATH": str(tmp_path / "site")}
    assert module(sys.executable, env) == tmp_path / "site" / "mlcal"
    emulated = _probe(env)
    differing = sorted(k for k in host_hashes if emulated.get(k) != host_hashes[k])
    assert not differing, f"calibrator JSON depends on the CPU for: {differing}"
