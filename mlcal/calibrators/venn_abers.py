"""Venn--Abers calibration: inductive (Vovk & Petej 2014) and cross (Vovk, Petej & Fedorova 2015).

Both ``p0(s)`` and ``p1(s)`` are step functions of the test score with breaks only at the
calibration scores (see :mod:`mlcal._solvers.venn_abers`), so the point prediction and the
interval are exact :class:`~mlcal.maps.StepMap` s. Derivation and conventions: docs/venn_abers.md.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from mlcal._solvers.detmath import det_exp_array, det_log_array
from mlcal._solvers.ties import sort_and_collapse
from mlcal._solvers.venn_abers import gap_values
from mlcal.calibrators._params import Integer, IsNone
from mlcal.calibrators.base import MAX_MAP_SIZE_CONSTRAINTS, BaseCalibrator
from mlcal.calibrators.catalog import register_calibrator
from mlcal.maps import DEFAULT_MAX_MAP_SIZE, MapFormatError, StepMap, map_from_dict, reduce_map

#: weight of the test object added to the calibration set (sample weights count rows)
_TEST_WEIGHT = 1.0


def _step(cuts: np.ndarray, values: np.ndarray) -> StepMap:
    """A StepMap without redundant cuts (adjacent bins of equal value are one bin)."""
    keep = values[1:] != values[:-1]
    return StepMap(cuts[keep], np.concatenate((values[:1], values[1:][keep])))


def ivap_maps(c: np.ndarray, ybar: np.ndarray, w: np.ndarray) -> tuple[StepMap, StepMap]:
    """``(p0, p1)`` of the inductive Venn--Abers predictor on collapsed calibration points.

    ``p0`` is right-continuous at a calibration score (a score equal to ``c_k`` gets the value
    of the gap above), which is StepMap's own convention. ``p1`` is left-continuous there, so
    its cuts sit one double above each ``c_k``: no double lies strictly between, hence exact.
    """
    g0 = gap_values(ybar, w, 0.0, _TEST_WEIGHT)
    g1 = gap_values(ybar, w, 1.0, _TEST_WEIGHT)
    up = np.nextafter(c, np.inf)
    finite = np.isfinite(up)   # above the largest double there is nothing left to cut
    p1_values = np.concatenate((g1[:1], g1[1:][finite]))
    return _step(c, g0), _step(up[finite], p1_values)


def _on_union(maps: list[StepMap]) -> tuple[np.ndarray, list[np.ndarray]]:
    """The union of the maps' cuts and every map's value on each bin of that union."""
    cuts = np.unique(np.concatenate([m.thresholds for m in maps]))
    probes = np.concatenate(([-np.inf], cuts))   # one point in each bin (its lowest)
    return cuts, [m.values[np.searchsorted(m.thresholds, probes, side="right")] for m in maps]


def _geometric_mean(rows: list[np.ndarray]) -> np.ndarray:
    """Element-wise geometric mean of non-negative arrays (0 where any is 0)."""
    logs = np.zeros(rows[0].shape)
    zero = np.zeros(rows[0].shape, dtype=bool)
    for r in rows:                      # a fixed order: the folds'
        zero |= r <= 0.0
        logs = logs + det_log_array(np.where(r > 0.0, r, 1.0))
    return np.where(zero, 0.0, det_exp_array(logs / len(rows)))


def _log_loss_merge(g1: np.ndarray, g0c: np.ndarray) -> np.ndarray:
    """``g1 / (g0c + g1)``, the log-loss minimax merge of ``p1`` and ``1 - p0``; 1/2 where
    both vanish (only possible with weights past 2**53, where ``1 - p0`` rounds to 0)."""
    den = g0c + g1
    return np.clip(np.where(den > 0.0, g1 / np.where(den > 0.0, den, 1.0), 0.5), 0.0, 1.0)


@register_calibrator("venn-abers")
class VennAbers(BaseCalibrator):
    """Inductive or cross Venn--Abers predictor, collapsed to a point probability.

    For a test score ``s``, ``p0(s)`` and ``p1(s)`` are the isotonic-regression values at ``s``
    after adding ``(s, label 0)`` and ``(s, label 1)`` to the calibration set (Vovk & Petej 2014).
    The point prediction is the log-loss minimax merge ``p = p1 / (1 - p0 + p1)``; the interval
    ``[p0, p1]`` is available from :meth:`predict_interval`.

    With ``n_folds = K`` (cross Venn--Abers, Vovk, Petej & Fedorova 2015) the distinct scores,
    sorted, are dealt to folds in turn (the ``i``-th smallest to fold ``i mod K``, so folds do not
    depend on row order); each fold is its own inductive predictor, and the point prediction is
    ``GM(p1) / (GM(1 - p0) + GM(p1))`` with ``GM`` the geometric mean over the folds. The
    interval is the envelope ``[min_k p0_k, max_k p1_k]``, which contains that point.

    Parameters
    ----------
    n_folds : int >= 2 or None, default=None
        ``None``: inductive Venn--Abers on the whole calibration set. ``K``: cross Venn--Abers.
    max_map_size : int or None, default=10000
        Cap on the bins of the point map and of each interval map (see
        :func:`mlcal.maps.reduce_map`); ``None`` keeps them exact.

    Attributes
    ----------
    map_ : StepMap
        The point prediction.
    interval_maps_ : tuple of StepMap
        ``(lower, upper)``: ``p0`` and ``p1`` (inductive) or the fold envelope (cross).
    interval_reductions_ : tuple of MapReduction
        What the size cap did to ``lower`` and ``upper``.

    Notes
    -----
    ``sample_weight`` counts rows: an integer weight equals repeating the row, and the test
    object enters with weight 1 in the same units. Weights therefore are not scale-free here
    (scaling them all by ``a`` acts like ``a`` times as many calibration rows).

    Examples
    --------
    >>> from mlcal import VennAbers
    >>> cal = VennAbers().fit([0.1, 0.2, 0.3, 0.4], [0, 1, 0, 1])
    >>> lo, hi = cal.predict_interval([0.25])
    >>> float(lo[0]) <= float(cal.predict([0.25])[0]) <= float(hi[0])
    True
    """

    # p0, p1 and their merge p1 / (1 - p0 + p1) are non-decreasing in exact arithmetic,
    # but the merge (and the folds' geometric means) are rounded: an ulp-level dip is
    # possible in a genuine fit, so monotonicity is not checked on load
    map_kinds = ("step",)
    document_extras = ("interval",)
    _parameter_constraints = {"n_folds": [IsNone(), Integer(2)],
                              "max_map_size": MAX_MAP_SIZE_CONSTRAINTS}

    def __init__(self, n_folds: int | None = None,
                 max_map_size: int | None = DEFAULT_MAX_MAP_SIZE):
        self.n_folds = n_folds
        self.max_map_size = max_map_size

    def fit(self, scores, y, sample_weight=None) -> "VennAbers":
        """Fit (see :meth:`BaseCalibrator.fit`); also builds ``interval_maps_``."""
        super().fit(scores, y, sample_weight)
        raw = self.__dict__.pop("_raw_interval")
        reduced = [reduce_map(m, self._max_map_size()) for m in raw]
        self.interval_reductions_ = tuple(r for _, r in reduced)
        self.interval_maps_ = tuple(
            dataclasses.replace(m, input_transform=self.map_.input_transform,
                                domain=self.map_.domain) for m, _ in reduced)
        return self

    def _fit(self, scores, y, w):
        c, ybar, wsum = sort_and_collapse(scores, y, w)
        if self.n_folds is None:
            p0, p1 = ivap_maps(c, ybar, wsum)
            cuts, (v0, v1) = _on_union([p0, p1])
            self._raw_interval = (p0, p1)
            return _step(cuts, _log_loss_merge(v1, 1.0 - v0))
        k = self.n_folds
        if c.size < k:
            raise ValueError(f"VennAbers(n_folds={k}) needs at least {k} distinct scores with "
                             f"positive weight, got {c.size}")
        fold = np.arange(c.size) % k
        maps = [ivap_maps(c[fold == f], ybar[fold == f], wsum[fold == f]) for f in range(k)]
        cuts, values = _on_union([m for pair in maps for m in pair])
        v0, v1 = values[0::2], values[1::2]
        self._raw_interval = (_step(cuts, np.min(v0, axis=0)), _step(cuts, np.max(v1, axis=0)))
        point = _log_loss_merge(_geometric_mean(v1), _geometric_mean([1.0 - v for v in v0]))
        return _step(cuts, point)

    def predict_interval(self, scores) -> tuple[np.ndarray, np.ndarray]:
        """The Venn--Abers interval ``(lower, upper)`` for ``scores``: ``(p0, p1)`` for the
        inductive predictor, the fold envelope for the cross predictor."""
        self._check_fitted()
        lower, upper = self.interval_maps_
        return lower(scores), upper(scores)

    def _extra_to_dict(self) -> dict[str, Any]:
        lower, upper = self.interval_maps_
        return {"interval": {"lower": lower.to_dict(), "upper": upper.to_dict()}}

    def _extra_from_dict(self, doc: dict) -> None:
        block = doc.get("interval")
        if not isinstance(block, dict) or set(block) != {"lower", "upper"}:
            raise MapFormatError("venn-abers: field 'interval' must be an object with exactly "
                                 "'lower' and 'upper' maps")
        maps = tuple(map_from_dict(block[key]) for key in ("lower", "upper"))
        for key, m in zip(("lower", "upper"), maps):
            if not isinstance(m, StepMap) or m.input_transform != self.map_.input_transform:
                raise MapFormatError(f"venn-abers: interval {key!r} must be a step map with "
                                     f"the point map's input_transform")
        self.interval_maps_ = maps
