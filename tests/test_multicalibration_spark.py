"""The multicalibration map as a Spark SQL column: Python's bits, at the split thresholds and
for categories never seen in training (#30 item 3)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from test_multicalibration import _segment_data

from mlcal.multicalibration import Multicalibration

pytest.importorskip("pyspark")


def test_spark_column_is_bit_identical_to_python(spark):
    from mlcal.multicalibration.spark_sql import multicalibration_column

    s, y, frame, _ = _segment_data(4000, seed=31)
    cal = Multicalibration(max_iter=12, learning_rate=0.3,
                           validation_fraction=None).fit(s, y, frame)
    m = cal.map_
    # every score/age threshold and its float neighbours, plus random rows and unseen regions
    edges = {0: [], 2: []}
    for tree in m.trees:
        for k, f in enumerate(tree.feature):
            if int(f) in edges:
                edges[int(f)].append(tree.threshold[k])
    rng = np.random.default_rng(32)
    n = 400
    score = rng.uniform(0, 1, n)
    age = rng.normal(size=n)
    e0 = np.clip(np.concatenate([np.nextafter(edges[0], -1), edges[0],
                                 np.nextafter(edges[0], 2)]), 0, 1)[:n // 2]
    e2 = np.concatenate([np.nextafter(edges[2], -np.inf), edges[2],
                         np.nextafter(edges[2], np.inf)])[:n // 2]
    score[:e0.size] = e0
    age[n - e2.size:] = e2
    score[:2] = [0.0, 1.0]
    region = rng.choice(["north", "south", "east", "west", "unseen"], n)
    pdf = pd.DataFrame({"score": score, "region": region, "age": age})
    got = spark.createDataFrame(pdf).select(
        multicalibration_column(cal, "score").alias("p")).toPandas()["p"].to_numpy()
    expected = cal.predict(score, pdf[["region", "age"]])
    np.testing.assert_array_equal(got.view(np.int64), expected.view(np.int64))
