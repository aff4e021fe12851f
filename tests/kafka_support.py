"""Helpers of the Kafka tests: the project's broker (tools/kafka/broker.py), topics, producing a clickstream with
malformed messages among it, reading a topic as a ``read_committed`` (or uncommitted) consumer, and the sessions a
run wrote."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pyarrow.parquet as pq

from statekit.bench.kafka_source import broker_module
from statekit.clickstream import Click

ROOT = Path(__file__).resolve().parent.parent
DRIVER = Path(__file__).with_name("kafka") / "kafka_driver.py"
VALUE_SCHEMA = "user_id STRING, ts_ms BIGINT, value BIGINT"
MALFORMED = [b"{not json", None, b'{"user_id": "user_3", "ts_ms": "soon", "value": 5}']
"""A value that is no JSON, a tombstone (no value), and one whose time is not a number."""


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the result: a dropped client cancels it
    [future] = admin.create_topics([NewTopic(topic, partitions, 1)]).values()
    future.result(30)


@dataclass
class Placed:
    """Where a malformed message landed."""

    value: bytes | None
    partition: int
    offset: int


def produce_clicks(bootstrap: str, topic: str, clicks: list[Click]) -> list[Placed]:
    """The clicks as JSON messages keyed by user, then the ``MALFORMED`` messages; where those landed."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for c in clicks:
        producer.produce(topic, key=c.user_id.encode(),
                         value=json.dumps({"user_id": c.user_id, "ts_ms": c.ts_ms, "value": c.value}).encode())
    placed: list[Placed] = []
    for i, value in enumerate(MALFORMED):
        producer.produce(topic, key=f"bad-{i}".encode(), value=value,
                         on_delivery=lambda err, msg, v=value: placed.append(Placed(v, msg.partition(), msg.offset())))
    assert producer.flush(30) == 0
    return placed


def consume(bootstrap: str, topic: str, committed_only: bool = True) -> list[tuple[bytes, dict, int]]:
    """Every record of ``topic`` (key, JSON value, epoch header), as a ``read_committed`` consumer sees it (else
    ``read_uncommitted``: aborted transactions' records too)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"test-{os.getpid()}-{topic}",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": "read_committed" if committed_only else "read_uncommitted"})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        at_end: set[int] = set()
        out = []
        while len(at_end) < len(partitions):
            msg = consumer.poll(30)
            assert msg is not None, f"topic {topic}: no end reached in 30s"
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            epoch = int(dict(msg.headers())["statekit.epoch"])
            out.append((msg.key(), json.loads(msg.value()), epoch))
        return out
    finally:
        consumer.close()


def session_rows(out: Path) -> list[tuple]:
    """Every session row a run published under ``out`` (all epochs), sorted."""
    files = sorted(out.glob("epoch=*/*.parquet"))
    rows = []
    for f in files:
        for r in pq.read_table(f).to_pylist():
            rows.append((r["user_id"], r["window_start"], r["window_end"], r["sum_value"], r["count"]))
    return sorted(rows)


def side_rows(out: Path, side: str) -> list[dict]:
    return [r for f in sorted(out.glob(f"{side}/epoch=*/*.parquet")) for r in pq.read_table(f).to_pylist()]


def metrics(out: Path) -> list[dict]:
    path = out / "_metrics.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def run_driver(spec: dict, logs: Path, timeout: float = 240,
               during: Callable[[subprocess.Popen], None] | None = None) -> subprocess.CompletedProcess:
    """tests/kafka/kafka_driver.py with ``spec`` in a fresh process group (a driver that kills itself takes its JVM
    with it; whatever is left of the group is killed after); ``during`` is called with the process as it runs. Its
    output goes to ``logs``.out and .err, not to pipes: a pipe nobody reads while ``during`` waits would stop the
    driver when full."""
    out, err = logs.with_suffix(".out"), logs.with_suffix(".err")
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen([sys.executable, str(DRIVER), json.dumps(spec)], stdout=stdout, stderr=stderr,
                                text=True, start_new_session=True, cwd=ROOT)
        try:
            if during is not None:
                during(proc)
            proc.wait(timeout)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.read_text(), err.read_text())


def when_epochs(out: Path, epochs: int, action: Callable[[], None]) -> Callable[[subprocess.Popen], None]:
    """A ``run_driver`` ``during`` that calls ``action`` once ``out`` has committed ``epochs`` epochs."""
    def during(proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + 180
        while len(metrics(out)) < epochs:
            assert proc.poll() is None, f"the driver ended (status {proc.returncode}) before {epochs} epochs"
            assert time.monotonic() < deadline, f"no {epochs} epochs in 180s"
            time.sleep(0.2)
        action()
    return during
