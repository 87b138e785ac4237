"""The main job end to end on a real sqlite store in a temp dir (`--fast` method set)."""

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request

import numpy as np
import pandas as pd
import pytest

mlflow = pytest.importorskip("mlflow")

from mlcal.cli import main  # noqa: E402
from support.serving import free_port  # noqa: E402


def _run_printed_serve_command(line: str, tmp_path, records: list) -> dict:
    """Run the printed serve command as a user would paste it, in a login-less bash whose PATH
    has no virtualenv on it; query /invocations once; stop the server by its process group."""
    port = free_port()
    cmd = line.split("serve the champion:", 1)[1].strip().replace("--port 5001", f"--port {port}")
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen(["bash", "-c", cmd], stdout=log, stderr=subprocess.STDOUT,
                            env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")},
                            cwd=tmp_path, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2):
                    break
            except (urllib.error.URLError, ConnectionError, OSError):
                assert time.monotonic() < deadline, "the printed serve command never answered"
                time.sleep(0.5)
        body = json.dumps({"dataframe_records": records}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read().decode())
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()


def test_quickstart_end_to_end(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        code = main(["quickstart", "--fast", "--workdir", str(tmp_path / "qs")])
    finally:
        mlflow.set_tracking_uri(None)
    out = capsys.readouterr().out
    assert code == 0, out
    for step in range(1, 8):
        assert f"[{step}/7]" in out
    # numba compilation happens (or is loaded from cache) before the timed fits, not in them
    assert out.index("numba kernels ready") < out.index("(base)")
    # the printed table: calibrated ECE below the base model's
    methods = ("auto", "platt", "histogram", "isotonic", "enir")
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.split() and line.split()[0] in {"(base)", *methods}}
    base_ece = float(rows["(base)"][1])
    cal_ece = [float(r[4]) for name, r in rows.items() if name != "(base)"]
    assert len(cal_ece) == 5 and min(cal_ece) < base_ece
    # the champion candidate is the method of lowest log loss on the selection rows
    log_loss = {name: float(rows[name][8]) for name in methods}
    lowest = min(methods, key=lambda m: (log_loss[m], methods.index(m)))
    assert f"candidate '{lowest}'" in out and "lowest log loss" in out
    # the registry holds the five versions and the champion alias; the ONNX file exists
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'qs' / 'mlflow.db'}")
    versions = client.search_model_versions("name='mlcal-quickstart'")
    assert len(versions) == 5
    champion = client.get_model_version_by_alias("mlcal-quickstart", "champion")
    assert champion.tags["mlcal.gate.result"] == "promoted"
    run = client.get_run(champion.run_id)
    assert run.data.tags["mlcal.method"] == lowest
    assert run.data.tags["mlcal.metrics_source"] == "held-out"
    assert run.data.metrics["log_loss_after"] == pytest.approx(log_loss[lowest], abs=1e-4)
    assert (tmp_path / "qs" / f"champion-v{champion.version}.onnx").exists()
    assert "mlflow models serve -m 'models:/mlcal-quickstart@champion'" in out
    serve_line = next(ln for ln in out.splitlines() if "serve the champion:" in ln)
    from mlcal.datasets import load_breast_cancer_binary
    from mlcal.mlflow import load_model

    X, _, names = load_breast_cancer_binary()
    rows = pd.DataFrame(X[:4], columns=[n.replace(" ", "_") for n in names])
    answer = _run_printed_serve_command(serve_line, tmp_path, rows.to_dict(orient="records"))
    # the printed query is a complete request: a real row with the model's columns
    import shlex

    query = shlex.split(next(ln for ln in out.splitlines() if "query it:" in ln)
                        .split("query it:", 1)[1])
    printed = json.loads(query[query.index("-d") + 1])["dataframe_split"]
    assert printed["columns"] == list(rows.columns) and len(printed["data"]) == 1
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'qs' / 'mlflow.db'}")
    try:
        expected = load_model("models:/mlcal-quickstart@champion").predict_proba(rows)[:, 1]
    finally:
        mlflow.set_tracking_uri(None)
    served = [r["p_calibrated"] for r in answer["predictions"]]
    np.testing.assert_array_equal(served, expected)
    assert not (tmp_path / "mlruns").exists()  # artifacts stay in the workdir
    assert np.isfinite(base_ece)


def test_gate_rows_are_disjoint_from_the_rows_that_pick_the_champion():
    from mlcal.quickstart import _split

    X_tr, _, X_cal, _, X_sel, _, X_gate, y_gate = _split(0)
    parts = [set(X.index) for X in (X_tr, X_cal, X_sel, X_gate)]
    assert sum(map(len, parts)) == len(set().union(*parts)) == 569   # a partition
    assert not parts[2] & parts[3]
    assert len(y_gate) >= 100  # the gate's default minimum of rows
