"""`mlcal monitor`, the monitoring loop, end to end on a real sqlite MLflow registry (no mocks):
a champion is fitted, logged, registered and promoted through the gate; batches are fed through
the CLI one at a time; the alarm builds, registers and gates a candidate; the alias moves only
when the gate promotes; per-batch metrics are logged with steps; an edited state is refused."""

import json
import os

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, logit

mlflow = pytest.importorskip("mlflow")

from sklearn.linear_model import LogisticRegression  # noqa: E402

import mlcal.mlflow as mlcal_mlflow  # noqa: E402
from mlcal import CalibratedModel, Platt  # noqa: E402
from mlcal.cli import main  # noqa: E402
from support.gate import promote_without_report  # noqa: E402

NAME = "loop-clf"
COLS = ["x1", "x2"]
ROWS = 400


def true_logit(X):
    return 1.2 * X[:, 0] - 0.8 * X[:, 1] - 0.5


def batch(rng, n=ROWS, offset=0.0, slope=1.0):
    X = rng.normal(size=(n, 2))
    y = (rng.random(n) < expit(slope * true_logit(X) + offset)).astype(int)
    frame = pd.DataFrame(X, columns=COLS)
    frame["y"] = y
    return frame


def champion(rng):
    """A logistic base model made under-confident (C small) and Platt-calibrated on fresh rows;
    registered and promoted to @champion through the gate."""
    train, cal, hold = batch(rng, 600), batch(rng, 1500), batch(rng, 1000)
    base = LogisticRegression(C=0.005).fit(train[COLS], train["y"])
    model = CalibratedModel(base, Platt()).fit(cal[COLS], cal["y"])
    with mlflow.start_run():
        mlcal_mlflow.log_model(model, name="model", registered_model_name=NAME,
                               pip_requirements=["mlcal"])
    # the setup's own promotion logs no HTML gate report (the candidates' gates in the loop do)
    decision = promote_without_report(NAME, "1", max_ece=0.08, data=hold, settle_seconds=0.0)
    assert decision.promoted, decision.explain()
    return model


def holder(client):
    return str(client.get_model_version_by_alias(NAME, "champion").version)


def feed(tmp_path, frame, i, *extra):
    """One batch through `mlcal monitor` (exit code). ``--diagrams off``: the loop's decisions
    are the same without the per-batch CORP diagrams, which no test here opens (their PNGs,
    per batch, at an alarm and at a window's close, are checked in test_monitor_diagrams.py)."""
    path = tmp_path / f"batch{i}.parquet"
    frame.to_parquet(path) if i % 2 else frame.to_csv(path.with_suffix(".csv"), index=False)
    data = str(path if i % 2 else path.with_suffix(".csv"))
    return main(["monitor", "--model-uri", f"models:/{NAME}@champion", "--data", data,
                 "--label-column", "y", "--state", str(tmp_path / "state.json"),
                 "--gate-min-rows", "200", "--max-ece", "0.08", "--diagrams", "off", *extra])


def registered_versions(client):
    return sorted(int(v.version) for v in client.search_model_versions(f"name='{NAME}'"))


