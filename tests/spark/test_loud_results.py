"""Loud results: ``statekit sessionize``'s closing line counts late and invalid records with the top reasons and
where they went, each epoch's metrics carry its invalid reasons, a run whose records were all invalid (or more
than ``--max-invalid-fraction`` of them) exits 3 with what was committed left committed, and an output directory
holding someone else's file is refused by ``run_keyed`` itself."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from statekit.cli import EXIT_INVALID, main
from statekit.jobs import sessionize
from statekit.spark import InputError

pytestmark = pytest.mark.spark

FUTURE_MS = 4_102_444_800_000  # 2100-01-01: beyond --max-ahead's default 7 days


def write_input(d: Path) -> Path:
    """Three csv files (three epochs): 40 valid clicks with 3 unparsable times, 2 null keys and 1 far-future
    time; 20 valid clicks (the watermark passes the first file's 5 sessions); 5 valid clicks and 1 behind the
    watermark (late)."""
    d.mkdir(parents=True)
    first = [f"u{i % 5},{100_000 + i * 1000},1" for i in range(40)]
    first += ["u1,n/a,1", "u2,yesterday,1", "u3,later,1", ",101000,1", ",102000,1", f"u4,{FUTURE_MS},1"]
    second = [f"u{i % 5},{200_000 + i * 1000},1" for i in range(20)]
    third = [f"u{i % 5},{300_000 + i * 1000},1" for i in range(5)] + ["u0,1000,1"]
    for i, rows in enumerate((first, second, third)):
        path = d / f"part-{i:05d}.csv"
        path.write_text("user_id,ts_ms,value\n" + "\n".join(rows) + "\n")
        os.utime(path, (time.time() - 10 + i,) * 2)  # Spark's file source takes the oldest first
    return d


def argv(inp: Path, out: Path, *extra: str) -> list[str]:
    return ["sessionize", "--input", str(inp), "--output", str(out), "--key", "user_id", "--time", "ts_ms",
            "--gap", "30s", "--partitions", "2", *extra]


def test_the_summary_counts_late_and_invalid_records_with_reasons_and_where_they_went(spark, tmp_path, capsys):
    inp, out = write_input(tmp_path / "in"), tmp_path / "out"
    assert main(argv(inp, out)) == 0
    line = capsys.readouterr().out
    assert (f"sessionize: 3 epochs, 72 records, 5 sessions, 1 late (in {out}/_late), 6 invalid (unparsable time 3, "
            f"null key 2, time ahead of the clock 1; in {out}/_invalid), ") in line
    metrics = [json.loads(ln) for ln in (out / "_metrics.jsonl").read_text().splitlines()]
    assert [m["invalid_reasons"] for m in metrics] == [
        {"unparsable time": 3, "null key": 2, "time ahead of the clock": 1}, {}, {}]
    invalid = pq.read_table(out / "_invalid" / "epoch=0").column("reason").to_pylist()
    assert len(invalid) == 6 and sum(r.startswith("time ahead of the clock: ") for r in invalid) == 1
    assert pq.read_table(out / "_late" / "epoch=2").num_rows == 1
    assert main(argv(inp, out)) == 0  # a resume into statekit's own output: nothing new to read
    assert "sessionize: 0 epochs, 0 records, 0 sessions, 0 late, 0 invalid, " in capsys.readouterr().out


def test_more_invalid_records_than_the_limit_exits_3_after_committing(spark, tmp_path, capsys):
    inp, out = write_input(tmp_path / "in"), tmp_path / "out"
    assert main(argv(inp, out, "--max-invalid-fraction", "0.05")) == EXIT_INVALID
    err = capsys.readouterr().err
    assert ("sessionize: error: 6 of 72 records were invalid (8.3%), more than --max-invalid-fraction 0.05 (most "
            f"often: unparsable time, 3 records); they are in {out}/_invalid with their reasons. The 3 epochs of "
            f"this run stay committed") in err
    assert [json.loads(ln)["epoch"] for ln in (out / "_metrics.jsonl").read_text().splitlines()] == [0, 1, 2]
    assert pq.read_table(out / "epoch=2").num_rows == 5  # the sessions of the first file, closed and kept
    assert main(argv(write_input(tmp_path / "in2"), tmp_path / "out2", "--max-invalid-fraction", "0.1")) == 0


@pytest.mark.slow
def test_a_run_whose_records_are_all_invalid_exits_3_from_the_command_line(tmp_path):
    inp = tmp_path / "in"
    inp.mkdir()
    # times pre-flight takes (most of the first ones are times), every record invalid all the same
    (inp / "part-00000.csv").write_text("user_id,ts_ms,value\nu1,n/a,1\n,5000,1\n,6000,1\n")
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "statekit.cli", *argv(inp, out, "--master", "local[1]")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == EXIT_INVALID, r.stderr[-3000:]
    assert ("sessionize: error: every record of this run was invalid (most often: null key, 2 records); they "
            f"are in {out}/_invalid with their reasons") in r.stderr
    assert f"0 sessions, 0 late, 3 invalid (null key 2, unparsable time 1; in {out}/_invalid)" in r.stdout
    # Spark logs errors only: no WARN line nor its log-level banner before (or after) statekit's output
    assert not re.search(r"\bWARN\b|Setting default log level|log4j", r.stderr), r.stderr[-3000:]


def test_run_keyed_refuses_an_output_holding_someone_elses_file(spark, tmp_path):
    inp, out = write_input(tmp_path / "in"), tmp_path / "out"
    out.mkdir()
    foreign = out / "report.csv"
    foreign.write_text("a,b\n")
    with pytest.raises(InputError, match=f"output {out} holds 'report.csv', which statekit did not write"):
        sessionize(spark, input=str(inp), output=str(out), key="user_id", time="ts_ms")
    assert sorted(p.name for p in out.iterdir()) == ["report.csv"] and foreign.read_text() == "a,b\n"
