"""Issue #24: a promotion killed (SIGKILL, a real process) between its intent record and the
alias move, or right after the move, is reconciled by the next ``promote`` / ``gate_history``
on a real sqlite registry: the history says what actually happened."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

mlflow = pytest.importorskip("mlflow")
pytestmark = pytest.mark.integration     # real subprocesses

from sklearn.naive_bayes import GaussianNB  # noqa: E402

import mlcal.mlflow as mlcal_mlflow  # noqa: E402
from mlcal import CalibratedModel, Platt  # noqa: E402
from mlcal.datasets import make_circular  # noqa: E402
from mlcal.mlflow.gate import gate_history, promote  # noqa: E402

NAME = "killed"

# The worker stops inside MlflowClient.set_registered_model_alias, which the gate calls right
# after writing its intent: "before" never moves the alias, "after" moves it first. It then
# signals and waits to be killed.
WORKER = r"""
import sys, time
from mlflow import MlflowClient
import mlflow
uri, name, version, csv, mode, signal_file = sys.argv[1:7]
mlflow.set_tracking_uri(uri)
move = MlflowClient.set_registered_model_alias
def stop_here(self, *args, **kwargs):
    if mode == "after":
        move(self, *args, **kwargs)
    open(signal_file, "w").close()
    time.sleep(600)
MlflowClient.set_registered_model_alias = stop_here
from mlcal.mlflow.gate import promote
promote(name, version, max_ece=0.05, data=csv)
"""


@pytest.fixture()
def setup(sqlite_tracking, tmp_path):
    X, y = make_circular(2000, seed=4)
    order = np.random.default_rng(4).permutation(len(y))
    X, y = X[order], y[order]
    frame = pd.DataFrame(np.column_stack([X, (X ** 2).sum(1)]), columns=["x1", "x2", "r2"])
    model = CalibratedModel(GaussianNB().fit(frame[:800], y[:800]), Platt())
    model.fit(frame[800:1600], y[800:1600])
    holdout = frame[1600:].copy()
    holdout["y"] = y[1600:]
    csv = tmp_path / "holdout.csv"
    holdout.to_csv(csv, index=False)
    versions = []
    for _ in range(2):   # the same good model twice: either passes against the other
        with mlflow.start_run():
            info = mlcal_mlflow.log_model(model, name="model", registered_model_name=NAME,
                                          input_example=holdout.iloc[:2, :3],
                                          pip_requirements=["scikit-learn"],
                                          bundle_mlcal=False)
        versions.append(str(info.registered_model_version))
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    return sqlite_tracking, csv, versions, script, tmp_path


def _kill_at(setup, version, mode):
    uri, csv, _, script, tmp = setup
    signal_file = tmp / f"stopped-{version}-{mode}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, str(script), uri, NAME, version, str(csv), mode,
                             str(signal_file)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.time() + 240
        while not signal_file.exists():
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.time() < deadline, "the worker never reached the alias move"
            time.sleep(0.05)
        # alive: its pending intent belongs to a running promotion and is left alone
        entry = [h for h in gate_history(NAME) if h["version"] == version][-1]
        assert entry["result"] == "pending" and entry["owner"]["pid"] == proc.pid
    finally:
        proc.kill()                  # SIGKILL: no cleanup runs
        proc.wait(timeout=60)
    assert proc.returncode == -9


def _holder(client):
    return client.get_registered_model(NAME).aliases.get("champion")


def test_killed_promotions_are_reconciled_from_the_alias(setup):
    _, csv, (v1, v2), _, _ = setup
    client = mlflow.MlflowClient()

    # 1. killed between the intent record and the alias move
    _kill_at(setup, v1, "before")
    assert _holder(client) is None
    raw = gate_history(NAME, reconcile=False)
    assert [h["result"] for h in raw] == ["pending"]
    # the next promote reconciles it first, then decides its own candidate (no HTML gate
    # report: logged after the decision, which it never changes; tested elsewhere)
    d = promote(NAME, v2, max_ece=0.05, data=str(csv), report=False)
    assert d.promoted and str(_holder(client)) == v2
    hist = gate_history(NAME)
    assert [(h["version"], h["result"]) for h in hist] == [(v1, "aborted"), (v2, "promoted")]
    assert hist[0]["reconciled"]["outcome"] == "aborted"
    assert hist[0]["from_version"] is None and hist[0]["holder_version"] is None
    tags = client.get_model_version(NAME, v1).tags
    assert tags["mlcal.gate.result"] == "aborted" and tags["mlcal.gate.reconciled"] == "aborted"

    # 2. killed right after the alias move, before the decision was recorded
    _kill_at(setup, v1, "after")
    assert str(_holder(client)) == v1           # the move happened, nothing recorded it
    assert [h["result"] for h in gate_history(NAME, reconcile=False)] == [
        "aborted", "promoted", "pending"]
    hist = gate_history(NAME)                   # a plain history read reconciles
    assert [(h["version"], h["result"]) for h in hist] == [
        (v1, "aborted"), (v2, "promoted"), (v1, "promoted")]
    assert hist[2]["reconciled"]["outcome"] == "completed"
    assert hist[2]["from_version"] == v2 and hist[2]["holder_version"] == v1
    assert any("reconciled from the alias: completed" in n for n in hist[2]["notes"])
    tags = client.get_model_version(NAME, v1).tags
    assert tags["mlcal.gate.result"] == "promoted" and tags["mlcal.gate.reconciled"] == \
        "completed"
    assert tags["mlcal.gate.compared_to"] == v2
    # reconciled once: reading again changes nothing
    assert gate_history(NAME) == hist
    stored = client.get_registered_model(NAME).tags
    assert sorted((json.loads(v) for k, v in stored.items() if k.startswith(
        "mlcal.gate.history.")), key=lambda h: h["decided_at"]) == hist
