"""Fitting a :class:`~mlcal.calibrators.segmented.SegmentedCalibrator` from a Spark DataFrame.

Spark aggregates the calibration set to its per-segment statistics: one row per distinct
(segment values, score, label[, weight]) with its row count. The driver fits on those rows with
the counts as frequency weights (times the weight, with a weight column), which the
calibrator treats exactly as repeated rows: the shared map is the in-memory fit's (every
method sees its data through per-score weight sums), and the per-segment offset Newton steps
and the empirical-Bayes shrinkage run on the same sums, added in another order, so they agree
with the in-memory fit to rounding, and the shrunk values to the tolerance of the REML
prior's scalar search (measured 4e-9 relative; tests/test_spark_segmented.py).

Cross-fitting (``n_folds``) assigns folds to aggregated rows, so a group of identical rows
goes to one fold: the result then differs from the in-memory cross-fitted fit (a different
random partition), and the default here is ``n_folds=None`` (in-sample offsets, equal to the
in-memory ``n_folds=None`` fit). Segment values are read by the driver as pandas reads them,
typed as in memory (docs/segments.md).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mlcal.calibrators.output_floor import represented_rows
from mlcal.calibrators.segmented import SegmentedCalibrator
from mlcal.spark._stats import _numeric_column, _to_pandas


def fit_segmented(df: DataFrame, score_col: str, label_col: str,
                  segment_columns: Sequence[str], method: Any = "auto",
                  weight_col: str | None = None, **params: Any) -> SegmentedCalibrator:
    """See :func:`mlcal.spark.fit` (``segment_columns``)."""
    names = list(segment_columns)
    missing = [c for c in names if c not in df.columns]
    if not names or missing:
        raise ValueError(f"segment_columns must name columns of the DataFrame; missing "
                         f"{missing} (columns: {df.columns})")
    params.setdefault("n_folds", None)
    cal = SegmentedCalibrator(method, **params)
    cal._validate_params()
    schema = df.schema
    s = _numeric_column(schema, score_col, "score")
    y = _numeric_column(schema, label_col, "label", allow_bool=True)
    keys = [F.col(c).alias(f"_seg{j}") for j, c in enumerate(names)]
    cols = [*keys, s.alias("_s"), y.alias("_y")]
    if weight_col is not None:
        cols.append(_numeric_column(schema, weight_col, "weight").alias("_w"))
    group = [c for c in ("_s", "_y", "_w") if c != "_w" or weight_col is not None]
    agg = df.select(*cols).groupBy(*[f"_seg{j}" for j in range(len(names))], *group) \
        .agg(F.count(F.lit(1)).alias("_n"))
    pdf = _to_pandas(agg)
    sort = [*group, *[f"_seg{j}" for j in range(len(names))]]
    pdf = pdf.sort_values(sort, kind="stable", na_position="last").reset_index(drop=True)
    counts = pdf["_n"].to_numpy(np.float64)
    weights = counts if weight_col is None else pdf["_w"].to_numpy(np.float64) * counts
    segments = pdf[[f"_seg{j}" for j in range(len(names))]]
    segments.columns = names
    with represented_rows(float(counts[weights > 0].sum())):   # the floor of the rows
        cal.fit(pdf["_s"].to_numpy(np.float64), pdf["_y"].to_numpy(np.float64), segments,
                sample_weight=weights)
    cal.spark_rows_ = int(counts.sum())
    cal.spark_groups_ = int(counts.size)
    return cal
