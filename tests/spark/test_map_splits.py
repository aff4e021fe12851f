"""An epoch's tasks commit only on a whole input: the end markers of every map split that routed its rows. On
Spark Connect the splits are counted from the marks they leave in the epoch's staging area (no job counts them)."""

from __future__ import annotations

from functools import partial

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from statekit.spark import records
from statekit.spark.event_time import MILLIS
from statekit.spark.map_splits import MapSplits
from statekit.spark.output_dir import OutputDir
from statekit.spark.records import MARK, POSITION, ROUTING_COLUMNS, Router, routing_values

PARTITIONS = 2
TYPES = {"long": pa.int64(), "int": pa.int32(), "string": pa.string()}
ROUTED = pa.schema([("k", pa.string()), ("t", pa.int64()), *((n, TYPES[t]) for n, t in ROUTING_COLUMNS)])


class _Split:
    """The task context of map split ``split`` (what the router asks of pyspark's)."""

    def __init__(self, split: int) -> None:
        self.split = split

    def partitionId(self) -> int:  # noqa: N802 -- pyspark's name
        return self.split


def _route(router: Router, split: int, monkeypatch: pytest.MonkeyPatch) -> pa.Table:
    """What map split ``split`` sends on: its rows routed, then one end marker per partition."""
    import pyspark

    monkeypatch.setattr(pyspark.TaskContext, "get", classmethod(lambda cls: _Split(split)))
    monkeypatch.setattr(records, "start_task", lambda: None)
    batch = pa.record_batch({"k": [f"user-{split}", "user-x"], "t": [1_000 + split, 2_000],
                             MILLIS: pa.array([1_000 + split, 2_000], pa.int64()),
                             POSITION: pa.array([split << 33, (split << 33) + 1], pa.int64())})
    return pa.Table.from_batches(list(router([batch])), schema=ROUTED)


def _ends(routed: list[pa.Table], partition: int) -> int:
    """How many distinct splits' end markers ``partition``'s task received from ``routed``."""
    table = pa.concat_tables(routed)
    ends = table.filter(pc.equal(table.column("_p"), partition)).column(MARK).drop_null()
    return len(set(ends.to_pylist()))


def test_counted_splits_are_every_split_that_routed_its_rows_and_a_short_input_is_refused(tmp_path, monkeypatch):
    output = OutputDir(str(tmp_path / "out"))
    splits = MapSplits.counted(output.staging_dir(4, "map-splits"))
    router = Router("k", "t", PARTITIONS, 128, routing_values(PARTITIONS), ROUTED, routed=partial(splits.mark, output))
    routed = [_route(router, split, monkeypatch) for split in range(3)]
    for partition in range(PARTITIONS):
        splits.check(output, _ends(routed, partition), 4, partition)  # whole: every split's markers
    with pytest.raises(RuntimeError, match=r"epoch 4 partition 1: input truncated \(2 of 3 map outputs received\)"):
        splits.check(output, _ends(routed[:2], 1), 4, 1)  # an orphaned worker's input ended early
    _route(router, 1, monkeypatch)  # a split's retry marks it again: still three
    splits.check(output, 3, 4, 0)
    output.storage.write(f"{splits.marks}/7", b"")  # a mark no split of this run left: refused, never a short commit
    with pytest.raises(RuntimeError, match=r"input truncated \(3 of 4"):
        splits.check(output, 3, 4, 0)
    again = MapSplits.counted(output.staging_dir(4, "map-splits"))  # a replay of the epoch counts its own splits' marks
    assert again.marks != splits.marks
    with pytest.raises(RuntimeError, match=r"input truncated \(3 of 0"):
        again.check(output, 3, 4, 0)
    output.drop_staging(4)  # gone with the epoch's staging
    assert output.storage.list_files(splits.marks) == []


def test_a_known_count_leaves_no_marks(tmp_path, monkeypatch):
    output = OutputDir(str(tmp_path / "out"))
    splits = MapSplits(2)
    router = Router("k", "t", PARTITIONS, 128, routing_values(PARTITIONS), ROUTED)
    routed = [_route(router, split, monkeypatch) for split in range(2)]
    splits.mark(output, 0)
    assert output.storage.list_files("") == []
    splits.check(output, _ends(routed, 0), 0, 0)
    with pytest.raises(RuntimeError, match=r"input truncated \(1 of 2"):
        splits.check(output, _ends(routed[1:], 0), 0, 0)


def test_a_rows_sequence_is_its_position_whichever_split_routes_it(monkeypatch):
    """The tasks order equal times by ``SEQ``: it is the row's position in the input as planned, not its split's
    number, so a retry whose merged splits group the input otherwise orders ties the same."""
    import pyspark

    router = Router("k", "t", PARTITIONS, 128, routing_values(PARTITIONS), ROUTED)
    monkeypatch.setattr(records, "start_task", lambda: None)
    batch = pa.record_batch({"k": ["a", "b", "a"], "t": [5, 5, 5], MILLIS: pa.array([5, 5, 5], pa.int64()),
                             POSITION: pa.array([(3 << 33) + 9, 7, 1 << 33], pa.int64())})
    seen = []
    for split in (0, 1):
        monkeypatch.setattr(pyspark.TaskContext, "get", classmethod(lambda cls, s=split: _Split(s)))
        table = pa.Table.from_batches(list(router([batch])), schema=ROUTED)
        seen.append(table.filter(pc.is_null(table[MARK]))[records.SEQ].to_pylist())
    assert seen == [[(3 << 33) + 9, 7, 1 << 33]] * 2


@pytest.mark.spark
def test_a_classic_plans_split_count_is_that_of_its_rows_rdd(spark, tmp_path):
    """``rdd_partitions`` (the physical plan's RDD) counts the splits pyspark's ``df.rdd`` has, where a merge asks
    for more splits than there are, for fewer, and for files packed into splits by size."""
    from pyspark.sql import functions as F

    from statekit.spark.jvm import rdd_partitions

    path = str(tmp_path / "in")
    spark.range(0, 50_000, 1, 3).select(F.col("id").cast("string").alias("k")).write.csv(path)
    files = spark.read.schema("k string").csv(path)
    frames = [spark.range(0, 10, 1, 1).coalesce(4), spark.range(0, 100, 1, 7).coalesce(2),
              files.select("*", F.monotonically_increasing_id().alias(POSITION)).coalesce(2), files,
              spark.range(0, 10, 1, 3).union(spark.range(0, 5, 1, 2))]
    counts = [rdd_partitions(df) for df in frames]
    assert counts == [df.rdd.getNumPartitions() for df in frames]
    assert (counts[0], counts[1], counts[4]) == (1, 2, 5)  # a merge keeps what there is, takes many to 2; a union adds
