"""A real `mlflow models serve --env-manager local` of an mlcal model on 127.0.0.1 (no mocks).

One server for the whole module (`LocalServer`): the `mlflow` executable next to sys.executable,
a free port, awaited via /ping, stopped by its PID; its uvicorn child is checked gone by PID.
"""

import json
import sys
import time
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from mlcal.calibrators.platt import Platt
from mlcal.datasets import make_circular
from mlcal.mlflow import save_model
from support.http import post
from support.serving import LocalServer, pid_alive
from mlcal.model import CalibratedModel

BIN_DIR = Path(sys.executable).parent


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    X, y = make_circular(1500, seed=23)
    order = np.random.default_rng(1).permutation(len(y))
    X = np.column_stack([X[order], (X[order] ** 2).sum(1)])
    y = y[order]
    df = pd.DataFrame(X, columns=["x1", "x2", "radius"])
    base = LogisticRegression(C=0.05).fit(df[:500], y[:500])
    model = CalibratedModel(base, Platt()).fit(df[500:1000], y[500:1000])
    path = root / "model"
    save_model(model, str(path), input_example=df[:3],
               pip_requirements=["scikit-learn", "numpy", "pandas"])

    server = LocalServer(str(path), log_path=str(root / "server.log")).start()
    try:
        yield {"url": server.url, "server": server, "model": model, "df": df[1000:],
               "pyfunc": mlflow.pyfunc.load_model(str(path)), "base": base}
    finally:
        server.stop()
        assert server.proc.returncode is not None, "the mlflow server is still running"
        assert not any(pid_alive(c) for c in server.children), "uvicorn outlived the server"


def _payloads(rows: pd.DataFrame):
    """Every request body the server accepts for a column signature (floats sent exactly)."""
    records = rows.to_dict(orient="records")
    columns = {c: rows[c].tolist() for c in rows.columns}
    return {
        "dataframe_split": ("application/json",
                            json.dumps({"dataframe_split": {"columns": list(rows.columns),
                                                            "data": rows.to_numpy().tolist()}})),
        "dataframe_records": ("application/json", json.dumps({"dataframe_records": records})),
        "inputs_records": ("application/json", json.dumps({"inputs": records})),
        "inputs_columns": ("application/json", json.dumps({"inputs": columns})),
        "instances_records": ("application/json", json.dumps({"instances": records})),
        "csv": ("text/csv", rows.to_csv(index=False, float_format="%.17g")),
    }


FORMATS = list(_payloads(pd.DataFrame({"a": [0.0]})))


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_accepted_payload_matches_local_predict(served, fmt):
    rows = served["df"].iloc[:200]
    local = served["pyfunc"].predict(rows)
    content_type, body = _payloads(rows)[fmt]
    status, text = post(f"{served['url']}/invocations", body, content_type)
    assert status == 200, text
    preds = pd.DataFrame(json.loads(text)["predictions"])
    assert list(preds.columns) == ["p_calibrated", "label"]
    np.testing.assert_allclose(preds["p_calibrated"].to_numpy(), local["p_calibrated"].to_numpy(),
                               rtol=0, atol=1e-12)
    np.testing.assert_array_equal(preds["label"].to_numpy(), local["label"].to_numpy())


def test_served_probabilities_match_the_native_model_and_platt_formula(served):
    rows = served["df"].iloc[:300]
    status, text = post(f"{served['url']}/invocations",
                         json.dumps({"dataframe_split": {"columns": list(rows.columns),
                                                         "data": rows.to_numpy().tolist()},
                                     "params": {"return_uncalibrated": True}}))
    assert status == 200, text
    preds = pd.DataFrame(json.loads(text)["predictions"])
    s = served["base"].predict_proba(rows)[:, 1]
    m = served["model"].calibrator_.map_
    np.testing.assert_allclose(preds["score_uncalibrated"].to_numpy(), s, rtol=0, atol=1e-12)
    # Platt's formula, kept within the map's output floor (mlcal.calibrators.output_floor)
    platt = np.clip(1.0 / (1.0 + np.exp(m.a * s + m.b)), m.floor, 1.0 - m.floor)
    np.testing.assert_allclose(preds["p_calibrated"].to_numpy(), platt, rtol=0, atol=1e-12)
    np.testing.assert_allclose(preds["p_calibrated"].to_numpy(),
                               served["model"].predict_proba(rows)[:, 1], rtol=0, atol=1e-12)


def test_single_row_request(served):
    row = served["df"].iloc[[7]]
    status, text = post(f"{served['url']}/invocations",
                         json.dumps({"inputs": row.to_dict(orient="records")}))
    assert status == 200, text
    (pred,) = json.loads(text)["predictions"]
    p = served["model"].predict_proba(row)[0, 1]
    assert abs(pred["p_calibrated"] - p) <= 1e-12
    assert pred["label"] == int(p >= 0.5)


