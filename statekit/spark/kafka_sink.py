"""Each epoch's results into a Kafka topic exactly once, with Kafka transactions (``confluent-kafka``).

The protocol (docs/kafka.md, RELIABILITY.md), after Flink's two-phase-commit KafkaSink, fitted to statekit's epochs:
an epoch's results are published under the output, then ``write`` sends them in one Kafka transaction together
with the epoch's marker, then the epoch commits. The producer's ``transactional.id`` derives from the checkpoint,
the operator and the topic, so each epoch's producer fences every earlier one (``init_transactions`` aborts
the transaction a killed run left open: a ``read_committed`` consumer never sees its records). The marker is the
offset ``epoch + 1`` that the sink's consumer group (named like the transactional id) commits on partition 0 of the
topic inside the transaction (``send_offsets_to_transaction``): visible exactly when the epoch's records are. A
replayed epoch (a crash after the transaction committed and before the epoch did) finds its marker and sends
nothing, so no second copy is ever visible.
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import json
import time
from typing import Any, Callable, Mapping

from .plan import INVALID_TAG, LATE_TAG
from .sinks import EpochSink

EPOCH_HEADER = "statekit.epoch"
"""Each record's header naming the epoch it came from."""
_TIMEOUT = 60.0
"""Seconds a transaction step (init, commit, abort) and the marker's look-up may take before the epoch fails."""


def _json_value(value: Any) -> Any:
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"a result value of type {type(value).__name__} has no JSON form")


def _retried(step: Callable[[], Any]) -> Any:
    """``step`` (a call of the Kafka client) again while it fails with an error Kafka calls retriable (a coordinator
    moving or loading, as after a broker restart), for up to ``_TIMEOUT`` seconds; then its error."""
    kafka = _client()
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


def _client() -> Any:
    try:
        import confluent_kafka
    except ImportError:
        raise ImportError("the Kafka sink needs the kafka extra: pip install 'statekit[kafka]'") from None
    return confluent_kafka


class KafkaSink(EpochSink):
    """Each epoch's results as JSON records (the row's columns by name) into ``topic``, keyed by column ``key``
    (default: the first result column), one Kafka transaction per epoch; ``late_topic`` and ``invalid_topic``
    take those side outputs in the same transaction. ``config``: more producer settings (security and the like);
    ``transactional_id``: default derived from the job (``open``)."""

    def __init__(self, bootstrap_servers: str, topic: str, *, key: str | None = None, late_topic: str | None = None,
                 invalid_topic: str | None = None, transactional_id: str | None = None,
                 config: Mapping[str, str] | None = None) -> None:
        _client()  # a missing extra is refused before any epoch runs
        self.bootstrap_servers, self.topic, self.key = bootstrap_servers, topic, key
        self.side_topics = {tag: t for tag, t in ((LATE_TAG, late_topic), (INVALID_TAG, invalid_topic)) if t}
        self.transactional_id = transactional_id
        self.config = dict(config or {})
        self._pending: dict[str, Any] = {}
        self._pending_epoch: int | None = None

    def open(self, checkpoint: str, operator_id: str) -> None:
        if self.transactional_id is None:
            digest = hashlib.sha256(f"{checkpoint}\0{operator_id}\0{self.topic}".encode()).hexdigest()[:20]
            self.transactional_id = f"statekit-{operator_id}-{digest}"

    def written_through(self) -> int | None:
        """The last epoch whose transaction committed (its marker), None if none did."""
        kafka = _client()
        consumer = kafka.Consumer({**self._common(), "group.id": self._group(), "enable.auto.commit": False,
                                   "isolation.level": "read_committed"})
        try:
            [marker] = _retried(lambda: consumer.committed([kafka.TopicPartition(self.topic, 0)], timeout=_TIMEOUT))
        finally:
            consumer.close()
        if marker.error is not None:
            raise kafka.KafkaException(marker.error)
        return marker.offset - 1 if marker.offset >= 0 else None

    def write_side(self, tag: str, rows: Any, epoch_id: int) -> None:
        if tag in self.side_topics:
            if self._pending_epoch != epoch_id:
                self._pending, self._pending_epoch = {}, epoch_id
            self._pending[tag] = rows.toArrow()

    def write(self, results: Any, epoch_id: int) -> None:
        kafka = _client()
        side = self._pending if self._pending_epoch == epoch_id else {}
        self._pending, self._pending_epoch = {}, None
        producer = self._transactional_producer()  # fences earlier ones; aborts a transaction one left open
        done = self.written_through()
        if done is not None and done >= epoch_id:
            return  # a replay: this epoch's transaction committed before
        table = results.toArrow()
        key = self.key or table.schema.names[0]
        producer.begin_transaction()
        try:
            self._send(producer, self.topic, table, key, epoch_id)
            for tag, rows in side.items():
                self._send(producer, self.side_topics[tag], rows, None, epoch_id)
            consumer = kafka.Consumer({**self._common(), "group.id": self._group()})
            try:
                marker = kafka.TopicPartition(self.topic, 0, epoch_id + 1, json.dumps({"epoch": epoch_id}))
                metadata = consumer.consumer_group_metadata()
                _retried(lambda: producer.send_offsets_to_transaction([marker], metadata, _TIMEOUT))
            finally:
                consumer.close()
        except BaseException:
            self._abort(producer)
            raise
        self._commit(producer, epoch_id)

    def _commit(self, producer: Any, epoch_id: int) -> None:
        """Commit the epoch's transaction (its records and marker become visible together)."""
        kafka = _client()
        try:
            _retried(lambda: producer.commit_transaction(_TIMEOUT))
        except kafka.KafkaException as e:
            if e.args[0].txn_requires_abort():
                self._abort(producer)
            raise kafka.KafkaException(e.args[0]) from None

    def _abort(self, producer: Any) -> None:
        kafka = _client()
        try:
            producer.abort_transaction(_TIMEOUT)
        except kafka.KafkaException:  # fenced or fatal: the next producer's init aborts the transaction
            pass

    def _send(self, producer: Any, topic: str, table: Any, key: str | None, epoch_id: int) -> None:
        headers = [(EPOCH_HEADER, str(epoch_id).encode())]
        for row in table.to_pylist():
            value = json.dumps(row, default=_json_value).encode()
            record_key = None if key is None or row[key] is None else str(row[key]).encode()
            while True:
                try:
                    producer.produce(topic, value=value, key=record_key, headers=headers)
                    break
                except BufferError:  # the client's queue is full: let it deliver
                    producer.poll(0.1)
            producer.poll(0)

    def _transactional_producer(self) -> Any:
        """A new producer of the sink's transactional id for one epoch, initialized: ``init_transactions`` fences
        earlier producers of the id and aborts a transaction one left open. One per epoch, not per run: a
        producer that outlived a broker restart idle could hang in its next transaction (librdkafka 2.16 against
        Kafka 4.1); a new one costs a connection and an InitProducerId request."""
        if self.transactional_id is None:
            raise RuntimeError("KafkaSink.open was not called: run it through run_keyed or sessionize")
        producer = _client().Producer({**self._common(), "transactional.id": self.transactional_id, "linger.ms": 5,
                                       **self.config})
        _retried(lambda: producer.init_transactions(_TIMEOUT))
        return producer

    def _group(self) -> str:
        return f"{self.transactional_id}-epochs"

    def _common(self) -> dict[str, str]:
        return {"bootstrap.servers": self.bootstrap_servers,
                **{k: v for k, v in self.config.items() if k.startswith(("security.", "sasl.", "ssl."))}}
