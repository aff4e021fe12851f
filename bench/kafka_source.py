"""``statekit bench spark --source kafka`` (and the topic half of ``files,kafka``): the bench's clickstream in a
Kafka topic, which every variant reads through statekit's Kafka input (``statekit.spark.kafka``: Spark's own
connector, JSON values parsed by ``read_topic``).

The broker is a given one (``--kafka-bootstrap-servers``) or one started from ``tools/kafka/broker.py`` in the
run's temporary directory and stopped when the run ends, also on an error; either way it is outside the runs'
process trees, so its memory is not in their peak RSS. Per user count the events go once into a new topic of
``PARTITIONS`` partitions, JSON messages keyed by user in the generated order, then the sentinel event (see
bench/spark.py's notes) as the last message: every variant reads the same topic, from earliest up to the offsets
at its start (availableNow), in about as many micro-batches as a file run has files (``maxOffsetsPerTrigger``).
statekit's runs read the sentinel too; its session is left out of the comparison, as it is for Spark's. The topics
are deleted when the run ends, from a given broker too.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from statekit.clickstream import Click
from statekit.spark.kafka import REASON, KafkaInput

SOURCES = ("files", "kafka", "files,kafka")
"""``--source``'s values: ``files,kafka`` runs every variant on both (``bench/sources.py``)."""
PARTITIONS = 4
"""Partitions of each topic: Spark's Kafka source reads each in a task of its own."""
BROKER = Path(__file__).resolve().parent.parent / "tools" / "kafka" / "broker.py"
"""The project's broker script (in the source tree; an installed package has none)."""
_PRODUCER = {"linger.ms": 50, "batch.num.messages": 10_000, "queue.buffering.max.messages": 500_000,
             "enable.idempotence": True}
"""Batched sends; idempotence keeps each partition in the order produced through retries (the sentinel last)."""


def broker_module() -> Any:
    """tools/kafka/broker.py as a module (it is a script, not part of the package)."""
    if not BROKER.exists():
        raise SystemExit(f"no {BROKER}: the bench starts the broker of statekit's source tree (tools/kafka/broker.py); "
                         f"run it from a checkout, or pass a running broker with --kafka-bootstrap-servers")
    spec = importlib.util.spec_from_file_location("statekit_kafka_broker", BROKER)
    if spec.name not in sys.modules:  # its dataclasses look their module up while it loads
        sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[spec.name])
    return sys.modules[spec.name]


def check(source: str, bootstrap_servers: str | None, fmt: str, remote: str | None) -> None:
    """Refuse an unknown source, and the options a source with kafka (``kafka``, ``files,kafka``) does not take
    (or that only it takes)."""
    if source not in SOURCES:
        raise SystemExit(f"unknown --source {source!r}; valid: {', '.join(map(repr, SOURCES))}")
    kafka = "kafka" in source.split(",")
    if not kafka and bootstrap_servers:
        raise SystemExit("--kafka-bootstrap-servers applies to --source kafka (or files,kafka) only")
    if kafka and fmt != "parquet":
        raise SystemExit(f"--format {fmt} applies to --source files only: the topic's messages are JSON")
    if kafka and remote:
        raise SystemExit(f"--source {source} runs on classic sessions only: a Spark Connect client cannot add "
                         f"Spark's Kafka connector (spark.jars.packages) to the server")


def _admin(bootstrap: str) -> Any:
    try:
        from confluent_kafka.admin import AdminClient
    except ImportError:
        raise SystemExit("statekit bench spark --source kafka loads its topics with confluent-kafka: "
                         "pip install 'statekit[kafka]'") from None
    return AdminClient({"bootstrap.servers": bootstrap})


