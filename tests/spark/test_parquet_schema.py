"""A local parquet file's schema read from its footer on the driver equals Spark's own read of it, and every
file whose Spark types would depend on a setting (or cannot be read here) is left to Spark."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from statekit.spark.files import read_files
from statekit.spark.local_files import local_path
from statekit.spark.parquet_schema import parquet_spark_schema

pytestmark = pytest.mark.spark

MAPPED = {
    "flag": pa.array([True, None]), "tiny": pa.array([1, None], pa.int8()), "small": pa.array([1, 2], pa.int16()),
    "int": pa.array([1, None], pa.int32()), "long": pa.array([1, 2], pa.int64()),
    "single": pa.array([1.5, None], pa.float32()), "double": pa.array([1.5, 2.0], pa.float64()),
    "text": pa.array(["a", None]), "large text": pa.array(["a", "b"], pa.large_string()),
    "day": pa.array([dt.date(2024, 1, 1), None], pa.date32()),
    "price": pa.array([decimal.Decimal("1.25"), None], pa.decimal128(9, 2)),
    "big price": pa.array([decimal.Decimal("1.25"), None], pa.decimal128(30, 4)),
    "ts_s": pa.array([0, 1], pa.timestamp("s", tz="UTC")), "ts_ms": pa.array([0, 1], pa.timestamp("ms", tz="UTC")),
    "ts_us": pa.array([0, None], pa.timestamp("us", tz="Europe/Paris")),
}
"""A column of every type the footer read maps, nulls in some (parquet OPTIONAL) and none in others."""

LEFT_TO_SPARK = {
    "binary": pa.array([b"a", b"b"]),  # a string or not by spark.sql.parquet.binaryAsString
    "local time": pa.array([0, 1], pa.timestamp("ms")),  # TimestampNTZ or not by a setting
    "nanos": pa.array([0, 1], pa.timestamp("ns", tz="UTC")),  # refused or a long by a setting
    "list": pa.array([[1], [2, 3]]),
    "unsigned": pa.array([1, 2], pa.uint32()),
}


def test_the_footer_read_equals_sparks_own_for_every_mapped_type(spark, tmp_path):
    path = tmp_path / "all.parquet"
    table = pa.table(MAPPED)
    pq.write_table(table.cast(pa.schema([pa.field(n, t.type, nullable=t.null_count > 0) for n, t in MAPPED.items()])),
                   path)
    assert parquet_spark_schema(f"file:{path}") == spark.read.parquet(str(path)).schema
    assert parquet_spark_schema(str(path)) == spark.read.parquet(str(path)).schema


@pytest.mark.parametrize("column", sorted(LEFT_TO_SPARK))
def test_a_file_with_a_column_of_a_setting_dependent_type_is_left_to_spark(tmp_path, column):
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"k": pa.array(["a", "b"]), column: LEFT_TO_SPARK[column]}), path)
    assert parquet_spark_schema(str(path)) is None


def test_locations_not_read_here_are_left_to_spark(tmp_path):
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")
    assert parquet_spark_schema(str(broken)) is None
    assert parquet_spark_schema(str(tmp_path / "missing.parquet")) is None
    assert local_path("s3a://bucket/part-0.parquet") is None
    spaced = tmp_path / "a b.parquet"
    spaced.write_bytes(b"")
    assert local_path(f"file:{tmp_path}/a%20b.parquet") == str(spaced)


def test_read_files_gives_sparks_schema_and_rows_either_way(spark, tmp_path):
    """The footer-read schema drives the stream as Spark's own read would: the same rows come back; a file
    Spark must read itself (a binary column) still works."""
    for name, extra in (("mapped", MAPPED["double"]), ("left", LEFT_TO_SPARK["binary"])):
        directory = tmp_path / name
        directory.mkdir()
        pq.write_table(pa.table({"user": ["u1", "u2"], "t": pa.array([5, 7], pa.int64()), "x": extra}),
                       directory / "part-0.parquet")
        read = read_files(spark, str(directory), fmt=None, time="t", required=[("user", "key")], stream=False)
        df, schema, kind = read.df, read.schema, read.kind
        assert read.reason is None
        assert schema == spark.read.parquet(str(directory)).schema
        assert kind == schema["t"].dataType
        assert sorted(map(tuple, df.collect())) == sorted(map(tuple, spark.read.parquet(str(directory)).collect()))
