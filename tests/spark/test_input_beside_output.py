"""An input given as a file or a glob whose directory also holds the run's output resumes (the reader lists that
level only); a directory input holding the output or checkpoint is refused before anything runs, naming both."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from statekit.clickstream import Click, sessionize_reference
from statekit.jobs import sessionize
from statekit.jobs.preflight import preflight_sessionize
from statekit.spark import InputError
from tests.spark_support import clickstream, output_rows, write_input

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("form", ["file", "glob"])
def test_a_file_or_glob_input_beside_its_output_resumes_and_finishes_exactly(spark, tmp_path, form):
    """The file's name holds a comma (a glob character in braces, escaped); the output is a sibling directory."""
    clicks = clickstream(600, 20)
    d = write_input(clicks, tmp_path / "data", files=2)
    later = tmp_path / "part-00001.csv"
    (d / "part-00001.csv").rename(later)
    odd = d / "clicks, 1 (b).csv"
    if form == "file":
        (d / "part-00000.csv").rename(odd)
    given = str(odd) if form == "file" else f"{d}/part-*.csv"
    first = _rows_of(odd if form == "file" else d / "part-00000.csv")
    run = dict(input=given, output=str(d / "sessions"), key="user_id", time="ts_ms", gap="30s",
               aggs=["sum:value", "count"], partitions=2)
    assert sessionize(spark, **run).total("records_in") == len(first)
    assert sessionize(spark, **run).total("records_in") == 0  # resumed: the output's epoch=N dirs are not listed
    if form == "glob":  # a file arriving later is still found by the glob
        later.rename(d / "part-00001.csv")
        os.utime(d / "part-00001.csv", (2_000_000_000, 2_000_000_000))
    summary = sessionize(spark, **run, final=True)
    assert summary.total("records_in") == (len(clicks) - len(first) if form == "glob" else 0)
    assert output_rows(spark, d / "sessions") == sessionize_reference(clicks if form == "glob" else first, 30_000)


def _rows_of(path: Path) -> list[Click]:
    return [Click(u, int(t), int(v)) for u, t, v in (line.split(",") for line in path.read_text().splitlines()[1:])]


def test_a_directory_input_holding_the_output_or_checkpoint_is_refused_before_anything_runs(spark, tmp_path):
    d = write_input(clickstream(100, 5), tmp_path / "data", files=1)
    common = dict(input=str(d), key="user_id", time="ts_ms", gap="30s", aggs=["count"])
    with pytest.raises(InputError, match=f"--output {d}/sessions is inside the input directory {d}"):
        sessionize(spark, output=str(d / "sessions"), **common)
    with pytest.raises(InputError, match=f"--checkpoint {d}/ckpt is inside the input directory"):
        sessionize(spark, output=str(tmp_path / "out"), checkpoint=str(d / "ckpt"), **common)
    assert not (d / "sessions").exists() and not (tmp_path / "out").exists()
    flags = dict(watermark_delay="0", fmt=None, max_ahead=None, partitions=None, output_format="parquet")
    with pytest.raises(InputError, match="is inside the input directory"):
        preflight_sessionize(output=str(d / "sessions"), checkpoint=None, **common, **flags)
    preflight_sessionize(output=str(tmp_path / "out"), checkpoint=str(tmp_path / "s3ish"), **common, **flags)
