"""The monitoring loop behind ``mlcal monitor``: one matured, labelled batch per call.

Per call: resolve the registry URI to a version, load that mlcal-flavour model, score the batch
(or take its served probabilities), update the :class:`~mlcal.monitor.CalibrationMonitor` kept in
the state file, log the batch's metrics to the monitored version's MLflow run with
``step = batch number``, and on an alarm build the recommended candidate from the rows since the
estimated change, register it and send it through the gate (:func:`mlcal.mlflow.gate.promote`),
which alone moves the alias. Details and the exit codes: ``docs/monitoring.md`` ("The loop").
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlcal.monitor.sequential import CalibrationMonitor, MonitorStep
from mlcal.monitor.state import LoopState, Window

EXIT_NO_ALARM, EXIT_PROMOTED, EXIT_REFUSED, EXIT_TOO_FEW = 0, 3, 4, 5
DEFAULT_WINDOW_BATCHES = 20
MIN_FIT_ROWS = 100   # fewest rows the candidate is fitted on (re-offset or re-fit)


@dataclass
class LoopResult:
    """What one call did; :meth:`summary` is the paragraph the CLI prints."""

    model_name: str
    model_version: str
    step: MonitorStep
    exit_code: int
    new_monitor: bool
    candidate_version: str | None = None
    decision: Any = None
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    alpha: float = 0.05

    def summary(self) -> str:
        s = self.step
        cs = "all offsets rejected" if s.offset_cs is None else \
            f"[{s.offset_cs[0]:+.3f}, {s.offset_cs[1]:+.3f}]"
        text = (f"{self.model_name} version {self.model_version}, batch {s.batch} "
                f"({s.n_rows} rows{', new monitor' if self.new_monitor else ''}): ECE "
                f"{s.ece:.4f}, log loss {s.log_loss:.4f}, offset {s.offset_estimate:+.3f} "
                f"(95% interval [{s.offset_interval[0]:+.3f}, {s.offset_interval[1]:+.3f}], "
                f"confidence sequence {cs}), e-value {s.e_value:.3g}. ")
        if not s.alarm:
            text += "No alarm."
        else:
            text += (f"ALARM (e-value >= {1 / self.alpha:g}) since batch {s.change_batch}, "
                     f"recommendation {s.recommendation}: ")
            if self.exit_code == EXIT_TOO_FEW:
                text += f"no candidate built, {self.reason}."
            else:
                verdict = "PROMOTED" if self.decision.promoted else "REFUSED by the gate"
                text += (f"candidate version {self.candidate_version} ({self.reason}) "
                         f"{verdict}; alias '{self.decision.alias}' is on version "
                         f"{self.decision.holder_version}.")
        return " ".join([text] + self.notes)


def parse_model_uri(uri: str) -> tuple[str, str | None, str | None]:
    """``models:/NAME@ALIAS`` or ``models:/NAME/VERSION`` as (name, alias, version)."""
    if not uri.startswith("models:/"):
        raise ValueError(f"--model-uri {uri!r}: expected models:/NAME@ALIAS or "
                         "models:/NAME/VERSION (the loop registers candidates under NAME)")
    rest = uri[len("models:/"):]
    if "@" in rest:
        name, alias = rest.split("@", 1)
        if name and alias and "/" not in alias:
            return name, alias, None
    elif rest.count("/") == 1:
        name, version = rest.split("/")
        if name and version.isdigit():
            return name, None, version
    raise ValueError(f"--model-uri {uri!r}: expected models:/NAME@ALIAS or models:/NAME/VERSION")


def resolve_version(client, uri: str) -> tuple[str, str | None, str]:
    """(name, alias, version the URI points to now)."""
    name, alias, version = parse_model_uri(uri)
    if alias is not None:
        version = str(client.get_model_version_by_alias(name, alias).version)
    return name, alias, version


class MulticalibratedModelNotMonitoredError(ValueError):
    """The monitored version is a multicalibrated model (``feature_columns``, a
    :class:`~mlcal.multicalibration.Multicalibration`): its map reads feature columns the
    loop's windows do not keep and its candidates are score-only maps, so it refuses it."""


