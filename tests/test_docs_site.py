"""The documentation site builds: ``mkdocs build --strict`` (mkdocs.yml at the repository root,
pages from docs/, the API reference generated from the docstrings by mkdocstrings) with every
warning an error: a broken link, a page missing from the navigation's files, a docstring
cross-reference that does not resolve (issue 27, item 2)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="the dev extra installs mkdocs")
    pytest.importorskip("mkdocstrings", reason="the dev extra installs mkdocstrings[python]")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
                          str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                         capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    site = tmp_path / "site"
    # the home page, a topic page and a generated API page with a documented function
    assert (site / "index.html").is_file() and (site / "getting-started" / "index.html").is_file()
    api = (site / "api" / "calibrators" / "index.html").read_text(encoding="utf-8")
    assert "get_calibrator" in api and "load_calibrator" in api