def test_prevalence_shift_alarms_builds_a_reoffset_candidate_and_only_the_gate_moves_the_alias(
        sqlite_tracking, tmp_path, capsys):
    client = mlflow.MlflowClient()
    rng = np.random.default_rng(0)
    champion(rng)
    # before the shift: no alarm, nothing registered, the alias stays
    for i in range(3):
        assert feed(tmp_path, batch(rng), i) == 0
    assert registered_versions(client) == [1] and holder(client) == "1"
    state = json.loads((tmp_path / "state.json").read_text())
    assert (state["model_version"], state["step"]) == ("1", 3)

    # a big prevalence shift (+1.5 on the log-odds). First alarm under a gate that cannot pass
    # (ECE <= 0.001): a re-offset candidate is registered and refused, the alias stays
    capsys.readouterr()
    assert feed(tmp_path, batch(rng, offset=1.5), 3, "--max-ece", "0.001") == 4
    out = capsys.readouterr().out
    assert "ALARM" in out and "recommendation re-offset" in out and "REFUSED" in out
    assert registered_versions(client) == [1, 2] and holder(client) == "1"
    assert client.get_model_version(NAME, "2").tags["mlcal.gate.result"] == "refused"
    # the gate logged its HTML report to the candidate's run (the default)
    gate_arts = client.list_artifacts(client.get_model_version(NAME, "2").run_id, "gate")
    assert [a.path.startswith("gate/gate_report_champion_") for a in gate_arts] == [True]
    # the candidate is the champion with an offset close to the true shift
    cand = mlcal_mlflow.load_model(f"models:/{NAME}/2")
    assert cand.calibrator_.map_.kind == "offset"
    assert 1.0 < cand.calibrator_.map_.delta < 2.0

    # next shifted batch under the real gate: a new candidate, promoted; the alias moves
    # (--no-gate-report: the same decision, no HTML gate report on the candidate's run)
    assert feed(tmp_path, batch(rng, offset=1.5), 4, "--no-gate-report") == 3
    assert registered_versions(client) == [1, 2, 3] and holder(client) == "3"
    assert client.list_artifacts(client.get_model_version(NAME, "3").run_id, "gate") == []
    run_tags = client.get_run(client.get_model_version(NAME, "3").run_id).data.tags
    assert run_tags["mlcal.monitor.recommendation"] == "re-offset"
    # fitted on the earlier half of the rows since the change, gated on the later half
    assert (run_tags["mlcal.monitor.fit_rows"], run_tags["mlcal.monitor.gate_rows"]) == \
        ("400", "400")

    # the alias moved: the next batch starts a new monitor on version 3, which fits the
    # shifted stream (no alarm)
    capsys.readouterr()
    assert feed(tmp_path, batch(rng, offset=1.5), 5) == 0
    assert "new monitor starts" in capsys.readouterr().out
    state = json.loads((tmp_path / "state.json").read_text())
    assert (state["model_version"], state["step"]) == ("3", 1)
    assert sorted(os.listdir(tmp_path)).count("state.json.window-1.npz") == 1

    # metrics of version 1's monitor, with steps 1..5
    first_run = json.loads((tmp_path / "state.json").read_text())["run_id"]
    runs = client.search_runs([mlflow.get_experiment_by_name("tests").experiment_id],
                              "tags.`mlcal.monitor.model_version` = '1'")
    assert len(runs) == 1 and runs[0].info.run_id != first_run
    hist = {k: sorted((m.step, m.value) for m in client.get_metric_history(runs[0].info.run_id, k))
            for k in ("monitor_e_value", "monitor_alarm", "monitor_offset", "monitor_ece",
                      "monitor_log_loss", "monitor_offset_lower", "monitor_offset_upper",
                      "monitor_rows")}
    assert [s for s, _ in hist["monitor_e_value"]] == [1, 2, 3, 4, 5]
    assert [v for _, v in hist["monitor_alarm"]] == [0, 0, 0, 1, 1]
    assert all(v >= 20 for _, v in hist["monitor_e_value"][3:])
    assert [v for _, v in hist["monitor_rows"]] == [ROWS] * 5
    for (_, lo), (_, est), (_, hi) in zip(hist["monitor_offset_lower"], hist["monitor_offset"],
                                          hist["monitor_offset_upper"]):
        assert lo < est < hi
    assert hist["monitor_offset"][-1][1] > 1.0


