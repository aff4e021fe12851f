"""ColumnarWindowOperator: event-time windows with the default trigger, no evictor and an incremental
function, run an epoch at a time by the engine their assigner declares (``WindowAssigner.columnar_engine``:
``operators.engines.session_engine``, ``operators.engines.aligned_engine``, ``operators.engines.session_table``), on one stored
value per key or one table of all keys. Results, side outputs, state and timers equal the record path's
(``operators.windowing.record_window``)."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from statekit import KeyedStateBackend, Timer, ValueStateDescriptor

from ..columns import RecordValues, RowView
from ..engines.session_rules import SessionRules
from ..engines.window_engine import EngineSpec, WindowEngine
from ..output import Output
from .window_base import BaseWindowOperator


class ColumnarWindowOperator(BaseWindowOperator):
    """Windows run by ``spec``'s engine (see ``BaseWindowOperator``); ``WindowOperator(...)`` makes one
    when the assigner declares an engine for the trigger, evictor and function given."""

    def __init__(self, spec: EngineSpec, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._spec = spec
        self._engine: WindowEngine | None = None

    def window_layout(self) -> str:
        return self._spec.engine.LAYOUT

    def open(self, backend: KeyedStateBackend, output: Output) -> None:
        """Bind to a backend (possibly restored) and an output, and make the engine over them."""
        super().open(backend, output)
        engine, packed = self._spec.engine, self.fn.packed

        def state_of(kind: type[WindowEngine]) -> Any:
            return backend.get_state(self._versioned(ValueStateDescriptor(kind.STATE),
                                                     lambda migrate: kind.cell_migration(migrate, packed)))
        moved = {} if engine.MOVES_TO is None else {"moved_state": state_of(engine.MOVES_TO)}
        self._engine = engine(*self._spec.shape, self.allowed_lateness, backend, state_of(engine), self._svc, self,
                              self.fn.incremental(), self.fn.merge, self.metrics, self._clears_window_state, packed,
                              **moved)

    def close(self) -> None:
        self._engine.close()
        super().close()

    def process_batch(self, records: Iterable[tuple[Any, Any, int | None]]) -> None:
        """An epoch's records at the current watermark, to the engine (same output as one by one)."""
        records = records if isinstance(records, list) else list(records)
        self._engine.process([r[0] for r in records], [r[2] for r in records], RecordValues(records), None)

    def process_columns(self, keys: Sequence[Any], timestamps: Sequence[int], columns: Sequence[Sequence[Any]]) -> None:
        """An epoch's records as columns, to the engine as columns: record i is ``(keys[i], tuple(c[i] for c
        in columns), timestamps[i])``. An AggregateFunction that implements ``accumulate`` is applied to whole
        runs of rows at once. Keys and columns may be Arrow arrays: the engine then makes Python values only
        of what it hands to Python code."""
        rows = RowView(columns)
        self._engine.process(keys, np.asarray(timestamps), rows, *self.fn.folds(rows, columns))

    def restore_sessions(self, keys: Sequence[Any], starts: Sequence[int], ends: Sequence[int],
                         accumulators: Sequence[Any]) -> int:
        """Open sessions put in as they are, accumulators of this operator's function (a job bootstrapped from
        a table of sessions: ``SessionRules.restore_sessions``); returns how many keys got sessions. TypeError
        for windows that are not event-time sessions."""
        if not isinstance(self._engine, SessionRules):
            raise TypeError(f"restore_sessions puts in event-time sessions; this operator's windows are "
                            f"{self.window_layout()}")
        return self._engine.restore_sessions(keys, starts, ends, accumulators)

    def process_watermark(self, watermark: int) -> None:
        self._engine.advance(watermark)

    def on_event_time(self, timer: Timer) -> None:
        raise RuntimeError(f"{self.window_layout()} windows take their timers in bulk when the watermark advances: "
                           f"a timer of namespace {timer.namespace!r} fired one by one (the timer service was "
                           f"advanced outside process_watermark)")

    def on_processing_time(self, timer: Timer) -> None:
        raise RuntimeError(f"{self.window_layout()} windows are event-time windows: a processing-time timer "
                           f"({timer!r}) is not theirs (the checkpoint holds another operator's timers)")
