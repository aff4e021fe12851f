"""WindowEngine: what every columnar window engine shares (Flink's ``WindowOperator`` with the
``EventTimeTrigger`` and an incremental function, an epoch at a time): its operator's sink, the cleanup
rule, the epoch and watermark entry points, and the timer queue's order, whichever way an engine stores
its windows (a cell per key, ``operators.engines.cell_engine``; one table of all keys, ``operators.engines.session_table``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Protocol, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statekit import (MAX_TIMESTAMP, InternalTimerService, KeyedStateBackend, PackedAggregate, ValueState,
                      key_identity, unhashable_reason)

from ..columns import factorize, python_values
from ..gc_pause import gc_paused
from ..invalid import MAX_EVENT_TIMESTAMP, MIN_EVENT_TIMESTAMP, timestamp_problem
from ..windows import TimeWindow

Fold = Callable[[np.ndarray, np.ndarray], list]
"""``fold(order, starts)``: one new accumulator per run j, folding ``add`` over rows ``order[starts[j]:starts[j+1]]``."""
PackedFold = Callable[[np.ndarray, np.ndarray], Any]
"""``fold`` with the accumulators packed (``PackedAggregate.accumulate_packed``): an array, or None."""
STATE_LAYOUTS = ("cells", "table")
"""How columnar windows are stored: a cell per key (``cells``), or, for event-time sessions of a
PackedAggregate, every key's sessions as one columnar table stored in pages per key group (``table``)."""


class Values(Protocol):
    """An epoch's record values by row: one (``values(r)``), or many in one pass (``take``)."""

    def __call__(self, r: int) -> Any:
        """Row ``r``'s value."""

    def take(self, rows: np.ndarray) -> list:
        """The values of ``rows``, in that order."""


class Incremental(ABC):
    """The window function's incremental part as the engines apply it: ``add(value, accumulator or None)``
    for one record, ``fold`` for a run of them (the function's own add per record, in one loop)."""

    @abstractmethod
    def __call__(self, value: Any, accumulator: Any) -> Any:
        """``value`` added to ``accumulator`` (None: a new window's)."""

    @abstractmethod
    def fold(self, accumulator: Any, values: list) -> Any:
        """``values`` added in order to ``accumulator`` (None: a new window's); ``values`` is not empty."""


class WindowSink(Protocol):
    """What an engine hands back to its operator: results, cleanups, late and invalid records."""

    def fire_window(self, key: Any, window: TimeWindow, accumulator: Any) -> None:
        """Emit ``window``'s result (stamped ``window.max_timestamp()``)."""

    def fire_windows(self, keys: list, starts: list, ends: list, accumulators: list) -> None:
        """``fire_window`` of many windows, in this order (``[starts[i], ends[i])`` of ``keys[i]``)."""

    def fire_windows_packed(self, keys: list, starts: np.ndarray, ends: np.ndarray, words: np.ndarray) -> None:
        """``fire_windows`` of windows whose accumulators are packed rows (``PackedAggregate``)."""

    def clear_window(self, key: Any, window: TimeWindow) -> None:
        """``window`` is cleaned up (its per-window state goes)."""

    def end_step(self) -> None:
        """A bounded step of the engine's keys ended: what it emitted may leave the operator (``Output.end_step``)."""

    def late_record(self, value: Any, timestamp: int) -> None:
        """A record no window took, behind the watermark."""

    def invalid_record(self, record: tuple, field: str, reason: str) -> None:
        """A record with a bad key or timestamp."""


