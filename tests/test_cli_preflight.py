"""`statekit sessionize` finds the mistakes a run would meet only after Spark started (a bad duration, a missing
input, a wrong column, an unusable time type, someone else's files in the output) before the JVM starts: each in a
real CLI process, well under the held-out bound, with no pyspark imported at all. No Spark here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import date, datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from statekit.jobs.preflight import preflight_sessionize
from statekit.spark.errors import InputError
from statekit.spark.event_time import TimeSpec

BOUND_S = 10  # the held-out check's bound; the mistakes are meant to show in under 2 s
_RUN = ("import sys; from statekit.cli import main; rc = main(sys.argv[1:]); "
        "print('pyspark imported' if 'pyspark' in sys.modules else 'no pyspark', file=sys.stderr); sys.exit(rc)")


def cli(*argv: str) -> tuple[subprocess.CompletedProcess, float]:
    """``statekit`` in a fresh interpreter; its result and how long it took. The last stderr line says whether
    pyspark was imported (no pyspark: no JVM could have started)."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", _RUN, *argv], capture_output=True, text=True, timeout=120)
    return r, time.perf_counter() - t0


@pytest.fixture
def inp(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    (d / "part-00000.csv").write_text("user_id,ts_ms,value\nu1,1000,1\nu2,2000,2\n")
    (d / "_SUCCESS").write_text("")  # not a data file, as for Spark's reader
    return d


def sessionize_argv(inp: Path, out: Path, **flags: str) -> list[str]:
    args = {"--input": str(inp), "--output": str(out), "--key": "user_id", "--time": "ts_ms", **flags}
    return ["sessionize"] + [x for kv in args.items() for x in kv]


@pytest.mark.parametrize("flags,message", [
    ({"--gap": "30 parsecs"}, "--gap: cannot parse duration '30 parsecs'"),
    ({"--gap": "0s"}, "--gap must be positive, got '0s'"),
    ({"--gap": "30"}, "--gap '30': a duration needs a unit, e.g. 30s or 30ms (forms: 30s, 500ms, 5m, 1h30m;"),
    ({"--conf": "spark.statekit.lease_timeout=60"}, "spark.statekit.lease_timeout '60': a duration needs a unit"),
    ({"--time-format": "HH:mm"}, "--time-format 'HH:mm' has no year (y): every time read by it would fall in 1970"),
    ({"--watermark-delay": "soon"}, "--watermark-delay: cannot parse duration 'soon'"),
    ({"--max-ahead": "later"}, "--max-ahead: cannot parse duration 'later'"),
    ({"--agg": "median:value"}, "--agg 'median:value': expected count or KIND:COLUMN"),
    ({"--partitions": "0"}, "--partitions must be at least 1, got 0"),
    ({"--max-invalid-fraction": "1.5"}, "--max-invalid-fraction must be between 0 and 1, got 1.5"),
    ({"--input": "{tmp}/nope"}, "input {tmp}/nope does not exist"),
    ({"--key": "uid"}, "input {tmp}/in/part-00000.csv: key column 'uid' not found; columns: user_id, ts_ms, value"),
    ({"--time": "ts"}, "input {tmp}/in/part-00000.csv: time column 'ts' not found; columns: user_id, ts_ms, value"),
    ({"--agg": "sum:price"}, "input {tmp}/in/part-00000.csv: --agg sum column 'price' not found"),
])
def test_each_mistake_is_reported_before_spark_starts(inp, tmp_path, flags, message):
    argv = sessionize_argv(inp, tmp_path / "out", **{k: v.format(tmp=tmp_path) for k, v in flags.items()})
    r, seconds = cli(*argv)
    assert r.returncode == 2, r.stderr
    assert f"statekit sessionize: error: {message.format(tmp=tmp_path)}" in r.stderr
    assert r.stderr.rstrip().endswith("no pyspark"), r.stderr
    assert "Traceback" not in r.stderr and "Spark" not in r.stderr and "log4j" not in r.stderr
    assert seconds < BOUND_S
    assert not (tmp_path / "out").exists()  # nothing written


@pytest.mark.parametrize("flags,message", [
    (["--input", "{tmp}/in", "--topic", "clicks"], "pass one input: --input (files) or --topic (a Kafka topic"),
    (["--topic", "clicks"], "--topic clicks needs --kafka-bootstrap-servers HOST:PORT"),
    (["--topic", "clicks", "--kafka-bootstrap-servers", "localhost:1", "--format", "parquet"],
     "--format 'parquet' for a Kafka topic: its values are text, one of json, csv"),
    (["--topic", "clicks", "--kafka-bootstrap-servers", "localhost:1", "--format", "csv"],
     "CSV messages have no header: pass their columns with --value-schema"),
    (["--topic", "clicks", "--kafka-bootstrap-servers", "localhost:1", "--kafka-option", "maxOffsetsPerTrigger"],
     "--kafka-option 'maxOffsetsPerTrigger': expected KEY=VALUE"),
    (["--input", "{tmp}/in", "--sink-late-topic", "late"],
     "--sink-late-topic, --sink-invalid-topic and --sink-partitions go with --sink-topic"),
    (["--input", "{tmp}/in", "--sink-topic", "out", "--kafka-bootstrap-servers", "localhost:1", "--sink-partitions",
      "0"], "--sink-partitions 0: needs 1 or more"),
])
def test_each_kafka_mistake_is_reported_before_spark_starts(inp, tmp_path, flags, message):
    argv = ["sessionize", "--output", str(tmp_path / "out"), "--key", "user_id", "--time", "ts_ms",
            *(f.format(tmp=tmp_path) for f in flags)]
    r, _ = cli(*argv)
    assert r.returncode == 2, r.stderr
    assert f"statekit sessionize: error: {message}" in r.stderr
    assert r.stderr.rstrip().endswith("no pyspark"), r.stderr
    assert not (tmp_path / "out").exists()


def test_an_output_holding_someone_elses_file_is_refused_and_the_file_left_as_it_was(inp, tmp_path):
    out = tmp_path / "out"
    (out / "epoch=0").mkdir(parents=True)
    (out / "_metrics.jsonl").write_text("")
    notes = out / "notes.txt"
    notes.write_text("mine")
    before = notes.stat()
    r, seconds = cli(*sessionize_argv(inp, out))
    assert r.returncode == 2
    assert (f"statekit sessionize: error: output {out} holds 'notes.txt', which statekit did not write: an output "
            f"directory is statekit's alone") in r.stderr
    assert r.stderr.rstrip().endswith("no pyspark") and seconds < BOUND_S
    after = notes.stat()
    assert notes.read_text() == "mine" and (after.st_mtime_ns, after.st_size) == (before.st_mtime_ns, before.st_size)
    assert sorted(p.name for p in out.iterdir()) == ["_metrics.jsonl", "epoch=0", "notes.txt"]


def test_a_delta_output_is_checked_where_statekit_writes_its_files(inp, tmp_path):
    files = tmp_path / "table" / "_statekit"
    files.mkdir(parents=True)
    (files / "stray.parquet").write_bytes(b"")
    (tmp_path / "table" / "_delta_log").mkdir()  # Delta's, beside statekit's _statekit/
    r, _ = cli(*sessionize_argv(inp, tmp_path / "table", **{"--output-format": "delta"}))
    assert r.returncode == 2 and f"output {files} holds 'stray.parquet'" in r.stderr


def check(inp: Path, out: Path, **overrides) -> None:
    args = dict(input=str(inp), output=str(out), key="user_id", time="ts_ms", aggs=["count"], gap="30s",
                watermark_delay="0", fmt=None, max_ahead="default", partitions=None, checkpoint=None,
                output_format="parquet")
    preflight_sessionize(**{**args, **overrides})


def test_statekits_own_output_is_accepted_for_a_resume(inp, tmp_path):
    out = tmp_path / "out"
    for d in ("epoch=0", "epoch=12", "_late/epoch=0", "_invalid/epoch=3", "_staging", "_checkpoint/_driver", "ckpt"):
        (out / d).mkdir(parents=True)
    (out / "_metrics.jsonl").write_text(json.dumps({"epoch": 0}) + "\n")
    (out / ".epoch=0.crc").write_text("")
    check(inp, out, checkpoint=str(out / "ckpt"))  # a checkpoint named by the user, directly below the output
    with pytest.raises(InputError, match="holds 'ckpt'"):
        check(inp, out)  # without it, ckpt/ is not statekit's
    (out / "epoch=x").mkdir()
    with pytest.raises(InputError, match="holds 'epoch=x'"):
        check(inp, out, checkpoint=str(out / "ckpt"))


def test_an_output_that_is_a_file_is_refused(inp, tmp_path):
    (tmp_path / "out").write_text("x")
    with pytest.raises(InputError, match="is a file, not a directory"):
        check(inp, tmp_path / "out")


def write_parquet(path: Path, ts: pa.Array) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"user_id": pa.array(["a"] * len(ts)), "ts": ts}), path)
    return path.parent


