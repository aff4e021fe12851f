"""statekit between Kafka topics, against a real broker (tools/kafka/broker.py, one for the module: conftest.py):
sessions from a topic of 4 partitions exact on both backends, malformed messages in ``_invalid`` with their topic,
partition and offset, and results in a topic exactly once under ``read_committed`` through driver kills
(mid-transaction, between the transaction's commit and the epoch's), a rollback of Spark's Kafka offsets and a rerun
through the CLI. Every run is a fresh driver process; the first one runs the heap job to its end and dies in the
rocksdb one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from statekit.clickstream import generate_clickstream, sessionize_reference
from statekit.spark import KafkaSink
from tests.kafka_support import (MALFORMED, VALUE_SCHEMA, broker_module, consume, create_topic, metrics,
                                 produce_clicks, run_driver, session_rows, side_rows, when_epochs)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

TOPIC, GAP_MS = "clicks", 30_000
CLI = "import sys; from statekit.cli import main; sys.exit(main())"


def _restart(broker_dir: Path) -> None:
    """Stop the broker (a clean shutdown) and start it again on its storage and port."""
    broker_module().Broker.of(broker_dir.resolve()).stop()
    broker_module().start(broker_dir)


@pytest.fixture(scope="module")
def topic(broker: str) -> tuple[list, list]:
    """A topic of 4 partitions holding a clickstream and three malformed messages: the reference sessions, and where
    the malformed ones landed."""
    clicks = generate_clickstream(1600, 30, seed=48, max_disorder_ms=5_000)
    create_topic(broker, TOPIC, 4)
    placed = produce_clicks(broker, TOPIC, clicks)
    return sessionize_reference(clicks, GAP_MS), placed


def _spec(broker: str, runs: list[dict]) -> dict:
    return {"bootstrap": broker, "topic": TOPIC, "value_schema": VALUE_SCHEMA, "max_offsets": 400,
            "watermark_delay": "5m", "runs": runs}


@pytest.fixture(scope="module")
def first_driver(broker: str, broker_dir: Path, topic: tuple,
                 tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One driver: the heap job over the topic to its end (sessions into topic ``sessions-heap``; the broker
    restarted once it committed two epochs), then the rocksdb job (into ``sessions-rocksdb``) killed mid-transaction
    of epoch 3. The two outputs."""
    root = tmp_path_factory.mktemp("kafka-jobs")
    for name in ("sessions-heap", "sessions-rocksdb"):
        create_topic(broker, name, 3)
    heap, rocksdb = root / "heap", root / "rocksdb"
    done = run_driver(_spec(broker, [
        {"output": str(heap), "backend": "heap", "sink_topic": "sessions-heap"},
        {"output": str(rocksdb), "backend": "rocksdb", "sink_topic": "sessions-rocksdb",
         "kill": {"epoch": 3, "when": "before-commit"}}]), root / "driver",
        during=when_epochs(heap, 2, lambda: _restart(broker_dir)))
    assert done.returncode == -9 and str(heap) in done.stdout, done.stderr[-4000:]  # the heap job ended first
    return heap, rocksdb


def _sessions_in(broker: str, sink_topic: str) -> list[tuple]:
    return sorted((v["user_id"], v["window_start"], v["window_end"], v["sum_value"], v["count"])
                  for _, v, _ in consume(broker, sink_topic))


def _reasons(placed: list) -> list[str]:
    return sorted(f"{'null message value' if p.value is None else 'unparsable json message'}: "
                  f"(topic {TOPIC}, partition {p.partition}, offset {p.offset})"
                  + ("" if p.value is None else f" '{p.value.decode()}'") for p in placed)


def test_sessions_from_a_topic_exact_and_once_in_a_topic_through_a_broker_restart(broker, topic, first_driver):
    reference, placed = topic
    heap, _ = first_driver
    assert session_rows(heap) == reference
    m = metrics(heap)
    assert len(m) >= 5 and sum(x["late"] for x in m) == 0  # several epochs of 400 offsets, none late
    assert sorted(r["reason"] for r in side_rows(heap, "_invalid")) == _reasons(placed)
    records = consume(broker, "sessions-heap")
    assert _sessions_in(broker, "sessions-heap") == reference  # each session once
    assert all(key.decode() == v["user_id"] for key, v, _ in records)  # keyed by the session's key