class SegmentedModelNotMonitoredError(ValueError):
    """The monitored version is a segmented model (``segment_columns``): the loop's window
    holds numeric features only and its candidates are score-only maps, so it refuses it."""


def feature_columns(model, frame, exclude: set[str]) -> list[str]:
    """The base model's input columns: ``feature_names_in_`` when it has them, else every column
    of the batch but the label, score and weight columns."""
    names = getattr(model.base_estimator, "feature_names_in_", None)
    cols = [str(c) for c in names] if names is not None else \
        [str(c) for c in frame.columns if c not in exclude]
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise ValueError(f"the batch has no column(s) {missing} the model needs; columns are "
                         f"{list(frame.columns)[:20]}")
    bad = [c for c in cols if frame[c].dtype.kind not in "biuf"]
    if bad:
        raise ValueError(f"feature column(s) {bad} are not numeric; the loop keeps numeric "
                         "features only (its window file holds no objects)")
    return cols


def _log_metrics(state: LoopState, step: MonitorStep, tags: dict[str, str]) -> str:
    import mlflow

    if state.run_id is None:
        with mlflow.start_run(run_name=f"monitor {state.model_name} v{state.model_version}",
                              tags=tags) as run:
            state.run_id = run.info.run_id
    lo, hi = step.offset_interval
    metrics = {"monitor_ece": step.ece, "monitor_log_loss": step.log_loss,
               "monitor_offset": step.offset_estimate, "monitor_offset_lower": lo,
               "monitor_offset_upper": hi, "monitor_e_value": step.e_value,
               "monitor_e_offset": step.e_offset, "monitor_e_shape": step.e_shape,
               "monitor_alarm": float(step.alarm), "monitor_rows": float(step.n_rows),
               "monitor_positive_rate": step.positive_rate,
               "monitor_mean_forecast": step.mean_forecast}
    if step.offset_cs is not None:
        metrics["monitor_offset_cs_lower"], metrics["monitor_offset_cs_upper"] = step.offset_cs
    client = mlflow.MlflowClient()
    from mlflow.entities import Metric
    import time

    now = int(time.time() * 1000)
    client.log_batch(state.run_id, metrics=[Metric(k, float(v), now, step.batch)
                                            for k, v in metrics.items() if np.isfinite(v)])
    return state.run_id


def _build_candidate(model, recommendation: str, fit: Window):
    """The re-offset model (ML offset on ``fit``) or the same method re-fitted on ``fit``'s base
    scores, keeping the base model."""
    from sklearn.base import clone

    from mlcal.mlflow.flavor import calibration_method
    from mlcal.maps.reoffset import reoffset

    X = _frame(fit)
    if recommendation == "re-offset":
        return reoffset(model, X=X, y=fit.y, sample_weight=fit.w), \
            "re-offset by maximum likelihood"
    out = copy.copy(model)
    cal = clone(model.calibrator_)
    # a re-offset calibrator clones to its inner method: refit that method from scratch
    cal.fit(fit.s, fit.y, sample_weight=fit.w)
    out.calibrator_ = cal
    return out, f"re-fit of {calibration_method(cal)}"


def _frame(win: Window):
    import pandas as pd

    return pd.DataFrame(win.X, columns=win.columns)


