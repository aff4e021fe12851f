"""A SparkSession with statekit's defaults: Java checked first, workers on this Python, quiet UI."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Mapping

from .java import find_java

DAEMON_MODULE = "statekit.spark.runtime.daemon"
"""``spark.python.daemon.module``: workers forked with statekit loaded (named, not imported: the daemon
runs it as ``__main__``, which must not find it imported already)."""
DEFAULT_MASTER = "local[*,4]"  # local mode retries a failed task up to 4 times, like a cluster
QUIET_LOG_CONFIG = Path(__file__).with_name("log4j2-quiet.properties")
"""Spark's log4j2 configuration for a quiet session, from the driver JVM's start: errors only, so that no
WARN banner comes before statekit's own output."""
_SUBMIT_OPTS = "SPARK_SUBMIT_OPTS"
"""Java options spark-submit adds to the JVM it starts (the driver, for a session started here): added to, not
replacing, ``spark.driver.extraJavaOptions`` of the user or the cluster's spark-defaults."""


def spark_session(master: str | None = None, conf: Mapping[str, Any] | None = None, app_name: str = "statekit",
                  quiet: bool = True) -> Any:
    """Get or create the SparkSession; ``master`` default ``local[*,4]``; ``conf`` adds Spark settings
    (``spark.statekit.*`` included); ``quiet``: Spark logs errors only (else warnings too). Raises
    ``JavaNotFoundError`` before Spark starts without Java."""
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
    options = os.environ.get(_SUBMIT_OPTS)
    if quiet and "log4j2.configurationFile" not in (options or ""):
        os.environ[_SUBMIT_OPTS] = f"{options or ''} -Dlog4j2.configurationFile={QUIET_LOG_CONFIG.as_uri()}".strip()
    try:
        spark = builder.getOrCreate()
    finally:  # the option is for the JVM started here, not for processes this one starts later
        if options is None:
            os.environ.pop(_SUBMIT_OPTS, None)
        else:
            os.environ[_SUBMIT_OPTS] = options
    spark.sparkContext.setLogLevel("ERROR" if quiet else "WARN")
    return spark