@pytest.mark.parametrize("ts", [
    pa.array([1, 2], pa.int64()), pa.array([1, 2], pa.int32()), pa.array([1.0, 2.0]),
    pa.array(["2025-11-24T16:00:01Z"] * 2),
    pa.array([datetime(2025, 1, 1, tzinfo=timezone.utc)] * 2, pa.timestamp("us", tz="UTC")),
    pa.array([datetime(2025, 1, 1)] * 2, pa.timestamp("us")), pa.array([date(2025, 1, 1)] * 2),
], ids=lambda a: str(a.type))
def test_time_columns_of_usable_types_pass(tmp_path, ts):
    check(write_parquet(tmp_path / "in" / "p.parquet", ts), tmp_path / "out", time="ts")


@pytest.mark.parametrize("ts,shown", [
    (pa.array([True, False]), "bool"),
    (pa.array([{"s": 1}, {"s": 2}]), "struct<s: int64>"),
    (pa.array([[1], [2]]), "list<element: int64>"),
    (pa.array([b"1", b"2"]), "binary"),
])
def test_time_columns_of_unusable_types_are_refused_naming_the_type(tmp_path, ts, shown):
    d = write_parquet(tmp_path / "in" / "p.parquet", ts)
    message = f"input {d}/p.parquet: time column 'ts' has type {shown}: it must hold event times"
    with pytest.raises(InputError, match=re.escape(message)):
        check(d, tmp_path / "out", time="ts")


