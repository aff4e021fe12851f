"""A streaming query whose micro-batches are ``run_keyed``'s epochs, and the empty input of an epoch without one."""

from __future__ import annotations

from typing import Any

from .errors import StopRequested


def run_stream(df: Any, runner: Any, spark_checkpoint: str, trigger: str, interval: str) -> None:
    """Run a streaming query whose batches are epochs until the input is drained (available-now) or a stop is
    requested (Ctrl-C, ``interrupts``; either trigger: the epoch in progress completes, a batch Spark planned
    after it is left whole for the next run, then the query stops)."""
    errors: list[BaseException] = []

    def batch(batch_df: Any, batch_id: int) -> None:
        try:
            runner.run(batch_df, batch_id)
        except BaseException as e:
            errors.append(e)
            if isinstance(e, StopRequested):
                runner.quiet.silence()  # Spark logs a refused batch as a failed query: this stop is deliberate
            raise

    writer = df.writeStream.foreachBatch(batch).option("checkpointLocation", spark_checkpoint)
    writer = writer.trigger(availableNow=True) if trigger == "available-now" else writer.trigger(processingTime=interval)
    query = writer.start()
    try:
        while query.isActive and not runner.stop_requested:
            query.awaitTermination(0.5)
        if runner.stop_requested:
            with runner.busy:  # the epoch in progress finishes; a batch after it sees the stop and is refused
                pass
            runner.quiet.silence()  # stopping interrupts what Spark planned (a broadcast, a batch): Spark logs it as errors
            query.stop()  # not under the lock: stopping waits for a batch Spark planned, which must get the lock to be refused
    except Exception:
        if not errors:
            raise
    finally:
        runner.quiet.restore()
    if errors and not (runner.stop_requested and isinstance(errors[0], StopRequested)):
        raise errors[0]
    if not runner.stop_requested and query.exception() is not None:
        raise RuntimeError(f"streaming query failed: {query.exception()}")


def no_rows(spark: Any, schema: Any) -> Any:
    """An empty DataFrame of ``schema`` in one partition, planned in the JVM (an empty
    ``createDataFrame`` goes through a Python RDD: about a second of Python workers on a final epoch)."""
    from pyspark.sql import functions as F

    return spark.range(0, 0, 1, 1).select(*[F.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields])
