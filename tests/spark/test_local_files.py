"""The driver's own read of a local text file's first lines equals Spark's text source (``limit(n)``) whatever ends
its lines, where its reads of a chunk end and whatever its text; a file the driver cannot read as Spark would is
left to Spark; and a local csv input is typed without Spark reading its text."""

from __future__ import annotations

import gzip
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statekit.spark import local_files
from statekit.spark.local_files import _LINE_END, first_lines
from tests.spark_support import read_one_csv

pytestmark = pytest.mark.spark

_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12)
_FILES = st.tuples(st.lists(st.tuples(_TEXT, st.sampled_from(["\n", "\r\n", "\r"])), max_size=8), st.booleans())


def _spark_lines(spark, path, n: int) -> list[str]:
    return [row[0] for row in spark.read.text(str(path)).limit(n).collect()]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=_FILES, n=st.integers(1, 10), chunk=st.integers(1, 16))
def test_the_first_lines_read_here_are_sparks(spark, tmp_path_factory, content, n, chunk):
    lines, ended = content
    text = "".join(t + end for t, end in lines)
    if lines and not ended:
        text = text[: -len(lines[-1][1])]  # the last line without its end
    path = tmp_path_factory.mktemp("lines") / "part-0.csv"
    path.write_bytes(text.encode())
    with mock.patch.object(local_files, "_CHUNK", chunk):  # a line end cut between two reads
        assert first_lines(str(path), n) == _spark_lines(spark, path, n)


@pytest.mark.parametrize("data", [b"", b"\n", b"\r\n\r\n", b"a\xffb\nc", b"\xef\xbb\xbfh1,h2\r\n1,2", b"x\r"])
def test_edges_of_the_first_lines_read_here_are_sparks(spark, tmp_path, data):
    """An empty file, empty lines, a byte that is no UTF-8, a byte order mark and a last line ended by ``\\r``."""
    path = tmp_path / "part-0.csv"
    path.write_bytes(data)
    assert first_lines(f"file://{path}", 5) == _spark_lines(spark, path, 5)


class _CountedSplits:
    """``local_files._LINE_END`` counting its splits."""

    def __init__(self) -> None:
        self.calls = 0

    def split(self, data: bytes) -> list[bytes]:
        self.calls += 1
        return _LINE_END.split(data)


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_the_head_is_split_once_however_many_reads_it_takes(tmp_path, end):
    """Lines of 10 bytes read 3 bytes at a time (a ``\r\n`` cut between reads too): one split of the head once n
    line ends are read, not one per read after (which made a file of long lines quadratic)."""
    path = tmp_path / "part-0.csv"
    path.write_text("".join(f"line{i:05d}{end}" for i in range(200)), newline="")
    counted = _CountedSplits()
    with mock.patch.object(local_files, "_CHUNK", 3), mock.patch.object(local_files, "_LINE_END", counted):
        assert first_lines(str(path), 50) == [f"line{i:05d}" for i in range(50)]
    assert counted.calls == 1


def test_a_file_the_driver_cannot_read_as_spark_does_is_left_to_spark(tmp_path):
    packed = tmp_path / "part-0.csv.gz"
    packed.write_bytes(gzip.compress(b"a,b\n1,2\n"))
    assert first_lines(str(packed), 2) is None
    assert first_lines("s3a://bucket/part-0.csv", 2) is None
    assert first_lines(str(tmp_path / "missing.csv"), 2) is None


def test_a_local_csv_input_is_typed_without_spark_reading_its_text(spark, tmp_path):
    """Spark's text reader is made to fail: the input's columns still come from its first lines, read here."""
    read = read_one_csv(spark, tmp_path, "user_id,ts_ms,value\na,1000,1\nb,2000,2.5\n",
                        "pyspark.sql.readwriter.DataFrameReader.text")
    assert [(f.name, f.dataType.simpleString()) for f in read.schema.fields] == [
        ("user_id", "string"), ("ts_ms", "string"), ("value", "double")]
