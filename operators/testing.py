"""OperatorHarness: drive one operator on one backend the way a runtime would, for tests.

Restore happens before ``open`` (as in Flink's harness); a snapshot is bytes (msgpack of the
backend's logical snapshot plus the operator's metadata), so it is isolated from later changes
and restores into either backend or another key-group range.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from statekit import KEY_SERIALIZER, KeyedStateBackend, StateConfig, create_backend

from .output import Output


class OperatorHarness:
    """Runs ``operator`` on a backend made from ``config`` serving ``key_groups`` (default: all)."""

    def __init__(self, operator: Any, config: StateConfig | None = None, key_groups: Iterable[int] | None = None) -> None:
        self.operator = operator
        self.config = config if config is not None else StateConfig()
        self.key_groups = key_groups
        self.backend: KeyedStateBackend | None = None
        self._out = Output()
        self._restored: dict | None = None
        self._processing_time = 0

    def restore(self, snapshot: bytes, *others: bytes) -> None:
        """Load a snapshot taken by ``snapshot`` (with ``others``: the state of all of them, as a rescale merges
        partitions, and the first one's operator metadata); call before ``open``."""
        if self.backend is not None:
            raise RuntimeError("restore() must be called before open()")
        self._restored = KEY_SERIALIZER.loads(bytes(snapshot))
        if others:
            self._restored["state"] = [self._restored["state"],
                                       *(KEY_SERIALIZER.loads(bytes(o))["state"] for o in others)]

    def open(self) -> None:
        self.backend = create_backend(self.config, key_groups=self.key_groups, time_provider=lambda: self._processing_time)
        if self._restored is not None:
            self.backend.restore_logical(self._restored["state"])
        self.operator.open(self.backend, self._out)
        if self._restored is not None:
            meta = self._restored["operator"]
            self.operator.restore_metadata(meta)
            self._processing_time = meta["processing_time"]

    def process_element(self, key: Any, value: Any, timestamp: int | None = None) -> None:
        self.operator.process_element(key, value, timestamp)

    def process_batch(self, records: Iterable[tuple[Any, Any, int | None]]) -> None:
        self.operator.process_batch(records)

    def process_columns(self, keys: Sequence[Any], timestamps: Sequence[int], columns: Sequence[Sequence[Any]]) -> None:
        self.operator.process_columns(keys, timestamps, columns)

    def process_watermark(self, watermark: int) -> None:
        self.operator.process_watermark(watermark)

    def set_processing_time(self, time: int) -> None:
        self._processing_time = time
        self.operator.advance_processing_time(time)

    def hand_over(self, consumer: Callable[[list], None] | None) -> None:
        """Records go to ``consumer`` at the end of each step of the operator's work (``Output.hand_over``)."""
        self._out.hand_over(consumer)

    def output(self) -> list[tuple[Any, int | None]]:
        """Records emitted since the last call, as (value, timestamp)."""
        return self._out.drain()

    def side_output(self, tag: str) -> list[tuple[Any, int | None]]:
        """Side outputs under ``tag`` since the last call, as (value, timestamp)."""
        return self._out.drain_side(tag)

    @property
    def metrics(self) -> dict[str, int]:
        return self.operator.metrics

    def num_entries(self) -> int:
        """Stored state cells plus timers of the backend (0: nothing leaked)."""
        return self.backend.num_entries()

    def snapshot(self, epoch: int = 0) -> bytes:
        """All state, timers and operator metadata as bytes."""
        return KEY_SERIALIZER.dumps({"epoch": epoch, "state": self.backend.snapshot_logical(),
                                     "operator": self.operator.snapshot_metadata()})

    def close(self) -> None:
        self.operator.close()
        if self.backend is not None:
            self.backend.close()
