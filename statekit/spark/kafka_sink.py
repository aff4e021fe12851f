"""Each epoch's results into a Kafka topic exactly once, with Kafka transactions (``confluent-kafka``) run in Spark
tasks, not through the driver.

The protocol (docs/kafka.md, RELIABILITY.md), after Flink's two-phase-commit KafkaSink, fitted to statekit's epochs:
an epoch's results are published under the output, then ``write`` runs a Spark job over them (and the side outputs)
that splits their records into ``sink_partitions`` sink partitions by a hash of the record's key
(``kafka_transactions``), and sends each sink partition in one transaction of its own producer,
``transactional.id`` ``<base>-<i>`` (``<base>`` derived from the checkpoint, the operator and the topic), together
with the partition's marker; then the epoch commits. A replayed epoch sends the sink partitions whose marker lacks
it, and nothing of the others: no second copy is ever visible under ``read_committed``. A topic the driver-side sink
of earlier versions wrote (one transaction per epoch, id ``<base>``, marker group ``<base>-epochs``) is taken over:
its marker counts for every sink partition, and its id is fenced before the first epoch's transactions.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any, Mapping

from .kafka_transactions import (RECORDS_SCHEMA, STATS_SCHEMA, PartitionWriter, RowEncoder, client, legacy_group,
                                 marker_consumer, marker_group, read_legacy_marker, read_marker,
                                 transactional_producer)
from .plan import INVALID_TAG, LATE_TAG
from .sinks import EpochSink

DEFAULT_SINK_PARTITIONS = 4
"""Sink partitions (transactions, producers, Spark tasks) per epoch unless the sink is given another count."""
_log = logging.getLogger(__name__)


class KafkaSink(EpochSink):
    """Each epoch's results as JSON records (the row's columns by name) into ``topic``, keyed by column ``key``
    (default: the first result column), in ``sink_partitions`` Kafka transactions per epoch, sent by Spark tasks;
    ``late_topic`` and ``invalid_topic`` take those side outputs in the same transactions. ``config``: more
    producer settings (security and the like); ``transactional_id``: the base of the producers' ids, default
    derived from the job (``open``). ``sink_partitions`` is part of the sink's identity: a job's checkpoint keeps
    the count it started with (another is refused)."""

    def __init__(self, bootstrap_servers: str, topic: str, *, key: str | None = None, late_topic: str | None = None,
                 invalid_topic: str | None = None, transactional_id: str | None = None,
                 config: Mapping[str, str] | None = None, sink_partitions: int = DEFAULT_SINK_PARTITIONS) -> None:
        client()  # a missing extra is refused before any epoch runs
        if type(sink_partitions) is not int or sink_partitions < 1:
            raise ValueError(f"sink_partitions must be a positive int, got {sink_partitions!r}")
        self.bootstrap_servers, self.topic, self.key = bootstrap_servers, topic, key
        self.side_topics = {tag: t for tag, t in ((LATE_TAG, late_topic), (INVALID_TAG, invalid_topic)) if t}
        self.transactional_id = transactional_id
        self.config = dict(config or {})
        self.sink_partitions = sink_partitions
        self._pending: dict[str, Any] = {}
        self._pending_epoch: int | None = None
        self._slot_values: tuple[int, ...] | None = None
        self._legacy: tuple[int | None] | None = None  # the legacy marker once read (per run)

    def open(self, checkpoint: str, operator_id: str) -> None:
        if self.transactional_id is None:
            digest = hashlib.sha256(f"{checkpoint}\0{operator_id}\0{self.topic}".encode()).hexdigest()[:20]
            self.transactional_id = f"statekit-{operator_id}-{digest}"
        self._legacy = None

    def markers(self) -> list[int | None]:
        """Each sink partition's last committed epoch (its marker), None where none committed."""
        found = []
        for i in range(self.sink_partitions):
            group = marker_group(self._base_id(), i)
            with marker_consumer(self.bootstrap_servers, self.config, group) as consumer:
                found.append(read_marker(consumer, self.topic, group, self.sink_partitions))
        return found

    def legacy_marker(self) -> int | None:
        """The last epoch the driver-side sink of earlier versions committed into the topic (its group
        ``<base>-epochs``), None if it never did. Read once per run; where the group exists, that sink's
        transactional id ``<base>`` is fenced first (its ``init_transactions`` aborts a transaction it left open,
        which would hold back ``read_committed`` readers, and a marker inside it), then the marker is read."""
        if self._legacy is None:
            found = self._read_legacy("read_uncommitted")  # a marker in an open transaction is not waited for
            if found is not None:
                transactional_producer(self.bootstrap_servers, self.config, self._base_id())  # fenced, dropped
                found = self._read_legacy("read_committed")
            self._legacy = (found,)
        return self._legacy[0]

    def written_through(self) -> int | None:
        """The last epoch every sink partition committed (each epoch commits all of them), None if none did. The
        legacy marker's epoch counts for every sink partition: that sink sent each of its epochs whole."""
        legacy, found = self.legacy_marker(), self.markers()
        if legacy is not None:
            found = [legacy if e is None else max(e, legacy) for e in found]
        return None if None in found else min(e for e in found if e is not None)

    def write_side(self, tag: str, rows: Any, epoch_id: int) -> None:
        if tag in self.side_topics:
            if self._pending_epoch != epoch_id:
                self._pending, self._pending_epoch = {}, epoch_id
            self._pending[tag] = rows

    def write(self, results: Any, epoch_id: int) -> None:
        side = self._pending if self._pending_epoch == epoch_id else {}
        self._pending, self._pending_epoch = {}, None
        key = self.key or results.columns[0]
        if key not in results.columns:
            raise ValueError(f"KafkaSink key={key!r} is not a result column (they are {', '.join(results.columns)})")
        done = self.written_through()
        if done is not None and done >= epoch_id:
            return  # a replay: every sink partition (or the driver-side sink of earlier versions) committed it
        n, spark = self.sink_partitions, results.sparkSession
        records = results.mapInArrow(RowEncoder(self.topic, key, n), RECORDS_SCHEMA)
        for tag, rows in side.items():
            records = records.unionByName(rows.mapInArrow(RowEncoder(self.side_topics[tag], None, n), RECORDS_SCHEMA))
        holders = spark.range(n).selectExpr(  # a row per sink partition: each commits its marker, records or not
            "cast(id as int) as sink", "cast(null as string) as topic", "cast(null as binary) as key",
            "cast(null as binary) as value")
        slot = f"element_at(array({', '.join(map(str, self._slots(spark)))}), sink + 1) as slot"
        stats = (records.unionByName(holders).selectExpr("*", slot, "monotonically_increasing_id() as ordinal")
                 .repartition(n, "slot").sortWithinPartitions("sink", "ordinal")  # the results' order within a key
                 .mapInArrow(self.partition_writer(epoch_id), STATS_SCHEMA).collect())
        if sorted(r["sink"] for r in stats) != list(range(n)):
            raise RuntimeError(f"epoch {epoch_id}: the sink's tasks reported partitions "
                               f"{sorted(r['sink'] for r in stats)}, not each of 0..{n - 1} once")
        _log.info("epoch %d into %s: %d records sent by %d sink partitions, %d had it (a replay)", epoch_id,
                  self.topic, sum(r["sent"] for r in stats), sum(not r["skipped"] for r in stats),
                  sum(r["skipped"] for r in stats))

    def partition_writer(self, epoch_id: int) -> PartitionWriter:
        """The tasks' writer of ``epoch_id`` (picklable: it goes to the executors)."""
        return PartitionWriter(self.bootstrap_servers, tuple(self.config.items()), self._base_id(), self.topic,
                               self.sink_partitions, epoch_id)

    def _read_legacy(self, isolation: str) -> int | None:
        group = legacy_group(self._base_id())
        with marker_consumer(self.bootstrap_servers, self.config, group, isolation) as consumer:
            return read_legacy_marker(consumer, self.topic, group)

    def _slots(self, spark: Any) -> tuple[int, ...]:
        """For each sink partition ``i`` an int that Spark's hash partitioning into ``sink_partitions`` puts in
        shuffle partition ``i`` (its SQL ``hash``), so each sink partition is a task of its own. Only the tasks'
        spread depends on it: sink partitions sharing a task are sent one after the other."""
        if self._slot_values is None:
            n = self.sink_partitions
            found: dict[int, int] = {}
            for r in spark.range(64 * n).selectExpr("cast(id as int) as v", f"pmod(hash(cast(id as int)), {n}) as p"
                                                    ).collect():
                found.setdefault(r["p"], r["v"])
            self._slot_values = tuple(found.get(i, i) for i in range(n))
        return self._slot_values

    def _base_id(self) -> str:
        if self.transactional_id is None:
            raise RuntimeError("KafkaSink.open was not called: run it through run_keyed or sessionize")
        return self.transactional_id
