"""Re-offsetting a fitted calibrator: shift its log-odds by an exact constant.

Three ways to get the offset ``delta`` of an :class:`~mlcal.maps.offset.OffsetMap`:

* given directly (e.g. the estimate a calibration monitor reports);
* from a known prior change (:func:`prior_shift_delta`): a model trained on data with positive
  rate ``train_rate`` (resampled, class-weighted) serves a population with rate ``target_rate``;
  Bayes' rule gives ``p' = r p / (r p + r0 (1 - p))`` with ``r = target/train`` and
  ``r0 = (1 - target)/(1 - train)`` (Saerens, Latinne & Decaestecker 2002; Elkan 2001), i.e.
  ``delta = logit(target_rate) - logit(train_rate)``;
* by maximum likelihood on new labelled rows (:func:`fit_delta`): the 1-D convex problem, solved
  deterministically (:mod:`mlcal._solvers.offset_newton`).

:func:`reoffset` applies it to a fitted binary calibrator, :class:`~mlcal.model.CalibratedModel`
or map and returns a new object; the calibrator keeps its method, and its document records the
offset as its map (``{"type": "offset", "inner": <the method's map>, "delta": ...}``), so saving,
loading, the MLflow flavour, ONNX export, Spark and the Java evaluator serve it unchanged.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from mlcal._solvers.detmath import det_log, det_log1p
from mlcal._solvers.offset_newton import solve_offset
from mlcal._validation import as_labels, as_weights, check_probabilities
from mlcal.maps._core import _BaseMap
from mlcal.maps.offset import OFFSET_INNER_KINDS, OffsetMap


def _rate(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number in (0, 1), got {type(value).__name__}")
    v = float(value)
    if not 0.0 < v < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {v!r}")
    return v


def _logit(p: float) -> float:
    return det_log(p) - det_log1p(-p)


def prior_shift_delta(train_rate: float, target_rate: float) -> float:
    """The offset that moves probabilities calibrated at positive rate ``train_rate`` to
    positive rate ``target_rate``: ``logit(target_rate) - logit(train_rate)``.

    Parameters
    ----------
    train_rate, target_rate : float in (0, 1)
        Positive-class rate of the data the probabilities are calibrated for, and of the
        population they will serve.

    Returns
    -------
    float
    """
    return _logit(_rate(target_rate, "target_rate")) - _logit(_rate(train_rate, "train_rate"))


def fit_delta(p, y, sample_weight=None) -> float:
    """Maximum-likelihood logit offset for probabilities ``p`` and labels ``y``.

    Maximises ``sum w log Bernoulli(y | expit(logit(p) + delta))``. Rows with ``p`` exactly 0 or 1
    do not depend on ``delta`` and are left out (a finite offset keeps them at 0 or 1).

    Parameters
    ----------
    p : array-like of shape (n,)
        The current probabilities (e.g. a calibrator's predictions on new rows), in [0, 1].
    y : array-like of shape (n,)
        Binary labels in {0, 1}.
    sample_weight : array-like of shape (n,), optional
        Non-negative weights.

    Returns
    -------
    float
        The offset; the same bits on every CPU.

    Raises
    ------
    ValueError
        If no row with ``0 < p < 1`` and positive weight remains, or those rows hold one class
        only (the likelihood then grows without bound).
    """
    p = check_probabilities(p, name="p")
    z = as_labels(y, p.size)
    w = as_weights(sample_weight, p.size)
    keep = (p > 0.0) & (p < 1.0) & (w > 0.0)
    if not keep.any():
        raise ValueError("fit_delta: no row with 0 < p < 1 and positive weight; an offset "
                         "cannot move probabilities of exactly 0 or 1")
    zk = z[keep].astype(np.float64)
    if zk.min() == zk.max():
        raise ValueError(f"fit_delta: the rows with 0 < p < 1 all have label {int(zk[0])}; the "
                         "maximum-likelihood offset is infinite")
    pk = np.ascontiguousarray(p[keep])
    logits = np.array([_logit(float(v)) for v in pk])
    delta, iterations, converged = solve_offset(logits, zk, np.ascontiguousarray(w[keep],
                                                                               dtype=np.float64))
    if not converged or not np.isfinite(delta):
        raise ValueError(f"fit_delta: the offset search did not converge after {iterations} "
                         "iterations")
    return float(delta)


def with_offset(m: _BaseMap, delta: float) -> OffsetMap:
    """``m`` followed by an offset of ``delta``; an offset map gets its delta increased
    (``delta1 + delta2``: the composition of two offsets, exact in real arithmetic)."""
    if isinstance(m, OffsetMap):
        return OffsetMap(m.inner, m.delta + float(delta))
    if getattr(m, "kind", None) not in OFFSET_INNER_KINDS:
        raise ValueError(f"reoffset: only binary maps ({', '.join(OFFSET_INNER_KINDS)}) take an "
                         f"offset, not a {type(m).__name__}")
    return OffsetMap(m, delta)


def _resolve_delta(predict, delta, train_rate, target_rate, rows, y, sample_weight) -> float:
    given = [delta is not None, train_rate is not None or target_rate is not None,
             rows is not None or y is not None]
    if sum(given) != 1:
        raise ValueError("reoffset: give exactly one of delta, (train_rate and target_rate), "
                         "or labelled rows (scores / X and y)")
    if given[0]:
        if isinstance(delta, bool) or not np.isfinite(float(delta)):
            raise ValueError(f"reoffset: delta must be a finite number, got {delta!r}")
        return float(delta)
    if given[1]:
        if train_rate is None or target_rate is None:
            raise ValueError("reoffset: a prior shift needs both train_rate and target_rate")
        return prior_shift_delta(train_rate, target_rate)
    if rows is None or y is None:
        raise ValueError("reoffset: fitting the offset needs both the rows and y")
    return fit_delta(predict(rows), y, sample_weight)


def reoffset(target: Any, delta: float | None = None, *, train_rate: float | None = None,
             target_rate: float | None = None, scores=None, X=None, y=None,
             sample_weight=None) -> Any:
    """A copy of a fitted binary calibrator, :class:`~mlcal.model.CalibratedModel` or map whose
    probabilities are shifted on the log-odds scale: ``expit(logit(p) + delta)``.

    Give exactly one of

    * ``delta``: the offset itself;
    * ``train_rate`` and ``target_rate``: the known-prior correction
      (:func:`prior_shift_delta`);
    * labelled rows: ``scores`` and ``y`` for a calibrator or map, ``X`` and ``y`` for a
      CalibratedModel; the offset is then fitted by maximum likelihood on the current
      predictions (:func:`fit_delta`).

    A target that already carries an offset gets the two added (one offset stage).

    Parameters
    ----------
    target : BaseCalibrator, CalibratedModel or binary calibration map
        Fitted; the original is not modified.
    delta : float, optional
    train_rate, target_rate : float in (0, 1), optional
    scores, X, y, sample_weight : array-like, optional

    Returns
    -------
    An object of the same type as ``target``.
    """
    from mlcal.calibrators.base import BaseCalibrator
    from mlcal.model import CalibratedModel

    if isinstance(target, CalibratedModel):
        if scores is not None:
            raise ValueError("reoffset: a CalibratedModel takes feature rows X, not scores")
        target._check_fitted()
        if target._multiclass:
            raise ValueError("reoffset: multiclass models are not supported (binary only)")
        if target.segment_columns is not None:
            # one offset would have to move every segment's offset and the shared map's
            # fallback for unseen segments alike; the segmented map has no such stage
            raise ValueError(f"reoffset: segmented models (segment_columns="
                             f"{target.segment_columns!r}) are not supported; refit the "
                             "segmented calibrator on recent rows instead")
        if target._multicalibrated:
            raise ValueError("reoffset: multicalibrated models (a Multicalibration calibrator) "
                             "are not supported; refit the multicalibration on recent rows "
                             "instead")
        d = _resolve_delta(lambda rows: target.predict_proba(rows)[:, 1], delta, train_rate,
                           target_rate, X, y, sample_weight)
        out = copy.copy(target)
        out.calibrator_ = reoffset(target.calibrator_, d)
        return out
    if X is not None:
        raise ValueError("reoffset: X is for a CalibratedModel; give a calibrator or map scores")
    if isinstance(target, BaseCalibrator):
        target._check_fitted()
        d = _resolve_delta(target.predict, delta, train_rate, target_rate, scores, y,
                           sample_weight)
        out = copy.deepcopy(target)
        out.map_ = with_offset(target.map_, d)
        return out
    if isinstance(target, _BaseMap):
        d = _resolve_delta(target, delta, train_rate, target_rate, scores, y, sample_weight)
        return with_offset(target, d)
    raise TypeError(f"reoffset: expected a fitted binary calibrator, CalibratedModel or map, got "
                    f"{type(target).__name__}")
