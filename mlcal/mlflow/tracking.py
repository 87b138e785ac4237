"""Per-run calibration logging: metrics before/after/improvement, plots, a JSON report."""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlcal._atomic import write_json
from mlcal.base_models.scores import naive_probability, naive_probability_matrix
from mlcal.holdout import DEFAULT_HOLDOUT, holdout_split
from mlcal.labels import multiclass_labels, positive_indicator
from mlcal.metrics import METRIC_NAMES, calibration_diagnostics, calibration_report
from mlcal.model import CalibratedModel
from mlcal.mlflow.tracking_segments import (check_segments, log_segment_report,
                                            resolve_segments)
from mlcal.maps.segmented import SEGMENTED_KIND
from mlcal.metrics.segments import DEFAULT_MIN_SEGMENT_ROWS

ARTIFACT_DIR = "calibration"
#: values of the run tag ``mlcal.metrics_source``: ``held-out`` metrics were computed on rows
#: the calibrator was not fitted on; ``in-sample`` on its own calibration rows (optimistic; the
#: promotion gate refuses them unless told otherwise)
METRICS_SOURCES = ("held-out", "in-sample")


def tag_metrics_source(source: str, n_rows: int, prefix: str = "") -> None:
    """Tag the active run with where its calibration metrics come from:
    ``mlcal.{prefix}metrics_source`` (:data:`METRICS_SOURCES`) and ``mlcal.{prefix}eval_rows``
    (how many rows they were computed on)."""
    import mlflow

    check_metrics_source(source)
    mlflow.set_tags({f"mlcal.{prefix}metrics_source": source,
                     f"mlcal.{prefix}eval_rows": str(int(n_rows))})


def check_metrics_source(source) -> None:
    if source not in METRICS_SOURCES:
        raise ValueError(f"metrics_source must be one of {list(METRICS_SOURCES)}, got "
                         f"{source!r}")


def _active_run():
    import mlflow

    run = mlflow.active_run()
    if run is None:
        raise ValueError("no active MLflow run; call this inside `with mlflow.start_run():`")
    return run