def test_csv_and_json_schemas_are_read_from_their_first_rows(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.json").write_text("".join(json.dumps({"user_id": f"u{i}", "ts_ms": i, "flag": True}) + "\n"
                                      for i in range(50_000)))
    (d / "b.json").write_text('{"other": 1}\n')  # not the first file: only the first one's columns are checked
    check(d, tmp_path / "out")
    with pytest.raises(InputError, match=r"a.json: time column 'flag' has type bool"):
        check(d, tmp_path / "out", time="flag")
    with pytest.raises(InputError, match=r"a.json: key column 'k' not found; columns: user_id, ts_ms, flag"):
        check(d, tmp_path / "out", key="k")


def write_times(directory: Path, fmt: str, times: list) -> Path:
    """A one-file input of ``fmt`` whose time column ``ts`` holds ``times`` as that format writes them."""
    directory.mkdir(parents=True)
    if fmt == "csv":
        (directory / "p.csv").write_text("user_id,ts\n" + "".join(f"u,{t}\n" for t in times))
    elif fmt == "json":
        (directory / "p.json").write_text("".join(json.dumps({"user_id": "u", "ts": t}) + "\n" for t in times))
    else:
        write_parquet(directory / "p.parquet", pa.array(times))
    return directory


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
@pytest.mark.parametrize("times,why", [
    (["12:00", "12:05"], "time has no date: '12:00'"),
    (["T12:00:00Z", "12:00:05Z"], "time has no date: 'T12:00:00Z'"),
    (["12:00:00", "12:00:05"], "time has no date: '12:00:00'"),
    (["yesterday", "today"], "unparsable time: 'yesterday' (ISO-8601 with a date, or a number in ms;"),
    ([1772352007.5, 1772352003.244], "time is not a whole number of ms: 1772352007.5 (epoch seconds? pass --time-unit s)"),
])
def test_a_time_column_whose_first_values_are_no_times_is_refused_naming_a_value(tmp_path, fmt, times, why):
    d = write_times(tmp_path / "in", fmt, times)
    with pytest.raises(InputError) as e:
        check(d, tmp_path / "out", time="ts")
    assert str(e.value).startswith(f"input {d}/p.{fmt}: time column 'ts': 2 of its first 2 values are not times ({why}")
    fixes = {"time has no date": "write the times with their date", "unparsable time": "pass --time-format PATTERN",
             "time is not a whole number": "pass --time-unit s for epoch seconds"}
    assert next(fix for kind, fix in fixes.items() if why.startswith(kind)) in str(e.value)


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
@pytest.mark.parametrize("times", [[1772352007.0, 1772352003.244], ["2026-03-01", "12:00"], ["-1.5e3", "x"],
                                   ["2026-03-01 12:00:00", "2026-03-01T12:00:01+01:00"]])
