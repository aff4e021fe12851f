"""The operator interface a runtime (the test harness, the Spark tasks) drives, once per epoch.

An operator is opened on a backend and an ``Output``, gets an epoch's records (``process_batch`` or,
as columns, ``process_columns``), then the epoch's watermark (``process_watermark``); its clocks go
into each snapshot (``snapshot_metadata``) and come back on restore (``restore_metadata``), because a
backend snapshot holds state and timers, not the operator's watermark.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Iterable, Sequence

import numpy as np

from statekit import InternalTimerService, KeyedStateBackend, TimerTarget

from .columns import python_values
from .output import Output


class KeyedOperator(TimerTarget):
    """A keyed operator with one timer service (``_svc``, set by ``open``) holding its clocks."""

    _svc: InternalTimerService
    metrics: dict[str, int]
    """Counters the runtime reports per epoch (records in, late, invalid, ...)."""

    @abstractmethod
    def open(self, backend: KeyedStateBackend, output: Output) -> None:
        """Bind to ``backend`` (its states and timer service) and ``output``; called once, before any record."""

    def close(self) -> None:
        """Release what ``open`` acquired (user functions' ``close``)."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """Plain data for a checkpoint's job description: ``state`` (what shapes stored state: a change is
        refused on restore) and ``parameters`` (what a restore carries, applied from the next epoch)."""

    @abstractmethod
    def process_batch(self, records: Iterable[tuple[Any, Any, int | None]]) -> None:
        """An epoch's ``(key, value, timestamp)`` records at the current watermark."""

    def process_columns(self, keys: Sequence[Any], timestamps: Sequence[int], columns: Sequence[Sequence[Any]]) -> None:
        """An epoch as columns: record i is ``(keys[i], tuple(c[i] for c in columns), timestamps[i])``;
        the same results as ``process_batch`` of those records (operators may take a faster path);
        keys and columns may be Arrow arrays (their values as Python values)."""
        ts = np.asarray(timestamps).tolist()
        keys, columns = python_values(keys), [python_values(c) for c in columns]
        self.process_batch(list(zip(keys, zip(*columns), ts)) if columns else [(k, (), t) for k, t in zip(keys, ts)])

    def process_element(self, key: Any, value: Any, timestamp: int | None = None) -> None:
        """One record (a batch of one)."""
        self.process_batch([(key, value, timestamp)])

    def current_watermark(self) -> int:
        return self._svc.current_watermark()

    def get_current_processing_time(self) -> int:
        return self._svc.current_processing_time()

    def process_watermark(self, watermark: int) -> None:
        """Advance event time: fire every event-time timer due at ``watermark``; an older watermark is ignored."""
        if watermark > self._svc.current_watermark():
            self._svc.advance_watermark(watermark)

    def advance_processing_time(self, time: int) -> None:
        if time > self._svc.current_processing_time():
            self._svc.advance_processing_time(time)

    def snapshot_metadata(self) -> dict:
        """What a backend snapshot does not hold: the operator's clocks."""
        return {"watermark": self._svc.current_watermark(), "processing_time": self._svc.current_processing_time()}

    def restore_metadata(self, metadata: dict) -> None:
        self._svc.restore_time(metadata["watermark"], metadata["processing_time"])
