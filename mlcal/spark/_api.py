"""The public entry points of :mod:`mlcal.spark`: ``fit`` and ``calibrated_column``."""

from __future__ import annotations

from typing import Any, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from sklearn.base import clone

from mlcal.calibrators.base import BaseCalibrator
from mlcal.calibrators.catalog import get_calibrator
from mlcal.calibrators.output_floor import represented_rows
from mlcal.calibrators.segmented import SegmentedCalibrator
from mlcal.maps import CalibrationMap, map_from_dict
from mlcal.maps.binary import rounded_scores_clamp
from mlcal.maps.segmented import SEGMENTED_KIND, SegmentedMap
from mlcal.spark._expressions import expit_column, map_column
from mlcal.spark._grid import grid_error
from mlcal.spark._segmented import segmented_column
from mlcal.spark._segmented_fit import fit_segmented
from mlcal.spark._stats import DEFAULT_MAX_DISTINCT, collect_statistics


def fit(df: DataFrame, score_col: str, label_col: str, method: str | BaseCalibrator = "isotonic",
        weight_col: str | None = None, grid=None, *,
        max_distinct: int | None = DEFAULT_MAX_DISTINCT,
        segment_columns: Sequence[str] | None = None,
        **params: Any) -> BaseCalibrator | SegmentedCalibrator:
    """Fit a calibrator on a Spark DataFrame: statistics in Spark, the fit on the driver.

    A frame of at most ``max_distinct`` rows is collected as it is (one Arrow transfer, no
    shuffle) and fitted on the driver; a larger one is aggregated exactly in Spark first.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        The calibration set.
    score_col, label_col : str
        Numeric column of uncalibrated scores (finite, not null) and of 0/1 labels (numeric or
        boolean).
    method : str or BaseCalibrator, default="isotonic"
        A registered method name (``mlcal.available_calibrators()``) or an unfitted calibrator
        whose parameters are used (it is not modified).
    weight_col : str, optional
        Non-negative finite sample weights.
    grid : int or array-like, optional
        Round the scores to a grid before aggregating: a number of equal cells over the observed
        score range, or strictly increasing cell edges (e.g. uniform in log-odds for
        probabilities: ``scipy.special.expit(np.linspace(-10, 10, 2001))``). Each score becomes
        its cell's midpoint. ``None`` (default): exact, unless the data hold more than
        ``max_distinct`` distinct scores, in which case ``max_distinct`` equal cells are used
        (for probability scores that saturate beyond ``[2^-40, 1 - 2^-40]``, the first and last
        refined by one cell per binade down to the data's extremes) and a
        :class:`~mlcal.spark.ScoreGridWarning` is issued. With a grid, the score clamp of the
        logit-family maps (beta, platt-logit, temperature, quadratic) is the in-memory fit's,
        from the exact extremes of the rows, not from the midpoints (docs/spark.md).
    max_distinct : int or None, default=1_000_000
        Most distinct scores aggregated exactly; ``None`` never switches to a grid.
    segment_columns : sequence of str, optional
        Fit a :class:`~mlcal.SegmentedCalibrator` (``method`` is its shared method, ``params``
        its parameters; ``n_folds`` defaults to None here) from per-segment statistics
        aggregated in Spark: equal to the in-memory fit with the same parameters to rounding,
        see :mod:`mlcal.spark._segmented_fit` and docs/segments.md. ``grid`` and
        ``max_distinct`` do not apply.
    **params
        Parameters of ``method`` when it is a name.

    Returns
    -------
    BaseCalibrator
        Fitted. Without a grid, its ``to_json()`` is byte-identical to
        ``get_calibrator(method, **params).fit(scores, y, sample_weight)`` on the same rows;
        with one, to that fit of the rounded rows under the rows' own logit clamp.
        ``spark_statistics_`` holds the :class:`~mlcal.spark.SufficientStatistics`; with a grid,
        ``grid_error_`` is the largest oscillation of the fitted map over a grid cell, which
        bounds ``|predict(s) - predict(cell midpoint of s)|`` for every score in the range.
    """
    if segment_columns is not None:
        if grid is not None:
            raise ValueError("grid does not apply with segment_columns")
        return fit_segmented(df, score_col, label_col, segment_columns, method, weight_col,
                             **params)
    if isinstance(method, BaseCalibrator):
        if params:
            raise TypeError("pass parameters either on the calibrator or as keywords, not both")
        cal = clone(method)
    elif isinstance(method, str):
        cal = get_calibrator(method, **params)
    else:
        raise TypeError(f"method must be a method name or a calibrator, got "
                        f"{type(method).__name__}")
    cal._validate_params()
    stats = collect_statistics(df, score_col, label_col, weight_col, grid=grid,
                               max_distinct=max_distinct)
    # the floor of the rows aggregated; on a grid, the logit-family clamp of the rows
    # themselves rather than of their cell midpoints
    with represented_rows(stats.n_weighted_rows), rounded_scores_clamp(stats.clamps):
        cal.fit(stats.scores, stats.labels, stats.weights)
    cal.spark_statistics_ = stats
    if stats.grid is not None:
        cal.grid_error_ = grid_error(cal.map_, stats.grid)
    return cal


