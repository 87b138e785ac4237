"""The Dockerfile's install and serve steps, run without Docker: the same `pip install` line in a
fresh virtual environment holding a copy of exactly what the Dockerfile COPYs (the
``fresh_install`` fixture, tests/support/fresh_install.py: built once per test run, on the
emulated baseline CPU), then the image's entrypoint script serving a calibrated model on
127.0.0.1, queried, and stopped by its PID.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def test_dockerfile_is_small_non_root_and_health_checked():
    assert re.search(r"^FROM python:3\.\d+-slim\b", DOCKERFILE, re.M)
    assert re.search(r"^USER (?!root)\S+", DOCKERFILE, re.M)
    assert re.search(r"^HEALTHCHECK .*\n?.*?/ping", DOCKERFILE, re.M)
    assert re.search(r"^EXPOSE 8080$", DOCKERFILE, re.M)
    assert "--env-manager local" in (ROOT / "docker" / "serve.sh").read_text()


def test_install_puts_fresh_mlcal_and_plugin_in_the_new_environment(fresh_install):
    root, env_dir = fresh_install.root, fresh_install.env_dir
    out = subprocess.check_output(
        [str(env_dir / "bin" / "python"), "-c",
         "import mlcal, mlflow, mlcal_mlflow_evaluator; print(mlcal.__file__); "
         "print('calibration' in mlflow.models.list_evaluators())"], text=True,
        env=fresh_install.env, cwd=root).split()  # not the repo, whose ./mlcal would shadow the installed one
    assert out[0].startswith(str(env_dir)), out[0]
    assert out[1] == "True"


# A new process's first fit of one method (argv[1]) on fixed data: how many numba compilations
# it ran, and the JSON.
_FIRST_FIT_DATA = (3, 3000)     # the data's seed and size
_FIRST_FIT = r"""
import json, sys
import numpy as np
from numba.core import event
recording = event.install_recorder("numba:compile")
rec = recording.__enter__()
import mlcal
seed, n = map(int, sys.argv[2:4])
rng = np.random.default_rng(seed)
s = rng.random(n)
y = (rng.random(n) < s).astype(int)
doc = mlcal.get_calibrator(sys.argv[1]).fit(s, y).to_json()
print(json.dumps({"compiled": sum(e.is_start for _, e in rec.buffer), "json": doc,
                  "module": mlcal.__file__}))
"""


def test_a_fresh_non_editable_install_fits_auto_without_compiling(fresh_install, tmp_path):
    """The wheel built by the install carries numba's compiled kernels (build_support/): the
    first `auto` fit of a new process loads them, and gives the JSON this checkout computes.
    This is the install without the Dockerfile's ENV (MLCAL_BUILD_KERNEL_CACHE=0 there); it
    was built, and is used here, on the emulated baseline CPU (``fresh_install.env``)."""
    env_dir = fresh_install.env_dir
    data = [str(v) for v in _FIRST_FIT_DATA]
    env = dict(fresh_install.env)
    out = subprocess.run([str(env_dir / "bin" / "python"), "-c", _FIRST_FIT, "auto", *data],
                         env=env, cwd=tmp_path, check=True, capture_output=True, text=True)
    installed = json.loads(out.stdout.strip().splitlines()[-1])
    assert installed["module"].startswith(str(env_dir)), installed["module"]
    assert installed["compiled"] == 0, out.stderr
    assert "compiling numba kernels" not in out.stderr
    # the probe sees compilation when there is some: the same probe, on the same CPU, with this
    # checkout's sources compiling into an empty cache (Platt scaling: its kernels compile in
    # a few seconds, where `auto`'s all take half a minute)
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "empty-cache")
    env["PYTHONPATH"] = str(ROOT)
    here = subprocess.run([sys.executable, "-c", _FIRST_FIT, "platt", *data], env=env,
                          cwd=tmp_path, check=True, capture_output=True, text=True)
    compiled_here = json.loads(here.stdout.strip().splitlines()[-1])
    assert compiled_here["module"].startswith(str(ROOT)), compiled_here["module"]
    assert compiled_here["compiled"] > 0
    assert "mlcal: compiling numba kernels (one-time, cached on disk)..." in here.stderr
    # the installed kernels give the JSON of this checkout's `auto` fit on the same data
    # (fitted here, in this process, on the host's CPU: fits are bit-identical across
    # processes and CPUs, tests/test_cpu_determinism.py)
    import mlcal

    assert Path(mlcal.__file__).is_relative_to(ROOT), mlcal.__file__
    seed, n = _FIRST_FIT_DATA
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    y = (rng.random(n) < s).astype(int)
    assert installed["json"] == mlcal.get_calibrator("auto").fit(s, y).to_json()


def test_entrypoint_serves_a_mounted_model_directory(fresh_install, tmp_path):
    from sklearn.linear_model import LogisticRegression

    import mlcal.mlflow
    from mlcal import CalibratedModel
    from mlcal.datasets import make_circular
    from support.serving import free_port

    root, env_dir = fresh_install.root, fresh_install.env_dir
    X, y = make_circular(600, seed=5)
    X = np.column_stack([X, (X ** 2).sum(1)])
    order = np.random.default_rng(0).permutation(len(y))  # make_circular lists class 0 first
    X, y = X[order], y[order]
    model = CalibratedModel(LogisticRegression().fit(X[:300], y[:300]), "isotonic").fit(
        X[300:], y[300:])
    model_dir = tmp_path / "model"
    import pandas as pd

    frame = pd.DataFrame(X, columns=["a", "b", "r2"])
    mlcal.mlflow.save_model(model, str(model_dir), input_example=frame.iloc[:2],
                            pip_requirements=["mlcal"])
    port = free_port()
    # on the CPU its packed kernels were built for (the host's would compile them first)
    env = {**fresh_install.env, "PATH": f"{env_dir / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "HOST": "127.0.0.1", "PORT": str(port)}
    env.pop("MODEL_URI", None)
    log = open(tmp_path / "serve.log", "wb")
    server = subprocess.Popen([str(root / "bin" / "mlcal-serve"), str(model_dir)], env=env,
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                              cwd=tmp_path)
    try:
        deadline = time.monotonic() + 240
        while True:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()[-3000:]
            time.sleep(0.5)
        body = json.dumps({"dataframe_split": frame.iloc[:20].to_dict(orient="split")}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            rows = json.loads(r.read())["predictions"]
        served = np.array([row["p_calibrated"] for row in rows])
        np.testing.assert_allclose(served, model.predict_proba(X[:20])[:, 1], rtol=0, atol=1e-12)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def test_entrypoint_refuses_a_missing_model(fresh_install, tmp_path):
    root = fresh_install.root
    proc = subprocess.run([str(root / "bin" / "mlcal-serve"), str(tmp_path / "nothing")],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "no MLflow model" in proc.stderr
