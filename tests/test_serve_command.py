"""`mlcal serve`'s request building and environment, in-process (the real server runs in
tests/test_mlflow_serve.py)."""

import json
import os
import shlex
import socket
import sys

import mlflow
import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from mlcal.cli import main as cli_main
from mlcal.mlflow import log_model, save_model
from mlcal.mlflow.serving import (curl_command, server_command, server_environment,
                                  serving_request)
from mlcal.model import CalibratedModel

REQS = ["scikit-learn", "numpy", "pandas"]


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=600), "b": rng.normal(size=600)})
    y = (X["a"] + rng.normal(size=600) > 0).astype(int)
    return CalibratedModel(LogisticRegression().fit(X[:300], y[:300]), "platt").fit(
        X[300:], y[300:]), X


def test_the_request_is_the_saved_serving_example(model, tmp_path):
    cal, X = model
    save_model(cal, str(tmp_path / "m"), input_example=X[:2], pip_requirements=REQS)
    req = serving_request(str(tmp_path / "m"))
    assert req.from_example and req.columns == [("a", "double"), ("b", "double")]
    saved = json.loads((tmp_path / "m" / "serving_input_example.json").read_text())
    assert json.loads(req.body) == saved


def test_without_an_example_the_signature_gives_one_placeholder_row(model, tmp_path):
    from mlflow.models import infer_signature

    cal, X = model
    sig = infer_signature(X[:3].assign(n=np.arange(3), s=["x", "y", "z"]))
    save_model(cal, str(tmp_path / "m"), signature=sig, pip_requirements=REQS)
    req = serving_request(str(tmp_path / "m"))
    assert not req.from_example
    assert req.columns == [("a", "double"), ("b", "double"), ("n", "long"), ("s", "string")]
    assert json.loads(req.body) == {"dataframe_records": [{"a": 0.0, "b": 0.0, "n": 0, "s": ""}]}


def test_a_model_with_neither_example_nor_signature_is_refused(model, tmp_path, capsys):
    cal, _ = model
    save_model(cal, str(tmp_path / "m"), pip_requirements=REQS)
    with pytest.raises(ValueError, match="no input example and no column signature"):
        serving_request(str(tmp_path / "m"))
    assert cli_main(["serve", str(tmp_path / "m")]) == 2
    assert "no input example and no column signature" in capsys.readouterr().err


def test_curl_line_survives_shell_quoting():
    body = json.dumps({"dataframe_records": [{"name": "O'Brien", "x": 1.5}]})
    argv = shlex.split(curl_command("http://127.0.0.1:5000", body))
    assert argv[:4] == ["curl", "-s", "-X", "POST"]
    assert argv[argv.index("-d") + 1] == body
    assert "http://127.0.0.1:5000/invocations" in argv


def test_server_runs_with_this_interpreter_and_its_bin_first_on_path():
    bin_dir = os.path.dirname(sys.executable)
    env = server_environment({"PATH": f"/usr/bin:{bin_dir}:/bin"})
    assert env["PATH"].split(os.pathsep) == [bin_dir, "/usr/bin", "/bin"]
    cmd = server_command("runs:/x/m", "127.0.0.1", 5001, "local")
    assert cmd[:4] == [sys.executable, "-m", "mlflow", "models"]
    assert cmd[cmd.index("--env-manager") + 1] == "local"
    with pytest.raises(ValueError, match="env_manager must be one of"):
        server_command("m", "127.0.0.1", 5001, "docker")


def test_a_busy_port_is_an_error_before_anything_starts(model, tmp_path, capsys):
    cal, X = model
    save_model(cal, str(tmp_path / "m"), input_example=X[:1], pip_requirements=REQS)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert cli_main(["serve", str(tmp_path / "m"), "--port", str(port)]) == 2
    assert f"port {port} on 127.0.0.1 is already in use" in capsys.readouterr().err


def test_registry_and_run_uris_give_the_same_request(model, sqlite_tracking):
    cal, X = model
    with mlflow.start_run() as run:
        info = log_model(
            cal, name="m", input_example=X[:2], pip_requirements=REQS,
            registered_model_name="served")
    mlflow.MlflowClient().set_registered_model_alias("served", "champion", 1)
    bodies = {uri: serving_request(uri).body
              for uri in (info.model_uri, f"runs:/{run.info.run_id}/m", "models:/served/1",
                          "models:/served@champion")}
    assert len(set(bodies.values())) == 1
    assert json.loads(next(iter(bodies.values()))) == {
        "dataframe_split": {"columns": ["a", "b"], "data": X[:2].to_numpy().tolist()}}
