"""Event-time windows with one stored value per key, an epoch at a time: what the session engine and
the aligned-window engine share (Flink's ``WindowOperator`` with the ``EventTimeTrigger`` and an
incremental function, computed in bulk).

A key's value, in the void namespace, is a cell ``[timer, *bounds0, acc0, *bounds1, acc1, ...]``: its
open windows in time order, each window's bounds next to its accumulator, and the one event-time timer
the key holds (the earliest fire or cleanup among its windows, or None); or the same packed into bytes
(``operators.engines.packed_cells``) when the function is a ``PackedAggregate`` and its accumulators pack. So a
key costs one read and one write per epoch and one timer: an epoch reads every touched key in one
batched call, takes keys that may emit at once (late records, late-but-allowed fires) one record at a
time in arrival order and the others in bulk (``_runs``, the engine's own), writes every key back in
one call and moves the timers in bulk; a watermark takes every due timer at once, fires and cleans the
due windows in timer order and writes their keys back.
"""

from __future__ import annotations

from abc import abstractmethod
from itertools import chain, compress
from operator import itemgetter
from typing import Any, Callable, ClassVar, Sequence

import numpy as np
import pyarrow as pa

from statekit import MAX_TIMESTAMP, InternalTimerService, KeyedStateBackend, PackedAggregate, StateError, ValueState

from ..columns import python_values
from ..windows import TimeWindow
from .epoch_start import KeyCodedEngine, coded_keys
from .packed_cells import NO_TIMER, PackedCells, WindowTable
from .window_engine import Fold, PackedFold, WindowSink, timer_order

PackedEntries = tuple[list, list, np.ndarray, np.ndarray]
"""Keys an epoch encoded in bulk: (key codes, cells, new timers, old timers), NO_TIMER for none."""


