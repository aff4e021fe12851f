"""A SparkSession with statekit's defaults: Java checked first, workers on this Python, quiet UI."""

from __future__ import annotations

import os
import sys
from typing import Any, Mapping

from .java import find_java

DAEMON_MODULE = "statekit.spark.daemon"
"""``spark.python.daemon.module``: workers forked with statekit loaded (named, not imported: the daemon
runs it as ``__main__``, which must not find it imported already)."""
DEFAULT_MASTER = "local[*,4]"  # local mode retries a failed task up to 4 times, like a cluster


def spark_session(master: str | None = None, conf: Mapping[str, Any] | None = None, app_name: str = "statekit") -> Any:
    """Get or create the SparkSession; ``master`` default ``local[*,4]``; ``conf`` adds Spark settings
    (``spark.statekit.*`` included). Raises ``JavaNotFoundError`` before Spark starts without Java."""
    find_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need this interpreter (statekit installed)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master or "PYSPARK_GATEWAY_PORT" not in os.environ:  # under spark-submit its --master applies
        builder = builder.master(master or DEFAULT_MASTER)
    builder = (builder.config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.python.daemon.module", DAEMON_MODULE))  # workers fork with statekit loaded
    for k, v in (conf or {}).items():
        builder = builder.config(k, str(v))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
