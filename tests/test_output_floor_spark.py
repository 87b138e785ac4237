"""The output floor of sigmoid and beta maps as a Spark SQL column: predict's bits."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from support.spark import local_spark

from mlcal.maps import BetaMap, SigmoidMap

pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def spark():
    session = local_spark()
    yield session
    session.stop()


def test_floored_maps_equal_predict_bit_for_bit(spark):
    from mlcal.spark import calibrated_column

    rng = np.random.default_rng(8)
    s = np.concatenate([[0.0, 1.0, 2.0 ** -40, 0.5, -30.0, 30.0], rng.random(60),
                        rng.normal(0.0, 4.0, 30)])
    df = spark.createDataFrame(pd.DataFrame({"s": s}))
    maps = {"sigmoid": SigmoidMap(-30.0, 3.0, 1.0 / 1202.0),
            "beta": BetaMap(3.0, 2.5, 0.1, 1.0 / 402.0)}
    out = df.select(*[calibrated_column(m, "s", exact=True).alias(k)
                      for k, m in maps.items()]).toPandas()
    for name, m in maps.items():
        want = m(s)
        assert ((want == m.floor) | (want == 1.0 - m.floor)).any(), name   # the clip acts
        got = out[name].to_numpy(dtype=np.float64)
        assert np.array_equal(got.view(np.int64), want.view(np.int64)), name
