"""mlcal's build backend: setuptools, plus the compiled numba kernels packed into the wheel.

A fresh install used to spend its first fit compiling kernels (a cold process's first ``auto``
fit on 5,000 rows took 11x a cold scikit-learn sigmoid fit). Building the wheel now runs
``mlcal warmup`` on the built package, so numba's cache lands in ``mlcal/_numba_cache/`` inside
the wheel and the first process after ``pip install .`` loads machine code instead of compiling
(``mlcal/_kernel_cache.py`` says how the installed package finds it, and why it is safe on
another CPU or with other numba/numpy versions: there it is ignored and numba compiles as it
always did).

That needs the runtime dependencies while building, so a wheel build asks for them as build
requirements (pip installs them into its isolated build environment, from its cache when it
has them). Set ``MLCAL_BUILD_KERNEL_CACHE=0`` to build a plain wheel (no extra requirements, no
cache): e.g. for a wheel meant for other machines, or an image that warms up as its runtime
user anyway. Editable installs never build it (the source tree caches on first use). If the
warm-up fails the wheel is built without a cache, with a note on stderr.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403  (the PEP 517 hooks not changed here)
from setuptools.command.build_py import build_py

ENV_SWITCH = "MLCAL_BUILD_KERNEL_CACHE"
PROJECT_ROOT = Path(__file__).resolve().parents[1]


def kernel_cache_enabled() -> bool:
    """False when ``MLCAL_BUILD_KERNEL_CACHE`` is 0, no, false or off."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in {"0", "no", "false", "off"}


def runtime_dependencies() -> list[str]:
    """``[project].dependencies`` of pyproject.toml: what ``mlcal warmup`` imports."""
    try:
        import tomllib
    except ImportError:          # Python 3.10: setuptools' own reader
        from setuptools.config.pyprojecttoml import read_configuration
        return list(read_configuration(PROJECT_ROOT / "pyproject.toml")["project"]["dependencies"])
    with open(PROJECT_ROOT / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def get_requires_for_build_wheel(config_settings=None):
    requires = list(_setuptools.get_requires_for_build_wheel(config_settings))
    return requires + runtime_dependencies() if kernel_cache_enabled() else requires


def build_kernel_cache(build_lib: Path) -> None:
    """Run ``mlcal warmup`` on the package built in ``build_lib``, filling its
    ``mlcal/_numba_cache/``. Never fails the build: on error the cache is removed."""
    target = build_lib / "mlcal" / "_numba_cache"
    shutil.rmtree(target, ignore_errors=True)     # never ship an older build's entries
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CACHE_DIR", "NUMBA_CACHE_LOCATOR_CLASSES", "NUMBA_DISABLE_JIT")}
    # the built package first; the rest of sys.path as pip's build environment set it up
    env["PYTHONPATH"] = os.pathsep.join([str(build_lib), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"          # no .pyc files in the wheel
    print("mlcal: compiling numba kernels into the wheel (about a minute; "
          f"{ENV_SWITCH}=0 skips it)", file=sys.stderr, flush=True)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mlcal", "warmup"], cwd=build_lib, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(target, ignore_errors=True)
        print("mlcal: could not build the kernel cache (the first fits will compile "
              "instead):\n" + (proc.stderr or proc.stdout)[-2000:], file=sys.stderr, flush=True)
        return
    print(f"mlcal: kernel cache built in {time.perf_counter() - start:.0f} s", file=sys.stderr,
          flush=True)


class BuildPyWithKernelCache(build_py):
    """``build_py`` that also packs the numba kernel cache (wheel builds only)."""

    def run(self):
        super().run()
        if not getattr(self, "editable_mode", False) and kernel_cache_enabled():
            build_kernel_cache(Path(self.build_lib))