def log_calibration(y, p_before, p_after, *, prefix: str = "", calibrator=None, map_data=None,
                    n_bins: int = 10, strategy: str = "uniform",
                    artifact_dir: str = ARTIFACT_DIR, classes=None,
                    metrics_source: str = "held-out",
                    html_report: bool = True, segments=None,
                    min_segment_rows: float = DEFAULT_MIN_SEGMENT_ROWS) -> dict[str, Any]:
    """Log the effect of a calibration to the active MLflow run.

    Logs, for each metric m of ECE, MCE, Brier, RMSE, log loss, AUC and accuracy, the metrics
    ``{prefix}{m}_before``, ``{prefix}{m}_after`` and ``{prefix}{m}_improvement`` (positive =
    better; non-finite values, e.g. AUC on one class, are skipped); ``{prefix}{d}_before`` and
    ``_after`` for each estimator d of :data:`mlcal.metrics.DIAGNOSTIC_NAMES` (adaptive,
    debiased and smooth ECE, Spiegelhalter's z and p-value); the artifacts
    ``{artifact_dir}/{prefix}reliability_diagram.png`` (before and after overlaid),
    ``{artifact_dir}/{prefix}calibration_map.png`` (when ``calibrator`` is given) and
    ``{artifact_dir}/{prefix}calibration_report.json``; with ``html_report`` also
    ``{artifact_dir}/{prefix}reliability_corp.png`` and the HTML report
    ``{artifact_dir}/{prefix}calibration_report.html`` (:mod:`mlcal.report`); and, when
    ``calibrator`` is given, the
    tags ``mlcal.{prefix}method``, ``mlcal.{prefix}map_type`` and
    ``mlcal.{prefix}input_transform`` (for ``auto`` also ``mlcal.{prefix}auto_chosen``, the
    method it chose, with its whole ``fit_info`` in the report). The run is tagged
    ``mlcal.{prefix}metrics_source`` (``metrics_source``) and ``mlcal.{prefix}eval_rows`` (the
    number of rows in ``y``).

    Multiclass: when ``p_before``/``p_after`` are (n, K) matrices with K >= 3, the metrics,
    diagrams and report of :mod:`mlcal.mlflow.tracking_multiclass` are logged instead
    (``top_label_ece``, ``classwise_ece``, ``multiclass_brier``, ``log_loss``, ``accuracy``;
    one reliability diagram per class and top-label diagrams); ``map_data`` is not used.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {0, 1}; for a multiclass model class indices ``0 .. K-1``, or labels of
        ``classes``.
    p_before, p_after : array-like of shape (n,) or (n, K)
        Probabilities of class 1 before and after calibration (multiclass: of every class).
    prefix : str, default=""
        Prepended to every metric, tag and file name, to log several calibrations in one run.
    calibrator : fitted mlcal calibrator, optional
        Adds the map plot, the tags and the method details in the report.
    map_data : tuple (scores, labels), optional
        Calibration data (raw scores and 0/1 labels) scattered under the map plot.
    n_bins, strategy
        ECE/MCE binning, as in :func:`mlcal.metrics.ece`.
    artifact_dir : str, default="calibration"
        Artifact folder within the run.
    classes : sequence, optional
        Multiclass only: the K class labels (column order). ``y`` then holds these labels and
        is validated (:func:`mlcal.labels.multiclass_labels`: no missing or unknown labels,
        every class present).
    metrics_source : {"held-out", "in-sample"}, default="held-out"
        Whether ``y`` and the probabilities are rows the calibrator was not fitted on (the
        intended use: a test set) or its own calibration rows. Say ``"in-sample"`` for the
        latter: the promotion gate refuses in-sample metrics unless told otherwise.
    html_report : bool, default=True
        Log the CORP diagram and the HTML calibration report (a few seconds).
    segments : array-like or DataFrame, optional
        The segment key of each row (one or more columns): also log the per-segment metrics
        of ``p_after`` (:func:`mlcal.mlflow.tracking_segments.log_segment_report`: the
        artifacts ``{prefix}segment_report.json``/``.csv`` and the ``{prefix}segment_worst_*``
        metrics), under ``"segments"`` in the returned report.
    min_segment_rows : float, default=100
        Smaller segments are reported but not chosen as the worst.

    Returns
    -------
    dict
        The :func:`mlcal.metrics.calibration_report` (plus method details) that was logged.
    """
    import mlflow

    from mlcal.plotting import plot_map, reliability_diagram

    _active_run()
    check_metrics_source(metrics_source)
    if segments is not None:   # named errors before anything is logged
        check_segments(segments, np.shape(p_after)[0], min_segment_rows)
    if np.ndim(p_after) == 2 and np.shape(p_after)[1] >= 3:
        from mlcal.mlflow.tracking_multiclass import log_multiclass_calibration

        if classes is not None:
            y = multiclass_labels(y, classes, min_rows=1, name="y")
        report = log_multiclass_calibration(y, p_before, p_after, prefix=prefix,
                                            calibrator=calibrator, classes=classes,
                                            n_bins=n_bins, strategy=strategy,
                                            artifact_dir=artifact_dir, html_report=html_report)
        tag_metrics_source(metrics_source, len(y), prefix)
        report["metrics_source"] = metrics_source
        _log_segments(report, y, p_after, segments, prefix, artifact_dir, min_segment_rows,
                      n_bins, strategy)
        return report
    report = calibration_report(y, p_before, p_after, n_bins=n_bins, strategy=strategy)
    metrics = {}
    for m in METRIC_NAMES:
        for part in ("before", "after", "improvement"):
            value = float(report[part][m])
            if math.isfinite(value):
                metrics[f"{prefix}{m}_{part}"] = value
    # debiased/smooth/adaptive ECE and Spiegelhalter's Z: estimators that stay honest on
    # small evaluation sets (no "improvement": a z statistic has no better direction)
    report["diagnostics"] = {part: calibration_diagnostics(y, p)
                             for part, p in (("before", p_before), ("after", p_after))}
    for part, values in report["diagnostics"].items():
        metrics.update({f"{prefix}{m}_{part}": float(v) for m, v in values.items()
                        if math.isfinite(v)})
    if calibrator is not None:
        mp = calibrator.map_
        # the parameters as the saved document records them (JSON-ready: a segmented
        # calibrator's shared method given as an estimator is recorded by its name)
        report["calibrator"] = {"method": calibrator.method_name,
                                "params": calibrator.to_dict()["params"],
                                "map_type": mp.kind, "map_size": int(mp.size),
                                "input_transform": mp.input_transform}
        selection = getattr(calibrator, "selection_", None)
        if selection is not None:   # auto: what it compared, chose and why
            report["calibrator"]["fit_info"] = selection
    mlflow.log_metrics(metrics)
    with tempfile.TemporaryDirectory(prefix="mlcal-log-") as tmp:
        files = [os.path.join(tmp, f"{prefix}reliability_diagram.png"),
                 os.path.join(tmp, f"{prefix}calibration_report.json")]
        reliability_diagram(y, p_before, p_after, n_bins=n_bins, strategy=strategy,
                            path=files[0])
        write_json(files[1], report, indent=1)   # NaN (e.g. AUC of one class) -> null
        # a multicalibration map has no curve over the score alone (nor a shared one)
        if calibrator is not None and calibrator.map_.kind != "multicalibration":
            files.append(os.path.join(tmp, f"{prefix}calibration_map.png"))
            s_map, y_map = map_data if map_data is not None else (None, None)
            if calibrator.map_.kind == SEGMENTED_KIND:
                # one curve per segment would not fit one plot: draw the shared map
                plot_map(calibrator.map_.inner, scores=s_map, y=y_map, path=files[-1],
                         title="shared map (before the per-segment adjustments)")
            else:
                plot_map(calibrator, scores=s_map, y=y_map, path=files[-1])
        for f in files:
            mlflow.log_artifact(f, artifact_path=artifact_dir)
    if html_report:
        from mlcal.report.mlflow_logging import log_run_report

        log_run_report(y, p_before, p_after, calibrator=calibrator, map_data=map_data,
                       n_bins=n_bins, strategy=strategy, artifact_dir=artifact_dir, prefix=prefix)
    if calibrator is not None:
        tags = {f"mlcal.{prefix}method": calibrator.method_name,
                f"mlcal.{prefix}map_type": calibrator.map_.kind,
                f"mlcal.{prefix}input_transform": calibrator.map_.input_transform}
        if getattr(calibrator, "selection_", None) is not None:
            tags[f"mlcal.{prefix}auto_chosen"] = calibrator.selection_["chosen"]
        mlflow.set_tags(tags)
    tag_metrics_source(metrics_source, np.shape(y)[0], prefix)
    report["metrics_source"] = metrics_source
    _log_segments(report, y, p_after, segments, prefix, artifact_dir, min_segment_rows, n_bins,
                  strategy)
    return report