def test_slope_change_recommends_and_builds_a_refit(sqlite_tracking, tmp_path, capsys):
    client = mlflow.MlflowClient()
    rng = np.random.default_rng(1)
    model = champion(rng)
    codes = [feed(tmp_path, batch(rng), i) for i in range(3)]
    assert codes == [0, 0, 0]
    # the outcome's log-odds grow 2.5-fold: the model is now under-confident
    codes.append(feed(tmp_path, batch(rng, slope=2.5), 3))
    codes.append(feed(tmp_path, batch(rng, slope=2.5), 4, "--gate-min-rows", "5000"))
    out = capsys.readouterr().out
    assert codes[-1] == 5, out
    assert "recommendation re-fit" in out and "no candidate built" in out
    assert registered_versions(client) == [1]
    assert feed(tmp_path, batch(rng, slope=2.5), 5, "--no-gate-report") in (3, 4)
    assert registered_versions(client) == [1, 2]
    version = client.get_model_version(NAME, "2")
    assert client.get_run(version.run_id).data.tags["mlcal.monitor.recommendation"] == "re-fit"
    promoted = version.tags["mlcal.gate.result"] == "promoted"
    assert holder(client) == ("2" if promoted else "1")
    # the candidate keeps the base model and re-fits Platt on the window's base scores: its
    # slope on the base model's log-odds is steeper than the champion's
    cand = mlcal_mlflow.load_model(f"models:/{NAME}/2")
    X = batch(rng)[COLS]
    assert np.allclose(cand.predict_uncalibrated(X), model.predict_uncalibrated(X))
    pc, pm = cand.predict_proba(X)[:, 1], model.predict_proba(X)[:, 1]
    assert np.std(logit(pc)) > 1.8 * np.std(logit(pm))


def test_an_edited_state_is_refused_by_name_and_score_column_is_monitored_as_served(
        sqlite_tracking, tmp_path, capsys):
    rng = np.random.default_rng(2)
    model = champion(rng)
    assert feed(tmp_path, batch(rng), 0) == 0
    state_path = tmp_path / "state.json"
    original = state_path.read_bytes()
    doc = json.loads(original)
    doc["step"] = 7
    state_path.write_text(json.dumps(doc))
    capsys.readouterr()
    assert feed(tmp_path, batch(rng), 1) == 2
    err = capsys.readouterr().err
    assert "state.json" in err and "does not match its digest" in err
    assert json.loads(state_path.read_text())["step"] == 7   # left as it was

    state_path.write_bytes(original)
    window = tmp_path / doc["window_file"]
    data = bytearray(window.read_bytes())
    data[-30] ^= 1
    window.write_bytes(bytes(data))
    assert feed(tmp_path, batch(rng), 1) == 2
    err = capsys.readouterr().err
    assert doc["window_file"] in err and "SHA-256 does not match" in err

    # a label the model does not know is named, and the state is not advanced
    window.write_bytes(bytes(data[:-30]) + bytes([data[-30] ^ 1]) + bytes(data[-29:]))
    bad = batch(rng)
    bad.loc[3, "y"] = 7
    assert feed(tmp_path, bad, 1) == 2
    assert "label column 'y'" in capsys.readouterr().err
    assert state_path.read_bytes() == original
    assert feed(tmp_path, batch(rng), 1) == 0
    assert json.loads(state_path.read_text())["step"] == 2


    # a URI the loop cannot register under, an alias that does not exist: named, exit 2
    data = str(tmp_path / "batch1.parquet")   # written by feed(..., 1)
    for uri, says in [("runs:/abc/model", "expected models:/NAME@ALIAS"),
                      (f"models:/{NAME}@nosuch", "nosuch")]:
        assert main(["monitor", "--model-uri", uri, "--data", data,
                     "--state", str(tmp_path / "other.json")]) == 2
        assert says in capsys.readouterr().err
    assert not (tmp_path / "other.json").exists()

    # --score-column: the batch's served probabilities are monitored instead of the model's
    frame = batch(rng)
    served = frame.copy()
    served["p"] = model.predict_proba(frame[COLS])[:, 1]
    outs = []
    capsys.readouterr()
    for i, (data, extra) in enumerate([(frame, []), (served, ["--score-column", "p"])]):
        sub = tmp_path / f"s{i}"
        sub.mkdir()
        assert feed(sub, data, 0, *extra) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1]   # the served probabilities are the model's: the same statistics
    shifted = served.copy()
    shifted["p"] = expit(logit(served["p"]) - 2.0)   # served far too low
    sub = tmp_path / "s2"
    sub.mkdir()
    assert feed(sub, shifted, 0, "--score-column", "p") == 0
    out = capsys.readouterr().out
    offset = float(out.split("offset ")[1].split(" ")[0])
    assert 1.6 < offset < 2.4   # the monitor saw the served column, not the model's scores