def run_batch(*, state_path: str, model_uri: str, frame, label_column: str,
              score_column: str | None = None, weight_column: str | None = None,
              alpha: float = 0.05, window_batches: int = DEFAULT_WINDOW_BATCHES,
              max_ece: float = 0.05, gate_min_rows: int | None = None,
              gate_options: dict | None = None, build: bool = True,
              diagrams: str = "batch", monitor_update=None) -> LoopResult:
    """Process one labelled batch (a DataFrame); see the module docstring.

    ``monitor_update``, when given, is called as ``monitor_update(monitor, model)`` and must
    return the :class:`~mlcal.monitor.MonitorStep` of the whole batch in place of
    ``monitor.update(p, y, w)`` on ``frame``: the Spark route
    (:func:`mlcal.spark.monitor_batches.monitor_spark_table`) computes the monitor's statistics
    over every row of a table in Spark and passes a capped sample of it as ``frame``, which then
    only feeds the candidate window and the diagrams.

    ``diagrams`` (``"batch"``, ``"alarm"`` or ``"off"``) selects the CORP reliability diagrams
    logged to the run (:mod:`mlcal.monitor.diagrams`).

    Returns
    -------
    LoopResult
        ``exit_code`` 0 no alarm, 3 alarm and candidate promoted, 4 alarm and candidate refused
        by the gate, 5 alarm but too few rows since the change to fit and gate a candidate.
    """
    import os

    import mlflow

    from mlcal.labels import positive_indicator
    from mlcal.mlflow import load_model
    from mlcal.mlflow.gate import promote
    from mlcal.monitor.diagrams import DIAGRAM_MODES

    if diagrams not in DIAGRAM_MODES:
        raise ValueError(f"diagrams must be one of {DIAGRAM_MODES}, got {diagrams!r}")
    client = mlflow.MlflowClient()
    name, alias, version = resolve_version(client, model_uri)
    model = load_model(f"models:/{name}/{version}")
    if getattr(model, "_multiclass", False):
        raise ValueError(f"models:/{name}/{version} is multiclass; the loop monitors binary "
                         "models")
    if getattr(model, "segment_columns", None):
        raise SegmentedModelNotMonitoredError(
            f"models:/{name}/{version} is segmented (segment columns "
            f"{list(model.segment_columns)}); the loop keeps numeric feature windows and "
            "re-offsets or re-fits one score-only map, neither of which carries segment keys, "
            "so it does not monitor segmented models. Track per-segment calibration with "
            "mlcal.metrics.segment_report, or gate new versions with max_segment_citl")
    if getattr(model, "_multicalibrated", False):
        raise MulticalibratedModelNotMonitoredError(
            f"models:/{name}/{version} is multicalibrated (a Multicalibration over feature "
            f"columns {list(model.feature_columns or [])}); the loop re-offsets or re-fits one "
            "score-only map, which would drop the feature corrections, so it does not monitor "
            "multicalibrated models. Refit the model on recent rows and gate the new version")
    for col in [label_column, score_column, weight_column]:
        if col is not None and col not in frame.columns:
            raise ValueError(f"the batch has no column {col!r}; columns are "
                             f"{list(frame.columns)[:20]}")
    y01 = positive_indicator(frame[label_column].to_numpy(), model.classes_,
                             name=f"label column {label_column!r}").astype(np.int8)
    w = (np.ones(len(frame)) if weight_column is None
         else frame[weight_column].to_numpy(dtype=np.float64))
    exclude = {label_column, score_column, weight_column}
    cols = feature_columns(model, frame, exclude)
    X = frame[cols].to_numpy(dtype=np.float64)
    s = model.predict_uncalibrated(frame[cols])
    p = (frame[score_column].to_numpy(dtype=np.float64) if score_column is not None
         else model.predict_proba(frame[cols])[:, 1])

    notes: list[str] = []
    state = LoopState.load(state_path) if os.path.exists(state_path) else None
    new = state is None or state.model_name != name or state.model_version != version
    if state is not None and new:
        notes.append(f"The state followed {state.model_name} version {state.model_version}; "
                     f"{model_uri} now resolves to version {version}, so a new monitor starts "
                     "(its evidence is about one model).")
    if state is not None and not new and state.window.columns != cols:
        raise ValueError(f"the batch's feature columns {cols} differ from the state's "
                         f"{state.window.columns}")
    if new:
        state = LoopState(name, version, None, 0, window_batches,
                          CalibrationMonitor(alpha=alpha), Window.empty(cols))
    step = (state.monitor.update(p, y01, w) if monitor_update is None
            else monitor_update(state.monitor, model))
    state.step = step.batch
    state.window = state.window.append(X, p, s, y01, w, step.batch, state.window_batches)
    _log_metrics(state, step, {"mlcal.monitor.model_uri": model_uri,
                               "mlcal.monitor.model_version": version})
    result = LoopResult(name, version, step, EXIT_NO_ALARM, new, notes=notes,
                        alpha=state.monitor.alpha)
    # the monitor's step is saved before acting: an error while building or gating a
    # candidate (exit 2) must not make the next call count this batch again
    state.extra = {"batch": step.batch, "exit_code": None, "candidate_version": None}
    state.save(state_path)
    if step.alarm and build:
        _act_on_alarm(result, state, model, alias or "champion", label_column, max_ece,
                      gate_min_rows, gate_options or {}, promote)
    state.extra = {"batch": step.batch, "exit_code": result.exit_code,
                   "candidate_version": result.candidate_version}
    state.save(state_path)
    # last, and not fatal: the batch is counted and acted on whether or not its diagrams can
    # be drawn and stored; a failure is named in the summary, the exit code stays the loop's
    try:
        _log_diagrams(state, step, diagrams)
    except Exception as exc:  # noqa: BLE001  (any drawing or artifact-store error)
        result.notes.append(f"The CORP diagrams of batch {step.batch} were not logged "
                            f"({type(exc).__name__}: {exc}).")
    return result


