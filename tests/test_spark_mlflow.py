"""Scoring a logged mlcal model in Spark with ``mlflow.pyfunc.spark_udf`` (real local Spark, a
real sqlite MLflow store): a struct of the raw and the calibrated score per row, equal to the
in-memory model; and the SQL column expression applied to the UDF's raw score equals the UDF's
calibrated one bit for bit."""

from __future__ import annotations

import mlflow
import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from mlcal.datasets import make_circular
from mlcal.model import CalibratedModel

FAST_REQS = ["scikit-learn", "numpy", "pandas"]  # explicit: skips slow requirement inference
RESULT_TYPE = "struct<p_calibrated: double, label: bigint, score_uncalibrated: double>"


@pytest.mark.parametrize("method", ["isotonic", "platt"])
def test_spark_udf_struct_matches_the_model_and_the_sql_expression(spark, sqlite_tracking,
                                                                   method):
    from pyspark.sql import functions as F

    import mlcal.mlflow
    from mlcal.spark import calibrated_column

    X, y = make_circular(1500, seed=4)
    order = np.random.default_rng(1).permutation(y.size)
    X, y = X[order], y[order]
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    base = LogisticRegression(C=0.3).fit(df[:500], y[:500])
    model = CalibratedModel(base, method).fit(df[500:1000], y[500:1000])
    with mlflow.start_run():
        info = mlcal.mlflow.log_model(model, name="m", input_example=df[:3],
                                      pip_requirements=FAST_REQS)
    udf = mlflow.pyfunc.spark_udf(spark, info.model_uri, result_type=RESULT_TYPE,
                                  env_manager="local", params={"return_uncalibrated": True})
    test = df[1000:].reset_index(drop=True)
    sdf = spark.createDataFrame(test.assign(row=np.arange(len(test))))
    scored = sdf.select("row", udf(F.struct(*df.columns)).alias("out"))
    scored = scored.select("row", "out.*",
                           calibrated_column(model.calibrator_, "out.score_uncalibrated",
                                             exact=True).alias("sql"),
                           calibrated_column(model.calibrator_, "out.score_uncalibrated")
                           .alias("fast"))
    out = scored.toPandas().sort_values("row")
    p = model.predict_proba(test)[:, 1]
    raw = model.predict_uncalibrated(test)
    assert np.array_equal(out["score_uncalibrated"].to_numpy(), raw)
    assert np.array_equal(out["p_calibrated"].to_numpy(), p)
    assert np.array_equal(out["sql"].to_numpy().view(np.int64), p.view(np.int64))
    # the default (fast) column: within its stated bound of predict
    from mlcal.spark._expressions import FAST_EXPIT_ULPS

    assert np.all(np.abs(out["fast"].to_numpy() - p) <= FAST_EXPIT_ULPS * np.spacing(p))
    labels = model.classes_[(p >= model.threshold).astype(int)]
    assert np.array_equal(out["label"].to_numpy(), labels)