def _as_map(calibrator) -> CalibrationMap | SegmentedMap:
    if isinstance(calibrator, (BaseCalibrator, SegmentedCalibrator)):
        calibrator._check_fitted()
        return calibrator.map_
    if isinstance(calibrator, dict):
        if calibrator.get("type") == SEGMENTED_KIND:
            return SegmentedMap.from_dict(calibrator)
        return map_from_dict(calibrator)
    if isinstance(calibrator, (CalibrationMap, SegmentedMap)):
        return calibrator
    raise TypeError(f"calibrated_column needs a fitted binary calibrator, a calibration map or "
                    f"a map dict, got {type(calibrator).__name__}")


def calibrated_column(calibrator: BaseCalibrator | SegmentedCalibrator | CalibrationMap |
                      SegmentedMap | dict, score_col: str | Column, *, exact: bool = False,
                      segment_columns: Sequence[str | Column] | None = None) -> Column:
    """The calibrated probability of ``score_col`` as a Spark SQL expression (no UDF).

    Parameters
    ----------
    calibrator : BaseCalibrator, SegmentedCalibrator, CalibrationMap, SegmentedMap or dict
        A fitted binary or segmented calibrator, its ``map_``, or a map's ``to_dict()``.
    score_col : str or Column
        The uncalibrated scores (cast to double).
    segment_columns : sequence of str or Column, optional
        Segmented maps only: the segment columns, one per ``map_.column_names`` entry and in
        that order; default: the columns of those names. A row whose segment was not fitted
        (or holds a null or NaN segment value) gets the shared map's probability bit for bit,
        or, under ``unseen="raise"``, fails the Spark job with an error naming the key
        (``raise_error``). A column of another type than its keys' (a number for string keys,
        a string for integer keys, a non-integral float, ...) fails it too, by name; see
        docs/segments.md.
    exact : bool, default=False
        ``False`` (the fast default): the logistic function that ends a sigmoid or beta map
        (Platt, beta, Platt on log-odds, temperature scaling) or an offset map (whose inner map stays exact) is evaluated with Spark's
        native, code-generated ``exp``, within ``FAST_EXPIT_ULPS`` = 8 ulps of ``predict``
        (``|column - predict| <= 8 * ulp(predict)``, i.e. at most ``8.9e-16`` for a
        probability; derived in docs/spark.md, measured at most 2 ulps, tested on every map
        type). Step and linear maps (isotonic, histogram, ENIR, BBQ, ELiTE, ...) and the
        ``"sigmoid"`` input transform are bit-identical to ``predict`` either way (a step
        map is discontinuous, so no error is allowed in its input). ``True``: bit-identical
        for every map type, through mlcal's deterministic exp/log written in SQL arithmetic
        (run by Spark's interpreter: about 50x slower for sigmoid maps on 1e6 rows).

    Returns
    -------
    pyspark.sql.Column
        ``predict(score)`` (float64, within the bound above, bit for bit when ``exact``) for
        finite scores, including the map's ``input_transform``; ``null`` for a null, NaN or
        infinite score (where ``predict`` raises).
    """
    m = _as_map(calibrator)
    s = (F.col(score_col) if isinstance(score_col, str) else score_col).cast("double")
    finite = ~(F.isnan(s) | (F.abs(s) == float("inf")))
    u = expit_column(s) if m.input_transform == "sigmoid" else s
    if isinstance(m, SegmentedMap):
        names = m.column_names if segment_columns is None else list(segment_columns)
        if len(names) != len(m.column_names):
            raise ValueError(f"segment_columns has {len(names)} column(s); this map keys on "
                             f"{len(m.column_names)}: {m.column_names}")
        cols = [F.col(c) if isinstance(c, str) else c for c in names]
        return F.when(s.isNotNull() & finite, segmented_column(m, u, cols, exact))
    if segment_columns is not None:
        raise ValueError(f"segment_columns is for segmented maps; this is a {m.kind!r} map")
    return F.when(s.isNotNull() & finite, map_column(m, u, exact))
