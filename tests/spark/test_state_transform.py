"""State as data (``read_states``/``write_checkpoint``): a checkpoint's state read as a DataFrame, written as a new
checkpoint and read again is the same state (a sessionize job on heap and RocksDB, table and cells layouts, 2 -> 3
partitions; a KeyedProcessOperator's value, list and map state and timers, signed), and the new checkpoint resumes
as the old one would; rows that are not the job's state are refused naming the first, before anything is written."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark import cloudpickle

from statekit.checkpoint import JobChangeError, inspect_checkpoint
from statekit import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from statekit.jobs import recorded_sessions, sessionize
from statekit.jobs.sessionize import SessionOperatorFactory
from statekit.operators import KeyedProcessFunction, KeyedProcessOperator
from statekit.spark import EpochLog, InputError, read_states, run_keyed, write_checkpoint
from statekit.spark.state_json import from_json
from statekit.clickstream import sessionize_reference
from tests.spark_support import FRESH_WORKERS, clickstream, output_rows, statekit_process, succeeded, write_input

pytestmark = pytest.mark.spark
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test module

GAP_MS = 30_000
AGGS = (("sum", 2), ("count", None), ("avg", 2))
"""sessionize's aggregates of ``--agg sum:value --agg count --agg avg:value`` (positions in its row: user_id, ts_ms,
value)."""


def session_factory(layout: str) -> SessionOperatorFactory:
    """The operator ``statekit sessionize --gap 30s`` with ``AGGS`` runs on csv input."""
    return SessionOperatorFactory(GAP_MS, AGGS, ("sum_value", "count", "avg_value"), state_layout=layout)


def rows_of(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


@pytest.fixture(scope="module", params=[("heap", "table", None), ("rocksdb", "cells", None), ("rocksdb", "table", "1k")],
                ids=["heap-table", "rocksdb-cells", "rocksdb-table-moved"])
def sessions_source(request, spark, tmp_path_factory) -> tuple[str, str, str]:
    """A sessionize checkpoint with open sessions (no final epoch) on 2 partitions: (checkpoint, backend, layout).
    With a budget (``spark.statekit.memory_budget``) of 1k, the table holds one row: it moves to cells, and the
    checkpoint holds the sessions as cells beside its moved pages."""
    backend, layout, budget = request.param
    root = tmp_path_factory.mktemp(f"sessions-{backend}")
    inp = write_input(clickstream(600, 16, seed=5), root / "in", files=1)
    if budget is not None:
        spark.conf.set("spark.statekit.memory_budget", budget)
    try:
        sessionize(spark, input=str(inp), output=str(root / "out"), key="user_id", time="ts_ms", gap="30s",
                   watermark_delay="10s", aggs=["sum:value", "count", "avg:value"], backend=backend,
                   state_layout=layout, partitions=2)
    finally:
        spark.conf.unset("spark.statekit.memory_budget")
    ckpt = str(root / "out" / "_checkpoint")
    held = {name for op in inspect_checkpoint(ckpt).operators for p in op.partitions for e in p.epochs
            for name, n in e.states.items() if n["entries"]}
    assert ("sessions" in held) == (layout == "cells" or budget is not None)  # cells, or a table that moved
    return ckpt, backend, layout


def test_sessions_read_write_read_equal_on_three_partitions_and_the_other_backend(spark, sessions_source, tmp_path):
    source, backend, layout = sessions_source
    read = read_states(spark, source)
    assert read.columns == ["user_id", "window_start", "window_end", "sum_value", "count", "avg_value_sum",
                            "avg_value_count"]
    sessions = rows_of(read)
    assert sessions and all(end - start >= GAP_MS and [total, count] == avg for _, start, end, total, count, *avg
                            in sessions)
    assert recorded_sessions(source, "30s") == session_factory(layout)  # the job's operator, from its record
    other = {"heap": "rocksdb", "rocksdb": "heap"}[backend]
    for out, into, partitions in ((tmp_path / "same", backend, 2), (tmp_path / "moved", other, 3)):
        target = out / "_checkpoint"
        metrics = write_checkpoint(spark, read, str(target), output=str(out), source_checkpoint=source,
                                   operator_factory=session_factory(layout), backend=into, partitions=partitions)
        assert (metrics["epoch"], metrics["partitions"], metrics["invalid"]) == (0, partitions, 0)
        assert rows_of(read_states(spark, str(target))) == sessions
        manifests = list(target.glob("sessionize/kg=*/epoch=0/manifest.json"))
        assert len(manifests) == partitions
        assert {json.loads(m.read_text())["backend"] for m in manifests} == {into}
    with pytest.raises(JobChangeError, match="aggregates"):  # the new checkpoint holds this job's state, no other's
        sessionize(spark, input=str(Path(source).parent.parent / "in"), output=str(tmp_path / "same"), key="user_id",
                   time="ts_ms", gap="30s", watermark_delay="10s", aggs=["count"], mode="batch")
    source_record = json.loads((Path(source) / "_job" / "job.json").read_text())
    written = json.loads((tmp_path / "moved" / "_checkpoint" / "_job" / "job.json").read_text())
    carried = ("backend", "partitions", "output", "spark_checkpoint")  # the writer's own; the resumed job's anyway
    assert {k: v for k, v in written.items() if k not in carried} == \
        {k: v for k, v in source_record.items() if k not in carried}


INPUT_SCHEMA = "k STRING, ts BIGINT, value BIGINT, category STRING"
RESULT_SCHEMA = "k STRING, ts BIGINT, what STRING, n BIGINT, total BIGINT, buckets BIGINT"
KEY = "transform-test-key"


class Profile(KeyedProcessFunction):
    """Values with no plain JSON form in each kind of state (bytes in a dict, tuples in a list, integer map keys),
    and an event-time timer a second after each element."""

    seen = ValueStateDescriptor("seen")
    recent = ListStateDescriptor("recent")
    buckets = MapStateDescriptor("buckets")

    def open(self, context):
        self.s, self.r, self.b = (context.get_state(self.seen), context.get_list_state(self.recent),
                                  context.get_map_state(self.buckets))

    def process_element(self, row, ctx):
        value, category = row
        before = self.s.value() or {"n": 0, "last": b""}
        self.s.update({"n": before["n"] + 1, "last": category.encode()})
        self.r.add((value, category))
        self.b.put(value % 5, (self.b.get(value % 5) or 0) + 1)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 1_000)
        yield (ctx.get_current_key(), ctx.timestamp(), "element", *self.summary())

    def on_timer(self, timestamp, ctx):
        yield (ctx.get_current_key(), timestamp, "timer", *self.summary())

    def summary(self) -> tuple[int, int, int]:
        return self.s.value()["n"], sum(v for v, _ in self.r.get()), len(list(self.b.keys()))


def profile_records(start: int, n: int) -> list[tuple]:
    return [(f"k{i % 7}", 10_000 + 300 * i, i % 11, "abc"[i % 3]) for i in range(start, start + n)]


def run_profile(spark, df, checkpoint: Path, output: Path, backend: str = "heap", mode: str | None = None):
    return run_keyed(df, key="k", time="ts", columns=["value", "category"],
                     operator_factory=lambda: KeyedProcessOperator(Profile()), result_schema=RESULT_SCHEMA,
                     output=str(output), checkpoint=str(checkpoint), partitions=2, config={"backend": backend},
                     watermark_delay=5_000, mode=mode, operator_id="profile")


@pytest.fixture(scope="module")
def profile_source(spark, tmp_path_factory) -> Path:
    """A KeyedProcessOperator's signed checkpoint on heap after one streaming epoch (its output beside it): its
    timers are still set."""
    root = tmp_path_factory.mktemp("profile")
    (root / "in").mkdir()
    pq.write_table(pa.Table.from_pylist([dict(zip(("k", "ts", "value", "category"), r)) for r in profile_records(0, 60)]),
                   root / "in" / "part-0.parquet")
    spark.conf.set("spark.statekit.checkpoint_key", KEY)
    try:
        run_profile(spark, spark.readStream.schema(INPUT_SCHEMA).parquet(str(root / "in")), root / "ckpt",
                    root / "out", mode="stream")
    finally:
        spark.conf.unset("spark.statekit.checkpoint_key")
    return root / "ckpt"


def test_process_state_read_write_read_equal_signed_and_resumed_alike(spark, profile_source, tmp_path):
    spark.conf.set("spark.statekit.checkpoint_key", KEY)
    try:
        read = read_states(spark, str(profile_source))
        cells = rows_of(read)
        target = tmp_path / "target-out" / "_checkpoint"
        write_checkpoint(spark, read, str(target), output=str(target.parent), source_checkpoint=str(profile_source),
                         operator_factory=lambda: KeyedProcessOperator(Profile()), backend="rocksdb")
        assert rows_of(read_states(spark, str(target))) == cells
        more = spark.createDataFrame(profile_records(60, 30), INPUT_SCHEMA)
        source = tmp_path / "source"  # resumed as a copy: the module's other tests read the source as it was
        shutil.copytree(profile_source.parent, source)
        for checkpoint, out in ((source / "ckpt", source / "out"), (target, target.parent)):
            run_profile(spark, more, checkpoint, out, backend="rocksdb")
    finally:
        spark.conf.unset("spark.statekit.checkpoint_key")
    kinds = {r[2]: r[1] for r in cells}
    assert kinds == {"value": "seen", "list": "recent", "map": "buckets", "event_timer": "user-timers"}
    values = {kind: [from_json(r[4]) for r in cells if r[2] == kind] for kind in kinds}
    assert all(type(v["last"]) is bytes for v in values["value"])  # exact values: bytes, tuples, integer keys
    assert all(type(t) is tuple for v in values["list"] for t in v)
    assert all(type(k) is int for v in values["map"] for k in v)
    resumed = [rows_of(spark.read.parquet(str(d)).filter("epoch > 0").drop("epoch"))
               for d in (source / "out", target.parent)]
    assert resumed[0] == resumed[1] and any(r[2] == "timer" for r in resumed[0])
    manifest = json.loads(next(target.glob("profile/kg=*/epoch=0/manifest.json")).read_text())
    assert "signature" in manifest
    spark.conf.set("spark.statekit.checkpoint_key", "another-key")
    try:
        with pytest.raises(Exception, match="fails its signature"):
            read_states(spark, str(target)).collect()
    finally:
        spark.conf.unset("spark.statekit.checkpoint_key")


def refused(spark, df, tmp_path, source: str, factory, match: str) -> None:
    """``write_checkpoint`` of ``df`` raises InputError matching ``match``; nothing is written at the target."""
    out = tmp_path / "refused"
    with pytest.raises(InputError, match=re.escape(match)):
        write_checkpoint(spark, df, str(out / "_checkpoint"), output=str(out), source_checkpoint=source,
                         operator_factory=factory)
    assert EpochLog(str(out / "_checkpoint")).last() is None and not out.exists()


def test_bad_sessions_are_refused_naming_the_row(spark, sessions_source, tmp_path):
    from pyspark.sql import functions as F

    source, _, layout = sessions_source
    read = read_states(spark, source)
    first = read.orderBy("user_id", "window_start").first()
    user, start, end = first["user_id"], first["window_start"], first["window_end"]
    one = (F.col("user_id") == user) & (F.col("window_start") == start)
    factory = session_factory(layout)
    refused(spark, read.withColumn("user_id", F.when(one, None).otherwise(F.col("user_id"))), tmp_path, source,
            factory, f"user_id=null, window_start={start}, window_end={end}: null key")
    backwards = read.withColumn("window_end", F.when(one, F.col("window_start") - 1).otherwise(F.col("window_end")))
    refused(spark, backwards, tmp_path, source, factory,
            f"user_id={user}, window_start={start}, window_end={start - 1}: the session ends before it starts")
    overlapping = read.unionByName(read.filter(one).withColumn("window_start", F.col("window_start") + 1)
                                   .withColumn("window_end", F.col("window_end") + 1))
    refused(spark, overlapping, tmp_path, source, factory,
            f"user_id={user}, window_start={start + 1}, window_end={end + 1}: it touches or overlaps an earlier "
            f"session of its key, which ends at {end}: the session rules would have merged them")
    refused(spark, read.withColumn("count", F.col("count").cast("boolean")), tmp_path, source, factory,
            "column 'count' has type boolean; the job reads it as bigint")


def test_bad_cells_are_refused_naming_the_row(spark, profile_source, tmp_path):
    from pyspark.sql import functions as F

    spark.conf.set("spark.statekit.checkpoint_key", KEY)
    try:
        read = read_states(spark, str(profile_source))
        factory = lambda: KeyedProcessOperator(Profile())  # noqa: E731
        one = (F.col("k") == "k3") & (F.col("state") == "seen")
        refused(spark, read.withColumn("k", F.when(one, None).otherwise(F.col("k"))), tmp_path, str(profile_source),
                factory, "k=null, state=seen, namespace=null: null key")
        refused(spark, read.unionByName(read.filter(one).withColumn("value", F.lit("41"))), tmp_path,
                str(profile_source), factory, "k=k3, state=seen, namespace=null: two rows for one key")
        refused(spark, read.withColumn("value", F.when(F.col("state") == "recent", F.lit('{"a": 1}'))
                                       .otherwise(F.col("value"))), tmp_path, str(profile_source), factory,
                "state=recent, namespace=null: a list state's value is a JSON array")
        refused(spark, read.withColumn("k", F.length("k")), tmp_path, str(profile_source), factory,
                "column 'k' has type int")
    finally:
        spark.conf.unset("spark.statekit.checkpoint_key")


@pytest.mark.slow
def test_a_transformed_checkpoint_resumes_in_a_fresh_process(spark, tmp_path):
    """Two keys' open sessions dropped and one key's sum fixed, written on 3 partitions; `statekit sessionize`
    in a new application resumes it over the rest of the clicks: the dropped keys start afresh, the fixed sum
    carries into the session it continues, every other session is as a job over all the clicks has it."""
    from pyspark.sql import functions as F

    clicks = clickstream(1500, 30, seed=11)
    half = len(clicks) // 2
    first_in = write_input(clicks[:half], tmp_path / "first", files=1)
    rest_in = write_input(clicks[half:], tmp_path / "rest", files=1)
    source_out, out = tmp_path / "source", tmp_path / "out"
    sessionize(spark, input=str(first_in), output=str(source_out), key="user_id", time="ts_ms", gap="30s",
               watermark_delay="10s", aggs=["sum:value", "count"], backend="heap", state_layout="table", partitions=2)
    read = read_states(spark, str(source_out / "_checkpoint"))
    opened = rows_of(read)
    users = sorted({r[0] for r in opened})
    dropped, fixed = set(users[:2]), users[2]
    changed = (read.filter(~F.col("user_id").isin(*dropped))
               .withColumn("sum_value", F.when(F.col("user_id") == fixed, F.col("sum_value") + 1000)
                           .otherwise(F.col("sum_value"))))
    metrics = write_checkpoint(spark, changed, str(out / "_checkpoint"), output=str(out),
                               source_checkpoint=str(source_out / "_checkpoint"),
                               operator_factory=recorded_sessions(str(source_out / "_checkpoint"), "30s"), partitions=3)
    assert metrics["partitions"] == 3 and metrics["restored"] > 0
    r = succeeded(statekit_process("sessionize", "--input", str(rest_in), "--output", str(out), "--key", "user_id",
                                   "--time", "ts_ms", "--gap", "30s", "--watermark-delay", "10s", "--agg", "sum:value",
                                   "--agg", "count", "--backend", "heap", "--partitions", "3", "--final",
                                   "--master", "local[2]", *FRESH_WORKERS))
    assert "0 late, 0 invalid" in r.stdout
    closed = set(output_rows(spark, source_out))
    fixed_open = [(start, end) for user, start, end, _, _ in opened if user == fixed]
    expected, carried = [], 0
    for user, start, end, total, count in sessionize_reference(clicks, GAP_MS):
        if user in dropped or (user, start, end, total, count) in closed:
            continue
        grew = sum(user == fixed and start <= s and e <= end for s, e in fixed_open)
        expected.append((user, start, end, total + 1000 * grew, count))
        carried += grew
    assert fixed_open and carried == len(fixed_open)  # each fixed session is continued or closed in the output
    expected += sessionize_reference([c for c in clicks[half:] if c.user_id in dropped], GAP_MS)
    assert output_rows(spark, out) == sorted(expected)


def test_an_initial_epoch_with_a_row_its_routing_refuses_commits_nothing(spark, tmp_path):
    """The last guard behind the checks: an initial state's row that the epoch's routing refuses (here a time past
    the operators' bound) fails the epoch before its commit, where a job's records would go to ``_invalid``."""
    from statekit.spark.event_time import MILLIS
    from statekit.spark.initial_state import InitialState
    from statekit.spark.records import TIME_BOUND
    from statekit.spark.state_cells import CellsRestore

    state = spark.createDataFrame([("k1", "seen", "value", "null", "1", 1), ("k2", "seen", "value", "null", "2",
                                                                              TIME_BOUND + 1)],
                                  f"k STRING, state STRING, kind STRING, namespace STRING, value STRING, {MILLIS} BIGINT")
    initial = InitialState(state, CellsRestore("k", {"seen": ["value", False, 1]}, {}, 128), only=True)
    with pytest.raises(InputError, match="rows of the initial state are not state"):
        run_keyed(spark.createDataFrame([], INPUT_SCHEMA), key="k", time="ts", columns=["value", "category"],
                  operator_factory=lambda: KeyedProcessOperator(Profile()), result_schema=RESULT_SCHEMA,
                  output=str(tmp_path / "out"), partitions=2, config={"backend": "heap"}, initial_state=initial)
    assert EpochLog(str(tmp_path / "out" / "_checkpoint")).last() is None


def _count_rows(operator, table) -> int:
    """A restore that keeps nothing: how many rows (keys) it was given."""
    return table.num_rows


def test_an_initial_state_of_keys_alone_commits_its_epoch(spark, tmp_path):
    """An initial state may hold only the key column (and its times): its routing takes the times from MILLIS, not
    from a second column it does not have."""
    from statekit.spark.event_time import MILLIS
    from statekit.spark.initial_state import InitialState

    state = spark.createDataFrame([("k1", 5), ("k2", 7)], f"k STRING, {MILLIS} BIGINT")
    spark.conf.set("spark.statekit.state_host", "worker")  # the test's restore goes to Spark's workers, pickled
    try:
        run_keyed(spark.createDataFrame([], INPUT_SCHEMA), key="k", time="ts", columns=["value", "category"],
                  operator_factory=lambda: KeyedProcessOperator(Profile()), result_schema=RESULT_SCHEMA,
                  output=str(tmp_path / "out"), partitions=2, config={"backend": "heap"},
                  initial_state=InitialState(state, _count_rows, only=True))
    finally:
        spark.conf.unset("spark.statekit.state_host")
    assert EpochLog(str(tmp_path / "out" / "_checkpoint")).last().epoch == 0
