"""examples/monitor_month.py, run for real in a subprocess with a shorter month (10 days of 800
rows, the base rate moving from 0.2 to 0.35 on day 6), its outcome checked against the sqlite
MLflow store it leaves behind: no alarm before the shift, an alarm after it recommending a
re-offset, a candidate the gate refuses leaves the alias alone, the next one is registered,
passed by the gate and holds @champion, the offset it carries is close to the true log-odds
shift, and the loop's metrics are in MLflow with steps 1..N, equal to the printed table. It runs
with ``--no-reports`` (no test opens them): tests/test_examples.py runs the script with its HTML
reports, test_monitor_loop.py checks a loop candidate's gate report."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.special import logit

mlflow = pytest.importorskip("mlflow")

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "monitor_month.py"
NAME = "month-clf"
SHIFT_DAY = 6
DAYS = 10
TRUE_SHIFT = logit(0.35) - logit(0.2)


@pytest.fixture(scope="module")
def month(tmp_path_factory):
    work = tmp_path_factory.mktemp("month")
    out_json = work / "out.json"
    figures = work / "img"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--dir", str(work / "store"), "--days", str(DAYS),
         "--rows", "800", "--shift-day", str(SHIFT_DAY), "--shifted-rate", "0.35",
         "--diagrams", "alarm", "--no-reports", "--figures", str(figures),
         "--json", str(out_json)],
        cwd=work, capture_output=True, text=True, timeout=600,
        env={**__import__("os").environ, "PYTHONPATH": str(SCRIPT.parents[1])})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not (work / "mlruns").exists()
    mlflow.set_tracking_uri(f"sqlite:///{work / 'store' / 'mlflow.db'}")
    yield json.loads(out_json.read_text()), proc.stdout, work
    mlflow.set_tracking_uri(None)


def test_no_alarm_before_the_shift_then_an_alarm_recommending_a_reoffset(month):
    out, stdout, _ = month
    table = out["table"]
    assert [r["day"] for r in table] == list(range(1, DAYS + 1))
    assert not any(r["alarm"] for r in table if r["day"] < SHIFT_DAY)
    first = next(r for r in table if r["alarm"])
    assert first["day"] >= SHIFT_DAY and first["version"] == "1"
    assert first["recommendation"] == "re-offset"
    # the printed table is the one in the JSON
    line = next(s for s in stdout.splitlines() if s.lstrip().startswith(f"{first['day']} "))
    assert "re-offset" in line and "yes" in line


def test_the_reoffset_candidate_is_registered_promoted_by_the_gate_and_holds_the_alias(month):
    out, _, _ = month
    client = mlflow.MlflowClient()
    promoted = [r for r in out["table"] if r["exit_code"] == 3]
    assert len(promoted) == 1, [(r["day"], r["exit_code"]) for r in out["table"]]
    version = promoted[0]["candidate_version"]
    # candidates refused before it are registered, tagged refused, and the alias stayed on 1
    refused = [r for r in out["table"] if r["exit_code"] == 4]
    for r in refused:
        assert client.get_model_version(NAME, r["candidate_version"]).tags[
            "mlcal.gate.result"] == "refused"
        assert out["table"][r["day"]]["version"] == "1"     # the next day still monitors v1
    holder = str(client.get_model_version_by_alias(NAME, "champion").version)
    assert holder == version == out["champion"] != "1"
    tags = client.get_model_version(NAME, version).tags
    assert tags["mlcal.gate.result"] == "promoted" and tags["mlcal.gate.compared_to"] == "1"
    run_tags = client.get_run(client.get_model_version(NAME, version).run_id).data.tags
    assert run_tags["mlcal.monitor.recommendation"] == "re-offset"
    cand = __import__("mlcal.mlflow", fromlist=["load_model"]).load_model(
        f"models:/{NAME}/{version}")
    assert cand.calibrator_.map_.kind == "offset"
    assert abs(cand.calibrator_.map_.delta - TRUE_SHIFT) < 0.35
    # after the promotion a new monitor follows the candidate and does not alarm
    after = [r for r in out["table"] if r["day"] > promoted[0]["day"]]
    assert after and all(r["version"] == version and not r["alarm"] for r in after)
    assert [r["batch"] for r in after] == list(range(1, len(after) + 1))


def test_metrics_are_in_mlflow_with_steps_1_to_n_and_equal_the_table(month):
    out, _, _ = month
    client = mlflow.MlflowClient()
    exp = mlflow.get_experiment_by_name("monitor-month")
    for version, rows in (("1", [r for r in out["table"] if r["version"] == "1"]),
                          (out["champion"], [r for r in out["table"]
                                             if r["version"] == out["champion"]])):
        runs = client.search_runs([exp.experiment_id],
                                  f"tags.`mlcal.monitor.model_version` = '{version}'")
        assert len(runs) == 1
        run_id = runs[0].info.run_id
        for key, field in (("monitor_e_value", "e_value"), ("monitor_ece", "ece"),
                           ("monitor_offset", "offset"), ("monitor_rows", "rows")):
            hist = sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))
            assert [s for s, _ in hist] == list(range(1, len(rows) + 1)), key
            np.testing.assert_allclose([v for _, v in hist], [r[field] for r in rows],
                                       rtol=1e-12, err_msg=key)
        alarms = [m.value for m in client.get_metric_history(run_id, "monitor_alarm")]
        assert sorted(alarms) == sorted(float(r["alarm"]) for r in rows)


def test_alarm_diagram_logged_and_figures_drawn(month):
    out, _, work = month
    client = mlflow.MlflowClient()
    first = next(r for r in out["table"] if r["alarm"])
    run_id = out["runs"]["1"]
    names = [f.path for f in client.list_artifacts(run_id, "monitor")]
    # --diagrams alarm: the alarm steps only, no per-batch diagrams
    assert f"monitor/corp_alarm_step{first['batch']:04d}.png" in names
    assert not any("corp_batch_" in n for n in names)
    local = client.download_artifacts(run_id, names[0], str(work / "dl"))
    assert Path(local).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    png = work / "img" / "monitor_month_metrics.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
