"""CORP reliability diagrams that the monitoring loop logs to the monitored version's MLflow run.

The metrics say *that* calibration moved; a diagram says *where* on the probability scale.
Drawn with :func:`mlcal.plotting.corp.corp_reliability_diagram` (CORP curve, consistency band,
binned points with counts, forecast histogram), one PNG per figure, under ``monitor/`` in the
run's artifacts, each name carrying the step so a stream's diagrams sort in order:

* ``monitor/corp_batch_step0007.png``: the batch of step 7 (mode ``"batch"`` only);
* ``monitor/corp_alarm_step0018.png``: at an alarmed step, the window's rows since the
  estimated change (what the candidate is built and gated on);
* ``monitor/corp_window_step0020.png``: when a window closes (the step is a multiple of
  ``window_batches``) without an alarm, every row of the window.

Mode ``"alarm"`` logs the last two only, ``"off"`` nothing. Diagrams draw rows, not weights: a
batch with non-unit weights is drawn unweighted and the title says so.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from mlcal.monitor.sequential import MonitorStep
from mlcal.monitor.state import Window

DIAGRAM_MODES = ("batch", "alarm", "off")
ARTIFACT_DIR = "monitor"


def diagram_names(step: MonitorStep, mode: str, window_batches: int) -> list[str]:
    """The diagram kinds (``"batch"``, ``"alarm"``, ``"window"``) logged at ``step``."""
    if mode not in DIAGRAM_MODES:
        raise ValueError(f"diagrams must be one of {DIAGRAM_MODES}, got {mode!r}")
    if mode == "off":
        return []
    kinds = ["batch"] if mode == "batch" else []
    if step.alarm:
        kinds.append("alarm")
    elif step.batch % window_batches == 0:
        kinds.append("window")
    return kinds


def _rows(window: Window, step: MonitorStep, kind: str) -> tuple[Window, str]:
    """The window rows a diagram of ``kind`` draws, and their description for the title."""
    if kind == "batch":
        rows = window.since(step.batch)
        return rows, f"batch {step.batch}"
    first = step.change_batch if kind == "alarm" else int(window.batch.min())
    what = "since the estimated change" if kind == "alarm" else "the window"
    return window.since(first), f"batches {first}-{step.batch} ({what})"


def log_monitor_diagrams(run_id: str, step: MonitorStep, window: Window, *, mode: str,
                         window_batches: int, model_label: str) -> list[str]:
    """Draw and log the diagrams of ``step`` (module docstring) to run ``run_id``.

    Parameters
    ----------
    run_id : str
        The monitored version's MLflow run.
    step : MonitorStep
        The step just taken; ``window`` must already hold its batch.
    window : Window
        The loop's recent rows (calibrated probability ``p`` and 0/1 label ``y`` are drawn).
    mode : {"batch", "alarm", "off"}
    window_batches : int
        The loop's window length (a window closes at its multiples).
    model_label : str
        Legend name of the forecasts, e.g. ``"version 3"``.

    Returns
    -------
    list of str
        The artifact paths logged, e.g. ``["monitor/corp_batch_step0007.png"]``.
    """
    import mlflow

    from mlcal.plotting.corp import corp_reliability_diagram

    kinds = diagram_names(step, mode, window_batches)
    logged = []
    client = mlflow.MlflowClient()
    with tempfile.TemporaryDirectory(prefix="mlcal-monitor-") as tmp:
        for kind in kinds:
            rows, what = _rows(window, step, kind)
            if rows.p.size == 0:
                continue
            note = "" if np.all(rows.w == 1.0) else ", drawn unweighted"
            name = f"corp_{kind}_step{step.batch:04d}.png"
            path = os.path.join(tmp, name)
            alarm = ", ALARM" if step.alarm else ""
            corp_reliability_diagram(
                rows.y, rows.p, labels=(model_label, ""), path=path,
                title=f"Monitor step {step.batch}{alarm}: {what}, {rows.p.size} rows{note}")
            client.log_artifact(run_id, path, artifact_path=ARTIFACT_DIR)
            logged.append(f"{ARTIFACT_DIR}/{name}")
    return logged
