"""Time columns as users have them (issue 37): TIMESTAMP and TIMESTAMP_NTZ columns, ISO-8601 text (with ``Z``,
with offsets, or zone-less read in ``--time-zone``), epoch numbers in ``--time-unit`` and text by ``--time-format``
give exactly the sessions of the plain reference over the same events, with window bounds in the input's kind;
values that do not convert go to ``_invalid/`` with their reason; a resume in a new application keeps the
time spec, and a resume with another one is refused."""

from __future__ import annotations

import csv
import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from statekit.checkpoint import CheckpointError
from statekit.clickstream import Click, sessionize_reference
from statekit.jobs import sessionize
from statekit.spark import InputError
from statekit.spark.event_time import OUT_OF_RANGE, TimeSpec
from statekit.spark.records import TIME_BOUND, Router, routing_values
from tests.spark_support import clickstream, copy_in_name_order, statekit_process, succeeded

pytestmark = pytest.mark.spark
GAP_MS = 30_000
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _clicks(seed: int = 5, whole_seconds: bool = False) -> list[Click]:
    clicks = clickstream(240, 10, seed=seed)
    return [c._replace(ts_ms=c.ts_ms // 1000 * 1000) for c in clicks] if whole_seconds else clicks


def _utc(ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=ms)


def _write_csv(path: Path, rows: list[tuple]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["user_id", "ts", "value"])
        w.writerows(rows)
    return path.parent


def _write_parquet(path: Path, clicks: list[Click], times: pa.Array) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"user_id": [c.user_id for c in clicks], "ts": times, "value": [c.value for c in clicks]}), path)
    return path.parent


def _sessions(spark, out: Path) -> tuple[list[tuple], object, str]:
    """The output's sessions with bounds as integers (a timestamp's microseconds), Spark's type of the bounds,
    and the bounds' Arrow type as written."""
    table = pq.read_table(out, partitioning="hive")
    arrow_type = table.schema.field("window_start").type
    as_int = lambda name: table.column(name).cast(pa.int64()).to_pylist()  # noqa: E731
    rows = sorted(zip(table.column("user_id").to_pylist(), as_int("window_start"), as_int("window_end"),
                      table.column("sum_value").to_pylist(), table.column("count").to_pylist()))
    return rows, spark.read.parquet(str(out)).schema["window_start"].dataType.simpleString(), str(arrow_type)


def _reference(clicks: list[Click], scale) -> list[tuple]:
    """The plain reference's sessions (bounds in ms), bounds mapped by ``scale``."""
    return sorted((u, scale(s), scale(e), total, n) for u, s, e, total, n in sessionize_reference(clicks, GAP_MS))


def _offset_text(ms: int, rng: random.Random) -> str:
    offset = timedelta(minutes=rng.choice([-480, -150, 0, 60, 330]))
    local = _utc(ms).astimezone(timezone(offset))
    return local.isoformat(timespec="milliseconds")  # 2023-11-14T23:13:20.123+01:00


def _us(ms: int) -> int:
    return ms * 1000


