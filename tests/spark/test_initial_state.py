"""`statekit sessionize --initial-state`: a job started from a table of the open sessions of a history's first part,
then run over its second part, gives the sessions of the whole history from scratch (parquet on rocksdb, resumed in
a fresh process on another partition count; csv on heap with 3 partitions; both layouts); a table that does not
hold such sessions, or a checkpoint that has committed epochs, is refused naming the row, with nothing written."""

from __future__ import annotations

import csv
import subprocess
from pathlib import Path

import deltalake
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from statekit.cli import main
from tests.spark_support import GAP, DELAY, clickstream, copy_in_name_order, output_rows, spark_sessions, statekit_process, write_input

pytestmark = pytest.mark.spark

GAP_MS = 30_000
FLAGS = ["--key", "user_id", "--time", "ts_ms", "--gap", GAP, "--watermark-delay", DELAY, "--agg", "sum:value",
         "--agg", "count"]


def open_sessions(clicks: list) -> list[dict]:
    """The sessions of ``clicks`` as sessionize writes them (window_end: the last click plus the gap), and avg's
    accumulator of ``value``: the sessions a job over them has open before its final watermark."""
    by_key: dict[str, list] = {}
    for c in sorted(clicks, key=lambda c: (c.user_id, c.ts_ms)):
        sessions = by_key.setdefault(c.user_id, [])
        if sessions and c.ts_ms <= sessions[-1]["window_end"]:
            s = sessions[-1]
            s["window_end"] = max(s["window_end"], c.ts_ms + GAP_MS)
            s["sum_value"] += c.value
            s["count"] += 1
        else:
            sessions.append({"user_id": c.user_id, "window_start": c.ts_ms, "window_end": c.ts_ms + GAP_MS,
                             "sum_value": c.value, "count": 1})
    rows = [s for sessions in by_key.values() for s in sessions]
    for s in rows:
        s["avg_value_sum"], s["avg_value_count"] = s["sum_value"], s["count"]
    return rows


def history(tmp_path: Path, files: int = 3) -> tuple[list, list, Path]:
    """A clickstream's first half (in arrival order) and its second half staged as ``files`` csv files."""
    clicks = clickstream(1500, 30, seed=11)
    half = len(clicks) // 2
    staged = write_input(clicks[half:], tmp_path / "staged", files=files)
    return clicks, clicks[:half], staged


def run(*argv: str) -> subprocess.CompletedProcess:
    return statekit_process("sessionize", *argv)


@pytest.mark.slow
def test_parquet_table_on_rocksdb_resumed_in_a_fresh_process_on_three_partitions(spark, tmp_path):
    clicks, first, staged = history(tmp_path)
    table = tmp_path / "open.parquet"
    pq.write_table(pa.Table.from_pylist([{k: s[k] for k in ("user_id", "window_start", "window_end", "sum_value",
                                                            "count")} for s in open_sessions(first)]), table)
    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    files = sorted(staged.iterdir())
    copy_in_name_order(files[:1], inp)
    r = run("--input", str(inp), "--output", str(out), *FLAGS, "--initial-state", str(table), "--backend", "rocksdb",
            "--state-layout", "cells", "--partitions", "2")
    assert r.returncode == 0, r.stderr
    assert f"started from {len(open_sessions(first)):,} open sessions" in r.stdout
    copy_in_name_order(files[1:], inp, first=1)
    r = run("--input", str(inp), "--output", str(out), *FLAGS, "--backend", "rocksdb", "--partitions", "3", "--final")
    assert r.returncode == 0, r.stderr
    assert "0 late, 0 invalid" in r.stdout
    assert output_rows(spark, out) == spark_sessions(spark, write_input(clicks, tmp_path / "whole", files=1))
    r = run("--input", str(inp), "--output", str(out), *FLAGS, "--initial-state", str(table))
    assert r.returncode == 2 and "has committed epochs" in r.stderr  # refused before Spark starts


def test_csv_table_on_heap_with_three_partitions_equals_the_whole_history(spark, tmp_path, capsys):
    clicks, first, staged = history(tmp_path, files=2)
    table = tmp_path / "open"
    table.mkdir()
    pacsv.write_csv(pa.Table.from_pylist(open_sessions(first)), table / "sessions.csv")
    flags = FLAGS + ["--agg", "avg:value", "--backend", "heap", "--partitions", "3", "--final"]
    inp = tmp_path / "in"
    inp.mkdir()
    copy_in_name_order(sorted(staged.iterdir()), inp)
    assert main(["sessionize", "--input", str(inp), "--output", str(tmp_path / "out"), *flags,
                 "--initial-state", str(table)]) == 0
    whole = write_input(clicks, tmp_path / "whole", files=3)
    assert main(["sessionize", "--input", str(whole), "--output", str(tmp_path / "scratch"), *flags]) == 0
    columns = ["user_id", "window_start", "window_end", "sum_value", "count", "avg_value"]
    got, expected = (sorted(tuple(r) for r in spark.read.parquet(str(tmp_path / d)).select(*columns).collect())
                     for d in ("out", "scratch"))
    assert got == expected and len(got) > len(open_sessions(first)) // 2
    assert "0 late, 0 invalid" in capsys.readouterr().out


def _table(tmp_path: Path, rows: list[dict], fmt: str) -> Path:
    path = tmp_path / f"bad.{fmt}"
    if fmt == "parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    elif fmt == "delta":
        deltalake.write_deltalake(str(path), pa.Table.from_pylist(rows))
    else:
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return path


GOOD = {"user_id": "u1", "window_start": 1_000, "window_end": 40_000, "sum_value": 3, "count": 2}


@pytest.mark.parametrize("rows,fmt,message", [
    ([GOOD, {**GOOD, "user_id": "u2", "window_end": 500}], "csv",
     "user_id=u2, window_start=1000, window_end=500: the session ends before it starts"),
    ([GOOD, {**GOOD, "window_start": 40_000, "window_end": 90_000}], "parquet",
     "user_id=u1, window_start=40000, window_end=90000: it touches or overlaps an earlier session of its key, which "
     "ends at 40000"),
    ([GOOD, {**GOOD, "user_id": None}], "delta", "user_id=null, window_start=1000, window_end=40000: null key"),
    ([GOOD, {**GOOD, "window_end": 20_000}], "csv", "the session is shorter than the gap (30000 ms)"),
    ([GOOD, {**GOOD, "user_id": "u3", "count": "two"}], "csv", "user_id=u3, window_start=1000, window_end=40000: "
                                                             "count two is not a bigint"),
    ([{**GOOD, "sum_value": 3.5}], "parquet", "column 'sum_value' has type double; the job reads it as bigint"),
    ([{k: v for k, v in GOOD.items() if k != "count"}], "parquet", "has no column 'count'"),
])
def test_a_table_that_holds_no_open_sessions_is_refused_naming_the_row(spark, tmp_path, capsys, rows, fmt, message):
    inp = write_input(clickstream(50, 5), tmp_path / "in", files=1)
    out = tmp_path / "out"
    assert main(["sessionize", "--input", str(inp), "--output", str(out), *FLAGS,
                 "--initial-state", str(_table(tmp_path, rows, fmt))]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert not out.exists()  # nothing written
