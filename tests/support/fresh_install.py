"""The Dockerfile's install step run without Docker, once per test run (the ``fresh_install``
fixture of tests/conftest.py): the Dockerfile's own `pip install` line in a new virtual
environment holding a copy of exactly what the Dockerfile COPYs.

To keep it fast the new environment sees the already installed third-party packages through a
.pth file (mlcal and the plugin themselves are installed fresh, non-editable), and launchers for
the `mlflow` and `uvicorn` commands run them with the new interpreter.

It runs on the emulated baseline x86-64 CPU (support/emulated_cpu.py), without the Dockerfile's
ENV (``MLCAL_BUILD_KERNEL_CACHE=0`` there): building the wheel runs `mlcal warmup`, which packs
numba's kernels compiled for that CPU into the wheel. That one full compile serves three tests
that each used to pay for their own: tests/test_dockerfile.py (a first fit loads the packed
kernels), tests/test_warmup.py (after warmup a new process compiles nothing) and
tests/test_cpu_determinism.py (the emulated CPU's fits give the host's JSON). Every process that
uses the new environment runs with :attr:`FreshInstall.env`: the same emulated CPU (numba keys
its cache entries by CPU name, so the host's CPU would compile again).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sysconfig
import venv
from dataclasses import dataclass
from pathlib import Path

from support.emulated_cpu import BASELINE_CPU

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


@dataclass(frozen=True)
class FreshInstall:
    root: Path          # the build context copy: root/app (WORKDIR), root/bin (the entrypoint)
    env_dir: Path       # the new virtual environment
    env: dict           # environment for its processes: emulated CPU, no NUMBA_CACHE_DIR/PYTHONPATH

    @property
    def python(self) -> Path:
        return self.env_dir / "bin" / "python"


def process_env() -> dict[str, str]:
    """This environment on the emulated baseline CPU, without an explicit numba cache folder
    (the packed one is used) and without PYTHONPATH (which could name this checkout)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    return {**env, **BASELINE_CPU}


def copy_build_context(dst: Path) -> None:
    """Apply the Dockerfile's COPY lines with Docker's semantics: WORKDIR-relative targets land
    under ``dst/app``, the absolute one (the entrypoint script) under ``dst/bin``."""
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for line in re.findall(r"^COPY (.+)$", DOCKERFILE.read_text(), re.M):
        *sources, dest = line.split()
        for src in sources:
            s_path = ROOT / src
            if dest.startswith("/"):
                target = dst / "bin" / Path(dest).name
            elif s_path.is_dir():
                target = dst / "app" / dest
            else:
                target = dst / "app" / dest / s_path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            if s_path.is_dir():
                shutil.copytree(s_path, target, ignore=ignore)
            else:
                shutil.copy2(s_path, target)


def pip_install_line() -> str:
    match = re.search(r"^RUN (pip install [^&\\\n]+)", DOCKERFILE.read_text(), re.M)
    assert match, "the Dockerfile must install with a `RUN pip install ...` line"
    return match.group(1).strip()


def build(root: Path) -> FreshInstall:
    """Copy the build context into ``root`` (a new folder), create the environment and run the
    Dockerfile's install line in it; fails with pip's output when the install fails."""
    import numba
    import numpy as np

    copy_build_context(root)
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    site = Path(subprocess.check_output(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        text=True).strip())
    # third-party packages from this environment, after the fresh site-packages
    (site / "zz_host_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    for tool in ("mlflow", "uvicorn"):
        launcher = env_dir / "bin" / tool
        launcher.write_text(f'#!/bin/sh\nexec "{py}" -m {tool} "$@"\n')
        launcher.chmod(0o755)
    cmd = shlex.split(pip_install_line())
    # the wheel build compiles mlcal's kernels in pip's isolated build environment, which
    # resolves numba and numpy apart from this one: pin them to the versions used here (the
    # packed cache is only read with the numba/numpy it was built with)
    constraints = root / "build-constraints.txt"
    constraints.write_text(f"numba=={numba.__version__}\nnumpy=={np.__version__}\n")
    env = process_env()
    proc = subprocess.run([str(py), "-m", *cmd, "--quiet"], cwd=root / "app",
                          env={**env, "PIP_CONSTRAINT": str(constraints)},
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return FreshInstall(root, env_dir, env)