def _model_segment_columns(calibrator, model_columns, report_columns):
    """The segment columns of the model :func:`calibrate_and_log` fits: ``model_columns``, or
    for a :class:`~mlcal.calibrators.segmented.SegmentedCalibrator` the report's
    ``segment_columns`` (a segmented calibrator with neither is a named error)."""
    from mlcal.calibrators.segmented import SegmentedCalibrator

    if model_columns is not None or not isinstance(calibrator, SegmentedCalibrator):
        return model_columns
    if report_columns is None:
        raise ValueError("a SegmentedCalibrator needs the columns that name each row's "
                         "segment: pass model_segment_columns (or segment_columns)")
    return report_columns


def _log_segments(report, y, p, segments, prefix, artifact_dir, min_segment_rows, n_bins,
                  strategy) -> None:
    if segments is not None:
        report["segments"] = log_segment_report(
            y, p, segments, prefix=prefix, artifact_dir=artifact_dir,
            min_segment_rows=min_segment_rows, n_bins=n_bins, strategy=strategy).to_dict()


@dataclass
class CalibrationRun:
    """What :func:`calibrate_and_log` produced."""

    model: CalibratedModel
    report: dict[str, Any]
    run_id: str
    model_uri: str
    model_info: Any


def _take(data, rows: np.ndarray):
    """Rows of a DataFrame/Series (by position) or of an array-like."""
    if hasattr(data, "iloc"):
        return data.iloc[rows]
    return np.asarray(data)[rows] if not isinstance(data, list) else [data[i] for i in rows]


