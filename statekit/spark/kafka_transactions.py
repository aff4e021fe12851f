"""The Kafka sink's per-task side: one transaction per sink partition and epoch, run in Spark tasks (executors).

``RowEncoder`` turns an epoch's rows into records ``(sink, topic, key, value)``: the JSON value, the key's bytes and
the sink partition, ``crc32`` of the key (of the value for a record without key) modulo the sink's partition count,
so a replay of the epoch puts every record in the same sink partition whatever Spark's splits. ``PartitionWriter``
sends one sink partition's records of an epoch: a producer of ``transactional.id`` ``<base>-<i>`` (its
``init_transactions`` fences every earlier producer of the id and aborts the transaction one left open), then the
partition's marker (the offset its consumer group ``<base>-<i>-epochs`` committed on partition 0 of the topic):
an epoch at or below it is a replay, nothing is sent; else one transaction with the records and the marker
``epoch + 1``. The driver's look-ups share the markers' reading and validation: the sink partitions' and the
marker of the driver-side sink of earlier versions (``legacy_group``). The protocol and its failure cases:
docs/kafka.md.
"""

from __future__ import annotations

import datetime
import decimal
import json
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import groupby
from typing import Any, Callable, Iterable, Iterator

EPOCH_HEADER = "statekit.epoch"
"""Each record's header naming the epoch it came from."""
RECORDS_SCHEMA = "sink int, topic string, key binary, value binary"
"""An epoch's records, encoded: a row with a null topic is a sink partition's place holder (no record)."""
STATS_SCHEMA = "sink int, sent long, skipped boolean"
"""What a sink partition's task did: records sent, or skipped (its marker had the epoch)."""
_TIMEOUT = 60.0
"""Seconds a transaction step (init, commit, abort) and a marker's look-up may take before the epoch fails."""


def client() -> Any:
    """The ``confluent_kafka`` module, or an error naming the extra that installs it."""
    try:
        import confluent_kafka
    except ImportError:
        raise ImportError("the Kafka sink needs the kafka extra: pip install 'statekit[kafka]' "
                          "(on the driver and on every executor)") from None
    return confluent_kafka


def retried(step: Callable[[], Any]) -> Any:
    """``step`` (a call of the Kafka client) again while it fails with an error Kafka calls retriable (a coordinator
    moving or loading, as after a broker restart), for up to ``_TIMEOUT`` seconds; then its error."""
    kafka = client()
    deadline = time.monotonic() + _TIMEOUT
    while True:
        try:
            return step()
        except kafka.KafkaException as e:
            error = e.args[0]
            transient = error.retriable() or error.code() in (kafka.KafkaError.NOT_COORDINATOR,
                                                              kafka.KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                                              kafka.KafkaError.COORDINATOR_NOT_AVAILABLE)
            if not transient or error.txn_requires_abort() or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def marker_group(base_id: str, partition: int) -> str:
    """The consumer group whose offset on partition 0 of the topic is sink partition ``partition``'s marker."""
    return f"{base_id}-{partition}-epochs"


def legacy_group(base_id: str) -> str:
    """The consumer group of the driver-side sink of earlier versions (one transaction per epoch, of transactional
    id ``base_id``): its offset on partition 0 of the topic is the last epoch that sink committed, plus one."""
    return f"{base_id}-epochs"


@contextmanager
def marker_consumer(bootstrap_servers: str, config: dict[str, str], group: str,
                    isolation: str = "read_committed") -> Iterator[Any]:
    """A consumer of ``group`` that only reads its committed offsets (a marker), closed after: ``read_committed``
    waits for a marker inside an open transaction (librdkafka asks for stable offsets), ``read_uncommitted`` not."""
    consumer = client().Consumer({**common_config(bootstrap_servers, config), "group.id": group,
                                  "enable.auto.commit": False, "isolation.level": isolation})
    try:
        yield consumer
    finally:
        consumer.close()


