"""The JVM side of a classic SparkSession, in one adapter: its SparkContext, Hadoop's FileSystem, Spark's log
and a DataFrame's RDD.

A Spark Connect session has none of these on the client (``runtime.is_connect`` tells the two apart): callers
ask a Connect session through its conf or the DataFrame API instead (``session_kind``), or go without the
accelerator (``accelerator_jvm``). The executor runtime reaches the SparkContext on its own
(``runtime.pyspark_internals``), below this package.
"""

from __future__ import annotations

from typing import Any

from .runtime import spark_context


class ClassicJvm:
    """What statekit asks of a classic session's SparkContext and the JVM behind it."""

    def __init__(self, context: Any) -> None:
        self._context = context

    @property
    def master(self) -> str:
        """The master URL (``spark.master``)."""
        return self._context.master

    @property
    def default_parallelism(self) -> int:
        """Spark's default parallelism."""
        return self._context.defaultParallelism

    def cancel_all_jobs(self) -> None:
        """Cancel every Spark job the session runs."""
        self._context.cancelAllJobs()

    def set_log_level(self, level: str) -> None:
        """Set the level of Spark's log (``ERROR``, ``WARN``, ``OFF``...)."""
        self._context.setLogLevel(level)

    def log_level(self) -> str:
        """The level of Spark's root logger (log4j2's name for it)."""
        return str(self._context._jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel().name())

    def hadoop_path(self, location: str) -> tuple[Any, Any, Any]:
        """Hadoop's ``org.apache.hadoop.fs`` package, ``location`` as its ``Path``, and the ``FileSystem`` that
        path is on (by the session's Hadoop configuration)."""
        hadoop = self._context._jvm.org.apache.hadoop.fs
        path = hadoop.Path(location)
        return hadoop, path, path.getFileSystem(self._hadoop_conf())

    def has_filesystem(self, scheme: str) -> bool:
        """Whether Hadoop has a FileSystem (a connector) for ``scheme://`` locations in this Spark."""
        filesystems = self._context._jvm.org.apache.hadoop.fs.FileSystem
        try:
            filesystems.getFileSystemClass(scheme, self._hadoop_conf())
        except Exception:  # noqa: BLE001 -- py4j wraps Hadoop's UnsupportedFileSystemException
            return False
        return True

    def text_rdd(self, lines: list[str]) -> Any:
        """``lines`` as an RDD of text, one partition (what pyspark's csv and json readers parsed before 4.2)."""
        return self._context.parallelize(lines, 1)

    def _hadoop_conf(self) -> Any:
        return self._context._jsc.hadoopConfiguration()


def classic_jvm(spark: Any) -> ClassicJvm:
    """The JVM side of classic session ``spark`` (the caller told it from a Spark Connect one)."""
    return ClassicJvm(spark.sparkContext)


def rdd_partitions(df: Any) -> int:
    """How many partitions classic DataFrame ``df``'s plan has (from its physical plan's RDD: no job runs, and no
    Python RDD of its rows is made for the asking)."""
    return df._jdf.queryExecution().toRdd().getNumPartitions()


def accelerator_jvm(spark: Any, what: str) -> ClassicJvm | None:
    """``spark``'s JVM side for accelerator ``what``; None, said once, on a Spark Connect session, which has none."""
    context = spark_context(spark, what)
    return None if context is None else ClassicJvm(context)
