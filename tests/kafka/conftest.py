"""The Kafka tests' broker: one per test module (tools/kafka/broker.py, as docs/kafka.md starts it)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.kafka_support import broker_module


@pytest.fixture(scope="module")
def broker_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The module's broker's directory: started as docs/kafka.md says (its jars fetched once into the cache), and
    stopped after (whichever process serves it then: a test may restart it)."""
    directory = tmp_path_factory.mktemp("kafka-broker")
    broker_module().start(directory)
    yield directory
    running = broker_module().Broker.of(directory.resolve())
    if running is not None:
        running.stop()


@pytest.fixture(scope="module")
def broker(broker_dir: Path) -> str:
    """The module's broker's bootstrap servers."""
    return broker_module().Broker.of(broker_dir.resolve()).bootstrap
