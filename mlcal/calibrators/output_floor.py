"""The output floor of binary calibrators: no fitted map returns exactly 0 or 1.

A calibration set of ``n`` rows cannot show that a probability is below ``1 / (2 (n + 1))``:
that is the Jeffreys posterior mean ``(k + 1/2) / (m + 1)`` of a group of ``m <= n`` rows that
are all negative (``k = 0``) at its most extreme, ``m = n``. So every binary calibrator clips its
fitted map to ``[floor, 1 - floor]`` with

``floor = 1 / (2 (n + 1))``, ``n = max(rows of positive weight, total weight)``

(the total weight makes integer weights count as the rows they stand for, the row count keeps
fractional weights from shrinking ``n``; the total is summed correctly rounded, so the floor has
the same bits on every machine). It is the binary case of the multiclass structured scalings'
uniform mixture of weight ``1 / (n + 1)``, whose smallest probability is ``1 / (K (n + 1))``.

How each map kind carries the floor (see :func:`floor_map`):

* :class:`~mlcal.maps.StepMap` and :class:`~mlcal.maps.LinearMap`: at fit time a value of
  exactly 0 becomes ``min(floor, smallest positive value of the map)`` and a value of exactly 1
  ``max(1 - floor, largest value below 1)`` (interpolation between such values stays inside
  (0, 1)); every other value keeps its bits, a non-decreasing map stays non-decreasing, and
  no new field is needed. A map without a value of 0 or 1 is returned unchanged, so its JSON
  keeps its bytes. (Values strictly between 0 and the floor, which smoothing methods such as
  BBQ or ELiTE can fit, are not exact bounds and are kept.)
* :class:`~mlcal.maps.SigmoidMap`, :class:`~mlcal.maps.BetaMap` and
  :class:`~mlcal.maps.QuadraticMap`: the map records ``floor``
  and clips its output (every route -- ``predict``, ONNX, Spark, the Java evaluator -- clips
  with ``min(max(p, floor), 1 - floor)``); the field is set only when the map's range over all
  its possible inputs leaves ``[floor, 1 - floor]``.

The ``bound_smoothing`` parameter of the binning methods is a stronger, per-bin version of the
same rule (each bin at 0 or 1 takes its own Beta posterior mean); the floor is the guarantee
every method gives.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

import dataclasses
from functools import singledispatch

import numpy as np

from mlcal._solvers.detmath import det_expit_array
from mlcal._solvers.ties import exact_group_sums
from mlcal.maps import (BetaMap, CalibrationMap, LinearMap, QuadraticMap, SigmoidMap,
                        StepMap)
from mlcal.maps.binary import logit_clamped


#: rows the weights stand for, when a fit is given aggregated rows (the Spark routes collect
#: one row per distinct (score, label[, weight]) with a count folded into its weight); None: the
#: weights' own nonzero entries are the rows
_REPRESENTED_ROWS: ContextVar[float | None] = ContextVar("mlcal_represented_rows", default=None)


@contextmanager
def represented_rows(n: float | None):
    """Within the block, :func:`data_floor` counts ``n`` rows with positive weight instead of
    the nonzero entries of the weights it is given: a fit on aggregated rows then gets the floor
    of the rows they aggregate. ``None``: the weights' own entries count, also inside an outer
    block (``auto``'s fold fits: each fold's floor is its own training rows', as in memory)."""
    token = _REPRESENTED_ROWS.set(None if n is None else float(n))
    try:
        yield
    finally:
        _REPRESENTED_ROWS.reset(token)


def data_floor(w: np.ndarray) -> float:
    """``1 / (2 (n + 1))`` for a calibration set with weights ``w`` (see the module notes).

    Parameters
    ----------
    w : ndarray of shape (n,)
        Non-negative finite sample weights (validated).

    Returns
    -------
    float
        The floor, in ``(0, 1/4]``.
    """
    w = np.ascontiguousarray(w, dtype=np.float64)
    rows = _REPRESENTED_ROWS.get()
    count = float(np.count_nonzero(w)) if rows is None else rows
    # the correctly rounded total (numba kernel): the same bits in any row order, on any CPU
    total = float(exact_group_sums(w, np.zeros(1, dtype=np.int64))[0]) if w.size else 0.0
    return 1.0 / (2.0 * (max(count, total) + 1.0))


@singledispatch
def floor_map(m: CalibrationMap, floor: float) -> CalibrationMap:
    """``m`` with its output kept in ``[floor, 1 - floor]`` (one registration per binary map
    kind; other kinds are returned unchanged)."""
    return m


def _lift_bound_values(m, floor: float):
    """Values of exactly 0 become ``min(floor, smallest positive value)``, values of exactly 1
    ``max(1 - floor, largest value below 1)``; all others keep their bits (so a
    non-decreasing map stays non-decreasing, and a map without 0 or 1 is returned as is)."""
    v = m.values
    zero, one = v == 0.0, v == 1.0
    if not (zero.any() or one.any()):
        return m
    inside = v[~zero & ~one]
    lo = min(floor, float(inside.min())) if inside.size else floor
    hi = max(1.0 - floor, float(inside.max())) if inside.size else 1.0 - floor
    return dataclasses.replace(m, values=np.where(zero, lo, np.where(one, hi, v)))


@floor_map.register
def _(m: StepMap, floor: float) -> CalibrationMap:
    return _lift_bound_values(m, floor)


@floor_map.register
def _(m: LinearMap, floor: float) -> CalibrationMap:
    return _lift_bound_values(m, floor)


def _needs_floor(m: SigmoidMap | BetaMap, probes: np.ndarray, floor: float) -> bool:
    p = dataclasses.replace(m, floor=0.0)._evaluate(probes)
    return bool(p.min() < floor or p.max() > 1.0 - floor)


@floor_map.register
def _(m: SigmoidMap, floor: float) -> CalibrationMap:
    if m.input_transform == "identity":
        # margins are unbounded: any slope reaches 0 and 1
        needed = m.a != 0.0 or _needs_floor(m, np.zeros(1), floor)
    else:   # scores expit(margin) lie in [0, 1]: the extremes are at the ends
        needed = _needs_floor(m, np.array([0.0, 1.0]), floor)
    return dataclasses.replace(m, floor=floor) if needed else m


@floor_map.register
def _(m: BetaMap, floor: float) -> CalibrationMap:
    # the clamped score lies in the map's clamp [lo, hi] (by default [BETA_EPS, 1 - BETA_EPS],
    # wider where the calibration scores saturate); the log-odds z(s) is monotone there unless
    # a and b have opposite signs, when its one extremum is at s = a / (a - b)
    lo, hi = m.clamp
    probes = [lo, 0.5, hi]
    if m.a != m.b and m.a * m.b < 0.0:
        probes.append(min(max(m.a / (m.a - m.b), lo), hi))
    needed = _needs_floor(m, np.array(probes), floor)
    return dataclasses.replace(m, floor=floor) if needed else m


@floor_map.register
def _(m: QuadraticMap, floor: float) -> CalibrationMap:
    if m.on == "margin":
        # z is unbounded: any a or b reaches 0 or 1 (b != 0 on both sides, else a != 0 on one)
        needed = m.a != 0.0 or m.b != 0.0 or _needs_floor(m, np.zeros(1), floor)
        return dataclasses.replace(m, floor=floor) if needed else m
    # z = logit of the clamped score runs over [z(lo), z(hi)] (the map's clamp) and the
    # quadratic eta(z) is extreme at those ends or at its vertex -a / (2b); the extremes of p
    # are taken on eta evaluated in the map's own order at these z
    z_ends = logit_clamped(np.array(m.clamp), m.clamp)
    zs = list(z_ends)
    if m.b != 0.0:
        vertex = -m.a / (2.0 * m.b)
        if z_ends[0] < vertex < z_ends[1]:
            zs.append(vertex)
    eta = m.log_odds(np.array(zs))
    p = det_expit_array(np.ascontiguousarray(eta))
    needed = bool(p.min() < floor or p.max() > 1.0 - floor)
    return dataclasses.replace(m, floor=floor) if needed else m
