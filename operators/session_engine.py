"""Event-time session windows an epoch at a time: Flink's ``WindowOperator`` with the
``EventTimeTrigger`` and an incremental function (aggregate or reduce), computed in bulk.

State is one value per key in the void namespace, ``[timer, start0, end0, acc0, start1, ...]``:
the key's open sessions in time order, each next to its accumulator, and the one event-time
timer the key holds (the earliest fire or cleanup among its sessions, or None). So a key costs
one read and one write per epoch and one timer: an epoch reads every touched key in one batched
call, merges its records into the sessions, writes every key back in one call and moves the
timers in bulk; a watermark takes every due timer at once, fires and cleans the due sessions and
writes their keys back.

Records are cut with numpy into runs (``operators.columns``) whose contents are aggregated in one
vectorized pass when the function has ``accumulate``. When it is a ``PackedAggregate`` the value is
a packed cell (``operators.packed_sessions``) instead, and an epoch's keys are decoded, merged, timed,
fired and encoded together with numpy; a key whose accumulators do not pack keeps the list form. Keys with records out of time order, or
with a record whose own window is not after the watermark (late, or firing at once), take
one-record runs in arrival order instead. Either way the merges, contents (order-sensitive
functions included), results, late records and timers equal one-by-one processing.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statekit import (MAX_TIMESTAMP, InternalTimerService, KeyedStateBackend, PackedAggregate, StateError, ValueState,
                      key_identity)

from .columns import factorize, out_of_order_keys, session_runs
from .gc_pause import gc_paused
from .invalid import MAX_EVENT_TIMESTAMP, MIN_EVENT_TIMESTAMP, timestamp_problem
from .packed_sessions import NO_TIMER, PackedCells, SessionTable, merged
from .windows import TimeWindow, touch

SESSIONS_STATE = "sessions"

Fold = Callable[[np.ndarray, np.ndarray], list]
"""``fold(order, starts)``: one new accumulator per run j, folding ``add`` over rows ``order[starts[j]:starts[j+1]]``."""
PackedFold = Callable[[np.ndarray, np.ndarray], Any]
"""``fold`` with the accumulators packed (``PackedAggregate.accumulate_packed``): an array, or None."""


class SessionSink(Protocol):
    """What the engine hands back to its operator: results, cleanups, late and invalid records."""

    def fire_session(self, key: Any, window: TimeWindow, accumulator: Any) -> None:
        """Emit ``window``'s result (stamped ``window.max_timestamp()``)."""

    def fire_sessions(self, keys: list, starts: list, ends: list, accumulators: list) -> None:
        """``fire_session`` of many windows, in this order (``[starts[i], ends[i])`` of ``keys[i]``)."""

    def clear_session(self, key: Any, window: TimeWindow) -> None:
        """``window`` is cleaned up (its per-window state goes)."""

    def late_record(self, value: Any, timestamp: int) -> None:
        """A record no session took, behind the watermark."""

    def invalid_record(self, record: tuple, field: str, reason: str) -> None:
        """A record with a bad key or timestamp."""


