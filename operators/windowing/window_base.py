"""BaseWindowOperator: what the window operators share (``operators.windowing.record_window``, its evicting variant
``operators.windowing.evicting_window`` and the engine-backed ``operators.windowing.columnar_window``): the configuration and
its description, how results, late and invalid records go out, and the user functions' lifecycle.

The user's functions are called through one ``InternalWindowFunction`` (``operators.windowing.internal_functions``),
whatever their kind. Trigger state and timers go through the backend, so an operator is fully described by a
backend snapshot plus ``snapshot_metadata()``.
"""

from __future__ import annotations

from abc import abstractmethod
from datetime import timedelta
from typing import Any, Callable

import numpy as np

from statekit import KeyedStateBackend, StateDescriptor
from statekit.descriptors import Migration, qualified_name
from statekit.durations import to_millis

from ..engines.window_engine import WindowSink
from ..functions import ProcessWindowFunction
from ..invalid import InvalidRecord, error
from ..operator import KeyedOperator
from ..output import Output
from ..windows import TimeWindow
from .assigners import MergingWindowAssigner, WindowAssigner
from .context import KeyedStateStore, WindowProcessContext
from .evictors import Evictor
from .internal_functions import Firing, InternalWindowFunction, internal_function
from .triggers import Trigger

TIMER_SERVICE = "window-timers"


