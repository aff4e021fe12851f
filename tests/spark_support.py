"""Helpers of the Spark tests: sample input, the output as sorted tuples, Spark's own session windows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from statekit.clickstream import Click, generate_clickstream
from statekit.jobs import write_clickstream

COLUMNS = ["user_id", "window_start", "window_end", "sum_value", "count"]
GAP, DELAY = "30s", "10s"


def clickstream(events: int = 3000, keys: int = 60, seed: int = 7) -> list[Click]:
    return generate_clickstream(events, keys, seed=seed, max_disorder_ms=5000)


def write_input(clicks: list[Click], directory: Path, files: int, fmt: str = "csv") -> Path:
    write_clickstream(clicks, directory, files=files, fmt=fmt)
    return directory


def output_rows(spark: Any, output: Path | str) -> list[tuple]:
    """Every session row written under ``output`` (all epochs), sorted."""
    return sorted(tuple(r) for r in spark.read.parquet(str(output)).select(*COLUMNS).collect())


def spark_sessions(spark: Any, input_dir: Path, gap: str = "30 seconds") -> list[tuple]:
    """Spark's own batch ``session_window`` over the same files, bounds in ms: the independent reference."""
    from pyspark.sql import functions as F

    df = spark.read.option("header", "true").option("inferSchema", "true").csv(str(input_dir))
    w = F.session_window(F.timestamp_millis("ts_ms"), gap).alias("w")
    res = (df.groupBy("user_id", w).agg(F.sum("value").alias("sum_value"), F.count(F.lit(1)).alias("count"))
           .select("user_id", F.unix_millis("w.start"), F.unix_millis("w.end"), "sum_value", "count"))
    return sorted(tuple(r) for r in res.collect())
