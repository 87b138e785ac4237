"""Calibrate a gradient-boosted tree model on an imbalanced data set, end to end.

    python examples/calibrate_boosted_trees_imbalanced.py
    python examples/calibrate_boosted_trees_imbalanced.py --rows 12000   # a quicker run
    python examples/calibrate_boosted_trees_imbalanced.py --no-reports   # no HTML reports

120 000 rows by default (``--rows``), about 3 % positives, split half/quarter/quarter into
train/calibrate/test. XGBoost is trained with ``scale_pos_weight`` (the usual
recipe for imbalance), which inflates its probabilities. Two calibrations are logged to a
throw-away sqlite store and registered: Platt scaling on the raw margins (log-odds) and
isotonic regression on the probabilities. The ECE gate promotes the better one to
``@champion``, which is then served by a real ``mlflow models serve`` on 127.0.0.1 and
exported to one fused ONNX graph (trees + calibration map), checked in onnxruntime.
Each calibration run logs its HTML report and each gate decision its gate report
(``--no-reports``: neither; the metrics, models and decisions are the same).
"""

import argparse
import json
import os
import shlex
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import xgboost
from sklearn.datasets import make_classification

import mlcal.mlflow
from mlcal.metrics import ece
from mlcal.onnx import input_feeds, to_onnx
from mlcal.mlflow.gate import promote

NAME = "boosted-imbalanced"
ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--rows", type=int, default=120_000,
                help="rows generated (default 120000; the test suite runs a smaller set)")
ap.add_argument("--no-reports", dest="reports", action="store_false",
                help="log no HTML reports: neither the calibration runs' reports nor the "
                     "gate's; the metrics, models and decisions are the same")
args = ap.parse_args()
ROWS = args.rows
if ROWS < 4000:
    ap.error(f"--rows must be at least 4000 (got {ROWS}): the test quarter needs positives")
t_start = time.monotonic()
X, y = make_classification(ROWS, 20, n_informative=8, weights=[0.97], flip_y=0.01,
                           class_sep=0.8, random_state=0)
frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
half, three_quarters = ROWS // 2, ROWS * 3 // 4
train, cal, test = slice(0, half), slice(half, three_quarters), slice(three_quarters, None)
print(f"{len(y)} rows, {y.mean():.1%} positives; train/calibrate/test = "
      f"{half}/{three_quarters - half}/{ROWS - three_quarters}")

# scale_pos_weight balances the classes for ranking and, as a side effect, inflates P(y=1)
base = xgboost.XGBClassifier(n_estimators=100, max_depth=5, learning_rate=0.1,
                             scale_pos_weight=(1 - y[train].mean()) / y[train].mean(),
                             tree_method="hist", n_jobs=2, random_state=0)
base.fit(frame[train], y[train])
p_base = base.predict_proba(frame[test])[:, 1]
print(f"base XGBoost: ECE {ece(y[test], p_base):.4f}, mean p {p_base.mean():.3f} "
      f"vs base rate {y[test].mean():.3f}")

with tempfile.TemporaryDirectory() as tmp:
    uri = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
    os.environ["MLFLOW_TRACKING_URI"] = uri  # for the server started below
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(experiment_id=mlflow.create_experiment(
        "boosted", artifact_location=(Path(tmp) / "artifacts").as_uri()))

    versions = {}
    for method, score in (("platt", "margin"), ("isotonic", "predict_proba")):
        run = mlcal.mlflow.calibrate_and_log(
            base, frame[cal], y[cal], calibrator=method, score=score, X_eval=frame[test],
            y_eval=y[test], registered_model_name=NAME, run_name=f"xgb-{method}-{score}",
            input_example=frame[cal].iloc[:3], html_report=args.reports)
        versions[method] = run.model_info.registered_model_version
        print(f"v{versions[method]} {method:8s} on {score:13s}: ECE "
              f"{run.report['before']['ece']:.4f} -> {run.report['after']['ece']:.4f}, "
              f"AUC {run.report['after']['auc']:.4f}")

    holdout = frame[test].assign(y=y[test])
    for method in versions:  # each candidate meets the gate on the same hold-out rows
        decision = promote(NAME, versions[method], max_ece=0.02, data=holdout,
                           report=args.reports)
        print(decision.explain())

    champion = mlflow.MlflowClient().get_model_version_by_alias(NAME, "champion")
    model = mlcal.mlflow.load_model(f"models:/{NAME}@champion")
    rows = frame[test].iloc[:5]

    # serve the champion with the real scoring server, as `mlcal serve` runs it: this
    # interpreter's mlflow, its bin directory first on PATH (the server execs `uvicorn`)
    from mlcal.mlflow.serving import server_command, server_environment

    with socket.socket() as s:  # a port that is free right now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = server_command(f"models:/{NAME}@champion", "127.0.0.1", port, "local")
    print("serve it yourself with (this store is temporary; same command on yours):\n  "
          f"MLFLOW_TRACKING_URI={shlex.quote(uri)} mlcal serve "
          f"'models:/{NAME}@champion' --port 5001")
    env = server_environment()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        t0 = time.monotonic()
        while True:  # wait until /ping answers
            if server.poll() is not None or time.monotonic() - t0 > 180:
                raise RuntimeError("mlflow models serve did not come up")
            try:
                with urllib.request.urlopen(url + "/ping", timeout=2):
                    break
            except OSError:
                time.sleep(0.5)
        startup = time.monotonic() - t0
        body = json.dumps({"dataframe_split": {"columns": list(rows.columns),
                                               "data": rows.to_numpy().tolist()}}).encode()
        req = urllib.request.Request(url + "/invocations", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            served = [r["p_calibrated"] for r in json.load(resp)["predictions"]]
    finally:
        server.terminate()
        server.wait(timeout=30)
    gap = np.max(np.abs(np.array(served) - model.predict_proba(rows)[:, 1]))
    print(f"served champion v{champion.version} (startup {startup:.1f} s): "
          f"max |served - predict_proba| = {gap:.1e}")
    assert gap == 0.0

    onnx_model = to_onnx(model)  # float64 graph: trees read float32, as XGBoost does
    import onnxruntime as ort

    sess = ort.InferenceSession(onnx_model.SerializeToString(),
                                providers=["CPUExecutionProvider"])
    p_onnx = sess.run(None, input_feeds(onnx_model, frame[test]))[1][:, 1]
    onnx_gap = np.max(np.abs(p_onnx - model.predict_proba(frame[test])[:, 1]))
    print(f"ONNX (trees + map, {len(onnx_model.SerializeToString()) / 1e3:.0f} kB) vs "
          f"predict_proba on {len(p_onnx)} test rows: max |diff| {onnx_gap:.1e}")
    assert onnx_gap < 1e-4
    mlflow.set_tracking_uri(None)
print(f"done in {time.monotonic() - t_start:.0f} s")