class SessionEngine:
    """Sessions with gap ``gap`` and ``lateness`` of one operator, stored in ``state``, timed by ``timers``."""

    def __init__(self, gap: int, lateness: int, backend: KeyedStateBackend, state: ValueState,
                 timers: InternalTimerService, sink: SessionSink, add: Callable[[Any, Any], Any],
                 merge: Callable[[Any, Any], Any], metrics: dict[str, int], clears: bool,
                 packed: PackedAggregate | None = None) -> None:
        self.gap = gap
        self.lateness = lateness
        self._backend = backend
        self._state = state
        self._timers = timers
        self._sink = sink
        self._add = add            # add(value, acc_or_None) -> acc
        self._merge = merge        # merge(a, b) -> acc (b after a)
        self._metrics = metrics
        self._clears = clears
        self._cells = PackedCells(packed) if packed is not None else None

    # -- rules ---------------------------------------------------------------------------------
    def _cleanup(self, end: int) -> int:
        """When a session ending at ``end`` is dropped: its last timestamp plus the allowed lateness."""
        return min(end - 1 + self.lateness, MAX_TIMESTAMP)

    def _cleanups(self, ends: np.ndarray) -> np.ndarray:
        """``_cleanup`` of many session ends."""
        last = ends - 1
        return np.where(last > MAX_TIMESTAMP - self.lateness, MAX_TIMESTAMP, last + self.lateness)

    def _next_timers(self, owner: np.ndarray, ends: np.ndarray, n: int, wm: int) -> np.ndarray:
        """The one timer each of ``n`` keys needs (NO_TIMER for none): its sessions' (``owner``, ``ends``)
        earliest pending fire (end - 1 after the watermark) or cleanup (never MAX_TIMESTAMP)."""
        due = ends - 1
        passed = due <= wm
        due = np.where(passed, self._cleanups(ends), due)
        timers = np.full(n, MAX_TIMESTAMP, np.int64)
        np.minimum.at(timers, owner, due)
        return np.where(timers == MAX_TIMESTAMP, NO_TIMER, timers)

    def _decode(self, cell: Any) -> tuple[int | None, list]:
        """A stored value as ``(timer or None, [[start, end, accumulator], ...])``."""
        if cell is None:
            return None, []
        if type(cell) is bytes:
            if self._cells is None:
                raise StateError(f"state '{SESSIONS_STATE}' holds packed session cells, written by a PackedAggregate; "
                                 f"this operator's function does not unpack them (restore with the function that wrote them)")
            return self._cells.to_sessions(cell)
        it = iter(cell)
        timer = next(it)
        return timer, [[s, e, acc] for s, e, acc in zip(it, it, it)]

    def _encode(self, timer: int | None, sessions: list) -> Any:
        """The value to store: packed when the function packs these accumulators, else a list."""
        if not sessions:
            return None
        if self._cells is not None:
            packed = self._cells.from_sessions(timer, sessions)
            if packed is not None:
                return packed
        cell = [timer]
        for s in sessions:
            cell += s
        return cell

    @staticmethod
    def cell_migration(migrate: Callable[[int, Any], Any], packed: PackedAggregate | None = None) -> Callable[[int, Any], Any]:
        """A migration of the engine's stored values from one of their accumulators' (each session's);
        a packed value is read with the layout of its version and comes out in the list form."""
        cells = PackedCells(packed) if packed is not None else None

        def cell(version: int, stored: Any) -> list:
            if type(stored) is bytes and cells is None:
                raise ValueError("a packed session cell, written by a PackedAggregate: this function does not unpack it")
            out = cells.unpack_version(stored, version) if type(stored) is bytes else list(stored)
            for i in range(3, len(out), 3):
                out[i] = migrate(version, out[i])
            return out
        return cell

    # -- an epoch's records --------------------------------------------------------------------
    def process(self, keys: Sequence[Any], timestamps: Any, value_of: Callable[[int], Any], fold: Fold | None,
                fold_packed: PackedFold | None = None) -> None:
        """The epoch's records at the current watermark: record i is ``(keys[i], value_of(i), timestamps[i])``;
        ``fold`` (when given) aggregates runs of rows in one pass, ``fold_packed`` into packed accumulators."""
        if len(keys):
            with gc_paused():
                self._process(keys, timestamps, value_of, fold, fold_packed)

    def _process(self, keys: Sequence[Any], timestamps: Any, value_of: Callable[[int], Any], fold: Fold | None,
                 fold_packed: PackedFold | None) -> None:
        ts, good, problems = self._timestamps(timestamps)
        codes, distinct = self._codes(keys, good, problems)
        for r in sorted(problems):
            field, reason = problems[r]
            self._sink.invalid_record((keys[r], value_of(r), timestamps[r]), field, reason)
        resolved, refused = self._backend.resolve_keys(distinct)
        wm = self._timers.current_watermark()
        rows = np.flatnonzero(good)
        c, t = codes[rows], ts[rows]
        slow = np.zeros(len(distinct), dtype=bool)
        slow[c[t + (self.gap - 1) <= wm]] = True
        slow[out_of_order_keys(c, t)] = True
        slow[list(refused)] = True
        touched = [i for i in range(len(distinct)) if i not in refused]
        cells = dict(zip(touched, self._state.get_internal_many([resolved[i] for i in touched])))
        per_key = np.bincount(c, minlength=len(distinct))
        self._metrics["records_in"] += int(per_key.sum()) - sum(int(per_key[i]) for i in refused)
        old_timers: dict[int, int | None] = {}
        new_cells: dict[int, list] = {}
        slow_codes = np.flatnonzero(slow)
        if len(slow_codes):
            by_key = rows[np.argsort(c, kind="stable")]
            bounds = np.concatenate(([0], np.cumsum(per_key))).tolist()
            # keys that may emit: in order of first appearance, each in arrival order
            for i in slow_codes.tolist():
                key_rows = by_key[bounds[i]:bounds[i + 1]].tolist()
                if i in refused:
                    reason = str(refused[i])
                    for r in key_rows:
                        self._sink.invalid_record((keys[r], value_of(r), int(ts[r])), "key", reason)
                    continue
                old_timers[i], sessions = self._decode(cells[i])
                key = distinct[i]
                for r in key_rows:
                    self._record(key, sessions, int(ts[r]), value_of(r), wm)
                new_cells[i] = sessions
        fast_rows = rows[~slow[c]]
        packed = None
        if len(fast_rows):
            packed = self._runs(codes, ts, fast_rows, cells, value_of, fold, fold_packed, old_timers, new_cells, wm)
        self._store(resolved, new_cells, old_timers, wm, packed)

    @staticmethod
    def _timestamps(timestamps: Any) -> tuple[np.ndarray, np.ndarray, dict[int, tuple[str, str]]]:
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

    @staticmethod
    def _codes(keys: Sequence[Any], good: np.ndarray, problems: dict) -> tuple[np.ndarray, list]:
        """Key codes of the rows in order of first appearance; an unhashable key's rows join ``problems``."""
        if not problems:
            try:
                return factorize(keys)
            except TypeError:
                pass
        index: dict[Any, int] = {}
        first: list[Any] = []
        codes = np.zeros(len(keys), dtype=np.int64)
        for r, k in enumerate(keys):
            if not good[r]:
                continue
            try:
                code = codes[r] = index.setdefault(key_identity(k), len(index))
            except TypeError:
                good[r] = False
                problems[r] = ("key", f"key of type {type(k).__name__} is not hashable (use a tuple, not a list)")
                continue
            if code == len(first):
                first.append(k)
        return codes, first

    def _record(self, key: Any, sessions: list, t: int, value: Any, wm: int) -> None:
        """One record, as one-by-one processing sees it: merge, add, and fire at once or drop when late."""
        gap = self.gap
        hits = [s for s in sessions if touch(s[0], s[1], t, t + gap)]
        if not hits:
            if self._cleanup(t + gap) <= wm:
                self._sink.late_record(value, t)
                return
            target = [t, t + gap, self._add(value, None)]
            sessions.append(target)
            sessions.sort(key=_start)
        else:
            target = self._merge_hits(sessions, hits, t, t + gap)
            target[2] = self._add(value, target[2])
        if target[1] - 1 <= wm:
            self._sink.fire_session(key, TimeWindow(target[0], target[1]), target[2])

    def _merge_hits(self, sessions: list, hits: list, lo: int, hi: int) -> list:
        """Merge the sessions ``hits`` (in time order) and the window [lo, hi) into the first hit, as
        Flink's MergingWindowSet does: the others' contents merged in order, then into the first."""
        target = hits[0]
        if len(hits) > 1:
            merged = hits[1][2]
            for h in hits[2:]:
                merged = self._merge(merged, h[2])
            target[2] = self._merge(target[2], merged)
            for h in hits[1:]:
                sessions.remove(h)
        target[0] = min(lo, target[0])
        target[1] = max(hi, hits[-1][1])
        return target

    def _runs(self, codes: np.ndarray, ts: np.ndarray, rows: np.ndarray, cells: dict, value_of: Callable[[int], Any],
              fold: Fold | None, fold_packed: PackedFold | None, old_timers: dict, new_cells: dict,
              wm: int) -> tuple[list, list, np.ndarray, np.ndarray] | None:
        """Keys whose records are in time order and all after the watermark: merged run by run, or all
        at once when their cells are packed (returned as ``_store``'s packed entries)."""
        gap = self.gap
        fast = np.unique(codes[rows])
        cell_list = [cells[code] for code in fast.tolist()]
        table = None
        if fold_packed is not None and self._cells is not None and all(type(x) is not list for x in cell_list):
            table = self._cells.decode(cell_list)
            runs = session_runs(codes, ts, rows, gap, fast[table.owner], table.rows[:, 0] - gap, table.rows[:, 1])
            accs = fold_packed(runs.order, runs.starts)
            if accs is not None:
                owner = np.searchsorted(fast, np.asarray(runs.codes, np.int64))
                firsts, lasts = np.asarray(runs.firsts, np.int64), np.asarray(runs.lasts, np.int64)
                result = merged(table, owner, firsts, lasts + gap, accs, self._cells.function)
                if result is not None:
                    result.timers = self._next_timers(result.owner, result.rows[:, 1], len(fast), wm)
                    return fast.tolist(), self._cells.encode(result), result.timers, table.timers
        stored: dict[int, list] = {}
        for code, cell in zip(fast.tolist(), cell_list):
            old_timers[code], stored[code] = self._decode(cell)
        if table is None:  # the runs of the packed attempt serve as they are (same stored sessions)
            reach = [(code, s[0] - gap, s[1]) for code, sessions in stored.items() for s in sessions]
            tc, lo, hi = (np.array(col, np.int64) for col in zip(*reach)) if reach else (np.zeros(0, np.int64),) * 3
            runs = session_runs(codes, ts, rows, gap, tc, lo, hi)
        accs = fold(runs.order, runs.starts) if fold is not None else None
        order, starts = runs.order, runs.starts
        add, merge = self._add, self._merge
        ends = np.append(starts[1:], len(order)).tolist() if accs is None else None
        starts_l = starts.tolist() if accs is None else None
        order_l = order.tolist() if accs is None else None
        codes_, firsts, lasts = runs.codes, runs.firsts, runs.lasts
        j, n = 0, len(codes_)
        while j < n:
            code = codes_[j]
            sessions = stored[code]
            while j < n and codes_[j] == code:
                t0, tl = firsts[j], lasts[j]
                hits = [s for s in sessions if s[0] <= t0 + gap and s[1] >= t0]
                if hits:
                    target = self._merge_hits(sessions, hits, t0, tl + gap)
                    acc = target[2]
                else:
                    target = [t0, tl + gap, None]
                    sessions.append(target)
                    sessions.sort(key=_start)
                    acc = None
                if accs is not None:
                    acc = accs[j] if acc is None else merge(acc, accs[j])
                else:
                    for r in order_l[starts_l[j]:ends[j]]:
                        acc = add(value_of(r), acc)
                target[2] = acc
                j += 1
            new_cells[code] = sessions
        return None

    def _store(self, resolved: list, new_cells: dict, old_timers: dict, wm: int,
               packed: tuple[list, list, np.ndarray, np.ndarray] | None = None) -> None:
        """Write every touched key once and move its timer; ``packed``: keys already encoded, as
        (codes, cells, new timers, old timers) with NO_TIMER for none."""
        codes = list(new_cells)
        sessions_of = [new_cells[code] for code in codes]
        counts = [len(sessions) for sessions in sessions_of]
        ends = np.fromiter((s[1] for sessions in sessions_of for s in sessions), np.int64, sum(counts))
        timers = self._next_timers(np.repeat(np.arange(len(codes)), counts), ends, len(codes), wm)
        olds = np.fromiter((_or_no_timer(old_timers.get(code)) for code in codes), np.int64, len(codes))
        values = [self._encode(None if t == NO_TIMER else t, sessions) for t, sessions in zip(timers.tolist(), sessions_of)]
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

    # -- a watermark ---------------------------------------------------------------------------
    def advance(self, watermark: int) -> None:
        """Fire and clean every session due at ``watermark``, in timer order (time, key group, key)."""
        if watermark > self._timers.current_watermark():
            with gc_paused():
                self._advance(watermark)

    def _advance(self, watermark: int) -> None:
        previous = self._timers.current_watermark()
        due = self._timers.take_due_event_time(watermark)
        if not due:
            return
        resolved, refused = self._backend.resolve_keys([d.key for d in due])
        if refused:  # a stored timer always has a valid key
            raise RuntimeError(f"timer of an invalid key: {next(iter(refused.values()))}")
        cells = self._state.get_internal_many(resolved)
        if self._cells is not None and all(type(cell) is not list for cell in cells):
            self._advance_packed(resolved, cells, previous, watermark)
            return
        actions = []
        new_cells: dict[int, list] = {}
        for i, (scope, cell) in enumerate(zip(resolved, cells)):
            key, kg, kb = scope
            _, sessions = self._decode(cell)
            keep = []
            for s in sessions:
                max_ts = s[1] - 1
                if previous < max_ts <= watermark:
                    actions.append((max_ts, kg, kb, 0, key, s))
                cleanup = self._cleanup(s[1])
                if cleanup <= watermark and cleanup != MAX_TIMESTAMP:
                    if self._clears:
                        actions.append((cleanup, kg, kb, 1, key, s))
                else:
                    keep.append(s)
            new_cells[i] = keep
        self._store(resolved, new_cells, {}, watermark)
        actions.sort(key=_action_order)
        sink = self._sink
        for _, _, _, kind, key, s in actions:
            window = TimeWindow(s[0], s[1])
            if kind == 0:
                sink.fire_session(key, window, s[2])
            else:
                sink.clear_session(key, window)

    def _advance_packed(self, resolved: list, cells: list, previous: int, watermark: int) -> None:
        """``_advance`` of packed cells, decided for all due keys at once."""
        table = self._cells.decode(cells)
        n = len(resolved)
        ends = table.rows[:, 1]
        fire_at = ends - 1
        cleanup = self._cleanups(ends)
        fired = np.flatnonzero((previous < fire_at) & (fire_at <= watermark))
        clean = (cleanup <= watermark) & (cleanup != MAX_TIMESTAMP)
        cleared = np.flatnonzero(clean) if self._clears else np.zeros(0, np.int64)
        keep = ~clean
        left = SessionTable(np.zeros(n, np.int64), table.owner[keep], table.rows[keep])
        left.timers = self._next_timers(left.owner, left.rows[:, 1], n, watermark)
        self._store(resolved, {}, {}, watermark,
                    (list(range(n)), self._cells.encode(left), left.timers, np.full(n, NO_TIMER, np.int64)))
        sink = self._sink
        if not len(cleared):  # fires only: handed over in one call
            r = fired[_pop_order(resolved, table.owner[fired], fire_at[fired], np.zeros(len(fired), np.int8))]
            sink.fire_sessions([resolved[i][0] for i in table.owner[r].tolist()], table.rows[r, 0].tolist(),
                               ends[r].tolist(), self._cells.function.unpack(table.rows[r, 2:]))
            return
        rows = np.concatenate((fired, cleared))
        kinds = np.concatenate((np.zeros(len(fired), np.int8), np.ones(len(cleared), np.int8)))
        order = _pop_order(resolved, table.owner[rows], np.concatenate((fire_at[fired], cleanup[cleared])), kinds).tolist()
        accs = self._cells.function.unpack(table.rows[fired, 2:])
        rows_l, kinds_l, owner = rows.tolist(), kinds.tolist(), table.owner.tolist()
        starts, ends_l = table.rows[:, 0].tolist(), ends.tolist()
        for a in order:
            r = rows_l[a]
            key, window = resolved[owner[r]][0], TimeWindow(starts[r], ends_l[r])
            if kinds_l[a] == 0:
                sink.fire_session(key, window, accs[a])
            else:
                sink.clear_session(key, window)


def _pop_order(resolved: list, owner: np.ndarray, times: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """Positions of due actions (of keys ``resolved[owner]``) in the order one-by-one processing takes
    them: timers by time, then key group and key bytes (the timer queue's order), a key's fire before
    its cleanup."""
    who = owner.tolist()
    table = pa.table({"t": times, "g": np.fromiter((resolved[i][1] for i in who), np.int64, len(who)),
                      "b": pa.array([resolved[i][2] for i in who], pa.binary()), "k": kinds})
    return pc.sort_indices(table, [("t", "ascending"), ("g", "ascending"), ("b", "ascending"),
                                   ("k", "ascending")]).to_numpy()


def _or_no_timer(timer: int | None) -> int:
    return NO_TIMER if timer is None else timer


def _start(session: list) -> int:
    return session[0]


def _action_order(action: tuple) -> tuple:
    return action[:4]