def read_marker(consumer: Any, topic: str, group: str, partitions: int) -> int | None:
    """The last epoch a sink partition committed, from ``consumer`` (of ``group``, ``read_committed``: a marker
    inside an open transaction is waited for); None if none. A marker another sink wrote, or one of a sink with
    another partition count, is refused: the records of its epochs would go to other transactional ids."""
    meta = _committed_marker(consumer, topic, group, ("epoch", "partitions"))
    if meta is None:
        return None
    if meta["partitions"] != partitions:
        raise ValueError(f"the sink wrote {topic} with {meta['partitions']} sink partitions (consumer group {group}) "
                         f"and now has {partitions}: a replayed epoch would be sent again; keep sink_partitions="
                         f"{meta['partitions']}, or write to another topic")
    return meta["epoch"]


def read_legacy_marker(consumer: Any, topic: str, group: str) -> int | None:
    """The last epoch the driver-side sink of earlier versions committed, from ``consumer`` (of its
    ``legacy_group``); None if none. Its marker's metadata is ``{"epoch": E}`` exactly: anything else is refused."""
    meta = _committed_marker(consumer, topic, group, ("epoch",))
    return None if meta is None else meta["epoch"]


def _committed_marker(consumer: Any, topic: str, group: str, fields: tuple[str, ...]) -> dict[str, int] | None:
    """The metadata of the offset ``group`` committed on partition 0 of ``topic``, None if none: a JSON object of
    exactly the int ``fields``, its ``epoch`` the offset - 1, or an error naming the group (another's group)."""
    kafka = client()
    [marker] = retried(lambda: consumer.committed([kafka.TopicPartition(topic, 0)], timeout=_TIMEOUT))
    if marker.error is not None:
        raise kafka.KafkaException(marker.error)
    if marker.offset < 0:
        return None
    try:
        meta = json.loads(marker.metadata or "")
    except ValueError:
        meta = None
    if not (isinstance(meta, dict) and sorted(meta) == sorted(fields) and all(type(v) is int for v in meta.values())
            and meta["epoch"] == marker.offset - 1):
        raise ValueError(f"consumer group {group} holds offset {marker.offset} on {topic}[0] with metadata "
                         f"{(marker.metadata or '')[:200]!r}: not a marker of this sink; give the sink another "
                         f"transactional_id or delete the group")
    return meta


def transactional_producer(bootstrap_servers: str, config: dict[str, str], transactional_id: str) -> Any:
    """A new producer of ``transactional_id``, initialized: its ``init_transactions`` fences every earlier producer
    of the id and aborts the transaction one left open (waiting for one whose commit the coordinator accepted)."""
    producer = client().Producer({**common_config(bootstrap_servers, config), "transactional.id": transactional_id,
                                  "linger.ms": 5, **config})
    retried(lambda: producer.init_transactions(_TIMEOUT))
    return producer


def _json_value(value: Any) -> Any:
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"a result value of type {type(value).__name__} has no JSON form")


@dataclass(frozen=True)
class RowEncoder:
    """A ``mapInArrow`` function: rows into ``RECORDS_SCHEMA`` records for ``topic``, keyed by column ``key``
    (None: no key), each in sink partition ``crc32(key or value) % partitions``."""

    topic: str
    key: str | None
    partitions: int

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            sinks, keys, values = [], [], []
            for row in batch.to_pylist():
                value = json.dumps(row, default=_json_value).encode()
                key = None if self.key is None or row[self.key] is None else str(row[self.key]).encode()
                sinks.append(zlib.crc32(value if key is None else key) % self.partitions)
                keys.append(key)
                values.append(value)
            yield pa.RecordBatch.from_pydict({"sink": pa.array(sinks, pa.int32()),
                                              "topic": pa.array([self.topic] * len(values), pa.string()),
                                              "key": pa.array(keys, pa.binary()),
                                              "value": pa.array(values, pa.binary())})