def _log_diagrams(state: LoopState, step: MonitorStep, mode: str) -> None:
    from mlcal.monitor.diagrams import log_monitor_diagrams

    log_monitor_diagrams(state.run_id, step, state.window, mode=mode,
                         window_batches=state.window_batches,
                         model_label=f"version {state.model_version}")


def _act_on_alarm(result: LoopResult, state: LoopState, model, alias: str, label_column: str,
                  max_ece: float, gate_min_rows, gate_options: dict, promote) -> None:
    import mlflow
    import pandas as pd

    from mlcal.mlflow import log_model
    from mlcal.mlflow.gate_policy import GatePolicy, default_min_rows

    step = result.step
    since = state.window.since(step.change_batch)
    # fit on the earlier half of the rows since the change, gate on the later half: the gate
    # judges the candidate on rows it was not fitted on
    n = len(since.p)
    cut = n // 2
    need_gate = gate_min_rows if gate_min_rows is not None else default_min_rows(GatePolicy(max_ece=max_ece))
    if cut < MIN_FIT_ROWS or n - cut < need_gate:
        result.exit_code = EXIT_TOO_FEW
        result.reason = (f"{n} rows since batch {step.change_batch} in the window; fitting needs "
                         f"{MIN_FIT_ROWS} (the earlier half) and the gate {need_gate} (the later "
                         "half)")
        return
    order = np.argsort(since.batch, kind="stable")
    fit_rows, gate_rows = order[:cut], order[cut:]
    fit = Window(since.columns, since.X[fit_rows], since.p[fit_rows], since.s[fit_rows],
                 since.y[fit_rows], since.w[fit_rows], since.batch[fit_rows])
    candidate, how = _build_candidate(model, step.recommendation, fit)
    gate_df = pd.DataFrame(since.X[gate_rows], columns=since.columns)
    gate_df[label_column] = model.classes_[since.y[gate_rows].astype(int)]
    from mlcal.mlflow.flavor import get_default_pip_requirements

    with mlflow.start_run(run_name=f"monitor candidate {state.model_name} batch {step.batch}",
                          tags={"mlcal.monitor.parent_version": state.model_version,
                                "mlcal.monitor.recommendation": step.recommendation,
                                "mlcal.monitor.fit_rows": str(cut),
                                "mlcal.monitor.gate_rows": str(n - cut)}):
        info = log_model(candidate, "model", registered_model_name=state.model_name,
                         pip_requirements=get_default_pip_requirements())
    result.candidate_version = str(info.registered_model_version)
    result.reason = f"{how} on {cut} rows, gated on {n - cut}"
    result.decision = promote(state.model_name, result.candidate_version, max_ece=max_ece,
                              alias=alias, data=gate_df, label_column=label_column,
                              min_rows=gate_min_rows, **gate_options)
    result.exit_code = EXIT_PROMOTED if result.decision.promoted else EXIT_REFUSED