def _default_example(X):
    import pandas as pd

    if isinstance(X, pd.DataFrame):
        return X.iloc[:5]
    arr = np.asarray(X)
    if arr.ndim == 2:
        # named columns give a column signature, which serves records and CSV
        return pd.DataFrame(arr[:5], columns=[f"f{i}" for i in range(arr.shape[1])])
    return None


def calibrate_and_log(base_estimator, X_cal, y_cal, *, calibrator="auto", X_eval=None,
                      y_eval=None, holdout: float = DEFAULT_HOLDOUT, holdout_seed: int = 0,
                      score: str = "auto", threshold: float = 0.5,
                      sample_weight=None, name: str = "model",
                      registered_model_name: str | None = None, signature=None,
                      input_example=None, prefix: str = "", n_bins: int = 10,
                      strategy: str = "uniform", run_name: str | None = None,
                      segments=None, segment_columns=None,
                      min_segment_rows: float = DEFAULT_MIN_SEGMENT_ROWS,
                      model_segment_columns=None, model_feature_columns=None,
                      html_report: bool = True, **log_model_kwargs) -> CalibrationRun:
    """Fit a :class:`CalibratedModel`, evaluate it, and log metrics, plots and the model.

    Uses the active run, or starts (and ends) one named ``run_name``. The run gets the params
    ``mlcal.{prefix}method``, ``.score_source``, ``.threshold``, ``.n_calibration`` (rows the
    calibrator was fitted on), ``.n_evaluation``, ``.evaluated_on``, ``.holdout`` and
    ``mlcal.{prefix}calibrator.<param>``; the metrics of :func:`log_calibration` (logged before
    the model, so MLflow also attaches them to the LoggedModel) and its tags
    ``mlcal.{prefix}metrics_source`` / ``eval_rows``; and the model in the ``mlcal`` flavour.

    Honest metrics by default: without ``X_eval`` a share ``holdout`` (25 %) of the calibration
    rows, stratified by label and drawn with ``holdout_seed``
    (:func:`mlcal.holdout.holdout_split`), is held out; the calibrator is fitted on the other
    rows and the metrics are computed on the held-out ones (tag ``held-out``). The logged
    model *is* that calibrator (not a refit on all rows), so the logged metrics, which the
    promotion gate may read, are exactly those of the model it would promote; to fit on every
    row, pass a separate evaluation set. ``holdout=0`` fits on all rows and computes the
    metrics on them (tag ``in-sample``; the gate refuses them unless told otherwise).

    A multiclass base model (K >= 3 classes) gets the multiclass metrics and per-class
    diagrams of :mod:`mlcal.mlflow.tracking_multiclass`; its evaluation labels must hold every
    class (:class:`~mlcal.calibrators.multiclass.MissingClassError` otherwise) and no missing
    or unknown label (:class:`~mlcal.labels.MissingLabelError`,
    :class:`~mlcal.labels.UnknownLabelError`).

    Parameters
    ----------
    base_estimator : fitted classifier or :class:`~mlcal.mlflow.PyfuncScorer`
    X_cal, y_cal
        Held-out calibration data; ``y_cal`` holds the base model's class labels.
    calibrator : str, BaseCalibrator or MulticlassCalibrator, default="auto"
    X_eval, y_eval : optional
        A separate evaluation set (then every calibration row is used for the fit).
    holdout : float, default=0.25
        Without ``X_eval``: the share of calibration rows held out for the metrics, in [0, 1);
        0 computes them in-sample. Too few rows for a hold-out is a ``ValueError``
        (:func:`mlcal.holdout.holdout_split`).
    holdout_seed : int, default=0
    score, threshold, sample_weight
        As in :class:`CalibratedModel`.
    name, registered_model_name, signature, input_example, **log_model_kwargs
        Passed to :func:`mlcal.mlflow.log_model`. The input example defaults to the first 5
        rows of ``X_cal`` (an array becomes columns ``f0, f1, ...``).
    prefix, n_bins, strategy, html_report
        Passed to :func:`log_calibration` (multiclass:
        :func:`~mlcal.mlflow.tracking_multiclass.log_multiclass_calibration`); with
        ``html_report=False`` the diagrams and the HTML report are not logged (the metrics,
        the JSON report and the model are).
    segments : array-like or DataFrame, optional
        Segment keys of the rows of ``X_eval`` (or, without ``X_eval``, of ``X_cal``: the
        held-out rows' keys are taken): the per-segment metrics of the evaluation rows are
        logged as well (:func:`log_calibration`'s ``segments``).
    segment_columns : list of str, optional
        Instead of ``segments``: columns of the DataFrame ``X_eval`` (or ``X_cal``) holding
        the keys (they stay model inputs; keys that are not features go in ``segments``).
    min_segment_rows : float, default=100
        Smaller segments are reported but not chosen as the worst.
    model_segment_columns : list of str, optional
        Fit a segmented model: the columns of ``X_cal`` (and ``X_eval``) that name each row's
        segment (:class:`CalibratedModel`'s ``segment_columns``; docs/segments.md). Defaults
        to ``segment_columns`` when ``calibrator`` is a
        :class:`~mlcal.calibrators.segmented.SegmentedCalibrator`. The held-out metrics are
        then those of :meth:`CalibratedModel.predict_calibrated` (each row through its
        segment's adjustment).
    model_feature_columns : list of str, optional
        Fit a multicalibrated model: ``calibrator`` is a
        :class:`~mlcal.multicalibration.Multicalibration` (or ``"multicalibration"``) and
        these columns of ``X_cal`` (and ``X_eval``) are its features
        (:class:`CalibratedModel`'s ``feature_columns``). Not defaulted from
        ``segment_columns``: the report's segments and the map's features are separate
        choices. The held-out metrics are those of
        :meth:`CalibratedModel.predict_calibrated` (each row with its features).
    """
    import mlflow

    from mlcal.mlflow.flavor import calibration_method, log_model

    if (X_eval is None) != (y_eval is None):
        raise ValueError("give both X_eval and y_eval, or neither")
    if not 0.0 <= holdout < 1.0:
        raise ValueError(f"holdout must lie in [0, 1), got {holdout!r}")
    n_rows = int(np.asarray(y_cal).shape[0])
    keyed = X_cal if X_eval is None else X_eval
    segments = resolve_segments(segments, segment_columns, keyed)
    if segments is not None:   # lengths and missing keys before the split and the fit
        check_segments(segments, int(np.shape(np.asarray(y_cal if X_eval is None else y_eval,
                                                          dtype=object))[0]), 1)
    if X_eval is None and holdout > 0:
        fit_rows, held = holdout_split(y_cal, holdout, holdout_seed)
        if segments is not None:
            segments = _take(segments, held)
        X_eval, y_eval = _take(X_cal, held), _take(y_cal, held)
        X_cal, y_cal = _take(X_cal, fit_rows), _take(y_cal, fit_rows)
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight)[fit_rows]
        evaluated_on = f"held-out {holdout:.0%} of the calibration rows"
        source = "held-out"
    elif X_eval is None:
        evaluated_on, source = "calibration set", "in-sample"
    else:
        evaluated_on, source = "evaluation set", "held-out"
    if segments is not None:   # a segment of min_segment_rows among the evaluation rows
        check_segments(segments, len(segments), min_segment_rows)
    model = CalibratedModel(base_estimator, calibrator, score=score, threshold=threshold,
                            segment_columns=_model_segment_columns(
                                calibrator, model_segment_columns, segment_columns),
                            feature_columns=model_feature_columns)
    model.fit(X_cal, y_cal, sample_weight=sample_weight)
    # a segmented or multicalibration map has no one curve over the score
    no_curve = model.segment_columns is not None or model._multicalibrated
    X_e, y_e = (X_cal, y_cal) if X_eval is None else (X_eval, y_eval)
    scores = model.predict_uncalibrated(X_e)
    multiclass = len(model.classes_) > 2
    if multiclass:   # class indices; missing/unknown labels and absent classes are named errors
        y01 = multiclass_labels(y_e, model.classes_, min_rows=1, name="y_eval")
        p_before = naive_probability_matrix(scores, model.score_source_)
        p_after = model.calibrator_.predict_proba(scores)
    else:
        y01 = positive_indicator(y_e, model.classes_, name="y_eval")
        p_before = naive_probability(scores, model.score_source_)
        p_after = model.predict_calibrated(X_e)[1]   # (reads segments / feature columns)

    started = mlflow.active_run() is None
    run = mlflow.start_run(run_name=run_name) if started else mlflow.active_run()
    try:
        cal = model.calibrator_
        params = {"method": calibration_method(cal), "score_source": model.score_source_,
                  "threshold": threshold, "n_calibration": int(np.asarray(y_cal).size),
                  "n_evaluation": int(y01.size), "evaluated_on": evaluated_on,
                  "holdout": holdout if evaluated_on.startswith("held-out") else 0,
                  **{f"calibrator.{k}": v for k, v in cal.get_params(deep=False).items()}}
        mlflow.log_params({f"mlcal.{prefix}{k}": v for k, v in params.items()})
        if no_curve:   # a segmented or multicalibration map: no one curve over the score
            map_data = None
        elif X_eval is None or multiclass:   # (no map plot for a multiclass calibrator)
            map_data = (scores, y01)
        else:
            y_cal01 = positive_indicator(y_cal, model.classes_, name="y_cal")  # fit checked it
            map_data = (model.predict_uncalibrated(X_cal), y_cal01)
        if multiclass:
            from mlcal.mlflow.tracking_multiclass import log_multiclass_calibration

            report = log_multiclass_calibration(y01, p_before, p_after, prefix=prefix,
                                                calibrator=cal, classes=model.classes_,
                                                n_bins=n_bins, strategy=strategy,
                                                html_report=html_report)
            tag_metrics_source(source, y01.size, prefix)
            report["metrics_source"] = source
            _log_segments(report, y01, p_after, segments, prefix, ARTIFACT_DIR,
                          min_segment_rows, n_bins, strategy)
        else:
            report = log_calibration(y01, p_before, p_after, prefix=prefix, calibrator=cal,
                                     map_data=map_data, n_bins=n_bins, strategy=strategy,
                                     metrics_source=source, segments=segments,
                                     min_segment_rows=min_segment_rows,
                                     html_report=html_report)
        report["evaluated_on"] = evaluated_on
        report["n_rows"] = {"given": n_rows, "fit": int(np.asarray(y_cal).shape[0]),
                            "metrics": int(y01.size)}
        if input_example is None and signature is None:
            input_example = _default_example(X_cal)
        info = log_model(model, name=name, registered_model_name=registered_model_name,
                         signature=signature, input_example=input_example, **log_model_kwargs)
    except BaseException:
        if started:
            mlflow.end_run(status="FAILED")
        raise
    if started:
        mlflow.end_run()
    return CalibrationRun(model=model, report=report, run_id=run.info.run_id,
                          model_uri=info.model_uri, model_info=info)