def _case(name: str, root: Path, clicks: list[Click]) -> tuple[Path, dict, object, str]:
    """Input directory, extra sessionize arguments, the bounds' scale from ms and Spark's type of the bounds."""
    rng = random.Random(3)
    d = root / name
    if name == "iso-z":
        rows = [(c.user_id, _utc(c.ts_ms).isoformat(timespec="milliseconds").replace("+00:00", "Z"), c.value) for c in clicks]
        return _write_csv(d / "part-0.csv", rows), {}, _us, "timestamp"
    if name == "iso-offsets":
        rows = [(c.user_id, _offset_text(c.ts_ms, rng), c.value) for c in clicks]
        return _write_csv(d / "part-0.csv", rows), {}, _us, "timestamp"
    if name == "iso-zoneless":  # wall-clock times in Berlin, no zone in the text
        berlin = ZoneInfo("Europe/Berlin")
        rows = [(c.user_id, _utc(c.ts_ms).astimezone(berlin).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3], c.value) for c in clicks]
        return _write_csv(d / "part-0.csv", rows), {"time_zone": "Europe/Berlin"}, _us, "timestamp"
    if name == "format":
        zone = timezone(timedelta(hours=-3))
        rows = [(c.user_id, _utc(c.ts_ms).astimezone(zone).strftime("%d/%m/%Y %H:%M:%S.%f")[:-3], c.value) for c in clicks]
        return (_write_csv(d / "part-0.csv", rows), {"time_format": "dd/MM/yyyy HH:mm:ss.SSS", "time_zone": "-03:00"},
                _us, "timestamp")
    if name == "timestamp":  # microseconds beyond the millisecond are dropped
        times = pa.array([_us(c.ts_ms) + rng.randrange(1000) for c in clicks], pa.int64()).cast(pa.timestamp("us", "UTC"))
        return _write_parquet(d / "part-0.parquet", clicks, times), {}, _us, "timestamp"
    if name == "timestamp-ntz":
        times = pa.array([_us(c.ts_ms) + rng.randrange(1000) for c in clicks], pa.int64()).cast(pa.timestamp("us"))
        return _write_parquet(d / "part-0.parquet", clicks, times), {}, _us, "timestamp_ntz"
    if name == "seconds":
        rows = [(c.user_id, c.ts_ms // 1000, c.value) for c in clicks]
        return _write_csv(d / "part-0.csv", rows), {"time_unit": "s"}, lambda ms: ms // 1000, "bigint"
    if name == "micros":
        times = pa.array([_us(c.ts_ms) + rng.randrange(1000) for c in clicks], pa.int64())
        return _write_parquet(d / "part-0.parquet", clicks, times), {"time_unit": "us"}, _us, "bigint"
    raise AssertionError(name)


@pytest.mark.parametrize("name", ["iso-z", "iso-offsets", "iso-zoneless", "format",
                                  pytest.param("timestamp", marks=pytest.mark.lowest_pyspark), "timestamp-ntz",
                                  "seconds", "micros"])
def test_time_columns_give_the_reference_sessions_in_the_input_kind(spark, tmp_path, name):
    clicks = _clicks(whole_seconds=name == "seconds")
    inp, extra, scale, bounds_type = _case(name, tmp_path, clicks)
    out = tmp_path / "out"
    summary = sessionize(spark, input=str(inp), output=str(out), key="user_id", time="ts", gap="30s",
                         aggs=["sum:value", "count"], mode="batch", partitions=2, **extra)
    rows, spark_type, arrow_type = _sessions(spark, out)
    assert rows == _reference(clicks, scale)
    assert spark_type == bounds_type, arrow_type
    assert summary.total("invalid") == 0 and summary.total("records") == len(clicks)


def test_unparsable_times_go_to_invalid_with_their_reason(spark, tmp_path):
    clicks = _clicks(seed=8)
    rows = [(c.user_id, _utc(c.ts_ms).isoformat().replace("+00:00", "Z"), c.value) for c in clicks]
    bad = [("user_1", "2025-13-99", 1), ("user_2", "yesterday", 2), ("user_3", "", 3)]
    inp = _write_csv(tmp_path / "in" / "part-0.csv", rows[:100] + bad + rows[100:])
    out = tmp_path / "out"
    summary = sessionize(spark, input=str(inp), output=str(out), key="user_id", time="ts", gap="30s",
                         aggs=["sum:value", "count"], mode="batch", partitions=2, time_zone="Europe/Berlin")
    invalid = sorted(tuple(r) for r in spark.read.parquet(str(out / "_invalid")).select("user_id", "ts", "reason").collect())
    expected = "(ISO-8601 with a date, or a number in ms; text without a zone in Europe/Berlin)"
    assert invalid == [("user_1", "2025-13-99", f"unparsable time: '2025-13-99' {expected}"),
                       ("user_2", "yesterday", f"unparsable time: 'yesterday' {expected}"),
                       ("user_3", None, "null time")]
    assert summary.total("invalid") == 3 and summary.total("records") == len(clicks)
    assert summary.epochs[0]["invalid_reasons"] == {"unparsable time": 2, "null time": 1}
    sessions, spark_type, _ = _sessions(spark, out)  # text with bad values among it: still timestamps
    assert sessions == _reference(clicks, _us) and spark_type == "timestamp"


def test_epoch_numbers_convert_exactly_to_the_millisecond(spark):
    """Seconds with a fraction (text, double, decimal) are their decimal digits, not a double times 1000; the
    other units take whole numbers only (a fraction there is most likely seconds); finer parts round down."""
    from decimal import Decimal

    from pyspark.sql.types import DecimalType, DoubleType, StringType

    ms = [1772352003244, 1772352007000, 1700000000001, 1700000000123, -1500, -1001]
    seconds = [f"{v / 1000:.3f}" for v in ms[:-1]] + ["-1.0005"]  # -1000.5 ms: rounded down to -1001
    finer = ["1772352003.2449999999", "1772352003.999999999"]  # as doubles times 1000: ...245 and ...004000
    cases = [("s", StringType(), seconds + finer + ["1.772352003244E9", "12:00", "1.5e-4"],
              ms + [1772352003244, 1772352003999, 1772352003244, None, 0]),
             ("s", DoubleType(), [float(t) for t in seconds], ms),
             ("s", DecimalType(20, 6), [Decimal(t) for t in seconds], ms),
             ("ms", StringType(), ["1772352003244", "1772352003244.0", "1e3", "1772352003244.5", "1.772352003244"],
              [1772352003244, 1772352003244, 1000, None, None]),
             ("ms", DoubleType(), [1772352003244.0, 1772352003244.5], [1772352003244, None]),
             ("us", StringType(), ["1772352003244999", "-1", "1772352003244999.5"], [1772352003244, -1, None])]
    for unit, dtype, values, expected in cases:
        df = spark.createDataFrame([(v,) for v in values], f"t {dtype.simpleString()}")
        got = [r[0] for r in df.select(TimeSpec(unit).millis("t", dtype)).collect()]
        assert got == expected, (unit, dtype, values)


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_epoch_seconds_with_a_fraction_give_the_reference_sessions_in_every_format(spark, tmp_path, fmt):
    clicks = _clicks(seed=17)
    d = tmp_path / "in"
    d.mkdir()
    if fmt == "csv":
        _write_csv(d / "part-0.csv", [(c.user_id, f"{c.ts_ms / 1000:.3f}", c.value) for c in clicks])
    elif fmt == "json":  # JSON numbers, as a float's shortest text: 1700000000.1, 1700000003.244
        (d / "part-0.json").write_text("".join(json.dumps({"user_id": c.user_id, "ts": c.ts_ms / 1000, "value": c.value})
                                               + "\n" for c in clicks))
    else:
        _write_parquet(d / "part-0.parquet", clicks, pa.array([c.ts_ms / 1000 for c in clicks], pa.float64()))
    out = tmp_path / "out"
    summary = sessionize(spark, input=str(d), output=str(out), key="user_id", time="ts", gap="30s", time_unit="s",
                         aggs=["sum:value", "count"], mode="batch", partitions=2)
    assert summary.total("invalid") == 0 and summary.total("records") == len(clicks)
    rows, spark_type, _ = _sessions(spark, out)
    assert rows == _reference(clicks, lambda ms: ms // 1000) and spark_type == "bigint"


def test_text_without_a_date_goes_to_invalid_with_its_reason(spark, tmp_path):
    """``12:00`` would be today at noon: the same file would give other sessions on another day."""
    clicks = _clicks(seed=19)
    rows = [(c.user_id, _utc(c.ts_ms).isoformat(timespec="milliseconds"), c.value) for c in clicks]
    dateless = [("user_1", "12:00", 1), ("user_2", "T12:00", 2), ("user_3", "12:00:00Z", 3), ("user_4", "T12", 4),
                ("user_5", "12:00:00.5", 5)]
    midnight = Click("user_6", (datetime(2024, 1, 1, tzinfo=timezone.utc) - EPOCH) // timedelta(milliseconds=1), 6)
    inp = _write_csv(tmp_path / "in" / "part-0.csv", rows[:50] + dateless + [("user_6", "2024-01-01", 6)] + rows[50:])
    out = tmp_path / "out"
    summary = sessionize(spark, input=str(inp), output=str(out), key="user_id", time="ts", gap="30s",
                         aggs=["sum:value", "count"], mode="batch", partitions=2)
    invalid = sorted(tuple(r) for r in spark.read.parquet(str(out / "_invalid")).select("user_id", "ts", "reason").collect())
    assert invalid == [(k, t, f"time has no date: {t!r} (it would be read as today's)") for k, t, _ in dateless]
    assert summary.epochs[0]["invalid_reasons"] == {"time has no date": len(dateless)}
    sessions, _, _ = _sessions(spark, out)
    assert sessions == _reference(clicks + [midnight], _us)  # a date alone is its midnight


def test_a_format_names_itself_in_the_reason(spark, tmp_path):
    inp = _write_csv(tmp_path / "in" / "part-0.csv", [("a", "2025-11-24 16:00:01", 1), ("a", "2025-11-24T16:00:02Z", 2)])
    out = tmp_path / "out"
    sessionize(spark, input=str(inp), output=str(out), key="user_id", time="ts", gap="30s", mode="batch",
               aggs=["sum:value", "count"], partitions=1, time_format="yyyy-MM-dd HH:mm:ss")
    reasons = [r.reason for r in spark.read.parquet(str(out / "_invalid")).collect()]
    assert reasons == ["unparsable time: '2025-11-24T16:00:02Z' (format 'yyyy-MM-dd HH:mm:ss'; text without a zone in UTC)"]
    start = (datetime(2025, 11, 24, 16, 0, 1, tzinfo=timezone.utc) - EPOCH) // timedelta(milliseconds=1)
    assert _sessions(spark, out)[0] == [("a", _us(start), _us(start + GAP_MS), 1, 1)]


def test_unusable_time_types_and_settings_are_refused_clearly(spark, tmp_path):
    inp = tmp_path / "in"
    inp.mkdir()
    pq.write_table(pa.table({"user_id": ["a"], "ts": [True]}), inp / "part-0.parquet")
    with pytest.raises(InputError, match=r"time column 'ts' has type boolean: statekit reads TIMESTAMP"):
        sessionize(spark, input=str(inp), output=str(tmp_path / "o1"), key="user_id", time="ts", mode="batch")
    with pytest.raises(ValueError, match=r"--time-format 'HH:mm' has no year \(y\): every time read by it would fall"):
        TimeSpec(format="HH:mm")
    with pytest.raises(ValueError, match=r"--time-zone 'Mars/Base' is not a time zone"):
        sessionize(spark, input=str(inp), output=str(tmp_path / "o2"), key="user_id", time="ts", time_zone="Mars/Base")
    csv_in = _write_csv(tmp_path / "csv" / "part-0.csv", [("a", "1", 1)])
    with pytest.raises(InputError, match=r"--time-format 'yyyy-bb' is not one of Spark's datetime patterns"):
        sessionize(spark, input=str(csv_in), output=str(tmp_path / "o3"), key="user_id", time="ts", mode="batch",
                   time_format="yyyy-bb")
    ts_in = tmp_path / "ts"
    ts_in.mkdir()
    pq.write_table(pa.table({"user_id": ["a"], "ts": pa.array([0], pa.timestamp("us", "UTC"))}), ts_in / "part-0.parquet")
    with pytest.raises(InputError, match=r"--time-format reads text, and time column 'ts' has type timestamp"):
        sessionize(spark, input=str(ts_in), output=str(tmp_path / "o5"), key="user_id", time="ts", mode="batch",
                   time_format="yyyy-MM-dd")
    with pytest.raises(ValueError, match=r"--gap '1500ms' is not a whole number of seconds"):
        sessionize(spark, input=str(csv_in), output=str(tmp_path / "o4"), key="user_id", time="ts", mode="batch",
                   time_unit="s", gap="1500ms")


def test_router_gives_each_time_that_did_not_convert_its_reason():
    """The router reads Spark's milliseconds (null: did not convert) beside the user's values; reasons only for
    the rows that need one, computed from the value as the user wrote it."""
    router = Router("k", "t", 2, 128, routing_values(2), None, 1000, "1d", TimeSpec("s", zone="Europe/Berlin"))
    millis = pa.array([5, None, None, None, TIME_BOUND + 1, 1001, None, 1000], pa.int64())
    values = pa.array(["5", None, "2025-13-99", "99999999999999999999", "x", "y", "z" * 80, "1"])
    ts, why = router._times(millis, values)
    assert ts.to_pylist() == [5, None, None, None, None, None, None, 1000]
    assert why == [None, "null time",
                   "unparsable time: '2025-13-99' (ISO-8601 with a date, or a number in s; text without a zone in Europe/Berlin)",
                   "time out of range [-2**62, 2**62] ms", "time out of range [-2**62, 2**62] ms",
                   "time ahead of the clock: 1001 > 1000 (max_ahead 1d)",
                   f"unparsable time: '{'z' * 60}...' (ISO-8601 with a date, or a number in s; text without a zone in Europe/Berlin)",
                   None]
    ts, why = router._times(pa.array([1, 2], pa.int64()), pa.array([1.5, 2.5]))
    assert ts.to_pylist() == [1, 2] and why == []  # all valid: no reasons list
    _, why = router._times(pa.array([None, None, None], pa.int64()), pa.array([1e300, float("nan"), float("-inf")]))
    assert why == [OUT_OF_RANGE, "time is not a finite number: nan", "time is not a finite number: -inf"]
    ms = Router("k", "t", 2, 128, routing_values(2), None, 1000, "1d", TimeSpec("ms"))
    _, why = ms._times(pa.array([None, None, None], pa.int64()), pa.array(["1.5", "12:00", "T12:00:00Z"]))
    assert why == ["time is not a whole number of ms: 1.5 (epoch seconds? pass --time-unit s)",
                   "time has no date: '12:00' (it would be read as today's)",
                   "time has no date: 'T12:00:00Z' (it would be read as today's)"]


def _cli(inp: Path, out: Path, *extra: str) -> None:
    succeeded(statekit_process("sessionize", "--input", str(inp), "--output", str(out), "--key", "user_id", "--time",
                               "ts", "--gap", "30s", "--watermark-delay", "10s", "--agg", "sum:value", "--agg", "count",
                               "--partitions", "2", "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                               "--conf", "spark.python.worker.reuse=false", *extra))


@pytest.mark.slow
def test_timestamp_input_resumes_in_a_new_application_and_refuses_another_time_spec(spark, tmp_path):
    clicks = _clicks(seed=13)
    staged = tmp_path / "staged"
    half = len(clicks) // 2
    for i, part in enumerate((clicks[:half], clicks[half:])):
        times = pa.array([_us(c.ts_ms) for c in part], pa.int64()).cast(pa.timestamp("us", "UTC"))
        _write_parquet(staged / f"part-{i}.parquet", part, times)
    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    for i, f in enumerate(sorted(staged.iterdir())):
        copy_in_name_order([f], inp, first=i)
        _cli(inp, out, *(["--final"] if i == 1 else []))
    rows, spark_type, _ = _sessions(spark, out)
    assert rows == _reference(clicks, _us) and spark_type == "timestamp"
    with pytest.raises(CheckpointError, match=r"time column, type and reading .*\"unit\": \"s\""):
        sessionize(spark, input=str(inp), output=str(out), key="user_id", time="ts", gap="30s",
                   watermark_delay="10s", aggs=["sum:value", "count"], partitions=2, time_unit="s")