def test_results_in_a_topic_exactly_once_through_driver_kills_and_a_rollback(broker, topic, first_driver):
    """Killed mid-transaction of epoch 3 (the first driver), then between epoch 4's transaction commit and the
    epoch's; rolled back to epoch 2 (Spark's Kafka offsets rewound); rerun through the CLI to the end, its state
    rescaled from 2 partitions to 3: the sessions
    are exact, a read_committed consumer sees each once (the replayed epochs 3 and 4 were not sent again), and the
    aborted records are in the log, uncommitted."""
    reference, placed = topic
    _, out = first_driver
    assert [x["epoch"] for x in metrics(out)] == [0, 1, 2]
    run = {"output": str(out), "backend": "rocksdb", "sink_topic": "sessions-rocksdb"}
    second = run_driver(_spec(broker, [{**run, "kill": {"epoch": 4, "when": "after-commit"}}]), out.parent / "second")
    assert second.returncode == -9, second.stderr[-4000:]
    assert [x["epoch"] for x in metrics(out)] == [0, 1, 2, 3]  # epoch 4's transaction committed, the epoch not
    sink = KafkaSink(broker, "sessions-rocksdb")
    sink.open(str(out / "_checkpoint"), "sessionize")
    assert sink.written_through() == 4  # its marker, which the replay of epoch 4 finds
    rollback = subprocess.run([sys.executable, "-c", CLI, "checkpoint", "rollback", str(out / "_checkpoint"),
                               "--to-epoch", "2"], capture_output=True, text=True, timeout=60)
    assert rollback.returncode == 0, rollback.stderr[-3000:]
    assert "2 offsets and 1 commits removed" in rollback.stdout  # Spark's batches 3 and 4: read again
    args = ["sessionize", "--topic", TOPIC, "--kafka-bootstrap-servers", broker, "--value-schema", VALUE_SCHEMA,
            "--kafka-option", "maxOffsetsPerTrigger=400", "--sink-topic", "sessions-rocksdb", "--output", str(out),
            "--key", "user_id", "--time", "ts_ms", "--gap", "30s", "--watermark-delay", "5m", "--agg", "sum:value",
            "--agg", "count", "--partitions", "3", "--final", "--master", "local[2]"]
    third = subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True, timeout=240)
    assert third.returncode == 0, third.stderr[-4000:]
    assert [x["rescaled_from"] for x in metrics(out) if x["epoch"] > 2][:1] == [2]  # rescaled to 3 partitions
    assert session_rows(out) == reference
    assert sorted(r["reason"] for r in side_rows(out, "_invalid")) == _reasons(placed)
    assert _sessions_in(broker, "sessions-rocksdb") == reference
    seen = consume(broker, "sessions-rocksdb", committed_only=False)
    assert len(seen) > len(reference)  # epoch 3's aborted records are in the log, hidden from read_committed


def test_late_and_invalid_records_in_their_topics_once_in_the_epochs_transactions(broker, tmp_path):
    """``--sink-late-topic`` and ``--sink-invalid-topic``: a read_committed consumer sees each late and each
    invalid record once, as the run's ``_late`` and ``_invalid`` outputs hold them, beside the sessions' topic (one
    partition in order: clicks, then one far behind the watermark, then the malformed messages)."""
    from confluent_kafka import Producer

    topic, sinks = "clicks-side", {"--sink-topic": "side-sessions", "--sink-late-topic": "side-late",
                                   "--sink-invalid-topic": "side-invalid"}
    create_topic(broker, topic, 1)
    for name in sinks.values():
        create_topic(broker, name, 2)
    clicks = generate_clickstream(300, 10, seed=49)
    producer = Producer({"bootstrap.servers": broker})
    for c in [*clicks, clicks[0]._replace(user_id="late-user", ts_ms=clicks[0].ts_ms - 3_600_000)]:
        producer.produce(topic, key=c.user_id.encode(),
                         value=json.dumps({"user_id": c.user_id, "ts_ms": c.ts_ms, "value": c.value}).encode())
    for i, value in enumerate(MALFORMED):
        producer.produce(topic, key=f"bad-{i}".encode(), value=value)
    assert producer.flush(30) == 0
    out = tmp_path / "out"
    args = ["sessionize", "--topic", topic, "--kafka-bootstrap-servers", broker, "--value-schema", VALUE_SCHEMA,
            "--kafka-option", "maxOffsetsPerTrigger=100", *[x for flag, name in sinks.items() for x in (flag, name)],
            "--output", str(out), "--key", "user_id", "--time", "ts_ms", "--gap", "30s", "--watermark-delay", "5m",
            "--agg", "sum:value", "--agg", "count", "--partitions", "2", "--final", "--master", "local[2]"]
    run = subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-4000:]
    assert _sessions_in(broker, "side-sessions") == session_rows(out)
    late = [(v["user_id"], v["ts_ms"]) for _, v, _ in consume(broker, "side-late")]
    assert late == [(r["user_id"], r["ts_ms"]) for r in side_rows(out, "_late")] == [
        ("late-user", clicks[0].ts_ms - 3_600_000)]
    invalid = sorted(v["reason"] for _, v, _ in consume(broker, "side-invalid"))
    assert invalid == sorted(r["reason"] for r in side_rows(out, "_invalid")) and len(invalid) == len(MALFORMED)
    assert all(f"topic {topic}, partition 0" in reason for reason in invalid)


def test_the_message_key_and_kafka_timestamp_as_key_and_time(broker, tmp_path):
    """``--key kafka_key --time kafka_timestamp``: sessionize keeps the Kafka record's own columns it reads (it
    leaves out those it does not), and the sessions equal the reference's on the message keys and timestamps."""
    from confluent_kafka import Producer

    import pyarrow.parquet as pq

    topic = "clicks-kafka-columns"
    create_topic(broker, topic, 2)
    clicks = generate_clickstream(400, 12, seed=53)
    producer = Producer({"bootstrap.servers": broker})
    for c in clicks:
        producer.produce(topic, key=c.user_id.encode(), value=json.dumps({"value": c.value}).encode(),
                         timestamp=c.ts_ms)
    assert producer.flush(30) == 0
    out = tmp_path / "out"
    args = ["sessionize", "--topic", topic, "--kafka-bootstrap-servers", broker, "--value-schema", "value BIGINT",
            "--output", str(out), "--key", "kafka_key", "--time", "kafka_timestamp", "--gap", "30s",
            "--watermark-delay", "5m", "--agg", "sum:value", "--agg", "count", "--partitions", "2", "--final",
            "--master", "local[2]"]
    run = subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-4000:]
    rows = [r for f in sorted(out.glob("epoch=*/*.parquet")) for r in pq.read_table(f).to_pylist()]
    got = sorted((r["kafka_key"], int(r["window_start"].timestamp() * 1000), int(r["window_end"].timestamp() * 1000),
                  r["sum_value"], r["count"]) for r in rows)
    assert got == sessionize_reference(clicks, 30_000)