def test_time_columns_whose_first_values_are_mostly_times_pass(tmp_path, fmt, times):
    """A few bad values are left to the run (they go to ``_invalid``)."""
    check(write_times(tmp_path / "in", fmt, times), tmp_path / "out", time="ts", time_spec=TimeSpec("s"))


def test_epoch_seconds_read_as_milliseconds_are_refused_though_some_are_whole(tmp_path):
    """Whole values among them would convert (to January 1970): most do not, so the unit is wrong."""
    d = write_times(tmp_path / "in", "json", [1772352007.0, 1772352003.244, 1772352004.5])
    with pytest.raises(InputError, match=r"time column 'ts': 2 of its first 3 values are not times \(time is not a "
                                         r"whole number of ms: 1772352003.244 .*pass --time-unit s for epoch seconds"):
        check(d, tmp_path / "out", time="ts")


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
@pytest.mark.parametrize("times,unit", [([1772352003, 1772352063], "s"), ([1772352003.5, 1772352063], "s"),
                                        ([1772352003000000, 1772352063000000], "us")])
def test_epoch_numbers_of_another_unit_than_the_default_are_refused_unless_the_unit_is_given(tmp_path, fmt, times,
                                                                                              unit):
    """Whole epoch seconds read as the default milliseconds are valid times in January 1970: quiet wrong sessions.
    Passing --time-unit (any) says the unit was meant."""
    d = write_times(tmp_path / "in", fmt, times)
    with pytest.raises(InputError) as e:
        check(d, tmp_path / "out", time="ts", unit_given=False)
    assert f"time column 'ts': its first values are epoch numbers that look like" in str(e.value)
    assert f"pass --time-unit {unit}, or --time-unit ms to read them as milliseconds after all" in str(e.value)
    check(d, tmp_path / "out", time="ts", unit_given=True, time_spec=TimeSpec(unit))
    check(d, tmp_path / "out", time="ts", unit_given=True)  # ms asked for: read as given


@pytest.mark.parametrize("times", [[1772352003000, 1772352063000], [1000, 2000], [1772352003, 1772352003000],
                                   ["2026-03-01T12:00:00Z", "2026-03-01T12:00:01Z"]])
def test_milliseconds_small_times_mixed_spans_and_text_pass_with_the_default_unit(tmp_path, times):
    check(write_times(tmp_path / "in", "json", times), tmp_path / "out", time="ts", unit_given=False)


def test_the_cli_refuses_epoch_seconds_without_a_unit_before_spark_starts(tmp_path):
    d = write_times(tmp_path / "in", "csv", [1772352003, 1772352063])
    r, _ = cli(*sessionize_argv(d, tmp_path / "out", **{"--time": "ts"}))
    assert r.returncode == 2, r.stderr
    assert "look like seconds (e.g. 1772352003; read as milliseconds, the default, they would be times in 1970); " \
           "pass --time-unit s" in r.stderr
    assert r.stderr.rstrip().endswith("no pyspark")


def test_text_by_a_time_format_is_left_to_the_run(tmp_path):
    check(write_times(tmp_path / "in", "csv", ["01/03/2026 12:00"]), tmp_path / "out", time="ts",
          time_spec=TimeSpec(format="dd/MM/yyyy HH:mm"))


def test_unknown_formats_and_empty_directories_are_named(tmp_path):
    (tmp_path / "in").mkdir()
    with pytest.raises(InputError, match=rf"input directory {tmp_path}/in has no data files"):
        check(tmp_path / "in", tmp_path / "out")
    (tmp_path / "in" / "clicks.txt").write_text("user_id,ts_ms\n")
    with pytest.raises(InputError, match=r"clicks.txt: unknown format; pass --format csv\|parquet\|json"):
        check(tmp_path / "in", tmp_path / "out")
    check(tmp_path / "in", tmp_path / "out", fmt="csv")  # the format named: read as csv
    (tmp_path / "in" / "clicks.txt").write_bytes(b"\x00\x01 not parquet")
    with pytest.raises(InputError, match=r"clicks.txt: cannot be read as parquet"):
        check(tmp_path / "in", tmp_path / "out", fmt="parquet")


