"""run_keyed as users write against it: every operator kind, batch and streaming, both backends, one and
three partitions, against a plain-Python reference; rows are exactly the tuple of ``columns``; results
are checked against ``result_schema`` before anything is committed."""

from __future__ import annotations

import os
import random
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from pyspark import cloudpickle

from statekit import AggregateFunction, ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from statekit.operators import (KeyedProcessFunction, KeyedProcessOperator, ProcessWindowFunction,
                                SlidingEventTimeWindows, TumblingEventTimeWindows, WindowOperator)
from statekit.spark import run_keyed
from statekit.testing import BACKENDS

pytestmark = pytest.mark.spark
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test module

INPUT_SCHEMA = "k STRING, ts BIGINT, value BIGINT, category STRING"
TIMER_DELAY = 1_000


def records(n: int = 240, keys: int = 8, seed: int = 3) -> list[tuple]:
    """(k, ts, value, category) with distinct, increasing times per key."""
    rng = random.Random(seed)
    return [(f"k{rng.randrange(keys)}", 10_000 + 37 * i, rng.randrange(100), rng.choice("abc")) for i in range(n)]


class SumCount(AggregateFunction):
    """Row is (value,): the columns argument decides it."""

    def create_accumulator(self):
        return (0, 0)

    def add(self, row, acc):
        return (acc[0] + row[0], acc[1] + 1)

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])

    def get_result(self, acc):
        return acc


class SlidingRows(ProcessWindowFunction):
    def process(self, key, context, elements):
        values = [row[1] for row in elements]  # row is (category, value)
        yield (key, context.window.start, context.window.end, len(values), max(values))


class Profile(KeyedProcessFunction):
    """Value, list and map state plus event-time timers; key and time come from the context."""

    count = ValueStateDescriptor("count", default=0)
    values = ListStateDescriptor("values")
    categories = MapStateDescriptor("categories")

    def open(self, context):
        self.c, self.v, self.m = (context.get_state(self.count), context.get_list_state(self.values),
                                  context.get_map_state(self.categories))

    def process_element(self, row, ctx):
        value, category = row
        self.c.update(self.c.value() + 1)
        self.v.add(value)
        self.m.put(category, True)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + TIMER_DELAY)
        yield (ctx.get_current_key(), ctx.timestamp(), "element", self.c.value(), sum(self.v.get()), len(self.m.keys()))

    def on_timer(self, timestamp, ctx):
        yield (ctx.get_current_key(), timestamp, "timer", 0, 0, 0)


def _reference(kind: str, recs: list[tuple]) -> list[tuple]:
    if kind == "aggregate":
        acc = defaultdict(lambda: [0, 0])
        for k, ts, v, _ in recs:
            a = acc[(k, ts - ts % 1000)]
            a[0] += v
            a[1] += 1
        return sorted(tuple(a) for a in acc.values())
    if kind == "process_window":
        wins = defaultdict(list)
        for k, ts, v, _ in recs:
            last = ts - ts % 500
            for start in range(last, ts - 1500, -500):
                wins[(k, start)].append(v)
        return sorted((k, s, s + 1500, len(vs), max(vs)) for (k, s), vs in wins.items())
    out, state = [], defaultdict(lambda: [0, 0, set()])
    for k, ts, v, cat in sorted(recs, key=lambda r: r[1]):
        st = state[k]
        st[0] += 1
        st[1] += v
        st[2].add(cat)
        out.append((k, ts, "element", st[0], st[1], len(st[2])))
    out += [(k, t, "timer", 0, 0, 0) for k, t in {(k, ts + TIMER_DELAY) for k, ts, _, _ in recs}]
    return sorted(out)


JOBS = {
    "aggregate": (lambda: WindowOperator(TumblingEventTimeWindows.of(1000), function=SumCount()),
                  ["value"], "total BIGINT, count BIGINT"),
    "process_window": (lambda: WindowOperator(SlidingEventTimeWindows.of(1500, 500), function=SlidingRows()),
                       ["category", "value"], "k STRING, start BIGINT, end BIGINT, n BIGINT, top BIGINT"),
    "keyed_process": (lambda: KeyedProcessOperator(Profile()), ["value", "category"],
                      "k STRING, ts BIGINT, what STRING, count BIGINT, total BIGINT, distinct BIGINT"),
}