@pytest.mark.parametrize("body, content_type, fragment", [
    ('[[0.1, 0.2, 0.3]]', "application/json", "must be a JSON dictionary"),
    ('{"inputs": [[0.1, 0.2, 0.3]]}', "application/json", "Model is missing inputs"),
    ('{"dataframe_split": {"columns": ["x1", "x2"], "data": [[0.1, 0.2]]}}', "application/json",
     "missing inputs ['radius']"),
    ('{"dataframe_records": [{"x1": null, "x2": 0.2, "radius": 1.0}]}', "application/json",
     "mlcal model: Input X contains NaN"),
    ('{"inputs": [{"x1": 0.1, "x2": 0.2, "radius": 1.0}], '
     '"params": {"return_uncalibrated": "maybe"}}',
     "application/json", "return_uncalibrated"),
    ('{"inputs": [{"x1": 0.1, "x2": ', "application/json", "valid JSON"),
    ('x1,x2,radius\n0.1,abc,1.0\n', "text/csv", "Failed to parse input"),
])
def test_malformed_payloads_get_a_4xx_with_a_message(served, body, content_type, fragment):
    status, text = post(f"{served['url']}/invocations", body, content_type)
    assert 400 <= status < 500, (status, text)
    message = json.loads(text)["message"]
    assert fragment in message, message


def test_server_is_the_interpreters_mlflow_on_loopback_with_a_uvicorn_child(served):
    server = served["server"]
    cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes().split(b"\0")
    assert str(BIN_DIR / "mlflow").encode() in cmdline
    assert b"--env-manager" in cmdline and b"local" in cmdline and b"127.0.0.1" in cmdline
    assert server.children, "no uvicorn child recorded"
    child = Path(f"/proc/{server.children[0]}/cmdline").read_bytes()
    assert b"uvicorn" in child


# -- `mlcal serve`: the command prints a request that works, without an activated venv ------
def _read_until(stream, marker: str, timeout: float = 180.0) -> list[str]:
    """Lines of ``stream`` up to the one starting with ``marker`` (the server's stdout).

    A thread reads the lines (and keeps draining the pipe afterwards): ``select`` on the file
    descriptor cannot see lines already read into the text stream's buffer, so a ``ready:``
    line that arrived in the same chunk as the line before it was waited for in vain."""
    import queue
    import threading

    lines_in: queue.Queue = queue.Queue()

    def pump():
        for text in stream:
            lines_in.put(text)
        lines_in.put(None)

    threading.Thread(target=pump, daemon=True).start()
    lines = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines_in.get(timeout=max(deadline - time.monotonic(), 0.0))
        except queue.Empty:
            break
        if line is None:
            break
        lines.append(line.rstrip("\n"))
        if line.startswith(marker):
            return lines
    raise AssertionError(f"no {marker!r} line; output so far: {lines}")


def test_mlcal_serve_prints_a_working_curl_request_without_the_venv_on_path(tmp_path):
    import os
    import shlex
    import shutil
    import signal
    import subprocess
    import urllib.request

    from support.serving import free_port, _children

    X, y = make_circular(900, seed=3)
    order = np.random.default_rng(2).permutation(len(y))   # the generator lists class 0 first
    X, y = X[order], y[order]
    df = pd.DataFrame(X, columns=["left", "right"])
    model = CalibratedModel(LogisticRegression().fit(df[:300], y[:300]), "isotonic")
    model.fit(df[300:600], y[300:600])
    example = df[600:603].round(4)
    save_model(model, str(tmp_path / "model"), input_example=example)

    port = free_port()
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and Path(p).resolve() != BIN_DIR.resolve())
    assert shutil.which("uvicorn", path=path) is None, "uvicorn is reachable without the venv"
    env = {**os.environ, "PATH": path,
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                          os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "mlcal", "serve", str(tmp_path / "model"),
                             "--port", str(port), "--host", "127.0.0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env, cwd=tmp_path)
    try:
        lines = _read_until(proc.stdout, "ready:")
        assert lines[0] == "input columns: left (double), right (double)"
        (curl,) = [ln.strip() for ln in lines if ln.strip().startswith("curl ")]
        argv = shlex.split(curl)
        body = argv[argv.index("-d") + 1]
        assert json.loads(body) == {"dataframe_split": {
            "columns": ["left", "right"], "data": example.to_numpy().tolist()}}
        if shutil.which("curl"):
            text = subprocess.run(argv, capture_output=True, text=True, check=True,
                                  timeout=60).stdout
        else:                    # the same request, sent the way curl would send it
            url = next(a for a in argv if a.startswith("http://"))
            req = urllib.request.Request(url, data=body.encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as resp:
                text = resp.read().decode()
        preds = pd.DataFrame(json.loads(text)["predictions"])
        np.testing.assert_array_equal(preds["p_calibrated"].to_numpy(),
                                      model.predict_proba(example)[:, 1])
        np.testing.assert_array_equal(preds["label"].to_numpy(), model.predict(example))
        server = _children(proc.pid)
        assert server, "no mlflow child process"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    # SIGTERM reached the mlflow server and its uvicorn: nothing listens on the port any more
    deadline = time.monotonic() + 20
    while any(pid_alive(p) for p in server) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(pid_alive(p) for p in server), "mlflow models serve outlived mlcal serve"
