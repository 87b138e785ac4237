"""Everything a calibration report shows, as plain JSON-able values (no HTML, no figures).

:func:`assemble_report` computes, for the forecasts before and after calibration on one
evaluation set:

* the metrics with bootstrap intervals (the same resampled rows for before, after and their
  paired change; calibration errors with the bias-corrected ``"basic"`` interval, the rest with
  the percentile interval -- see :mod:`mlcal.metrics.bootstrap`);
* the CORP decomposition of the Brier score and the log loss (binary), or of the top-label
  forecast and the class-wise sum (multiclass);
* binary: calibration slope / intercept and the ICI family;
* the calibrator: method, parameters, map type/size/domain/transform, its JSON document and,
  for ``auto``, every candidate with its cross-validated log loss and the reason for the choice;
* a gate decision, when given (:meth:`mlcal.mlflow.gate.GateDecision.as_dict`).
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Sequence

import numpy as np

from mlcal.metrics.bootstrap import _bootstrap, _interval

#: bootstrap resamples of the report's intervals: a report computes three intervals for each
#: of about five metrics, and this keeps it to seconds on 10^5 rows; the intervals' Monte
#: Carlo error at this size is a few percent of their width
DEFAULT_REPORT_RESAMPLES = 200
#: binning of the binned metrics in the report (the bins drawn in the diagrams too)
DEFAULT_N_BINS = 10


@dataclass
class CalibrationReport:
    """One report: ``summary`` (plain JSON, what the HTML shows as tables) and the arrays the
    figures are drawn from. Build it with :func:`assemble_report`."""

    summary: dict[str, Any]
    y: np.ndarray
    p_before: np.ndarray
    p_after: np.ndarray
    class_names: list[str] | None = None
    calibrator: Any = None
    map_data: tuple | None = None
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def multiclass(self) -> bool:
        return self.p_after.ndim == 2


def _metric_table(y, p_before, p_after, metrics, *, n_resamples: int, seed: int,
                  confidence: float) -> list[dict[str, Any]]:
    """One row per (key, label, metric, higher_is_better, method): before, after and the
    paired change after - before, each with its bootstrap interval (``None`` when the metric
    is undefined on these data, e.g. AUC with one class)."""
    stacked = np.concatenate([np.reshape(p_before, (len(y), -1)),
                              np.reshape(p_after, (len(y), -1))], axis=1)
    half = stacked.shape[1] // 2

    def unstack(q):
        return q[:, 0] if half == 1 else q

    rows = []
    for key, label, metric, higher, method in metrics:
        def change(yy, q, metric=metric):
            return metric(yy, unstack(q[:, half:])) - metric(yy, unstack(q[:, :half]))

        row = {"key": key, "label": label, "higher_is_better": higher, "interval_method": method}
        done = {}
        for part, fn, data in (("before", metric, p_before), ("after", metric, p_after),
                               ("change", change, stacked)):
            try:
                if part == "change" and done["before"][2] == done["after"][2] == 0:
                    # no resample was drawn again, so before and after saw the same index sets
                    # as the change would: its replicates are their differences (the same
                    # subtraction of the same floats), not 2 x n_resamples metrics more
                    (est_b, reps_b, _), (est_a, reps_a, _) = done["before"], done["after"]
                    iv = _interval(est_a - est_b, reps_a - reps_b, confidence, n_resamples,
                                   seed, method)
                else:
                    iv, estimate, reps, redrawn = _bootstrap(fn, y, data, confidence,
                                                             n_resamples, seed, method)
                    done[part] = (estimate, reps, redrawn)
                row[part] = iv.as_dict()
            except ValueError as exc:   # e.g. AUC of a single class
                row[part] = {"estimate": None, "error": str(exc)}
                done[part] = (None, None, None)
        rows.append(row)
    return rows


def _binary_metrics(n_bins: int, strategy: str) -> list[tuple]:
    from mlcal.metrics import auc, brier, ece, log_loss
    from mlcal.metrics.decomposition import corp_mcb

    return [("ece", f"ECE ({n_bins} {strategy} bins)", partial(ece, n_bins=n_bins,
                                                               strategy=strategy),
             False, "basic"),
            ("corp_mcb", "CORP miscalibration (MCB, Brier)", corp_mcb, False, "basic"),
            ("brier", "Brier score", brier, False, "percentile"),
            ("log_loss", "log loss", log_loss, False, "percentile"),
            ("auc", "ROC AUC", auc, True, "percentile")]


def _multiclass_metrics(n_bins: int, strategy: str) -> list[tuple]:
    from mlcal.metrics.multiclass import (classwise_ece, multiclass_accuracy, multiclass_brier,
                                          multiclass_log_loss, top_label_ece)

    return [("top_label_ece", f"top-label ECE ({n_bins} {strategy} bins)",
             partial(top_label_ece, n_bins=n_bins, strategy=strategy), False, "basic"),
            ("classwise_ece", f"class-wise ECE ({n_bins} {strategy} bins)",
             partial(classwise_ece, n_bins=n_bins, strategy=strategy), False, "basic"),
            ("multiclass_brier", "multiclass Brier score", multiclass_brier, False,
             "percentile"),
            ("log_loss", "log loss", multiclass_log_loss, False, "percentile"),
            ("accuracy", "accuracy", multiclass_accuracy, True, "percentile")]


def _safely(fn: Callable[[], Any]) -> Any:
    """``fn()`` as JSON, or ``{"error": message}`` when the quantity is undefined here (e.g. a
    slope on separated labels)."""
    try:
        out = fn()
    except ValueError as exc:
        return {"error": str(exc)}
    return out.as_dict() if hasattr(out, "as_dict") else out


def _binary_extras(y, p_before, p_after) -> dict[str, Any]:
    from mlcal.metrics.curves import calibration_slope_intercept, integrated_calibration_index
    from mlcal.metrics.decomposition import corp_decomposition

    out: dict[str, Any] = {"decomposition": {}}
    for score in ("brier", "log_loss"):
        out["decomposition"][score] = {
            part: _safely(lambda p=p: corp_decomposition(y, p, score=score))
            for part, p in (("before", p_before), ("after", p_after))}
    out["slope_intercept"] = {part: _safely(lambda p=p: calibration_slope_intercept(
        y, p, eps=1e-12)) for part, p in (("before", p_before), ("after", p_after))}
    out["ici"] = {part: _safely(lambda p=p: integrated_calibration_index(y, p))
                  for part, p in (("before", p_before), ("after", p_after))}
    return out


def _multiclass_extras(y, p_before, p_after, class_names) -> dict[str, Any]:
    from mlcal.metrics.decomposition import (classwise_corp_decomposition,
                                             top_label_corp_decomposition)

    out: dict[str, Any] = {"decomposition": {"top_label": {}, "classwise": {}}}
    for part, p in (("before", p_before), ("after", p_after)):
        out["decomposition"]["top_label"][part] = _safely(
            lambda p=p: top_label_corp_decomposition(y, p))
        cw = _safely(lambda p=p: classwise_corp_decomposition(y, p))
        for c, name in zip(cw.get("per_class", []), class_names):
            c["class"] = name
        out["decomposition"]["classwise"][part] = cw
    counts = np.bincount(y, minlength=len(class_names))
    out["class_counts"] = {str(n): int(c) for n, c in zip(class_names, counts)}
    return out


def calibrator_summary(calibrator) -> dict[str, Any]:
    """Method, parameters, map type/size/domain/transform, the JSON document and, for
    ``auto``, its ``fit_info`` (candidates, CV scores, the choice and why)."""
    m = calibrator.map_
    method = getattr(calibrator, "document_method", "") or calibrator.method_name
    out = {"method": method, "class": type(calibrator).__name__,
           "params": {k: v for k, v in calibrator.get_params(deep=False).items()},
           "map_type": m.kind, "map_size": int(m.size),
           "input_transform": getattr(m, "input_transform", "identity"),
           "domain": None if getattr(m, "domain", None) is None else list(m.domain),
           "document": calibrator.to_dict()}
    selection = getattr(calibrator, "selection_", None)
    if selection is not None:
        out["fit_info"] = selection
    return out


def _check_arrays(y, p_before, p_after, class_names):
    from mlcal._validation import check_binary_forecasts as check_binary
    from mlcal.metrics.multiclass import _check as check_multiclass

    if np.ndim(p_after) == 2:
        yi, pb = check_multiclass(y, p_before)
        pa = check_multiclass(yi, p_after)[1]
        if pa.shape != pb.shape:
            raise ValueError(f"p_before has shape {pb.shape} but p_after {pa.shape}")
        k = pb.shape[1]
        names = [str(j) for j in range(k)] if class_names is None else \
            [str(c) for c in class_names]
        if len(names) != k:
            raise ValueError(f"classes has {len(names)} names for {k} probability columns")
        return yi, pb, pa, names
    yb, pb = check_binary(y, p_before)
    pa = check_binary(yb, p_after)[1]
    return yb, pb, pa, None


def assemble_report(y, p_before, p_after, *, calibrator=None, map_data=None,
                    classes: Sequence | None = None, gate: dict | None = None,
                    title: str = "Calibration report", source: dict | None = None,
                    n_bins: int = DEFAULT_N_BINS, strategy: str = "uniform",
                    n_resamples: int = DEFAULT_REPORT_RESAMPLES, seed: int = 0,
                    confidence: float = 0.95) -> CalibrationReport:
    """Compute everything a calibration report shows (see the module docstring).

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels in {0, 1}; multiclass: class indices ``0 .. K-1``.
    p_before, p_after : array-like of shape (n,) or (n, K)
        Forecasts before and after calibration.
    calibrator : fitted mlcal calibrator, optional
        Adds the method, the map and (``auto``) the candidates' scores.
    map_data : tuple (scores, labels), optional
        Calibration data drawn under the map plot (binary).
    classes : sequence of K labels, optional
        Multiclass: the class names (column order).
    gate : dict, optional
        A gate decision, :meth:`mlcal.mlflow.gate.GateDecision.as_dict`.
    title : str, default="Calibration report"
    source : dict, optional
        Where the data and model came from (e.g. ``{"model": uri, "data": path}``), shown in the
        header; values are shown as text.
    n_bins, strategy
        Binning of the ECEs and of the diagrams' binned points.
    n_resamples, seed, confidence
        The metrics' bootstrap intervals.

    Returns
    -------
    CalibrationReport
    """
    from mlcal import __version__

    yv, pb, pa, names = _check_arrays(y, p_before, p_after, classes)
    if gate is not None and not isinstance(gate, dict):
        raise ValueError(f"gate must be a dict (GateDecision.as_dict()), got "
                         f"{type(gate).__name__}")
    multiclass = names is not None
    table = _metric_table(yv, pb, pa, (_multiclass_metrics if multiclass else _binary_metrics)(
        n_bins, strategy), n_resamples=n_resamples, seed=seed, confidence=confidence)
    summary: dict[str, Any] = {
        "title": str(title), "kind": "multiclass" if multiclass else "binary",
        "n": int(yv.size), "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(
            timespec="seconds"), "mlcal_version": __version__,
        "source": {str(k): str(v) for k, v in (source or {}).items()},
        "settings": {"n_bins": n_bins, "strategy": strategy, "n_resamples": n_resamples,
                     "seed": seed, "confidence": confidence},
        "metrics": table}
    if multiclass:
        summary["classes"] = names
        summary.update(_multiclass_extras(yv, pb, pa, names))
    else:
        summary["base_rate"] = float(np.mean(yv))
        summary.update(_binary_extras(yv, pb, pa))
    if calibrator is not None:
        summary["calibrator"] = calibrator_summary(calibrator)
    if gate is not None:
        summary["gate"] = gate
    return CalibrationReport(summary=summary, y=yv, p_before=pb, p_after=pa, class_names=names,
                             calibrator=calibrator, map_data=map_data)


def is_finite_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
