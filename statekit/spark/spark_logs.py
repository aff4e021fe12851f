"""Spark's own log, silenced while a run stops on purpose.

A Ctrl-C that lands after Spark planned a batch refuses that batch from ``foreachBatch`` (it is left whole
for the next run), and Spark logs any batch that raises as a failed query, with two stack traces. The
stop is deliberate, so the log is turned off for it and set back once the query has stopped. On a Spark
Connect session (no JVM on the driver) the log stays as it is.
"""

from __future__ import annotations

from typing import Any

from .jvm import accelerator_jvm


class SparkLogSilence:
    """Turns Spark's log off (``silence``, from any thread) and back to its earlier level (``restore``)."""

    def __init__(self, spark: Any) -> None:
        self.jvm = accelerator_jvm(spark, "silencing Spark's log on a deliberate stop")
        self.previous: str | None = None

    def silence(self) -> None:
        if self.previous is not None or self.jvm is None:
            return
        self.previous = self.jvm.log_level()
        self.jvm.set_log_level("OFF")

    def restore(self) -> None:
        if self.previous is not None:
            self.jvm.set_log_level(self.previous)
            self.previous = None