def clicks_dir(d: Path, mtimes_s: list[float]) -> Path:
    """csv files ``part-0000<i>.csv`` with the modification times (seconds) given, in name order."""
    d.mkdir(parents=True)
    for i, t in enumerate(mtimes_s):
        f = d / f"part-{i:05d}.csv"
        f.write_text(f"user_id,ts_ms,value\nu{i},{i * 1000},1\n")
        os.utime(f, (t, t))
    return d


def test_a_streams_files_out_of_name_order_are_refused_with_a_way_out_that_works(tmp_path):
    d = clicks_dir(tmp_path / "in", [1_000.5, 2_000.25, 2_000.25])  # a tie to the millisecond
    r, seconds = cli(*sessionize_argv(d, tmp_path / "out"))
    assert r.returncode == 2 and r.stderr.rstrip().endswith("no pyspark") and seconds < BOUND_S, r.stderr
    message = (f"statekit sessionize: error: input {d}: part-00001.csv (1970-01-01 00:33:20.250 UTC) and "
               f"part-00002.csv (1970-01-01 00:33:20.250 UTC) have the same modification time")
    assert message in r.stderr and "or pass --mode batch" in r.stderr
    check(d, tmp_path / "out", mode="batch")  # the whole input as one epoch: no order to keep
    subprocess.run(re.search(r"for example: (.+)\), or pass --mode batch", r.stderr).group(1), shell=True, check=True)
    check(d, tmp_path / "out")

    newer = (d / "part-00002.csv").stat().st_mtime + 5
    os.utime(d / "part-00000.csv", (newer, newer))  # newer than the files after it
    with pytest.raises(InputError, match=r"part-00000.csv \(.+\) and part-00001.csv \(.+\) have modification times "
                                         r"out of name order"):
        check(d, tmp_path / "out")
    sources = tmp_path / "out" / "_checkpoint" / "_spark" / "sources" / "0"
    sources.mkdir(parents=True)  # a resumed stream that read part-00000.csv: its time no longer counts
    entry = {"path": (d / "part-00000.csv").as_uri(), "timestamp": int(newer * 1000), "batchId": 0}
    (sources / "0").write_text("v1\n" + json.dumps(entry) + "\n")
    check(d, tmp_path / "out")
    with pytest.raises(InputError, match="part-00000.csv"):
        check(d, tmp_path / "out", spark_checkpoint=str(tmp_path / "elsewhere"))  # another stream read none


def test_a_stray_file_is_named_with_advice_that_works_and_globs_are_taken(tmp_path):
    d = clicks_dir(tmp_path / "in", [1_000, 2_000])
    (d / "README.md").write_text("# clicks\n")
    message = (f"statekit sessionize: error: input {d} holds 2 .csv files and 1 other (README.md): Spark would read "
               f"every file of the input as csv; pass a glob of the data files, --input '{d}/*.csv', or move it out of {d}")
    for fmt in ([], ["--format", "csv"]):  # the format named does not read the README as csv
        r, _ = cli(*sessionize_argv(d, tmp_path / "out"), *fmt)
        assert r.returncode == 2 and message in r.stderr, r.stderr
    check(f"{d}/*.csv", tmp_path / "out", input=f"{d}/*.csv")
    check(d, tmp_path / "out", input=f"{d}/part-*")
    with pytest.raises(InputError, match=re.escape(f"input {d}/*.json: no data file (a name not starting with _ or .) "
                                                   f"matches '*.json'")):
        check(d, tmp_path / "out", input=f"{d}/*.json")
    with pytest.raises(InputError, match=re.escape(f"input {d}/nope/*.csv: directory {d}/nope does not exist")):
        check(d, tmp_path / "out", input=f"{d}/nope/*.csv")
    os.utime(d / "part-00001.csv", (1_000, 1_000))
    with pytest.raises(InputError, match="have the same modification time") as e:  # the order of the glob's files
        check(d, tmp_path / "out", input=f"{d}/*.csv")
    assert f"glob.glob(\"{d}/*.csv\")" in str(e.value)


def test_uris_are_left_to_the_run(tmp_path):
    check(Path("/unused"), tmp_path / "out", input="s3://no-such-bucket/in", output="s3://no-such-bucket/out")


def test_java_is_checked_before_the_input(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = os.path.dirname(sys.executable)  # the venv's bin: python, no java
    r = subprocess.run([sys.executable, "-m", "statekit.cli", *sessionize_argv(tmp_path / "nope", tmp_path / "out")],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Spark needs Java 17+: no 'java' on PATH" in r.stderr