@dataclass(frozen=True)
class PartitionWriter:
    """Sends an epoch's records, a sink partition at a time, each in its own transaction (``write``); as a
    ``mapInArrow`` function, over records sorted by sink partition, it yields ``STATS_SCHEMA`` rows."""

    bootstrap_servers: str
    config: tuple[tuple[str, str], ...]
    base_id: str
    marker_topic: str
    partitions: int
    epoch: int

    def __call__(self, batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa

        rows = (r for b in batches for r in zip(*(b.column(c).to_pylist() for c in ("sink", "topic", "key", "value"))))
        seen: set[int] = set()
        for sink, records in groupby(rows, key=lambda r: r[0]):
            if sink in seen:  # a second transaction of the partition would find the first's marker: rows lost
                raise RuntimeError(f"sink partition {sink}'s records are not together in the task: not sorted")
            seen.add(sink)
            sent = self.write(sink, ((t, k, v) for _, t, k, v in records if t is not None))
            yield pa.RecordBatch.from_pydict({"sink": pa.array([sink], pa.int32()),
                                              "sent": pa.array([sent or 0], pa.int64()),
                                              "skipped": pa.array([sent is None])})

    def write(self, partition: int, records: Iterable[tuple[str, bytes | None, bytes]]) -> int | None:
        """Sink partition ``partition``'s ``records`` (topic, key, value) of the epoch in one transaction with its
        marker: how many were sent, or None if its marker says the epoch is in (a replay: nothing sent)."""
        kafka = client()
        producer = self._producer(partition)  # fences earlier producers of the id; aborts what one left open
        group = marker_group(self.base_id, partition)
        with marker_consumer(self.bootstrap_servers, dict(self.config), group) as consumer:
            done = read_marker(consumer, self.marker_topic, group, self.partitions)
            if done is not None and done >= self.epoch:
                return None
            producer.begin_transaction()
            try:
                sent = self._send(producer, records)
                marker = kafka.TopicPartition(self.marker_topic, 0, self.epoch + 1,
                                              json.dumps({"epoch": self.epoch, "partitions": self.partitions}))
                metadata = consumer.consumer_group_metadata()
                retried(lambda: producer.send_offsets_to_transaction([marker], metadata, _TIMEOUT))
            except BaseException:
                _abort(producer)
                raise
            self._commit(producer)
            return sent

    def _commit(self, producer: Any) -> None:
        """Commit the transaction: the partition's records and marker become visible together."""
        kafka = client()
        try:
            retried(lambda: producer.commit_transaction(_TIMEOUT))
        except kafka.KafkaException as e:
            if e.args[0].txn_requires_abort():
                _abort(producer)
            raise kafka.KafkaException(e.args[0]) from None

    def _send(self, producer: Any, records: Iterable[tuple[str, bytes | None, bytes]]) -> int:
        headers = [(EPOCH_HEADER, str(self.epoch).encode())]
        sent = 0
        for topic, key, value in records:
            while True:
                try:
                    producer.produce(topic, value=value, key=key, headers=headers)
                    break
                except BufferError:  # the client's queue is full: let it deliver
                    producer.poll(0.1)
            producer.poll(0)
            sent += 1
        return sent

    def _producer(self, partition: int) -> Any:
        """A new producer of sink partition ``partition``'s transactional id, initialized. A new one per epoch: a
        producer that outlived a broker restart idle could hang in its next transaction (librdkafka 2.16 against
        Kafka 4.1)."""
        return transactional_producer(self.bootstrap_servers, dict(self.config), f"{self.base_id}-{partition}")


def common_config(bootstrap_servers: str, config: dict[str, str]) -> dict[str, str]:
    """The client settings producers and consumers share: the servers and the security ones of ``config``."""
    return {"bootstrap.servers": bootstrap_servers,
            **{k: v for k, v in config.items() if k.startswith(("security.", "sasl.", "ssl."))}}


def _abort(producer: Any) -> None:
    kafka = client()
    try:
        producer.abort_transaction(_TIMEOUT)
    except kafka.KafkaException:  # fenced or fatal: the next producer's init aborts the transaction
        pass
