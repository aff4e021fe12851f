"""The Kafka sink's per-task transactions against a real broker (tools/kafka/broker.py, one for the module:
conftest.py), in the shared SparkSession: results and side outputs once under ``read_committed`` across 3 sink
partitions through replays, a replay after only some sink partitions committed (it sends only the others), a
zombie producer of a sink partition's id fenced, a changed sink partition count refused, and a topic the driver-side
sink of earlier versions wrote taken over (its epochs not sent again, its open transaction aborted, a garbage marker
in its group refused)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from statekit.spark import KafkaSink
from statekit.spark.kafka_transactions import EPOCH_HEADER, RowEncoder, legacy_group
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


def _legacy_epoch(broker: str, sink: KafkaSink, epoch: int) -> Any:
    """The driver-side sink of earlier versions (commit 0de68aa) sending ``epoch``: its records and its marker (group
    ``<base>-epochs``, offset ``epoch + 1`` on partition 0, metadata ``{"epoch": epoch}``) in one transaction of
    id ``<base>``, left open: its producer, for the caller to commit or to leave (killed before its commit). Its
    transaction timeout is 5 minutes, so that only a fence aborts it within a test."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": broker, "transactional.id": sink.transactional_id,
                         "transaction.timeout.ms": 300_000})
    producer.init_transactions(30)
    producer.begin_transaction()
    for user, start, count in _results(epoch):
        producer.produce(sink.topic, key=user.encode(), headers=[(EPOCH_HEADER, str(epoch).encode())],
                         value=json.dumps({"user_id": user, "window_start": start, "count": count}).encode())
    group = Consumer({"bootstrap.servers": broker, "group.id": legacy_group(sink.transactional_id)})
    marker = TopicPartition(sink.topic, 0, epoch + 1, json.dumps({"epoch": epoch}))
    producer.send_offsets_to_transaction([marker], group.consumer_group_metadata(), 30)
    group.close()
    assert producer.flush(30) == 0
    return producer


def test_epochs_the_driver_side_sink_committed_are_not_sent_again(spark, broker, tmp_path):
    """A topic whose epochs 0 and 1 the driver-side sink of earlier versions committed, then the job resumed with
    this sink: replays of epochs 1 and 0 send nothing (the legacy marker holds them, for every sink partition),
    epoch 2 is sent; a read_committed consumer sees each record once."""
    sink = _sink(broker, tmp_path, "tasks-legacy")
    for epoch in (0, 1):
        _legacy_epoch(broker, sink, epoch).commit_transaction(30)
    assert sink.legacy_marker() == 1 and sink.markers() == [None, None, None] and sink.written_through() == 1
    for epoch in (1, 0, 2):
        sink.write(spark.createDataFrame(_results(epoch), RESULT_SCHEMA), epoch)
    assert sink.markers() == [2, 2, 2] and sink.written_through() == 2
    expected = _expected(_results(0), 0) + _expected(_results(1), 1) + _expected(_results(2), 2)
    assert _seen(broker, "tasks-legacy") == expected
    assert _seen(broker, "tasks-legacy", committed_only=False) == expected


def test_a_transaction_the_driver_side_sink_left_open_is_aborted(spark, broker, tmp_path):
    """The driver-side sink committed epoch 0 and was killed in epoch 1 after sending its records and marker, before
    the commit; the resumed job's first epoch (1) fences the old id: its transaction is aborted (its commit then
    fails), its records are never visible under read_committed, and they do not hold the topic back: the new
    sink's epoch 1 is read to the end."""
    from confluent_kafka import KafkaException

    sink = _sink(broker, tmp_path, "tasks-legacy-open")
    _legacy_epoch(broker, sink, 0).commit_transaction(30)
    killed = _legacy_epoch(broker, sink, 1)
    sink.write(spark.createDataFrame(_results(1), RESULT_SCHEMA), 1)
    with pytest.raises(KafkaException):
        killed.commit_transaction(30)
    assert sink.legacy_marker() == 0 and sink.markers() == [1, 1, 1]
    assert _seen(broker, "tasks-legacy-open") == _expected(_results(0), 0) + _expected(_results(1), 1)
    assert _seen(broker, "tasks-legacy-open", committed_only=False) == (
        _expected(_results(0), 0) + _expected(_results(1), 1) + _expected(_results(1), 1))  # the aborted one's too


def test_a_garbage_marker_in_the_driver_side_sinks_group_is_refused(spark, broker, tmp_path):
    """An offset in the legacy group that is not the driver-side sink's marker (not JSON, not an object, an epoch
    other than offset - 1 or not an int, this sink's own marker shape) is refused naming the group; nothing sent."""
    from confluent_kafka import Consumer, TopicPartition

    create_topic(broker, "tasks-legacy-garbage", 2)
    df = spark.createDataFrame(_results(0), RESULT_SCHEMA)
    garbage = ["{not json", "[2]", '{"epoch": 5}', '{"epoch": "2"}', '{"epoch": 2, "partitions": 3}', ""]
    for i, metadata in enumerate(garbage):
        sink = KafkaSink(broker, "tasks-legacy-garbage", sink_partitions=2, transactional_id=f"legacy-garbage-{i}")
        group = Consumer({"bootstrap.servers": broker, "group.id": legacy_group(sink.transactional_id),
                          "enable.auto.commit": False})
        group.commit(offsets=[TopicPartition(sink.topic, 0, 3, metadata)], asynchronous=False)
        group.close()
        with pytest.raises(ValueError, match=f"consumer group legacy-garbage-{i}-epochs holds offset 3 on "
                                             r"tasks-legacy-garbage\[0\] .* not a marker of this sink"):
            sink.write(df, 0)
    assert consume(broker, "tasks-legacy-garbage", committed_only=False) == []
