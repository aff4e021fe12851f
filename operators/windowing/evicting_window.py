"""EvictingWindowOperator: Flink's ``EvictingWindowOperator``, the record path with an evictor.

A window keeps its elements with their timestamps whatever the function; on firing, the evictor drops
elements before and after the function sees them, and what remains is stored back.
"""

from __future__ import annotations

from typing import Any

from .evictors import TimestampedValue
from .record_window import RecordWindowOperator
from .window_base import AGGREGATE, PROCESS


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
        values = [e.value for e in elements]
        if self.kind == PROCESS:
            self._process(self.function, window, values, ts)
        else:
            if self.kind == AGGREGATE:
                agg = self.function
                acc = agg.create_accumulator()
                for v in values:
                    acc = agg.add(v, acc)
                result = agg.get_result(acc)
            else:
                result = None
                for v in values:
                    result = v if result is None else self.function(result, v)
            if self.window_function is None:
                self._collect(result, ts)
            else:
                self._process(self.window_function, window, [result], ts)
        evictor.evict_after(elements, len(elements), window, ctx)
        self._contents.update([(e.value, e.timestamp) for e in elements])