class WindowEngine(ABC):
    """The windows of one operator with ``lateness``, stored in ``state``; ``timers``' watermark is the
    operator's. ``add(value, accumulator or None)`` and ``merge(a, b)`` are the window function's.
    A concrete engine (one naming its ``STATE``) is found by that name with ``engine_storing``."""

    STATE: ClassVar[str]
    """The name of the state holding the windows."""
    LAYOUT: ClassVar[str]
    """The state layout an operator describes (a checkpoint of another layout is refused)."""
    MOVES_TO: ClassVar[type["WindowEngine"] | None] = None
    """The engine this one hands its windows to when they outgrow memory (made with ``moved_state``, that
    engine's state), or None."""
    _storing: ClassVar[dict[str, type["WindowEngine"]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "STATE" in cls.__dict__:
            WindowEngine._storing[cls.STATE] = cls

    def __init__(self, lateness: int, backend: KeyedStateBackend, state: ValueState, timers: InternalTimerService,
                 sink: WindowSink, add: Incremental, merge: Callable[[Any, Any], Any],
                 metrics: dict[str, int], clears: bool, packed: PackedAggregate | None = None) -> None:
        self.lateness = lateness
        self._backend = backend
        self._state = state
        self._timers = timers
        self._sink = sink
        self._add = add            # add(value, acc_or_None) -> acc; add.fold(acc_or_None, values) -> acc
        self._merge = merge        # merge(a, b) -> acc (b after a)
        self._metrics = metrics
        self._clears = clears

    @abstractmethod
    def _slow_codes(self, codes: np.ndarray, timestamps: np.ndarray, wm: int) -> np.ndarray:
        """Codes of the keys of these records (valid ones) that must be taken one record at a time."""

    @abstractmethod
    def _process(self, keys: Sequence[Any], timestamps: Any, value_of: Callable[[int], Any], fold: Fold | None,
                 fold_packed: PackedFold | None) -> None:
        """``process`` of a non-empty epoch, the cyclic GC paused."""

    @abstractmethod
    def _advance(self, watermark: int) -> None:
        """``advance`` to a watermark past the current one, the cyclic GC paused."""

    @abstractmethod
    def _restore(self, keys: list, windows_of: list[list]) -> None:
        """Put each of ``keys`` (distinct, holding no windows) with its windows ``windows_of[i]`` in the list form
        (``[*bounds, accumulator]``, in time order), timed as the engine times its own; StateError when a key
        holds windows already or the backend refuses it."""

    @classmethod
    @abstractmethod
    def cell_migration(cls, migrate: Callable[[int, Any], Any], packed: PackedAggregate | None = None) -> Callable[[int, Any], Any]:
        """A migration of the engine's stored values from one of their accumulators' (each window's)."""

    @classmethod
    @abstractmethod
    def readable(cls, stored: bytes, function: PackedAggregate, version: int) -> list:
        """A packed value of the engine's state (accumulators of ``function``'s ``version``) as people read it."""

    def close(self) -> None:
        """Let go of the backend (the operator closes; the backend may be kept). Default: nothing held."""

    # -- an epoch's parts --------------------------------------------------------------------------
    def _refuse_rows(self, keys: Sequence[Any], timestamps: Any, value_of: Callable[[int], Any],
                     problems: dict[int, tuple[str, str]]) -> None:
        """Rows with a bad timestamp or an unhashable key (``problems``: row -> (field, reason)) to the
        invalid side output, in row order."""
        for r in sorted(problems):
            field, reason = problems[r]
            self._sink.invalid_record((keys[r], value_of(r), timestamps[r]), field, reason)

    def _refuse_key(self, keys: Sequence[Any], ts: np.ndarray, value_of: Callable[[int], Any], rows: list,
                    error: Exception) -> None:
        """The rows of a key the backend refused (``error`` says why) to the invalid side output."""
        reason = str(error)
        for r in rows:
            self._sink.invalid_record((keys[r], value_of(r), int(ts[r])), "key", reason)

    def _slow_keys(self, n: int, codes: np.ndarray, timestamps: np.ndarray, refused: dict, wm: int) -> np.ndarray:
        """Which of the epoch's ``n`` keys take their records one at a time (``_slow_codes``, and refused
        keys, whose records are named in side outputs in that order); counts the records taken in."""
        slow = np.zeros(n, dtype=bool)
        slow[self._slow_codes(codes, timestamps, wm)] = True
        slow[list(refused)] = True
        per_key = np.bincount(codes, minlength=n)
        self._metrics["records_in"] += int(per_key.sum()) - sum(int(per_key[i]) for i in refused)
        return slow

    # -- rules ---------------------------------------------------------------------------------
    def _cleanup(self, end: int) -> int:
        """When a window ending at ``end`` is dropped: its last timestamp plus the allowed lateness."""
        return min(end - 1 + self.lateness, MAX_TIMESTAMP)

    def _cleanups(self, ends: np.ndarray) -> np.ndarray:
        """``_cleanup`` of many window ends."""
        last = ends - 1
        return np.where(last > MAX_TIMESTAMP - self.lateness, MAX_TIMESTAMP, last + self.lateness)

    # -- an epoch's records --------------------------------------------------------------------
    def process(self, keys: Sequence[Any], timestamps: Any, value_of: Values, fold: Fold | None,
                fold_packed: PackedFold | None = None) -> None:
        """The epoch's records at the current watermark: record i is ``(keys[i], value_of(i), timestamps[i])``;
        ``fold`` (when given) aggregates runs of rows in one pass, ``fold_packed`` into packed accumulators."""
        if len(keys):
            with gc_paused():
                self._process(keys, timestamps, value_of, fold, fold_packed)

    # -- a watermark ---------------------------------------------------------------------------
    def advance(self, watermark: int) -> None:
        """Fire and clean every window due at ``watermark``, in timer order (time, key group, key)."""
        if watermark > self._timers.current_watermark():
            with gc_paused():
                self._advance(watermark)


def engine_storing(state: str) -> type[WindowEngine] | None:
    """The engine whose windows are stored in the state named ``state``, if any."""
    return WindowEngine._storing.get(state)


@dataclass(frozen=True)
class EngineSpec:
    """How a window assigner's windows run columnar: the ``engine`` and the ``shape`` its constructor
    takes first (a session's gap; aligned windows' size, slide and offset)."""

    engine: type[WindowEngine]
    shape: tuple[int, ...]


def timestamps_of(timestamps: Any) -> tuple[np.ndarray, np.ndarray, dict[int, tuple[str, str]]]:
    """int64 timestamps, which rows have a valid one, and why the others do not."""
    if isinstance(timestamps, np.ndarray) and timestamps.dtype.kind == "i":
        ts = timestamps.astype(np.int64, copy=False)
        good = (ts >= MIN_EVENT_TIMESTAMP) & (ts <= MAX_EVENT_TIMESTAMP)
        problems = {r: ("timestamp", timestamp_problem(int(ts[r]))) for r in np.flatnonzero(~good).tolist()}
        return ts, good, problems
    values = timestamps.tolist() if isinstance(timestamps, np.ndarray) else timestamps
    problems = {r: ("timestamp", p) for r, v in enumerate(values) if (p := timestamp_problem(v)) is not None}
    good = np.ones(len(values), dtype=bool)
    good[list(problems)] = False
    ts = np.fromiter((v if r not in problems else 0 for r, v in enumerate(values)), np.int64, len(values))
    return ts, good, problems


def key_codes(keys: Sequence[Any], good: np.ndarray, problems: dict) -> tuple[np.ndarray, list]:
    """Key codes of the rows in order of first appearance; an unhashable key's rows join ``problems``."""
    if not problems:
        try:
            return factorize(keys)
        except TypeError:
            pass
    index: dict[Any, int] = {}
    first: list[Any] = []
    codes = np.zeros(len(keys), dtype=np.int64)
    for r, k in enumerate(python_values(keys)):
        if not good[r]:
            continue
        try:
            code = codes[r] = index.setdefault(key_identity(k), len(index))
        except TypeError:
            good[r] = False
            problems[r] = ("key", unhashable_reason(k))
            continue
        if code == len(first):
            first.append(k)
    return codes, first


def timer_order(times: np.ndarray, groups: np.ndarray, key_bytes: pa.Array, kinds: np.ndarray) -> np.ndarray:
    """Positions of due actions in the order one-by-one processing takes them: timers by time, then key
    group and key bytes (a binary column; the timer queue's order), a key's fire (kind 0) before its
    cleanup (kind 1)."""
    table = pa.table({"t": times, "g": groups, "b": key_bytes, "k": kinds})
    return pc.sort_indices(table, [("t", "ascending"), ("g", "ascending"), ("b", "ascending"),
                                   ("k", "ascending")]).to_numpy()


def window_start(window: list) -> int:
    """A window's start in the list form ``[*bounds, accumulator]``: what keeps a key's windows in time order."""
    return window[0]
