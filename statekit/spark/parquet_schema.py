"""A local parquet file's Spark schema read from its footer with pyarrow on the driver. Spark's own schema read
of a file runs a job and is the JVM's first parquet use, seconds at a run's start. Only columns whose Spark type
does not depend on a Spark setting are mapped; a file with any other column is left to Spark's read."""

from __future__ import annotations

from typing import Any

from .local_files import local_path


def parquet_spark_schema(uri: str) -> Any | None:
    """The Spark schema Spark's reader gives the parquet file ``uri`` (every field nullable, as Spark's file
    sources make them), or None when the file is not local, cannot be read here or has a column this does
    not map (Spark then reads the schema itself, with its own settings and errors)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.types import StructField, StructType

    path = local_path(uri)
    if path is None:
        return None
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowException, OSError):
        return None
    fields = []
    for field in schema:
        spark_type = _spark_type(field.type)
        if spark_type is None:
            return None
        fields.append(StructField(field.name, spark_type, True))
    return StructType(fields)


def _spark_type(arrow_type: Any) -> Any | None:
    """Spark's type for a top-level parquet column read by pyarrow as ``arrow_type``, where that does not
    depend on a Spark setting (binary as string, timestamps without a zone, INT96, nanoseconds); else None."""
    import pyarrow.types as t
    from pyspark.sql import types as st

    simple = [(t.is_boolean, st.BooleanType), (t.is_int8, st.ByteType), (t.is_int16, st.ShortType),
              (t.is_int32, st.IntegerType), (t.is_int64, st.LongType), (t.is_float32, st.FloatType),
              (t.is_float64, st.DoubleType), (t.is_string, st.StringType), (t.is_large_string, st.StringType),
              (t.is_date32, st.DateType)]
    for matches, spark_type in simple:
        if matches(arrow_type):
            return spark_type()
    if t.is_decimal128(arrow_type):
        return st.DecimalType(arrow_type.precision, arrow_type.scale)
    if t.is_timestamp(arrow_type) and arrow_type.tz is not None and arrow_type.unit in ("s", "ms", "us"):
        return st.TimestampType()
    return None
