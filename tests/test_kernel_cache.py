"""The packaged numba kernel cache (mlcal/_kernel_cache.py, build_support/mlcal_build.py): used
when it fits this CPU and these sources, ignored (compile as before, same JSON bytes) when it
was built for another CPU, when a source changed, or when its folder cannot be written.

Each scenario is a new process on a private copy of the mlcal package (so this checkout's own
cache is never touched), fitting Platt scaling, whose kernels compile in a few seconds.
"""

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mlcal import _kernel_cache

ROOT = Path(__file__).resolve().parents[1]

_PROBE = r"""
import json
import numpy as np
from numba.core import event
recording = event.install_recorder("numba:compile")
rec = recording.__enter__()
import mlcal
from mlcal._solvers import platt_newton
rng = np.random.default_rng(5)
s = rng.normal(0, 2, 500)
y = (rng.random(500) < 1 / (1 + np.exp(-s))).astype(int)
doc = mlcal.get_calibrator("platt").fit(s, y).to_json()
print(json.dumps({"compiled": sum(e.is_start for _, e in rec.buffer), "json": doc,
                  "cache": platt_newton._objective._cache.cache_path,
                  "module": mlcal.__file__}))
"""


def _reference_json() -> str:
    """The probe's fit in this process, with this checkout's mlcal."""
    import numpy as np

    import mlcal

    assert Path(mlcal.__file__).is_relative_to(ROOT), mlcal.__file__
    rng = np.random.default_rng(5)
    s = rng.normal(0, 2, 500)
    y = (rng.random(500) < 1 / (1 + np.exp(-s))).astype(int)
    return mlcal.get_calibrator("platt").fit(s, y).to_json()


@pytest.fixture()
def package_copy(tmp_path):
    root = tmp_path / "site"
    shutil.copytree(ROOT / "mlcal", root / "mlcal",
                    ignore=shutil.ignore_patterns("__pycache__", "_numba_cache"))
    return root


def _run(site: Path, cwd: Path, **env_extra) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("NUMBA_") and k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(site), **env_extra)
    proc = subprocess.run([sys.executable, "-c", _PROBE], env=env, cwd=cwd, check=True,
                          capture_output=True, text=True)
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def test_cache_is_used_on_its_cpu_ignored_on_another_and_when_a_source_changes(package_copy,
                                                                                tmp_path):
    packaged = package_copy / "mlcal" / "_numba_cache"
    # built for a baseline x86-64 CPU, as a wheel built on another machine would be
    foreign, err = _run(package_copy, tmp_path, NUMBA_CPU_NAME="generic")
    assert foreign["module"].startswith(str(package_copy))
    assert Path(foreign["cache"]).is_relative_to(packaged)
    assert foreign["compiled"] > 0 and _kernel_cache.COMPILE_NOTICE in err
    # this CPU: the other CPU's entries are not used; it compiles and adds its own
    host, err = _run(package_copy, tmp_path)
    assert host["compiled"] > 0 and _kernel_cache.COMPILE_NOTICE in err
    assert host["json"] == foreign["json"]
    again, err = _run(package_copy, tmp_path)
    assert again["compiled"] == 0 and _kernel_cache.COMPILE_NOTICE not in err
    assert again["json"] == host["json"]
    # a changed source makes its kernels' entries stale (content stamp, not mtime)
    solver = package_copy / "mlcal" / "_solvers" / "platt_newton.py"
    solver.write_text(solver.read_text() + "\n# edited\n")
    edited, _ = _run(package_copy, tmp_path)
    assert edited["compiled"] > 0 and edited["json"] == host["json"]


def test_unwritable_packaged_folder_falls_back_to_numba_and_compiles(package_copy, tmp_path):
    # a file where the folder would be: it can be neither created nor written (as a read-only
    # site-packages; file modes would not stop root)
    (package_copy / "mlcal" / "_numba_cache").write_text("")
    out, _ = _run(package_copy, tmp_path)
    assert out["compiled"] > 0
    assert "_numba_cache" not in out["cache"]          # numba's own in-tree __pycache__
    # the same JSON bytes as this checkout's fit of the same data, here in this process (fits
    # are bit-identical across processes; no second subprocess compiling into another cache)
    assert out["json"] == _reference_json()


def test_locator_is_installed_once_after_numba_cache_dir_and_only_for_mlcal():
    from numba.core import caching

    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl
    _kernel_cache.install_locator()
    classes = impl._locator_classes
    assert classes.count(_kernel_cache.PackagedCacheLocator) == 1
    user_dir = (getattr(caching, "UserProvidedCacheLocator", None)
                or caching._UserProvidedCacheLocator)
    assert classes.index(_kernel_cache.PackagedCacheLocator) == classes.index(user_dir) + 1

    def outside():
        pass

    assert _kernel_cache.PackagedCacheLocator.from_function(outside, __file__) is None


def test_wheel_build_requires_the_runtime_dependencies_unless_switched_off(monkeypatch,
                                                                           tmp_path):
    pytest.importorskip("setuptools")
    # as a PEP 517 frontend runs the backend: from the project folder (a copy, which setuptools
    # may write egg-info into), backend-path on sys.path
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copytree(ROOT / "build_support", tmp_path / "build_support")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path / "build_support"))
    monkeypatch.delitem(sys.modules, "mlcal_build", raising=False)
    backend = importlib.import_module("mlcal_build")
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as f:
        runtime = tomllib.load(f)["project"]["dependencies"]
    monkeypatch.delenv(backend.ENV_SWITCH, raising=False)
    assert set(runtime) <= set(backend.get_requires_for_build_wheel())
    monkeypatch.setenv(backend.ENV_SWITCH, "0")
    assert not set(runtime) & set(backend.get_requires_for_build_wheel())
    assert not set(runtime) & set(backend.get_requires_for_build_editable())