class Topics:
    """The bench's topics on one broker: ``load`` makes one; ``delete`` removes every one made."""

    def __init__(self, bootstrap: str, started: bool) -> None:
        self.bootstrap, self.started = bootstrap, started
        self.names: list[str] = []
        self.load_seconds: dict[str, float] = {}
        self._run = uuid.uuid4().hex[:8]  # a given broker may hold an earlier run's topics

    def load(self, name: str, events: list[Click], batches: int, value_schema: str) -> KafkaInput:
        """A new topic holding ``events`` (JSON messages keyed by user, each partition in their order), and how to
        read it in about ``batches`` micro-batches."""
        from confluent_kafka import Producer
        from confluent_kafka.admin import NewTopic

        topic = f"statekit-bench-{name}-{self._run}"
        admin = _admin(self.bootstrap)  # held until the result: a dropped client cancels it
        [created] = admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values()
        created.result(60)
        self.names.append(topic)
        failed: list[Any] = []
        t0 = time.perf_counter()
        producer = Producer({"bootstrap.servers": self.bootstrap, **_PRODUCER,
                             "on_delivery": lambda err, _msg: failed.append(err) if err else None})
        for c in events:
            value = json.dumps({"user_id": c.user_id, "ts_ms": c.ts_ms, "value": c.value}).encode()
            while True:
                try:
                    producer.produce(topic, key=c.user_id.encode(), value=value)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
        left = producer.flush(120)
        if left or failed:
            raise RuntimeError(f"loading topic {topic} at {self.bootstrap}: {left} messages undelivered, "
                               f"{len(failed)} failed (first: {failed[:1]})")
        self.load_seconds[topic] = time.perf_counter() - t0
        per_batch = -(-len(events) // batches) + PARTITIONS  # each partition's share rounds down: no tiny last batch
        return KafkaInput(self.bootstrap, topic, value_schema=value_schema,
                          options=(("maxOffsetsPerTrigger", str(per_batch)),))

    def delete(self) -> None:
        if self.names:
            admin = _admin(self.bootstrap)  # held until the results
            for done in admin.delete_topics(self.names).values():
                done.result(60)

    def params(self) -> dict[str, Any]:
        """What the report says of the source."""
        return {"source": f"Kafka topics of {PARTITIONS} partitions, JSON messages keyed by user, the sentinel last; "
                          f"read by statekit.spark.read_topic with the input's schema: statekit's runs decode the "
                          f"JSON with Arrow (its default), Spark's baselines with Spark's from_json (decode='spark')",
                "broker": (f"started by the bench (tools/kafka/broker.py, Kafka {broker_module().kafka_version()})"
                           if self.started else f"given, {self.bootstrap}") + "; not in the sampled process trees",
                "format": "json messages",
                "trigger": "availableNow from earliest, maxOffsetsPerTrigger: the input's events / files",
                "topic_load_seconds": {t: round(s, 1) for t, s in self.load_seconds.items()},
                "spark_end_of_input": "sentinel message, the topic's last; statekit's runs read it too (its session "
                                      "not compared)"}


@contextmanager
def topics(bootstrap_servers: str | None, work: Path) -> Iterator[Topics]:
    """The bench's topics on the broker at ``bootstrap_servers``, or on one started in ``work``; the topics are
    deleted and a started broker stopped when the block ends, also on an error."""
    broker = None if bootstrap_servers else broker_module().start(work / "kafka-broker")
    made = Topics(bootstrap_servers or broker.bootstrap, started=broker is not None)
    try:
        yield made
    finally:
        try:
            if broker is None:  # a started broker's topics go with its directory
                made.delete()
        finally:
            if broker is not None:
                broker.stop()


def stream(spark: Any, source: KafkaInput, decode: str) -> Any:
    """The topic as a stream of its values' columns only (as a file run's input has), parsed by ``read_topic``:
    statekit's runs as its default (``decode="arrow"``), Spark's baselines as a Spark job parses JSON (``"spark"``:
    ``from_json``)."""
    from statekit.spark import read_topic

    return read_topic(spark, source, stream=True, decode=decode, kafka_columns=()).drop(REASON)


def sessionize_input(where: str | KafkaInput, fmt: str) -> dict[str, Any]:
    """``sessionize``'s arguments naming its input: files in ``fmt``, or a topic."""
    return {"kafka": where} if isinstance(where, KafkaInput) else {"input": where, "fmt": fmt}
