"""A local Spark session for the tests (conftest.py's `spark` fixture: one per test process), or a
skip with the reason.

Spark needs a Java runtime. Without one the Spark tests are skipped, unless
``MLCAL_REQUIRE_JAVA=1`` (set in CI), where a missing Java or pyspark is a failure.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest


def _missing(reason: str):
    if os.environ.get("MLCAL_REQUIRE_JAVA") == "1":
        pytest.fail(f"{reason}, and MLCAL_REQUIRE_JAVA=1 requires the Spark tests to run")
    pytest.skip(f"{reason}: local Spark needs a JDK 17+ (apt install openjdk-17-jre-headless) "
                "and pyspark (pip install -e '.[spark]'); set MLCAL_REQUIRE_JAVA=1 to fail "
                "instead of skipping")


def local_spark():
    """Start (or reuse) a quiet 2-core local session with one shuffle partition per core, no UI.

    Python workers (MLflow's spark_udf) run this interpreter, not whatever ``python3`` is on
    PATH (which lacks the test environment's packages)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (java_home and os.path.exists(
            os.path.join(java_home, "bin", "java"))):
        _missing("no Java runtime (java is not on PATH and JAVA_HOME is unset)")
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        _missing("pyspark is not installed")
    spark = (SparkSession.builder.master("local[2]").appName("mlcal-tests")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.default.parallelism", "2")
             .config("spark.driver.memory", "2g")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark
