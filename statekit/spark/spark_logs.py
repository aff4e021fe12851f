"""Spark's own log, silenced while a run stops on purpose.

A Ctrl-C that lands after Spark planned a batch refuses that batch from ``foreachBatch`` (it is left whole
for the next run), and Spark logs any batch that raises as a failed query, with two stack traces. The
stop is deliberate, so the log is turned off for it and set back once the query has stopped. On a Spark
Connect session (no JVM on the driver) the log stays as it is.
"""

from __future__ import annotations

from typing import Any

from .runtime import spark_context


class SparkLogSilence:
    """Turns Spark's log off (``silence``, from any thread) and back to its earlier level (``restore``)."""

    def __init__(self, spark: Any) -> None:
        self.context = spark_context(spark, "silencing Spark's log on a deliberate stop")
        self.previous: str | None = None

    def silence(self) -> None:
        if self.previous is not None or self.context is None:
            return
        jvm = self.context._jvm
        self.previous = str(jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel().name())
        self.context.setLogLevel("OFF")

    def restore(self) -> None:
        if self.previous is not None:
            self.context.setLogLevel(self.previous)
            self.previous = None