class CellEngine(KeyCodedEngine):
    """The windows of one operator, a cell per key in ``state``, timed by ``timers``."""

    BOUNDS: ClassVar[int]
    """Words of bounds per window in a cell."""
    KEYS_AT_ONCE: ClassVar[int] = 1 << 16
    """Keys read, merged or fired, written back and timed together: an epoch's records are taken in that
    many keys at a time (in order of first appearance), a watermark's fires that many due keys at a time
    (in timer order). What bounds the working set (decoded cells, resolved keys, timers, pending writes)
    whatever the epoch's size or the number of due keys; results do not depend on it."""

    def __init__(self, lateness: int, backend: KeyedStateBackend, state: ValueState, timers: InternalTimerService,
                 sink: WindowSink, add: Callable[[Any, Any], Any], merge: Callable[[Any, Any], Any],
                 metrics: dict[str, int], clears: bool, packed: PackedAggregate | None = None) -> None:
        super().__init__(lateness, backend, state, timers, sink, add, merge, metrics, clears, packed)
        self._cells = PackedCells(packed, self.BOUNDS) if packed is not None else None

    # -- what an engine defines ----------------------------------------------------------------
    @abstractmethod
    def _ends(self, bounds: np.ndarray) -> np.ndarray:
        """The ends of windows whose bounds are the rows of ``bounds`` (shape (n, BOUNDS))."""

    @abstractmethod
    def _record(self, key: Any, windows: list, t: int, value: Any, wm: int) -> None:
        """One record into a key's ``windows`` (the list form), as one-by-one processing sees it."""

    @abstractmethod
    def _runs(self, codes: np.ndarray, ts: np.ndarray, rows: np.ndarray, cells: dict, value_of: Callable[[int], Any],
              fold: Fold | None, fold_packed: PackedFold | None, old_timers: dict, new_cells: dict,
              wm: int) -> PackedEntries | None:
        """The records ``rows`` of keys not taken one at a time, into their ``cells``: keys in the list form
        go to ``new_cells`` (their old timers to ``old_timers``), keys encoded in bulk are returned."""

    def _next_timers(self, owner: np.ndarray, ends: np.ndarray, n: int, wm: int) -> np.ndarray:
        """The one timer each of ``n`` keys needs (NO_TIMER for none): its windows' (``owner``, ``ends``)
        earliest pending fire (end - 1 after the watermark) or cleanup (never MAX_TIMESTAMP)."""
        due = ends - 1
        passed = due <= wm
        due = np.where(passed, self._cleanups(ends), due)
        timers = np.full(n, MAX_TIMESTAMP, np.int64)
        np.minimum.at(timers, owner, due)
        return np.where(timers == MAX_TIMESTAMP, NO_TIMER, timers)

    def _decode(self, cell: Any) -> tuple[int | None, list]:
        """A stored value as ``(timer or None, [[*bounds, accumulator], ...])``."""
        if cell is None:
            return None, []
        if type(cell) is bytes:
            if self._cells is None:
                raise StateError(f"state '{self.STATE}' holds packed cells, written by a PackedAggregate; this "
                                 f"operator's function does not unpack them (restore with the function that wrote them)")
            return self._cells.to_windows(cell)
        step = self.BOUNDS + 1
        if len(cell) == step + 1:  # one window: the common case
            return cell[0], [cell[1:]]
        return cell[0], [cell[i:i + step] for i in range(1, len(cell), step)]

    def _encode(self, timer: int | None, windows: list) -> Any:
        """The value to store: packed when the function packs these accumulators, else a list."""
        if self._cells is not None and windows:
            packed = self._cells.from_windows(timer, windows)
            if packed is not None:
                return packed
        return _cell(timer, windows)

    @classmethod
    def readable(cls, stored: bytes, function: PackedAggregate, version: int) -> list:
        """A packed cell in the list form ``[timer, *bounds0, acc0, ...]``."""
        return PackedCells(function, cls.BOUNDS).unpack_version(stored, version)

    @classmethod
    def cell_migration(cls, migrate: Callable[[int, Any], Any], packed: PackedAggregate | None = None) -> Callable[[int, Any], Any]:
        """A migration of the engine's stored values from one of their accumulators' (each window's);
        a packed value is read with the layout of its version and comes out in the list form."""
        cells = PackedCells(packed, cls.BOUNDS) if packed is not None else None
        step = cls.BOUNDS + 1

        def cell(version: int, stored: Any) -> list:
            if type(stored) is bytes and cells is None:
                raise ValueError("a packed cell, written by a PackedAggregate: this function does not unpack it")
            out = cells.unpack_version(stored, version) if type(stored) is bytes else list(stored)
            for i in range(step, len(out), step):
                out[i] = migrate(version, out[i])
            return out
        return cell

    def _process(self, keys: Sequence[Any], timestamps: Any, value_of: Callable[[int], Any], fold: Fold | None,
                 fold_packed: PackedFold | None) -> None:
        epoch = self._start_epoch(keys, timestamps, value_of, coded_keys)
        keys, ts, rows, wm = epoch.keys, epoch.ts, epoch.rows, epoch.wm
        codes, distinct = epoch.coded.codes, epoch.coded.distinct
        n, step = len(distinct), self.KEYS_AT_ONCE
        if n <= step:
            self._process_keys(keys, ts, value_of, fold, fold_packed, codes, distinct, rows, wm)
            return
        by_key = rows[np.argsort(codes[rows], kind="stable")]
        cuts = np.searchsorted(codes[by_key], np.arange(0, n + step, step)).tolist()
        local = np.empty_like(codes)  # a part's codes from 0, set at its own rows only
        for part, lo in enumerate(range(0, n, step)):
            part_rows = np.sort(by_key[cuts[part]:cuts[part + 1]])
            local[part_rows] = codes[part_rows] - lo
            keys = self._process_keys(keys, ts, value_of, fold, fold_packed, local, distinct[lo:lo + step], part_rows, wm)

    def _process_keys(self, keys: Sequence[Any], ts: np.ndarray, value_of: Callable[[int], Any], fold: Fold | None,
                      fold_packed: PackedFold | None, codes: np.ndarray, distinct: list, rows: np.ndarray,
                      wm: int) -> Sequence[Any]:
        """The valid ``rows`` of the keys ``distinct`` (their codes in ``codes``, from 0), read, taken in and
        written back together; returns ``keys``, as Python values when a key was refused."""
        resolved, refused = self._backend.resolve_keys(distinct)
        if refused:  # refused keys: named in side outputs (a no-op once converted, and for a list)
            keys = python_values(keys)
        c, t = codes[rows], ts[rows]
        slow = self._slow_keys(len(distinct), c, t, refused, wm)
        touched = [i for i in range(len(distinct)) if i not in refused] if refused else range(len(distinct))
        cells = dict(zip(touched, self._state.get_internal_many([resolved[i] for i in touched])))
        old_timers: dict[int, int | None] = {}
        new_cells: dict[int, list] = {}
        for i, key_rows in self._slow_key_rows(keys, ts, value_of, codes, rows, slow, refused):  # keys that may emit
            old_timers[i], windows = self._decode(cells[i])
            key = distinct[i]
            for r in key_rows:
                self._record(key, windows, int(ts[r]), value_of(r), wm)
            new_cells[i] = windows
        fast_rows = rows[~slow[c]]
        packed = None
        if len(fast_rows):
            packed = self._runs(codes, ts, fast_rows, cells, value_of, fold, fold_packed, old_timers, new_cells, wm)
        self._store(resolved, list(new_cells), list(new_cells.values()), old_timers, wm, packed)
        return keys

    def put_encoded(self, resolved: list, table: WindowTable) -> None:
        """Keys ``resolved`` (holding no windows) with the windows of ``table`` (packed rows in time order,
        ``table.owner`` indexing ``resolved``) written and timed in bulk: a session table moving to cells."""
        n, wm = len(resolved), self._timers.current_watermark()
        table.timers = self._next_timers(table.owner, self._ends(table.rows[:, :self.BOUNDS]), n, wm)
        self._store(resolved, [], [], {}, wm,
                    (list(range(n)), self._cells.encode(table), table.timers, np.full(n, NO_TIMER, np.int64)))

    def _restore(self, keys: list, windows_of: list[list]) -> None:
        for lo in range(0, len(keys), self.KEYS_AT_ONCE):
            part = keys[lo:lo + self.KEYS_AT_ONCE]
            resolved, refused = self._backend.resolve_keys(part)
            if refused:
                i, error = next(iter(refused.items()))
                raise StateError(f"state '{self.STATE}': cannot restore the windows of key {part[i]!r}: {error}")
            held = [k for k, cell in zip(part, self._state.get_internal_many(resolved)) if cell is not None]
            if held:
                raise StateError(f"state '{self.STATE}': key {held[0]!r} holds windows already; a restore puts "
                                 f"windows on keys without any")
            self._store(resolved, list(range(len(part))), windows_of[lo:lo + self.KEYS_AT_ONCE], {},
                        self._timers.current_watermark())

    def _bounds(self, windows: list) -> np.ndarray:
        """The bounds of windows in the list form, as rows of an int64 array (shape (n, BOUNDS))."""
        bounds = map(itemgetter(slice(0, self.BOUNDS)), windows)
        return np.fromiter(chain.from_iterable(bounds), np.int64, len(windows) * self.BOUNDS).reshape(-1, self.BOUNDS)

    def _store(self, resolved: list, codes: list, windows_of: list, old_timers: dict, wm: int,
               packed: PackedEntries | None = None) -> None:
        """Write every touched key (``codes``, their windows ``windows_of``) once and move its timer;
        ``packed``: keys already encoded."""
        counts = list(map(len, windows_of))
        ends = self._ends(self._bounds(list(chain.from_iterable(windows_of))))
        timers = self._next_timers(np.repeat(np.arange(len(codes)), counts), ends, len(codes), wm)
        olds = np.array([NO_TIMER if t is None else t for t in map(old_timers.get, codes)], np.int64)
        stamps = timers.astype(object)
        stamps[timers == NO_TIMER] = None
        if self._cells is None:  # the list form: one list per key
            values = [_cell(t, windows) for t, windows in zip(stamps.tolist(), windows_of)]
        else:
            values = [self._encode(t, windows) for t, windows in zip(stamps.tolist(), windows_of)]
        if packed is not None:
            p_codes, p_values, p_timers, p_olds = packed
            codes += p_codes
            values += p_values
            timers, olds = np.concatenate((timers, p_timers)), np.concatenate((olds, p_olds))
        scopes = [resolved[i] for i in codes]
        changed = timers != olds
        drop = np.flatnonzero(changed & (olds != NO_TIMER))
        add = np.flatnonzero(changed & (timers != NO_TIMER))
        self._state.update_internal_many(scopes, values)
        if len(drop):
            self._timers.delete_event_time_timers([scopes[i] for i in drop.tolist()], None, olds[drop].tolist(),
                                                  present=True)  # a key's one timer, as its cell records it
        if len(add):
            self._timers.register_event_time_timers([scopes[i] for i in add.tolist()], None, timers[add].tolist(),
                                                    fresh=True)  # the key's only timer, unlike the one it replaces

    def _advance(self, watermark: int) -> None:
        """Through watermarks at which at most ``KEYS_AT_ONCE`` keys are due (``event_time_step``), each
        step's keys read, fired and written back together: the same fires in the same order as one step."""
        while True:
            previous = self._timers.current_watermark()
            step, _, resolved = self._timers.take_event_time_step_scoped(watermark, self.KEYS_AT_ONCE)
            if resolved:
                self._advance_step(resolved, previous, step)
            self._sink.end_step()  # the step's results leave the operator (to a runtime that takes them per step)
            if step == watermark:
                return

    def _advance_step(self, resolved: list, previous: int, watermark: int) -> None:
        """Fire and clean every window of the keys ``resolved`` due at ``watermark`` (past ``previous``), in
        timer order."""
        cells = self._state.get_internal_many(resolved)
        if self._cells is not None and all(type(cell) is not list for cell in cells):
            self._advance_packed(resolved, cells, previous, watermark)
            return
        decoded = [self._decode(cell)[1] for cell in cells]
        n = len(resolved)
        counts = np.fromiter(map(len, decoded), np.int64, n)
        flat = list(chain.from_iterable(decoded))
        bounds = self._bounds(flat)
        starts, ends = bounds[:, 0], self._ends(bounds)
        owner = np.repeat(np.arange(n), counts)
        fire_at = ends - 1
        cleanup = self._cleanups(ends)
        fired = np.flatnonzero((previous < fire_at) & (fire_at <= watermark))
        clean = (cleanup <= watermark) & (cleanup != MAX_TIMESTAMP)
        cleared = np.flatnonzero(clean) if self._clears else np.zeros(0, np.int64)
        kept = list(compress(flat, (~clean).tolist()))
        cuts = np.concatenate(([0], np.cumsum(np.bincount(owner[~clean], minlength=n)))).tolist()
        self._store(resolved, list(range(n)), [kept[a:b] for a, b in zip(cuts, cuts[1:])], {}, watermark)
        rows = np.concatenate((fired, cleared))
        kinds = np.concatenate((np.zeros(len(fired), np.int8), np.ones(len(cleared), np.int8)))
        positions = _pop_order(resolved, owner[rows], np.concatenate((fire_at[fired], cleanup[cleared])), kinds)
        order = rows[positions]
        sink = self._sink
        if not len(cleared):  # fires only: handed over in one call
            sink.fire_windows([resolved[i][0] for i in owner[order].tolist()], starts[order].tolist(),
                              ends[order].tolist(), [flat[r][-1] for r in order.tolist()])
            return
        owner_l, starts_l, ends_l = owner.tolist(), starts.tolist(), ends.tolist()
        for r, kind in zip(order.tolist(), kinds[positions].tolist()):
            key, window = resolved[owner_l[r]][0], TimeWindow(starts_l[r], ends_l[r])
            if kind == 0:
                sink.fire_window(key, window, flat[r][-1])
            else:
                sink.clear_window(key, window)

    def _advance_packed(self, resolved: list, cells: list, previous: int, watermark: int) -> None:
        """``_advance`` of packed cells, decided for all due keys at once."""
        table = self._cells.decode(cells)
        n = len(resolved)
        starts, ends = table.rows[:, 0], self._ends(table.rows[:, :self.BOUNDS])
        accs = table.rows[:, self.BOUNDS:]
        fire_at = ends - 1
        cleanup = self._cleanups(ends)
        fired = np.flatnonzero((previous < fire_at) & (fire_at <= watermark))
        clean = (cleanup <= watermark) & (cleanup != MAX_TIMESTAMP)
        cleared = np.flatnonzero(clean) if self._clears else np.zeros(0, np.int64)
        keep = ~clean
        left = WindowTable(np.zeros(n, np.int64), table.owner[keep], table.rows[keep])
        left.timers = self._next_timers(left.owner, ends[keep], n, watermark)
        self._store(resolved, [], [], {}, watermark,
                    (list(range(n)), self._cells.encode(left), left.timers, np.full(n, NO_TIMER, np.int64)))
        sink = self._sink
        if not len(cleared):  # fires only: handed over in one call
            r = fired[_pop_order(resolved, table.owner[fired], fire_at[fired], np.zeros(len(fired), np.int8))]
            sink.fire_windows_packed([resolved[i][0] for i in table.owner[r].tolist()], starts[r], ends[r], accs[r])
            return
        rows = np.concatenate((fired, cleared))
        kinds = np.concatenate((np.zeros(len(fired), np.int8), np.ones(len(cleared), np.int8)))
        order = _pop_order(resolved, table.owner[rows], np.concatenate((fire_at[fired], cleanup[cleared])), kinds).tolist()
        fired_accs = self._cells.function.unpack(accs[fired])
        rows_l, kinds_l, owner = rows.tolist(), kinds.tolist(), table.owner.tolist()
        starts_l, ends_l = starts.tolist(), ends.tolist()
        for a in order:
            r = rows_l[a]
            key, window = resolved[owner[r]][0], TimeWindow(starts_l[r], ends_l[r])
            if kinds_l[a] == 0:
                sink.fire_window(key, window, fired_accs[a])
            else:
                sink.clear_window(key, window)


def _cell(timer: int | None, windows: list) -> list | None:
    """A key's value in the list form ``[timer, *bounds0, acc0, ...]``; None for a key without windows."""
    if len(windows) == 1:
        return [timer, *windows[0]]
    if not windows:
        return None
    cell = [timer]
    for w in windows:
        cell += w
    return cell


def _pop_order(resolved: list, owner: np.ndarray, times: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """``timer_order`` of due actions of keys ``resolved[owner]``."""
    who = owner.tolist()
    return timer_order(times, np.fromiter((resolved[i][1] for i in who), np.int64, len(who)),
                       pa.array([resolved[i][2] for i in who], pa.binary()), kinds)