class BaseWindowOperator(KeyedOperator, WindowSink, Firing):
    """Windows a keyed stream: assigner + trigger (+ evictor) + function, with allowed lateness and a
    side output for late elements (``late_output_tag=None`` drops and counts them instead).

    Invalid records (see ``operators.invalid``) raise ``InvalidRecordError``, or go to the
    ``invalid_output_tag`` side output as ``InvalidRecord`` and are counted in ``metrics["invalid"]``.
    An exception out of ``process_batch`` fails the epoch: restore the backend from the last
    committed checkpoint before going on (``CheckpointStore.restore`` notices the changed state)."""

    def __init__(self, assigner: WindowAssigner, function: Any, window_function: ProcessWindowFunction | None,
                 trigger: Trigger, evictor: Evictor | None, allowed_lateness: int | timedelta | str,
                 late_output_tag: str | None, invalid_output_tag: str | None) -> None:
        self.assigner = assigner
        self.fn: InternalWindowFunction = internal_function(function, window_function)
        self.window_function = window_function
        self.trigger = trigger
        self.evictor = evictor
        self.allowed_lateness = to_millis(allowed_lateness, "allowed_lateness")
        if self.allowed_lateness < 0:
            raise ValueError(f"allowed_lateness must be >= 0, got {self.allowed_lateness}")
        self.late_output_tag = late_output_tag
        self.invalid_output_tag = invalid_output_tag
        self.merging = isinstance(assigner, MergingWindowAssigner)
        if self.merging and not self.trigger.can_merge():
            raise ValueError(f"{self.trigger!r} cannot be used with the merging assigner {assigner!r}: it does not support merging")
        self.event_time = assigner.is_event_time()
        self.metrics: dict[str, int] = {"records_in": 0, "late_dropped": 0, "late_side_output": 0, "windows_fired": 0,
                                        "invalid": 0, "state_migrated": 0}
        self._backend: KeyedStateBackend | None = None

    @property
    def function(self) -> Any:
        """The user's window function (an AggregateFunction, a reduce callable or a ProcessWindowFunction);
        setting another wraps it anew (``internal_function``), with the same window function."""
        return self.fn.function

    @function.setter
    def function(self, function: Any) -> None:
        self.fn = internal_function(function, self.window_function)

    def describe(self) -> dict[str, Any]:
        acc = self.fn.accumulating
        version = acc.accumulator_version() if acc is not None else 1
        return {"state": {"operator": "WindowOperator", "assigner": type(self.assigner).__name__,
                          "function": self.fn.layout(), "kind": self.fn.kind,
                          **({"version": version} if version > 1 else {}),  # as recorded before versions existed
                          "window_function": None if self.window_function is None else qualified_name(self.window_function),
                          "trigger": type(self.trigger).__name__,
                          "evictor": None if self.evictor is None else type(self.evictor).__name__,
                          "layout": self.window_layout()},
                "parameters": {"assigner": repr(self.assigner), "trigger": repr(self.trigger),
                               "allowed_lateness": self.allowed_lateness},
                "migration": acc is not None and acc.accumulator_migration() is not None}

    @abstractmethod
    def window_layout(self) -> str:
        """The layout of the window state, as ``describe()`` records it (a checkpoint of another is refused)."""

    # -- lifecycle -----------------------------------------------------------------------------
    def open(self, backend: KeyedStateBackend, output: Output) -> None:
        """Bind to a backend (possibly restored) and an output: the timer service and the user functions."""
        self._backend = backend
        self._output = output
        self._svc = backend.timer_service(TIMER_SERVICE, self)
        self._key: Any = None
        self._state_taken = False
        self._pctx = WindowProcessContext(backend, self._svc, self.merging, self._took_state)
        self._clears_window_state = self.fn.clears_window_state
        self.fn.open(KeyedStateStore(backend, taken=self._took_state), self, output)

    def _took_state(self) -> None:
        """The user's window function takes keyed state: the key of the window it evaluates is made current
        now and, from then on, before each fired window (a function that never takes state costs no key
        switch per window)."""
        if not self._state_taken:
            self._state_taken = True
            if self._key is not None:  # None: taken in open, before any window
                self._backend.set_current_key(self._key)

    def close(self) -> None:
        self.fn.close()

    # -- the function --------------------------------------------------------------------------
    def _versioned(self, descriptor: StateDescriptor, lift: Callable[[Migration], Migration]) -> StateDescriptor:
        """``descriptor`` of a state holding the function's accumulators, at their version, with their
        migration (``lift`` applies an accumulator migration to the state's values); each migrated
        accumulator (a window's) counts in ``metrics["state_migrated"]``."""
        fn = self.fn.accumulating
        if fn is None:
            return descriptor
        migrate = fn.accumulator_migration()
        if migrate is None:
            return descriptor.with_version(fn.accumulator_version())

        def counted(version: int, accumulator: Any) -> Any:
            self.metrics["state_migrated"] += 1
            return migrate(version, accumulator)
        return descriptor.with_version(fn.accumulator_version(), lift(counted))

    # -- results (WindowSink, Firing) ----------------------------------------------------------
    def fire_window(self, key: Any, window: TimeWindow, accumulator: Any) -> None:
        self.fire_windows([key], [window.start], [window.end], [accumulator])

    def fire_windows(self, keys: list, starts: list, ends: list, accumulators: list) -> None:
        self.metrics["windows_fired"] += len(keys)
        self.fn.fire(keys, starts, ends, accumulators)

    def fire_windows_packed(self, keys: list, starts: np.ndarray, ends: np.ndarray, words: np.ndarray) -> None:
        self.metrics["windows_fired"] += len(keys)
        self.fn.fire_packed(keys, starts, ends, words)

    def enter_key(self, key: Any) -> None:
        self._key = key
        if self._state_taken:
            self._backend.set_current_key(key)

    def process_window(self, fn: ProcessWindowFunction, window: Any, elements: list, timestamp: int) -> None:
        self._pctx.set_window(window)
        self._output.collect_all(fn.process(self._key, self._pctx, elements), timestamp)

    def end_step(self) -> None:
        self._output.end_step()

    def clear_window(self, key: Any, window: TimeWindow) -> None:
        self._backend.set_current_key(key)
        self._pctx.set_window(window)
        self.fn.clear(self._pctx)

    def late_record(self, value: Any, timestamp: int) -> None:
        self._late(value, timestamp, self._svc.current_watermark())

    def invalid_record(self, record: tuple, field: str, reason: str) -> None:
        self._invalid(record, field, reason)

    def _invalid(self, record: tuple, field: str, reason: str) -> None:
        """A record that cannot be processed: raise, or side-output and count it."""
        if self.invalid_output_tag is None:
            raise error(record, field, reason)
        self.metrics["invalid"] += 1
        self._output.side_output(self.invalid_output_tag, InvalidRecord(*record, field, reason), None)

    def _late(self, value: Any, ts: int | None, wm: int) -> None:
        """An element no window took: side-output (or count) it if it is late."""
        if self.event_time and ts + self.allowed_lateness <= wm:
            if self.late_output_tag is not None:
                self._output.side_output(self.late_output_tag, value, ts)
                self.metrics["late_side_output"] += 1
            else:
                self.metrics["late_dropped"] += 1
