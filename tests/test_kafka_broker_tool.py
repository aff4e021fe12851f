"""tools/kafka/broker.py's cluster ids: Kafka's storage tool reads an id starting with ``-`` as an option (one
random id in 64 did, and the broker failed to format its storage), so such an id is drawn again."""

from __future__ import annotations

import uuid

from statekit.bench.kafka_source import broker_module


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch):
    broker = broker_module()
    drawn = iter([uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x01" * 16)])  # the first: '-' first
    monkeypatch.setattr(broker.uuid, "uuid4", lambda: next(drawn))
    assert broker.cluster_id() == "AQEBAQEBAQEBAQEBAQEBAQ"
    monkeypatch.undo()
    ids = [broker.cluster_id() for _ in range(5000)]
    assert not any(i.startswith("-") for i in ids) and all(len(i) == 22 for i in ids)
