"""The local Spark session the Spark benchmark scripts share (quiet: no UI, no progress bars,
errors only), with this interpreter as the workers' Python."""

from __future__ import annotations

import os
import sys


def local_session(app: str, cores: int = 2, memory: str | None = None,
                  shuffle_partitions: int | None = None):
    """A ``local[cores]`` SparkSession named ``app``; ``memory`` sets the driver's memory and
    ``shuffle_partitions`` Spark SQL's shuffle partitions when given."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(f"local[{cores}]").appName(app)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    if memory is not None:
        builder = builder.config("spark.driver.memory", memory)
    if shuffle_partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
