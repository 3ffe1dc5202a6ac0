"""One small local Spark session for every Spark test (starting one takes seconds).

Keep it small: the machine is shared, so ``local[2]``, two shuffle
partitions, no UI. Python workers must run this interpreter (the venv), not
whatever ``python3`` is on PATH. All Spark tests carry the ``xdist_group``
mark so that ``pytest -n 2 --dist loadgroup`` keeps them on one worker (one
JVM); with plain ``--dist load`` each worker that gets one starts its own.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest


def _spark_available() -> str | None:
    """Why Spark cannot run here, or None."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime"
    try:
        import pyspark
    except ImportError:
        return "pyspark is not installed"
    if int(pyspark.__version__.split(".")[0]) < 4:
        return f"pyspark {pyspark.__version__} < 4.0"
    return None


@pytest.fixture(scope="session")
def spark():
    reason = _spark_available()
    if reason:
        pytest.skip(f"Spark tests need Java and pyspark >= 4: {reason}")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("matchsql-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.numRecentProgressUpdates", "10")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
