"""Every ```python block of README.md and docs/*.md runs (issue 27, item 2: documentation that
cannot go stale).

A page's blocks run in order as one script, in a new interpreter with a temporary working
directory, so a page may set up data in its first block and use it in the next ones. A block
preceded by a visible ``<!-- skip-test: reason -->`` line is not run (the reason names the test
that runs those calls instead); there are few, and a test keeps them few.

The README's three examples run for real, and its ``curl`` line is sent to a real
``mlflow models serve`` of the model the third example registered and promoted.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^( *)```python[ \t]*\n(.*?)^\1```", re.M | re.S)
SKIP = re.compile(r"<!--\s*skip-test:\s*(\S.*?)\s*-->\s*$")
MAX_SKIPPED = 4


def python_blocks(page: Path) -> list[tuple[int, str, str | None]]:
    """(line, code, skip reason or None) of each ```python block of ``page``."""
    text = page.read_text(encoding="utf-8")
    blocks = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        previous = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = SKIP.search(previous)
        blocks.append((line, textwrap.dedent(m.group(2)), skip.group(1) if skip else None))
    return blocks


def page_script(page: Path) -> str:
    parts = [f"# {page.name}, line {line}\n{code}" for line, code, skip in python_blocks(page)
             if skip is None]
    return "import matplotlib\nmatplotlib.use('Agg')\n\n" + "\n".join(parts)


def run_script(script: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    path = cwd / "page_examples.py"
    path.write_text(script, encoding="utf-8")
    if 'sqlite:///mlruns.db"' in script:
        # the page's store starts as the empty store MLflow makes (copied from one MLflow
        # migrated once per test process: the migrations cost seconds of fsyncs per store);
        # the page's code then opens and fills it as on a reader's machine
        from support.mlflow_store import new_sqlite_db

        new_sqlite_db(cwd / "mlruns.db", cwd=cwd)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT),
                                                       os.environ.get("PYTHONPATH", "")]))
    # a page's script sets up its own store: nothing MLflow-related leaks in from earlier tests
    # (an MLFLOW_EXPERIMENT_ID left by another test names an experiment this store lacks)
    for key in [k for k in env if k.startswith("MLFLOW_")]:
        del env[key]
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=env)


def test_blocks_are_found_and_skips_are_rare_and_explained():
    blocks = {str(page.relative_to(ROOT)): python_blocks(page) for page in PAGES}
    assert len(blocks["README.md"]) == 3 and not any(s for *_, s in blocks["README.md"])
    skipped = [(name, line, skip) for name, bs in blocks.items() for line, _, skip in bs if skip]
    assert len(skipped) <= MAX_SKIPPED, skipped
    # an indented block (inside a list item) is found and dedented
    assert any(code.startswith("cal = mlcal.VennAbers()") for _, code, _ in blocks["docs/methods.md"])


DOC_PAGES = [p for p in PAGES[1:] if any(s is None for *_, s in python_blocks(p))]


@pytest.mark.parametrize("page", DOC_PAGES, ids=[p.name for p in DOC_PAGES])
def test_docs_page_examples_run(page, tmp_path):
    out = run_script(page_script(page), tmp_path)
    assert out.returncode == 0, f"{page.name}:\n{out.stderr[-3000:]}"


@pytest.mark.integration
def test_readme_examples_run_and_its_curl_line_gets_calibrated_probabilities(tmp_path):
    from support.serving import LocalServer

    out = run_script(page_script(ROOT / "README.md"), tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    ece_line = next(line for line in lines if line.startswith("ECE "))
    before, after = (float(v) for v in ece_line.split()[1::2])
    assert after < before                      # what the first example claims
    assert any("alias 'champion' now points to version 1" in line for line in lines)

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    serve_line = next(line for line in readme.splitlines() if " mlcal serve " in line)
    curl_line = next(line for line in readme.splitlines() if line.startswith("curl "))
    uri = shlex.split(serve_line)[3]
    env = {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlruns.db'}"}
    os.environ.update(env)
    import mlflow

    # an earlier test's explicit set_tracking_uri/set_registry_uri would win over the variable
    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    mlflow.set_registry_uri(env["MLFLOW_TRACKING_URI"])
    try:
        from mlcal.mlflow.serving import curl_command, serving_request

        # the README's request is the one `mlcal serve` prints for this model
        assert curl_line == curl_command("http://127.0.0.1:5000", serving_request(uri).body)
        with LocalServer(uri, env=env, log_path=str(tmp_path / "server.log")) as server:
            sent = curl_line.replace("http://127.0.0.1:5000", server.url)
            reply = subprocess.run(sent, shell=True, capture_output=True, text=True, timeout=60)
        import mlflow.pyfunc

        rows = json.loads(shlex.split(curl_line)[-1])["dataframe_split"]
        import pandas as pd

        local = mlflow.pyfunc.load_model(uri).predict(
            pd.DataFrame(rows["data"], columns=rows["columns"]))
    finally:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
        mlflow.set_tracking_uri(None)
        mlflow.set_registry_uri(None)
    served = json.loads(reply.stdout)["predictions"]
    assert len(served) == 2
    assert set(served[0]) == set(local.columns) == {"p_calibrated", "label"}   # as README says
    for col in local.columns:
        np.testing.assert_array_equal([r[col] for r in served], local[col].to_numpy())
