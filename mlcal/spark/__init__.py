"""Calibration at Spark scale (``mlcal[spark]``): fit from a Spark DataFrame, score in Spark.

* :func:`fit` aggregates the calibration set in Spark to its sufficient statistics (per
  distinct score and label: the exact count or exact weight sum) and fits locally on them; the
  fitted calibrator's JSON is byte-identical to fitting the same rows in memory. Above
  ``max_distinct`` distinct scores (or with ``grid=``) the scores are first rounded to a grid
  (see docs/spark.md for the error bound).
* :func:`calibrated_column` turns a fitted calibrator (or map) into a Spark SQL column
  expression built from Spark's own functions (no Python workers): by default within 8 ulps
  of ``predict`` (bit-identical for step and linear maps), with ``exact=True`` bit for bit.

Scoring a whole logged model (base model and calibrator) goes through MLflow's
``mlflow.pyfunc.spark_udf`` on the ``mlcal`` flavour (see docs/spark.md).
"""

from __future__ import annotations

from mlcal._optional import require

require("spark", feature="mlcal.spark")

from mlcal.spark._api import calibrated_column, fit  # noqa: E402
from mlcal.spark._grid import GridInfo  # noqa: E402
from mlcal.spark._stats import (DEFAULT_MAX_DISTINCT, ScoreGridWarning,  # noqa: E402
                                SufficientStatistics)

__all__ = ["fit", "calibrated_column", "SufficientStatistics", "GridInfo", "ScoreGridWarning",
           "DEFAULT_MAX_DISTINCT"]
