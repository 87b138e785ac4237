"""Concurrent promotes of different versions, as real processes on one sqlite store: the alias
must end on the version the policy prefers, and every decision must be recorded."""

import json
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

mlflow = pytest.importorskip("mlflow")

from sklearn.naive_bayes import GaussianNB  # noqa: E402

import mlcal.mlflow as mlcal_mlflow  # noqa: E402
from mlcal import CalibratedModel, HistogramBinning, Platt  # noqa: E402
from mlcal.datasets import make_circular  # noqa: E402
from mlcal.metrics import brier, log_loss  # noqa: E402
from mlcal.mlflow.gate import gate_history  # noqa: E402

NAME = "race"

WORKER = r"""
import json, os, sys, time
from mlcal.mlflow.gate import promote
import mlflow
uri, name, version, csv, prefix, trials = sys.argv[1:7]
mlflow.set_tracking_uri(uri)
for trial in range(int(trials)):   # one race per trial, all workers released by one file
    open(f"{prefix}ready{trial}-{version}", "w").close()
    while not os.path.exists(f"{prefix}go{trial}"):
        time.sleep(0.01)
    # no HTML gate report: it is logged after the decision and the alias move, which it never
    # changes (tested in test_gate_mcb_report.py); rendering it was most of a promote's time
    d = promote(name, version, max_ece=0.05, data=csv, settle_seconds=0.5, report=False)
    print(json.dumps({"version": d.version, "promoted": d.promoted, "rounds": d.rounds}),
          flush=True)
"""


def test_concurrent_promotes_end_on_the_preferred_version(sqlite_tracking, tmp_path):
    X, y = make_circular(2400, seed=3)
    order = np.random.default_rng(3).permutation(len(y))
    X, y = X[order], y[order]
    frame = pd.DataFrame(np.column_stack([X, (X ** 2).sum(1)]), columns=["x1", "x2", "r2"])
    base = GaussianNB().fit(frame.iloc[:800], y[:800])
    cal, test = slice(800, 1600), slice(1600, None)
    models = {"platt": Platt(), "hist2": HistogramBinning(n_bins=2),
              "hist3": HistogramBinning(n_bins=3)}
    holdout = frame.iloc[test].copy()
    holdout["y"] = y[test]
    csv = tmp_path / "holdout.csv"
    holdout.to_csv(csv, index=False)
    versions, quality = {}, {}
    for key, calibrator in models.items():
        m = CalibratedModel(base, calibrator).fit(frame.iloc[cal], y[cal])
        p = m.predict_proba(holdout.drop(columns=["y"]))[:, 1]
        quality[key] = (log_loss(y[test], p), brier(y[test], p))
        with mlflow.start_run():
            info = mlcal_mlflow.log_model(m, name="model", registered_model_name=NAME,
                                          pip_requirements=["mlcal"],
                                          input_example=holdout.iloc[:2, :3])
        versions[key] = str(info.registered_model_version)
    # an unambiguous preference: platt beats the others on both proper scores beyond the margins
    for other in ("hist2", "hist3"):
        assert quality["platt"][0] < quality[other][0] - 0.01
        assert quality["platt"][1] < quality[other][1] - 0.0025
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    client = mlflow.MlflowClient()
    # the same three processes race in every trial (each a new race released by one file):
    # starting them once saves two rounds of three interpreters importing mlcal and MLflow
    trials = 2
    # (stderr to files: a pipe nobody reads until the end could fill and block a worker)
    logs = {v: tmp_path / f"worker-{v}.log" for v in versions.values()}
    procs = []
    for v in versions.values():
        with open(logs[v], "w") as err:      # the child keeps its own copy of the handle
            procs.append(subprocess.Popen(
                [sys.executable, str(script), sqlite_tracking, NAME, v, str(csv),
                 f"{tmp_path}/", str(trials)], stdout=subprocess.PIPE, stderr=err, text=True))
    err_of = {p: logs[v] for p, v in zip(procs, versions.values())}
    for trial in range(trials):
        go = tmp_path / f"go{trial}"
        ready = [tmp_path / f"ready{trial}-{v}" for v in versions.values()]
        deadline = time.time() + 240
        while not all(r.exists() for r in ready):
            assert time.time() < deadline and all(p.poll() is None for p in procs), \
                [err_of[p].read_text()[-3000:] for p in procs if p.poll() is not None]
            time.sleep(0.05)
        go.touch()
        results = []
        for p in procs:
            line = ""
            while not line.startswith('{"version"'):  # this trial's decision, after its promote
                line = p.stdout.readline()
                if not line:
                    p.wait(timeout=300)
                    pytest.fail(f"a worker exited (code {p.returncode}):\n"
                                f"{err_of[p].read_text()[-3000:]}")
            results.append(json.loads(line))
        holder = client.get_model_version_by_alias(NAME, "champion").version
        assert str(holder) == versions["platt"], (trial, results)
        assert next(r for r in results if r["version"] == versions["platt"])["promoted"]
        hist = gate_history(NAME)
        assert len(hist) == 3 * (trial + 1)          # every decision recorded, none overwritten
        assert sorted(h["version"] for h in hist[3 * trial:]) == sorted(versions.values())
        client.delete_registered_model_alias(NAME, "champion")
    for p in procs:
        p.communicate(timeout=300)
        assert p.returncode == 0, err_of[p].read_text()[-3000:]
