"""csv and json input typed from a sample of the first file (or a declared ``--schema``), never a whole pass over
it: a later record whose value does not fit its column goes to ``_invalid`` with a reason naming its file, never
into a session as a null; a csv file whose header does not name the columns in order fails the run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from statekit.clickstream import Click, sessionize_reference
from statekit.jobs import sessionize
from statekit.spark import files as spark_files
from tests.spark_support import output_rows

pytestmark = pytest.mark.spark
AGGS = ["sum:value", "count"]


def _write(directory: Path, fmt: str, parts: list[list[tuple]]) -> Path:
    """``parts`` (rows of user_id, ts_ms, value as text) as csv or json files, in name and modification order."""
    directory.mkdir()
    for i, rows in enumerate(parts):
        path = directory / f"part-{i:05d}.{fmt}"
        if fmt == "csv":
            path.write_text("user_id,ts_ms,value\n" + "".join(f"{u},{t},{v}\n" for u, t, v in rows))
        else:
            path.write_text("".join(json.dumps({"user_id": u, "ts_ms": t, "value": v}) + "\n" for u, t, v in rows))
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    return directory


def _invalid(spark, out: Path) -> list[tuple]:
    return sorted((r["user_id"], r["reason"]) for r in spark.read.parquet(str(out / "_invalid")).collect())


@pytest.mark.parametrize("fmt", [pytest.param("csv", marks=pytest.mark.lowest_pyspark), "json"])
def test_a_value_beyond_the_sample_that_does_not_fit_goes_to_invalid_naming_its_file(spark, tmp_path, monkeypatch,
                                                                                      fmt):
    """Typed from the first lines (here 3), ``value`` is a whole number; a later line's 2.5 (same file) and 'n/a'
    (a later epoch's file) do not fit: both rows go to _invalid naming their files, and the sessions are those of
    the other rows, not of rows whose value became null."""
    monkeypatch.setattr(spark_files, "SAMPLE_LINES", 3)
    good = [("a", 1_000, 1), ("b", 2_000, 2), ("a", 3_000, 3), ("c", 4_000, 4), ("b", 90_000, 5)]
    d = _write(tmp_path / "in", fmt, [good[:3] + [("x", 3_500, 2.5)] + good[3:4],
                                      [("y", 95_000, "n/a")] + good[4:]])
    out = tmp_path / "out"
    summary = sessionize(spark, input=str(d), output=str(out), key="user_id", time="ts_ms", aggs=AGGS, partitions=2,
                         final=True)
    assert summary.total("invalid") == 2
    (x, why_x), (y, why_y) = _invalid(spark, out)
    assert (x, y) == ("x", "y")
    assert f"{fmt} record not readable as the columns' types" in why_x and f"part-00000.{fmt}" in why_x and "2.5" in why_x
    assert f"part-00001.{fmt}" in why_y and "n/a" in why_y
    clicks = [Click(u, t, v) for u, t, v in good]
    assert output_rows(spark, out) == sessionize_reference(clicks, 30_000)


def test_a_declared_schema_types_the_columns_and_a_header_that_does_not_match_it_fails(spark, tmp_path):
    """``input_schema`` (``--schema``) types ``value`` as a double though the files hold whole numbers first; a
    schema naming the columns in another order than the header fails the run instead of swapping them."""
    rows = [("a", 1_000, 1), ("a", 2_000, 2.5), ("b", 3_000, 4)]
    d = _write(tmp_path / "in", "csv", [rows])
    out = tmp_path / "out"
    sessionize(spark, input=str(d), output=str(out), key="user_id", time="ts_ms", aggs=AGGS, final=True,
               input_schema="user_id STRING, ts_ms LONG, value DOUBLE")
    got = spark.read.parquet(str(out / "epoch=*")).orderBy("user_id")
    assert dict(got.dtypes)["sum_value"] == "double"
    assert [(r["user_id"], r["sum_value"], r["count"]) for r in got.collect()] == [("a", 3.5, 2), ("b", 4.0, 1)]
    with pytest.raises(Exception, match="(?i)header|schema"):
        sessionize(spark, input=str(d), output=str(tmp_path / "swapped"), key="user_id", time="ts_ms", aggs=AGGS,
                   final=True, input_schema="user_id STRING, value DOUBLE, ts_ms LONG")
    assert not list((tmp_path / "swapped").glob("epoch=*"))


def test_a_declared_schema_is_refused_for_parquet_and_when_it_is_no_list_of_columns(spark, tmp_path):
    d = _write(tmp_path / "in", "csv", [[("a", 1_000, 1)]])
    with pytest.raises(ValueError, match="--schema 'not a schema"):
        sessionize(spark, input=str(d), output=str(tmp_path / "o1"), key="user_id", time="ts_ms", final=True,
                   input_schema="not a schema (")
    spark.read.option("header", "true").csv(str(d)).write.parquet(str(tmp_path / "pq"))
    with pytest.raises(ValueError, match="parquet files carry their columns' types"):
        sessionize(spark, input=str(tmp_path / "pq"), output=str(tmp_path / "o2"), key="user_id", time="ts_ms",
                   final=True, input_schema="user_id STRING, ts_ms STRING, value STRING")