def _input(spark, recs: list[tuple], tmp_path: Path, stream: bool):
    if not stream:
        return spark.createDataFrame(recs, INPUT_SCHEMA)
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path / "in"
    d.mkdir()
    half = len(recs) // 2
    for i, part in enumerate((recs[:half], recs[half:])):  # two files, two epochs, the older file first
        path = d / f"part-{i}.parquet"
        pq.write_table(pa.table(dict(zip(["k", "ts", "value", "category"], map(list, zip(*part))))), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    return spark.readStream.schema(INPUT_SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(d))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", sorted(JOBS))
@pytest.mark.parametrize("stream,partitions", [(False, 1), (True, 3)])
def test_each_operator_kind_through_run_keyed(spark, tmp_path, backend, kind, stream, partitions):
    recs = records()
    factory, columns, schema = JOBS[kind]
    df = _input(spark, recs, tmp_path, stream)
    summary = run_keyed(df, key="k", time="ts", columns=columns, operator_factory=factory, result_schema=schema,
                        output=str(tmp_path / "out"), partitions=partitions, config={"backend": backend},
                        watermark_delay=5_000, final=True)
    assert summary.total("late") == 0 and summary.total("invalid") == 0
    got = sorted(tuple(r) for r in spark.read.parquet(str(tmp_path / "out")).drop("epoch").collect())
    assert got == _reference(kind, recs)


def test_an_input_of_more_partitions_than_slots_is_routed_one_split_per_slot(spark, tmp_path):
    """Each map split pays for a Python worker of the router's: 8 input partitions on 2 slots are read by 2 splits,
    and the windows are those of the plain reference."""
    recs = records()
    factory, columns, schema = JOBS["aggregate"]
    sc = spark.sparkContext
    group = f"statekit-test-{tmp_path.name}"
    sc.setJobGroup(group, "one split per slot")
    try:
        run_keyed(spark.createDataFrame(recs, INPUT_SCHEMA).repartition(8), key="k", time="ts", columns=columns,
                  operator_factory=factory, result_schema=schema, output=str(tmp_path / "out"), partitions=2,
                  final=True)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    tracker = sc.statusTracker()
    stages = [tracker.getStageInfo(s) for j in tracker.getJobIdsForGroup(group)
              for s in tracker.getJobInfo(j).stageIds]
    tasks = [s.numTasks for s in stages if s is not None]
    assert tasks and max(tasks) <= sc.defaultParallelism < 8, tasks
    got = sorted(tuple(r) for r in spark.read.parquet(str(tmp_path / "out")).drop("epoch").collect())
    assert got == _reference("aggregate", recs)


@pytest.mark.parametrize("name", ["_pos", "_seq", "_time_ms"])
def test_a_column_named_as_one_statekit_adds_is_refused_by_name(spark, tmp_path, name):
    from statekit.spark import InputError

    df = spark.createDataFrame(records(8), INPUT_SCHEMA).withColumnRenamed("value", name)
    factory, _, schema = JOBS["aggregate"]
    with pytest.raises(InputError, match=f"column '{name}' has a name statekit gives a column of its own"):
        run_keyed(df, key="k", time="ts", columns=[name], operator_factory=factory, result_schema=schema,
                  output=str(tmp_path / "out"), partitions=1)
    assert not (tmp_path / "out").exists()


class Yields(KeyedProcessFunction):
    def __init__(self, make):
        self.make = make

    def process_element(self, row, ctx):
        yield self.make(ctx.get_current_key(), ctx.timestamp())


@pytest.mark.parametrize("make,message", [
    (lambda k, ts: (k, ts, 1, 2, 3, 4), "5 values expected, got 6 values"),
    (lambda k, ts: "abcde", "5 values expected, got a str, not a tuple"),
    (lambda k, ts: (k, ts), "5 values expected, got 2 values"),
    (lambda k, ts: (k, "late", 1, 2, 3), "result column 'b' (int64)"),
])
def test_results_are_checked_against_the_schema_before_anything_commits(spark, tmp_path, make, message):
    schema = "a STRING, b BIGINT, c BIGINT, d BIGINT, e BIGINT"
    df = spark.createDataFrame(records(20), INPUT_SCHEMA)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    with pytest.raises(Exception) as err:
        run_keyed(df, key="k", time="ts", columns=["value"], operator_factory=lambda: KeyedProcessOperator(Yields(make)),
                  result_schema=schema, output=str(out), checkpoint=str(ckpt), partitions=1)
    text = str(err.value)
    assert message in text and "row 0" in text
    assert "(a string, b int64, c int64, d int64, e int64)" in text  # the result schema, named
    assert not list(out.glob("epoch=*")) and not list(out.glob("_staging/*"))  # nothing published or staged
    assert not list(ckpt.glob("**/manifest.json")) and not list(ckpt.glob("_driver/epoch=*"))  # nothing committed


def test_an_operator_factory_must_make_an_operator(spark, tmp_path):
    df = spark.createDataFrame(records(5), INPUT_SCHEMA)
    with pytest.raises(Exception, match="not a statekit.operators.KeyedOperator"):
        run_keyed(df, key="k", time="ts", operator_factory=lambda: object(), result_schema="a STRING",
                  output=str(tmp_path / "out"), partitions=1)


@pytest.mark.parametrize("argument, setting, message", [
    ({"watermark_delay": "10000"}, None, "watermark_delay '10000': a duration needs a unit"),
    ({"max_ahead": "3600"}, None, "max_ahead '3600': a duration needs a unit"),
    ({}, ("max_ahead", "3600"), "spark.statekit.max_ahead '3600': a duration needs a unit"),
    ({}, ("lease_timeout", "60"), "spark.statekit.lease_timeout '60': a duration needs a unit"),
])
def test_durations_given_as_text_need_a_unit(spark, tmp_path, argument, setting, message):
    """An argument or a Spark setting: "10000" is not read as 10,000 ms (an int is, as the operator API takes it)."""
    df = spark.createDataFrame(records(5), INPUT_SCHEMA)
    if setting:
        spark.conf.set(f"spark.statekit.{setting[0]}", setting[1])
    try:
        with pytest.raises(ValueError, match=f"^{message}"):
            run_keyed(df, key="k", time="ts", columns=["value"], operator_factory=lambda: KeyedProcessOperator(Yields(
                lambda k, ts: (k, ts))), result_schema="a STRING, b BIGINT", output=str(tmp_path / "out"), partitions=1,
                **argument)
    finally:
        if setting:
            spark.conf.unset(f"spark.statekit.{setting[0]}")
    assert not (tmp_path / "out").exists()
