"""statekit between Kafka topics, against a real broker (tools/kafka/broker.py, one for the module): sessions from a
topic of 4 partitions exact on both backends, malformed messages in ``_invalid`` with their topic, partition and
offset, and results in a topic exactly once under ``read_committed`` through driver kills (mid-transaction, between
the transaction's commit and the epoch's, and a rerun through the CLI). Every run is a fresh driver process."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Iterator

import pytest

from statekit.clickstream import generate_clickstream, sessionize_reference
from tests.kafka_support import (VALUE_SCHEMA, broker_module, consume, create_topic, metrics, produce_clicks,
                                 run_driver, session_rows, side_rows)

pytestmark = pytest.mark.kafka

TOPIC, GAP_MS = "clicks", 30_000
CLI = "import sys; from statekit.cli import main; sys.exit(main())"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The module's broker, started as docs/kafka.md says (its jars fetched once into the cache), stopped after."""
    started = broker_module().start(tmp_path_factory.mktemp("kafka-broker"))
    yield started.bootstrap
    started.stop()


@pytest.fixture(scope="module")
def topic(broker: str) -> tuple[str, list, list]:
    """A topic of 4 partitions holding a clickstream and three malformed messages; the reference sessions and where
    the malformed ones landed."""
    clicks = generate_clickstream(1600, 30, seed=48, max_disorder_ms=5_000)
    create_topic(broker, TOPIC, 4)
    placed = produce_clicks(broker, TOPIC, clicks)
    return TOPIC, sessionize_reference(clicks, GAP_MS), placed


def _spec(broker: str, runs: list[dict]) -> dict:
    return {"bootstrap": broker, "topic": TOPIC, "value_schema": VALUE_SCHEMA, "max_offsets": 400,
            "watermark_delay": "5m", "runs": runs}


def _sessions_in(broker: str, sink_topic: str) -> list[tuple]:
    return sorted((v["user_id"], v["window_start"], v["window_end"], v["sum_value"], v["count"])
                  for _, v, _ in consume(broker, sink_topic))


def test_sessions_from_a_topic_exact_on_both_backends_malformed_to_invalid(broker, topic, tmp_path):
    _, reference, placed = topic
    create_topic(broker, "sessions-a", 3)
    outs = {b: tmp_path / b for b in ("heap", "rocksdb")}
    done = run_driver(_spec(broker, [{"output": str(outs["heap"]), "backend": "heap", "sink_topic": "sessions-a"},
                                     {"output": str(outs["rocksdb"]), "backend": "rocksdb"}]))
    assert done.returncode == 0, done.stderr[-4000:]
    for backend, out in outs.items():
        assert session_rows(out) == reference, backend
        m = metrics(out)
        assert len(m) >= 5 and sum(x["late"] for x in m) == 0, backend  # several epochs of 400 offsets, none late
        reasons = sorted(r["reason"] for r in side_rows(out, "_invalid"))
        expected = sorted(
            f"{'null message value' if p.value is None else 'unparsable json message'}: "
            f"(topic {TOPIC}, partition {p.partition}, offset {p.offset})"
            + ("" if p.value is None else f" '{p.value.decode()}'") for p in placed)
        assert reasons == expected, backend
    records = consume(broker, "sessions-a")
    assert _sessions_in(broker, "sessions-a") == reference  # each session once, in one epoch's transaction
    assert {key.decode() for key, v, _ in records} == {v["user_id"] for _, v, _ in records}


def test_results_in_a_topic_exactly_once_through_driver_kills(broker, topic, tmp_path):
    """Killed mid-transaction of epoch 3, then between the transaction's commit and the epoch's at epoch 1 of the
    rerun's (that epoch replays: its records are not sent again), then a rerun through the CLI to the end: the
    sessions are exact, a read_committed consumer sees each once, and the aborted records exist uncommitted."""
    _, reference, _ = topic
    create_topic(broker, "sessions-b", 3)
    out = tmp_path / "out"
    run = {"output": str(out), "backend": "rocksdb", "sink_topic": "sessions-b"}
    first = run_driver(_spec(broker, [{**run, "kill": {"epoch": 3, "when": "before-commit"}}]))
    assert first.returncode == -9, first.stderr[-4000:]
    assert [x["epoch"] for x in metrics(out)] == [0, 1, 2]
    second = run_driver(_spec(broker, [{**run, "kill": {"epoch": 4, "when": "after-commit"}}]))
    assert second.returncode == -9, second.stderr[-4000:]
    assert [x["epoch"] for x in metrics(out)] == [0, 1, 2, 3]  # epoch 4's transaction committed, the epoch not
    epochs = Counter(e for _, _, e in consume(broker, "sessions-b"))
    assert set(epochs) <= set(range(5)) and 4 in epochs or not any(x["results"] for x in metrics(out)[4:])
    args = ["sessionize", "--topic", TOPIC, "--kafka-bootstrap-servers", broker, "--value-schema", VALUE_SCHEMA,
            "--kafka-option", "maxOffsetsPerTrigger=400", "--sink-topic", "sessions-b", "--output", str(out),
            "--key", "user_id", "--time", "ts_ms", "--gap", "30s", "--watermark-delay", "5m", "--agg", "sum:value",
            "--agg", "count", "--partitions", "2", "--final", "--master", "local[2]"]
    third = subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True, timeout=240)
    assert third.returncode == 0, third.stderr[-4000:]
    assert "3 invalid" in third.stdout
    assert session_rows(out) == reference
    assert _sessions_in(broker, "sessions-b") == reference  # once each: the replayed epoch 4 was not sent again
    seen = consume(broker, "sessions-b", committed_only=False)
    assert len(seen) > len(reference)  # epoch 3's aborted records are in the log, hidden from read_committed
