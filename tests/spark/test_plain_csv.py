"""A plain csv sample is typed on the driver exactly as Spark's csv inference types it (a differential test against
Spark's reader), anything less plain is left to Spark, and a local input of plain csv is typed without a Spark job."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statekit.spark.files import _OPTIONS
from statekit.spark.plain_csv import plain_csv_schema
from statekit.spark.text_schema import sample_frame
from tests.spark_support import read_one_csv

pytestmark = pytest.mark.spark

_EDGES = ["2147483647", "2147483648", "-2147483648", "-2147483649", "9223372036854775807", "-9223372036854775808",
          "+7", "-0", "007"]
_WORDS = st.builds(lambda first, rest: first + rest, st.sampled_from("abcdeghjkmopqrsuvwxyzABCDEGHJKLMOPQRSUVWXYZ"),
                   st.text("abcdefxyzTEDZ0123456789_:.+-/@#", max_size=8))
_NOT_PLAIN = st.sampled_from(["1.5", " 5", "5 ", "1e5", "NaN", "Infinity", "-Inf", "true", "False", "T10:00",
                              "2024-01-01", "2024-01-01T10:00:00", "\"a,b\"", "a b", "n1", "i2", "9223372036854775808",
                              "0x10", "5d"])
_PLAIN = st.one_of(st.integers(-3_000_000_000, 3_000_000_000).map(str), st.sampled_from(_EDGES), _WORDS, st.just(""))
_VALUE = st.integers(0, 39).flatmap(lambda i: _NOT_PLAIN if i == 0 else _PLAIN)
"""Mostly plain values, so that most samples are typed here and checked against Spark."""
_SAMPLES = st.integers(1, 5).flatmap(lambda width: st.lists(st.lists(_VALUE, min_size=width, max_size=width),
                                                            max_size=6))


def _sparks(spark, lines: list[str]):
    return sample_frame(spark, lines, "csv", dict(_OPTIONS["csv"])).schema


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_SAMPLES)
def test_a_plain_sample_is_typed_as_spark_types_it(spark, rows):
    width = len(rows[0]) if rows else 2
    lines = [",".join(f"c{i}" for i in range(width)), *(",".join(row) for row in rows)]
    plain = plain_csv_schema(lines)
    if plain is not None:
        assert plain == _sparks(spark, lines), lines


@pytest.mark.parametrize("lines", [
    ["a,b", "1,2", "u1,3000000000", "", "x,"],  # INT and STRING, BIGINT, an empty line, a null
    ["a,b,c,d,e", "2147483647,-2147483648,2147483648,-2147483649,9223372036854775807", "0,0,0,0,-9223372036854775808"],
    # INT's bounds and one past each, BIGINT's bounds
    ["user_id,ts_ms,value", "u17,1700000000000,3", "u4,1700000001000,-12"],
    ["a,b"],  # no record: STRING columns
    ["a,b", ","],  # nulls only
])
def test_plain_samples_of_each_kind_are_typed_here_as_by_spark(spark, lines):
    plain = plain_csv_schema(lines)
    assert plain is not None and plain == _sparks(spark, lines)


@pytest.mark.parametrize("lines", [
    [], ["a,a", "1,2"], ["a,A", "1,2"], ["a,b c", "1,2"], ["a,b", "1"], ["a,b", "1,2,3"], ["a,b", "1,2.5"],
    ["a,b", "1, 2"], ["a,b", "true,2"], ["a,b", "x,NaN"], ["a,b", "1,\"2\""], ["a,b", "x\\y,2"], ["a,b", " ,2"],
    ["a,b", "1,99999999999999999999"], ["a,b", "T12:00,1"],
])
def test_a_sample_that_is_not_plain_is_left_to_spark(lines):
    assert plain_csv_schema(lines) is None


def test_a_local_plain_csv_input_is_typed_without_a_spark_job(spark, tmp_path):
    """Spark's csv reader of text is made to fail: the columns of a plain sample are typed here."""
    read = read_one_csv(spark, tmp_path, "user_id,ts_ms,value\nu1,1000,1\nu2,3000000000,2\n",
                        "pyspark.sql.readwriter.DataFrameReader.csv")
    assert [(f.name, f.dataType.simpleString()) for f in read.schema.fields] == [
        ("user_id", "string"), ("ts_ms", "string"), ("value", "int")]
    assert read.kind.simpleString() == "bigint"
    assert sorted(tuple(r) for r in read.df.select("user_id", "ts_ms", "value").collect()) == [
        ("u1", "1000", 1), ("u2", "3000000000", 2)]


def test_text_times_of_a_plain_sample_are_told_from_its_frame(spark, tmp_path):
    """A time column of words is STRING in the plain types; its kind then counts the sample's numbers, made on
    demand from the same lines."""
    read = read_one_csv(spark, tmp_path, "user_id,ts,value\nu1,x1,1\nu2,2000,2\nu3,3000,3\n", time="ts")
    assert read.schema["ts"].dataType.simpleString() == "string"
    assert read.kind.simpleString() == "bigint"  # two numbers of three
