"""EvictingWindowOperator: Flink's ``EvictingWindowOperator``, the record path with an evictor.

A window keeps its elements with their timestamps whatever the function; on firing, the evictor drops
elements before and after the function sees them, and what remains is stored back.
"""

from __future__ import annotations

from typing import Any

from .evictors import TimestampedValue
from .record_window import RecordWindowOperator


class EvictingWindowOperator(RecordWindowOperator):
    """Windows with an evictor (see ``BaseWindowOperator``); ``WindowOperator(...)`` makes one when an
    evictor is given or the assigner has a default one (sliding count windows)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lists = True

    def _element(self, value: Any, ts: int | None) -> Any:
        return value, ts

    def _emit(self, window: Any, data: list, ts: int) -> None:
        """Evict, apply the function to what remains, evict again and keep the rest."""
        elements = [TimestampedValue(v, t) for v, t in data]
        ctx, evictor = self._ctx, self.evictor
        ctx.window = window
        evictor.evict_before(elements, len(elements), window, ctx)
        self.fn.emit_elements(window, [e.value for e in elements], ts)
        evictor.evict_after(elements, len(elements), window, ctx)
        self._contents.update([(e.value, e.timestamp) for e in elements])
