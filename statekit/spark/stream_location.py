"""Where a run keeps Spark's own streaming checkpoint (``--spark-checkpoint``), checked before anything runs, and
the ``spark.statekit.*`` settings of a session that decide it."""

from __future__ import annotations

import os
from typing import Any

from .errors import InputError
from .jvm import classic_jvm
from .runtime import accelerator_off, is_connect
from .settings import statekit_settings
from .spark_checkpoint import BELOW_CHECKPOINT


def spark_settings(spark: Any) -> dict[str, str]:
    """The session's ``spark.statekit.*`` settings, by their short names."""
    conf = spark.conf.getAll
    items = conf() if callable(conf) else conf
    return statekit_settings(dict(items))


def stream_checkpoint(spark: Any, checkpoint: str, spark_checkpoint: str | None = None) -> str:
    """Where a stream on ``checkpoint`` keeps Spark's own checkpoint: ``spark_checkpoint``, else
    ``spark.statekit.spark_checkpoint``, else ``<checkpoint>/_spark`` (``hadoop_checkpoint``)."""
    return hadoop_checkpoint(spark, checkpoint, spark_checkpoint or spark_settings(spark).get("spark_checkpoint"))


def hadoop_checkpoint(spark: Any, checkpoint: str, spark_checkpoint: str | None) -> str:
    """Where Spark's own streaming checkpoint goes: ``spark_checkpoint``, else ``<checkpoint>/_spark``. It
    goes through Hadoop's FileSystem (statekit's own files go through pyarrow): a location whose scheme
    Hadoop has no connector for here is refused before anything runs, naming both ways out (on a classic
    session: Spark Connect has no JVM at hand to ask, and its query fails when it starts)."""
    location = spark_checkpoint or f"{checkpoint.rstrip('/')}/{BELOW_CHECKPOINT}"
    if "://" not in location:
        return os.path.abspath(location)
    scheme = location.split("://", 1)[0]
    if is_connect(spark):
        accelerator_off("the Hadoop connector check of Spark's streaming checkpoint", "a Spark Connect session has no "
                        "JVM on the driver; a location Hadoop cannot write fails when the streaming query starts")
        return location
    if not classic_jvm(spark).has_filesystem(scheme):
        raise InputError(
            f"Spark's streaming checkpoint {location} goes through Hadoop's FileSystem, which has no connector for "
            f"{scheme}:// in this Spark: pass --spark-checkpoint PATH (Spark conf spark.statekit.spark_checkpoint; "
            f"a local or HDFS path, or s3a:// where the Hadoop S3 connector is installed), or add the Hadoop "
            f"connector for {scheme}:// to the cluster; statekit's own state and output stay at {checkpoint}")
    return location
