"""Spark's own log, silenced while a run stops on purpose.

A Ctrl-C that lands after Spark planned a batch refuses that batch from ``foreachBatch`` (it is left whole
for the next run), and Spark logs any batch that raises as a failed query, with two stack traces. The
stop is deliberate, so the log is turned off for it and set back once the query has stopped.
"""

from __future__ import annotations

from typing import Any


class SparkLogSilence:
    """Turns Spark's log off (``silence``, from any thread) and back to its earlier level (``restore``)."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.previous: str | None = None

    def silence(self) -> None:
        if self.previous is not None:
            return
        try:
            jvm = self.spark.sparkContext._jvm
            self.previous = str(jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel().name())
            self.spark.sparkContext.setLogLevel("OFF")
        except Exception:  # noqa: BLE001 -- no JVM at hand (Spark Connect): the refusal is logged, nothing else changes
            self.previous = None

    def restore(self) -> None:
        if self.previous is not None:
            self.spark.sparkContext.setLogLevel(self.previous)
            self.previous = None
