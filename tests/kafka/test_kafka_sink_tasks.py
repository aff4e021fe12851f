"""The Kafka sink's per-task transactions against a real broker (tools/kafka/broker.py, one for the module:
conftest.py), in the shared SparkSession: results and side outputs once under ``read_committed`` across 3 sink
partitions through replays, a replay after only some sink partitions committed (it sends only the others), a
zombie producer of a sink partition's id fenced, and a changed sink partition count refused."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from statekit.spark import KafkaSink
from statekit.spark.kafka_transactions import EPOCH_HEADER, RowEncoder
from tests.kafka_support import consume, create_topic

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

RESULT_SCHEMA = "user_id string, window_start long, count long"
LATE_SCHEMA = "user_id string, ts_ms long, value long, reason string"
INVALID_SCHEMA = "value string, reason string"


def _sink(broker: str, tmp_path: Path, topic: str, partitions: int = 3, **kwargs: Any) -> KafkaSink:
    create_topic(broker, topic, 2)
    for side in kwargs.values():
        create_topic(broker, side, 2)
    sink = KafkaSink(broker, topic, sink_partitions=partitions, **kwargs)
    sink.open(str(tmp_path / "checkpoint"), "sessionize")
    return sink


def _results(epoch: int) -> list[tuple]:
    return [(f"user_{i % 23}", epoch * 1_000_000 + i, i) for i in range(60)]


def _seen(broker: str, topic: str, committed_only: bool = True) -> Counter:
    return Counter((key, json.dumps(value, sort_keys=True), epoch)
                   for key, value, epoch in consume(broker, topic, committed_only))


def _expected(rows: list[tuple], epoch: int) -> Counter:
    return Counter((r[0].encode(), json.dumps(dict(zip(("user_id", "window_start", "count"), r)), sort_keys=True),
                    epoch) for r in rows)


def test_results_and_side_outputs_once_across_sink_partitions_through_replays(spark, broker, tmp_path):
    sink = _sink(broker, tmp_path, "tasks-results", late_topic="tasks-late", invalid_topic="tasks-invalid")
    late = [("user_1", 5, 7, "late: 5 < watermark 10")]
    invalid = [("{not json", "unparsable json message"), (None, "null message value"), ("x", "null key")]
    for epoch in (0, 1, 1, 0):  # each epoch once, then replayed
        sink.write_side("late", spark.createDataFrame([(u, t + epoch, v, r) for u, t, v, r in late], LATE_SCHEMA),
                        epoch)
        sink.write_side("invalid", spark.createDataFrame(invalid, INVALID_SCHEMA), epoch)
        sink.write(spark.createDataFrame(_results(epoch), RESULT_SCHEMA), epoch)
    expected = _expected(_results(0), 0) + _expected(_results(1), 1)
    assert _seen(broker, "tasks-results") == expected
    assert _seen(broker, "tasks-results", committed_only=False) == expected  # a replay sent nothing, not even aborted
    assert sink.markers() == [1, 1, 1] and sink.written_through() == 1
    per_key: dict[bytes, list[int]] = {}
    for key, value, _ in consume(broker, "tasks-results"):
        per_key.setdefault(key, []).append(value["window_start"])
    assert all(starts == sorted(starts) for starts in per_key.values())  # each key's records in the results' order
    late_seen = sorted((v["ts_ms"], e) for _, v, e in consume(broker, "tasks-late", committed_only=False))
    assert late_seen == [(5, 0), (6, 1)]
    invalid_seen = Counter((v["value"], v["reason"], e) for _, v, e in consume(broker, "tasks-invalid", False))
    assert invalid_seen == Counter((v, r, e) for e in (0, 1) for v, r in invalid)
    assert set(_sinks_of(spark.createDataFrame(_results(0), RESULT_SCHEMA), sink)) == {0, 1, 2}  # split 3 ways


def _sinks_of(df: Any, sink: KafkaSink) -> list[int]:
    encoded = RowEncoder(sink.topic, "user_id", sink.sink_partitions)(df.toArrow().to_batches())
    return [s for batch in encoded for s in batch.column("sink").to_pylist()]


def test_a_replay_after_some_sink_partitions_committed_sends_only_the_others(spark, broker, tmp_path):
    """Sink partitions 0 and 2 of epoch 0 committed by their tasks' writer (as a driver killed before the epoch's
    commit leaves them), then the whole epoch written again: only partition 1's records are sent; the topic holds
    each record once even read_uncommitted. Then a sink of the same id with another partition count is refused, and
    a key that is no result column."""
    sink = _sink(broker, tmp_path, "tasks-partial")
    df = spark.createDataFrame(_results(0), RESULT_SCHEMA)
    encoded = [r for b in RowEncoder(sink.topic, "user_id", 3)(df.toArrow().to_batches()) for r in b.to_pylist()]
    writer = sink.partition_writer(0)
    for i in (0, 2):
        assert writer.write(i, [(r["topic"], r["key"], r["value"]) for r in encoded if r["sink"] == i]) > 0
    assert sink.markers() == [0, None, 0] and sink.written_through() is None
    assert any(r["sink"] == 1 for r in encoded)
    sink.write(df, 0)
    assert sink.markers() == [0, 0, 0]
    assert _seen(broker, "tasks-partial", committed_only=False) == _expected(_results(0), 0)
    assert writer.write(1, [("tasks-partial", b"k", b"{}")]) is None  # the marker has it: nothing sent
    other = KafkaSink(broker, "tasks-partial", sink_partitions=2, transactional_id=sink.transactional_id)
    with pytest.raises(ValueError, match="with 3 sink partitions .* now has 2"):
        other.write(df, 1)
    with pytest.raises(ValueError, match="key='nope' is not a result column"):
        KafkaSink(broker, "tasks-partial", key="nope").write(df, 1)


def test_a_zombie_producer_of_a_sink_partition_is_fenced(spark, broker, tmp_path):
    """A producer of sink partition 1's transactional id (a task attempt thought dead) sends a record and has not
    committed when the epoch is written: the new attempt's init aborts its transaction and its commit then fails;
    a read_committed consumer never sees its record."""
    from confluent_kafka import KafkaException, Producer

    sink = _sink(broker, tmp_path, "tasks-zombie", partitions=2)
    zombie = Producer({"bootstrap.servers": broker, "transactional.id": f"{sink.transactional_id}-1"})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce("tasks-zombie", key=b"zombie", value=b'{"zombie": true}', headers=[(EPOCH_HEADER, b"0")])
    assert zombie.flush(30) == 0
    sink.write(spark.createDataFrame(_results(0), RESULT_SCHEMA), 0)
    with pytest.raises(KafkaException):
        zombie.commit_transaction(30)
    assert _seen(broker, "tasks-zombie") == _expected(_results(0), 0)
    uncommitted = _seen(broker, "tasks-zombie", committed_only=False)
    assert uncommitted - _expected(_results(0), 0) == Counter([(b"zombie", '{"zombie": true}', 0)])  # in the log
