"""Ship the running mlcal inside a saved model as a wheel, so its environment can be rebuilt.

A model's ``requirements.txt`` must name mlcal (MLflow never captures a flavour's own package),
but ``mlcal==<version>`` only resolves where a package index has that version. MLflow's
library bundling stores dependency wheels in the model's ``wheels/`` folder and names them by
relative path in ``requirements.txt``; ``mlflow models serve/prepare-env`` with a virtualenv
installs the requirements from a copy of the model directory, so the path resolves. This module
builds that wheel straight from the imported package (no build backend, no network), so it
works for editable and regular installs alike.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os
import re
import zipfile
from pathlib import Path

WHEELS_DIR = "wheels"  # the folder MLflow's own library bundling uses
_DIST = "mlcal"


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def _metadata_text(version: str) -> str:
    """Core metadata of the running mlcal: name, version and its runtime requirements."""
    lines = ["Metadata-Version: 2.1", f"Name: {_DIST}", f"Version: {version}"]
    try:
        dist = importlib.metadata.distribution(_DIST)
        requires = [r for r in (dist.requires or []) if "extra ==" not in r]
        python = dist.metadata.get("Requires-Python")
    except importlib.metadata.PackageNotFoundError:  # running from a source tree
        requires, python = [], None
    if python:
        lines.append(f"Requires-Python: {python}")
    lines += [f"Requires-Dist: {r}" for r in requires]
    return "\n".join(lines) + "\n"


def wheel_name(version: str | None = None) -> str:
    """``mlcal-<version>-py3-none-any.whl`` for the running (or given) version."""
    from mlcal import __version__

    version = version or __version__
    return f"{_DIST}-{re.sub(r'[^A-Za-z0-9.]+', '_', version)}-py3-none-any.whl"


def build_wheel(dest_dir: str) -> str:
    """Write a pure-Python wheel of the imported ``mlcal`` package into ``dest_dir``.

    Returns the wheel's path. Compiled caches are left out (bytecode, and numba's kernel cache
    ``mlcal/_numba_cache/``, which a built wheel or a used source tree holds: several times
    the size of the sources, keyed to this machine's CPU); the entry points (the ``mlcal``
    command) are copied from the installed distribution when there is one.
    """
    import mlcal
    from mlcal._kernel_cache import CACHE_ROOT

    version = mlcal.__version__
    pkg_root = Path(mlcal.__file__).resolve().parent
    compiled = {"__pycache__", CACHE_ROOT.name}
    info = f"{_DIST}-{version}.dist-info"
    os.makedirs(dest_dir, exist_ok=True)
    path = os.path.join(dest_dir, wheel_name(version))
    records: list[str] = []

    def add(zf: zipfile.ZipFile, arcname: str, data: bytes) -> None:
        zi = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))  # reproducible bytes
        zi.compress_type = zipfile.ZIP_DEFLATED
        zi.external_attr = 0o644 << 16
        zf.writestr(zi, data)
        records.append(f"{arcname},{_record_hash(data)},{len(data)}")

    with zipfile.ZipFile(path, "w") as zf:
        for file in sorted(pkg_root.rglob("*")):
            rel = file.relative_to(pkg_root)
            if (file.is_dir() or compiled.intersection(rel.parts)
                    or file.suffix in (".pyc", ".pyo")):
                continue
            add(zf, f"mlcal/{rel.as_posix()}", file.read_bytes())
        add(zf, f"{info}/METADATA", _metadata_text(version).encode())
        add(zf, f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: mlcal.mlflow.bundle\n"
                                 b"Root-Is-Purelib: true\nTag: py3-none-any\n")
        try:
            entry_points = importlib.metadata.distribution(_DIST).read_text("entry_points.txt")
        except importlib.metadata.PackageNotFoundError:
            entry_points = None
        if entry_points:
            add(zf, f"{info}/entry_points.txt", entry_points.encode())
        records.append(f"{info}/RECORD,,")
        zf.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(1980, 1, 1, 0, 0, 0)),
                    "\n".join(records) + "\n")
    return path


def is_mlcal_requirement(line: str) -> bool:
    """Whether a requirements line asks for the mlcal distribution itself."""
    return re.match(r"^mlcal\s*(?:[=<>!~\[;@]|$)", line.strip()) is not None


def bundle_into(model_dir: str, requirements: list[str]) -> list[str]:
    """Build the wheel into ``<model_dir>/wheels/`` and point ``requirements`` at it.

    Every line naming mlcal is replaced by the wheel's relative path (added when missing).
    """
    wheel = build_wheel(os.path.join(model_dir, WHEELS_DIR))
    rel = f"{WHEELS_DIR}/{os.path.basename(wheel)}"
    return [rel, *(r for r in requirements if not is_mlcal_requirement(r))]
