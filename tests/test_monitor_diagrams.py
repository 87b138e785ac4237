"""The CORP reliability diagrams `mlcal monitor` logs (mlcal.monitor.diagrams), against a real
sqlite MLflow store: per batch, at an alarm (the rows since the estimated change) and when a
window closes; each a PNG that opens, named with its step; `--diagrams alarm` and `off` log
less; an unknown mode is refused before anything is written."""

import json

import numpy as np
import pytest

mlflow = pytest.importorskip("mlflow")

from PIL import Image  # noqa: E402
from test_monitor_loop import NAME, batch, champion  # noqa: E402  (the loop tests' stream)

from mlcal.cli import main  # noqa: E402
from mlcal.monitor import MonitorStep  # noqa: E402
from mlcal.monitor.diagrams import _rows, diagram_names  # noqa: E402
from mlcal.monitor.state import Window  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def feed(tmp_path, frame, i, state, *extra):
    path = tmp_path / f"{state}-batch{i}.csv"
    frame.to_csv(path, index=False)
    return main(["monitor", "--model-uri", f"models:/{NAME}@champion", "--data", str(path),
                 "--label-column", "y", "--state", str(tmp_path / f"{state}.json"),
                 "--window-batches", "3", "--gate-min-rows", "100000", *extra])


def logged(client, tmp_path, state):
    run_id = json.loads((tmp_path / f"{state}.json").read_text())["run_id"]
    return run_id, sorted(f.path for f in client.list_artifacts(run_id, "monitor"))


@pytest.fixture(scope="module")
def streams(tmp_path_factory):
    """One champion; the same four batches (three stable, then a +1.5 log-odds shift that
    alarms) fed to three monitors with --diagrams batch (default), alarm and off. The gate's
    minimum is out of reach, so the alarm builds nothing (exit 5) and the alias stays."""
    tmp_path = tmp_path_factory.mktemp("diagrams")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(experiment_id=mlflow.create_experiment(
        "diagrams", artifact_location=(tmp_path / "artifacts").as_uri()))
    rng = np.random.default_rng(0)
    champion(rng)
    frames = [batch(rng) for _ in range(3)] + [batch(rng, offset=1.5)]
    codes = {}
    for state, extra in (("batch", []), ("alarm", ["--diagrams", "alarm"]),
                         ("off", ["--diagrams", "off"])):
        codes[state] = [feed(tmp_path, f, i, state, *extra) for i, f in enumerate(frames)]
    yield tmp_path, codes, frames
    mlflow.set_tracking_uri(None)


def test_batch_mode_logs_every_batch_the_closed_window_and_the_alarm(streams):
    tmp_path, codes, _ = streams
    assert codes["batch"] == [0, 0, 0, 5]           # the shift alarms at batch 4
    client = mlflow.MlflowClient()
    run_id, names = logged(client, tmp_path, "batch")
    assert names == ["monitor/corp_alarm_step0004.png", "monitor/corp_batch_step0001.png",
                     "monitor/corp_batch_step0002.png", "monitor/corp_batch_step0003.png",
                     "monitor/corp_batch_step0004.png", "monitor/corp_window_step0003.png"]
    for name in names:
        local = client.download_artifacts(run_id, name, str(tmp_path / "dl"))
        with open(local, "rb") as fh:
            assert fh.read(8) == PNG
        with Image.open(local) as img:
            img.verify()                      # a complete, decodable PNG
        with Image.open(local) as img:
            assert img.width > 300 and img.height > 300


def test_alarm_mode_logs_only_the_alarm_and_window_diagrams_and_off_logs_none(streams):
    tmp_path, codes, _ = streams
    assert codes["alarm"] == codes["off"] == [0, 0, 0, 5]
    client = mlflow.MlflowClient()
    assert logged(client, tmp_path, "alarm")[1] == ["monitor/corp_alarm_step0004.png",
                                                    "monitor/corp_window_step0003.png"]
    assert logged(client, tmp_path, "off")[1] == []


def step(batch, alarm, change):
    return MonitorStep(batch, 10, 10.0, 0.5, 0.5, 0.0, 0.7, 1.0, 1.0, 1.0, alarm, change, 0.0,
                       (0.0, 0.0), None, "none")


def test_rows_drawn_are_the_batch_the_rows_since_the_change_and_the_window():
    # a window of batches 3..7 with 2, 3, 4, 5, 6 rows; brute-force row counts
    sizes = {3: 2, 4: 3, 5: 4, 6: 5, 7: 6}
    win = Window.empty(["x"])
    for b, n in sizes.items():
        win = win.append(np.zeros((n, 1)), np.full(n, 0.3), np.zeros(n),
                         np.arange(n) % 2, np.ones(n), b, keep_batches=5)
    s = step(7, True, 5)
    assert _rows(win, s, "batch")[0].p.size == sizes[7]
    assert _rows(win, s, "alarm")[0].p.size == sum(n for b, n in sizes.items() if b >= 5)
    assert _rows(win, s, "window")[0].p.size == sum(sizes.values())
    assert diagram_names(s, "batch", 5) == ["batch", "alarm"]
    assert diagram_names(step(10, False, 1), "batch", 5) == ["batch", "window"]
    assert diagram_names(step(11, False, 1), "alarm", 5) == []


def test_unknown_mode_is_refused_before_the_state_is_written(streams, capsys):
    tmp_path, _, frames = streams
    with pytest.raises(ValueError, match="diagrams must be one of .*'every'"):
        from mlcal.monitor.loop import run_batch

        run_batch(state_path=str(tmp_path / "never.json"),
                  model_uri=f"models:/{NAME}@champion", frame=frames[0], label_column="y",
                  diagrams="every")
    assert not (tmp_path / "never.json").exists()
    with pytest.raises(SystemExit):           # argparse refuses it on the command line
        feed(tmp_path, frames[0], 0, "never", "--diagrams", "every")
    assert "invalid choice: 'every'" in capsys.readouterr().err


def test_a_diagram_that_cannot_be_stored_is_named_and_the_batch_still_counts(streams, capsys):
    """Artifacts of this experiment would go under a regular file (no directory can be made
    there, even as root): the batch is counted, its metrics logged, the exit code is the
    loop's, and the summary names what was not logged."""
    tmp_path, _, frames = streams
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    mlflow.set_experiment(experiment_id=mlflow.create_experiment(
        "no-artifacts", artifact_location=(blocker / "artifacts").as_uri()))
    try:
        capsys.readouterr()
        assert feed(tmp_path, frames[0], 0, "blocked") == 0
        out = capsys.readouterr().out
        assert "No alarm." in out and "The CORP diagrams of batch 1 were not logged" in out
        state = json.loads((tmp_path / "blocked.json").read_text())
        assert state["step"] == 1
        client = mlflow.MlflowClient()
        assert [m.step for m in client.get_metric_history(state["run_id"], "monitor_ece")] == [1]
    finally:
        mlflow.set_experiment("diagrams")
