"""Event-time sessions of all of an operator's keys as one columnar table (``state_layout="table"``): the
session engine's rules (``operators.engines.session_engine``) on numpy arrays instead of one stored cell and one
timer per key, for 10^6 keys and more.

In memory: a slot per key (``KeySlots``: its serialized bytes and key group by slot; the key itself is
made from its bytes when a window fires) and one row per open session ``[start, end, *packed
accumulator]`` with its key's slot. A key whose accumulators do not pack keeps its sessions in the list
form (``[[start, end, accumulator], ...]``) instead. An epoch takes the rows of the keys it touches out,
merges the epoch's runs into them in bulk (``merged``), takes keys that may emit (late records,
late-but-allowed fires, records out of time order) one record at a time, and puts the rows back. Timers
are implicit: a watermark fires and cleans every session whose end it passed, found by one scan of the
end column, in the order of the timer queue (time, key group, key bytes). Results equal the cell
engine's and the record path's.

Stored: one page per key group in the value state ``session-table``, under the group's representative
key (``statekit.key_group_representatives``), so pages snapshot, restore and move with their groups on
rescaling like any state. Pages of the groups an epoch changed are written by a backend flush hook,
once per flush (before every snapshot); an engine opened on a backend reads every page of its groups.

Bounded: on a backend that keeps state on disk, a table past its share of the memory budget
(``statekit.memory_budget.table_rows``) moves every session to a stored cell per key, once, and from then on
the session engine (``operators.engines.session_engine``, state ``sessions``) runs the operator: memory stays
flat however many sessions are open, where the table would grow with them. Its pages become ``MOVED_PAGE``, so
an operator restored on any of those groups (rescaled with groups still paged) moves too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from statekit import (MAX_TIMESTAMP, InternalTimerService, KeyedStateBackend, PackedAggregate,
                      SerializationError, StateError, ValueState, deserialized_keys, key_group_representatives)
from statekit.memory_budget import table_rows

from ..columns import ArrowValues, arrow_codes, present_codes, session_runs
from ..windows import TimeWindow
from .epoch_start import KeyCodedEngine, KeyCodes
from .key_slots import KeyBytes, KeySlots
from .packed_cells import WindowTable
from .packed_sessions import merged
from .session_engine import SessionEngine
from .session_pages import MOVED_PAGE, TABLE_STATE, decode_page, encode_page, page_migration, page_sessions
from .session_rules import SessionRules
from .window_engine import Fold, PackedFold, WindowSink, key_codes, timer_order


@dataclass
class SlottedKeys(KeyCodes):
    """An epoch's keys coded, with each distinct key's slot in the table (-1: a refused key)."""

    slots: np.ndarray


class SessionTable(SessionRules, KeyCodedEngine):
    """Sessions with gap ``gap`` of every key, held as columns and stored as pages per key group."""

    STATE = TABLE_STATE
    LAYOUT = "session-table"
    MOVES_TO = SessionEngine
    BULK_KEYS = 1 << 16
    """The span of key codes merged in bulk at a time: an epoch's bulk work in parts keeps its working
    arrays (about 200 bytes a key, profiled at 500k keys) small next to the table, and each part's codes
    sort by radix."""

    def __init__(self, gap: int, lateness: int, backend: KeyedStateBackend, state: ValueState,
                 timers: InternalTimerService, sink: WindowSink, add: Callable[[Any, Any], Any],
                 merge: Callable[[Any, Any], Any], metrics: dict[str, int], clears: bool,
                 packed: PackedAggregate, *, moved_state: ValueState) -> None:
        super().__init__(gap, lateness, backend, state, timers, sink, add, merge, metrics, clears, packed)
        self._moved = self.MOVES_TO(gap, lateness, backend, moved_state, timers, sink, add, merge, metrics, clears,
                                    packed)
        self._cells: SessionEngine | None = None  # the moved engine, once the table moved to it
        self._limit = table_rows(backend.config)
        self._function = packed
        self._width = 2 + packed.packed_width()
        self._slots = KeySlots()
        self._owner = np.empty(0, np.int64)   # row -> slot
        self._rows = np.empty((0, self._width), np.int64)
        self._overflow: dict[int, list] = {}  # slot -> list-form sessions (accumulators that do not pack)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []  # (owner, rows) put, not yet in the table
        self._dirty = np.zeros(backend.max_parallelism, bool)
        groups = backend.key_groups
        reps = key_group_representatives(backend.max_parallelism)
        resolved, _ = backend.resolve_keys([reps[g] for g in groups])
        self._groups = np.arange(groups.start, groups.stop)
        self._page_keys = resolved
        backend.add_flush_hook(self.write_pages)
        self._load()

    def close(self) -> None:
        if self._cells is None:
            self._backend.remove_flush_hook(self.write_pages)

    # -- moving to cells -----------------------------------------------------------------------
    def _outgrown(self) -> None:
        """Move to cells when the table holds more rows than its share of the memory budget."""
        if self._limit is not None and len(self._owner) + len(self._overflow) > self._limit:
            self._move()

    def _move(self) -> None:
        """Every session to the session engine's cells (each key's one timer registered), every page of this
        backend's groups to ``MOVED_PAGE``, and the table emptied: from now on ``self._cells`` runs the operator."""
        cells = self._moved
        self._settle()
        by = np.lexsort((self._rows[:, 0], self._owner))
        owner, rows = self._owner[by], np.take(self._rows, by, axis=0)
        held = np.unique(owner)
        cuts = np.searchsorted(owner, held[::cells.KEYS_AT_ONCE]).tolist() + [len(owner)]
        for part, (a, b) in enumerate(zip(cuts, cuts[1:])):
            slots = held[part * cells.KEYS_AT_ONCE:(part + 1) * cells.KEYS_AT_ONCE]
            table = WindowTable(np.zeros(len(slots), np.int64), np.searchsorted(slots, owner[a:b]), rows[a:b])
            resolved = list(zip(self._slots.keys_at(slots), self._slots.groups[slots].tolist(),
                                self._slots.key_bytes(slots).to_pylist()))
            cells.put_encoded(resolved, table)
        if self._overflow:
            keys = self._slots.keys_at(np.array(list(self._overflow), np.int64))
            sessions = [(key, *s) for key, ss in zip(keys, self._overflow.values()) for s in ss]
            cells.restore_sessions(*map(list, zip(*sessions)))
        self._state.update_internal_many(self._page_keys, [MOVED_PAGE] * len(self._page_keys))
        self._backend.remove_flush_hook(self.write_pages)
        self._slots, self._overflow, self._pending = KeySlots(), {}, []
        self._owner, self._rows = np.empty(0, np.int64), np.empty((0, self._width), np.int64)
        self._dirty[:] = False
        self._cells = cells

    # -- slots ---------------------------------------------------------------------------------
    def _release(self, slots: np.ndarray) -> None:
        """The keys at ``slots`` are left without sessions; slots are renumbered when many are free."""
        if len(slots):
            self._slots.release(slots)
        moved = self._slots.compact()
        if moved is not None:
            self._owner = moved[self._owner]
            self._overflow = {int(moved[slot]): sessions for slot, sessions in self._overflow.items()}

    def _take(self, hit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Remove and return (owner, rows) of the rows whose slot ``hit`` marks."""
        taken = hit[self._owner]
        owner, rows = self._owner[taken], np.compress(taken, self._rows, axis=0)  # (2-d fancy indexing is slow)
        self._owner, self._rows = self._owner[~taken], np.compress(~taken, self._rows, axis=0)
        return owner, rows

    def _put(self, owner: np.ndarray, rows: np.ndarray) -> None:
        """Rows to add to the table at the next ``_settle`` (the table is copied once, not once a put)."""
        self._pending.append((owner, rows))

    def _settle(self) -> None:
        if self._pending:
            owners, rows = zip(*self._pending)
            self._owner = np.concatenate((self._owner, *owners))
            self._rows = np.concatenate((self._rows, *rows))
            self._pending = []

    def _list_form(self, rows: np.ndarray) -> list:
        """Sessions ``[[start, end, accumulator], ...]`` of packed rows."""
        return [[s, e, a] for (s, e), a in zip(rows[:, :2].tolist(), self._function.unpack(rows[:, 2:]))]

    # -- an epoch's records --------------------------------------------------------------------
    def _process(self, keys: Sequence[Any], timestamps: Any, value_of: Callable[[int], Any], fold: Fold | None,
                 fold_packed: PackedFold | None) -> None:
        if self._cells is not None:
            self._cells.process(keys, timestamps, value_of, fold, fold_packed)
            return
        self._process_table(keys, timestamps, value_of, fold_packed)
        self._outgrown()

    def _process_table(self, keys: Sequence[Any], timestamps: Any, value_of: Callable[[int], Any],
                       fold_packed: PackedFold | None) -> None:
        epoch = self._start_epoch(keys, timestamps, value_of, self._locate)
        keys, ts, rows, wm, coded = epoch.keys, epoch.ts, epoch.rows, epoch.wm, epoch.coded
        codes, distinct, slots, refused = coded.codes, coded.distinct, coded.slots, coded.refused
        c, t = codes[rows], ts[rows]
        slow = self._slow_keys(len(distinct), c, t, refused, wm)
        if self._overflow:
            slow[np.fromiter(map(self._overflow.__contains__, slots.tolist()), bool, len(slots))] = True
        held = slots[slots >= 0]
        hit = np.zeros(len(self._slots), bool)
        hit[held] = True
        code_of = np.full(len(self._slots), -1, np.int64)
        code_of[held] = np.flatnonzero(slots >= 0)
        owner, old = self._take(hit)
        old_codes = code_of[owner]
        by = np.lexsort((old[:, 0], old_codes))
        old_codes, old = old_codes[by], np.take(old, by, axis=0)
        fast_rows = rows[~slow[c]]
        fast = present_codes(codes[fast_rows]) if len(fast_rows) else np.zeros(0, np.int64)
        for part, part_rows in self._parts(codes, fast_rows, fast):
            if not self._bulk(codes, ts, part_rows, part, slots, old_codes, old, fold_packed):
                slow[part] = True  # values that do not pack: these keys go record by record too
        self._by_records(keys, codes, ts, rows, slow, slots, distinct, refused, old_codes, old, value_of, wm)
        self._settle()
        self._dirty[self._slots.groups[held]] = True
        left = np.zeros(len(self._slots), bool)
        left[self._owner] = True
        left[list(self._overflow)] = True
        self._release(held[~left[held]])

    def _locate(self, keys: Sequence[Any], good: np.ndarray, problems: dict) -> SlottedKeys:
        """Each row's key code, the distinct keys, the refused keys' errors by code and each distinct key's
        slot (keys not held are added; -1: a refused key): a ``Locate``. An Arrow column of plain keys is
        serialized, hashed and looked up as columns, with no Python work per key (its distinct keys become
        Python values only where the record path asks for them)."""
        encoded = None if problems else arrow_codes(keys)
        resolved = None if encoded is None else self._backend.resolve_key_array(encoded[1])
        if encoded is not None:
            codes, distinct = encoded[0], ArrowValues(encoded[1])
        else:
            codes, distinct = key_codes(keys, good, problems)
        if resolved is not None:
            groups, kb, refused = resolved[0], KeyBytes(resolved[1], resolved[2]), {}
            known = np.arange(len(distinct))
        else:
            groups, kbs, refused = self._backend.resolve_key_columns(distinct)
            known = np.flatnonzero(groups >= 0) if refused else np.arange(len(distinct))
            kb = KeyBytes.of(kbs).take(known) if refused else KeyBytes.of(kbs)
        slots = np.full(len(distinct), -1, np.int64)
        slots[known] = found = self._slots.find(kb)
        new = np.flatnonzero(found < 0)
        if len(new):
            at = known[new]
            slots[at] = self._slots.add(groups[at], kb.take(new))
        return SlottedKeys(codes, distinct, refused, slots)

    def _parts(self, codes: np.ndarray, rows: np.ndarray, fast: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(keys, their records)`` of the keys ``fast`` (ascending codes) whose records are ``rows``, in
        parts of codes ``[i * BULK_KEYS, (i + 1) * BULK_KEYS)`` (in bulk no key emits: parts are independent)."""
        if not len(fast):
            return
        part = fast // self.BULK_KEYS
        cuts = np.flatnonzero(part[1:] != part[:-1]) + 1
        if not len(cuts):
            yield fast, rows
            return
        row_part = codes[rows] // self.BULK_KEYS
        for keys in np.split(fast, cuts):
            yield keys, rows[row_part == keys[0] // self.BULK_KEYS]

    def _bulk(self, codes: np.ndarray, ts: np.ndarray, rows: np.ndarray, fast: np.ndarray, slots: np.ndarray,
              old_codes: np.ndarray, old: np.ndarray, fold_packed: PackedFold | None) -> bool:
        """The records ``rows`` of keys ``fast`` (in time order, all after the watermark) merged into their
        sessions in bulk; False (nothing changed) when their values or accumulators do not pack."""
        if fold_packed is None:
            return False
        is_fast = np.zeros(len(slots), bool)
        is_fast[fast] = True
        mine = is_fast[old_codes]
        gap = self.gap
        table = WindowTable(np.zeros(len(fast), np.int64), np.searchsorted(fast, old_codes[mine]),
                            np.compress(mine, old, axis=0))
        runs = session_runs(codes, ts, rows, gap, fast[table.owner], table.rows[:, 0] - gap, table.rows[:, 1])
        accs = fold_packed(runs.order, runs.starts)
        if accs is None:
            return False
        result = merged(table, np.searchsorted(fast, runs.codes), runs.firsts, runs.lasts + gap, accs, self._function)
        if result is None:
            return False
        self._put(slots[fast][result.owner], result.rows)
        return True

    def _by_records(self, keys: Sequence[Any], codes: np.ndarray, ts: np.ndarray, rows: np.ndarray, slow: np.ndarray,
                    slots: np.ndarray, distinct: Sequence[Any], refused: dict, old_codes: np.ndarray, old: np.ndarray,
                    value_of: Callable[[int], Any], wm: int) -> None:
        """Keys ``slow`` one record at a time in arrival order, in order of first appearance, as one-by-one
        processing takes them; their sessions go back packed, or in the list form when they do not pack."""
        slow_codes = np.flatnonzero(slow)
        if not len(slow_codes):
            return
        mine = slow[old_codes]
        starts = np.searchsorted(old_codes[mine], slow_codes, "left").tolist()
        ends = np.searchsorted(old_codes[mine], slow_codes, "right").tolist()
        spans = dict(zip(slow_codes.tolist(), zip(starts, ends)))  # each slow key's stored sessions: stored[a:b]
        stored = self._list_form(old[mine])
        back_slots, back = [], []
        for i, key_rows in self._slow_key_rows(keys, ts, value_of, codes, rows, slow, refused):
            a, b = spans[i]
            slot = int(slots[i])
            sessions = self._overflow.pop(slot, None)
            if sessions is None:
                sessions = stored[a:b]
            key = distinct[i]
            for r in key_rows:
                self._record(key, sessions, int(ts[r]), value_of(r), wm)
            back_slots.append(slot)
            back.append(sessions)
        self._put_sessions(back_slots, back)

    def _restore(self, keys: list, windows_of: list[list]) -> None:
        if self._cells is not None:
            self._cells._restore(keys, windows_of)
            return
        self._restore_table(keys, windows_of)
        self._outgrown()

    def _restore_table(self, keys: list, windows_of: list[list]) -> None:
        coded = self._locate(keys, np.ones(len(keys), bool), {})
        if coded.refused:
            i, error = next(iter(coded.refused.items()))
            raise StateError(f"state '{self.STATE}': cannot restore the sessions of key {coded.distinct[i]!r}: {error}")
        slots = coded.slots[coded.codes]  # keys are distinct: one code each, in order
        held = np.isin(slots, self._owner) | np.fromiter(map(self._overflow.__contains__, slots.tolist()), bool, len(slots))
        if held.any():
            raise StateError(f"state '{self.STATE}': key {keys[int(np.flatnonzero(held)[0])]!r} holds sessions "
                             f"already; a restore puts sessions on keys without any")
        self._put_sessions(slots.tolist(), windows_of)
        self._settle()
        self._dirty[self._slots.groups[slots]] = True

    def _put_sessions(self, slots: list, sessions: list) -> None:
        """Keys' list-form sessions back into the table: packed rows, or kept in the list form."""
        counts = list(map(len, sessions))
        flat = [s for ss in sessions for s in ss]
        if not flat:
            return
        words = self._function.pack([s[2] for s in flat])
        if words is not None:
            bounds = np.array([s[:2] for s in flat], np.int64).reshape(-1, 2)
            rows = np.concatenate((bounds, np.asarray(words, np.int64).reshape(-1, self._width - 2)), axis=1)
            self._put(np.repeat(np.array(slots, np.int64), counts), rows)
            return
        for slot, ss in zip(slots, sessions):  # some do not pack: key by key
            words = self._function.pack([s[2] for s in ss]) if ss else None
            if words is None and ss:
                self._overflow[slot] = ss
            elif ss:
                bounds = np.array([s[:2] for s in ss], np.int64)
                self._put(np.full(len(ss), slot, np.int64), np.concatenate((bounds, words), axis=1))

    # -- a watermark ---------------------------------------------------------------------------
    def _advance(self, watermark: int) -> None:
        if self._cells is not None:
            self._cells.advance(watermark)
            return
        previous = self._timers.current_watermark()
        self._timers.advance_watermark(watermark)  # this layout registers no timers: it only moves time
        if not len(self._owner) and not self._overflow:
            return
        rows, owner = self._rows, self._owner
        ends = rows[:, 1]
        fire_at = ends - 1
        cleanup = self._cleanups(ends)
        fired = np.flatnonzero((previous < fire_at) & (fire_at <= watermark))
        clean = (cleanup <= watermark) & (cleanup != MAX_TIMESTAMP)
        listed, emptied = self._listed_due(previous, watermark)
        cleared = np.flatnonzero(clean) if self._clears else np.zeros(0, np.int64)
        done = np.zeros(len(self._slots), bool)
        done[owner[clean]] = True
        done[emptied] = True
        done = np.flatnonzero(done)
        self._owner, self._rows = owner[~clean], np.compress(~clean, rows, axis=0)
        self._dirty[self._slots.groups[done]] = True
        left = np.zeros(len(self._slots), bool)
        left[self._owner] = True
        left[list(self._overflow)] = True
        if not len(cleared) and listed is None:  # fires only: handed over in one call
            r = fired[self._pop_order(owner[fired], fire_at[fired], np.zeros(len(fired), np.int8))]
            due = np.take(rows, r, axis=0)
            self._sink.fire_windows_packed(self._slots.keys_at(owner[r]), due[:, 0], due[:, 1], due[:, 2:])
        else:
            self._emit(rows, owner, fired, cleared, fire_at, cleanup, listed)
        self._release(done[~left[done]])

    def _listed_due(self, previous: int, watermark: int) -> tuple[tuple | None, np.ndarray]:
        """Fires and cleanups of list-form sessions at ``watermark`` as ``(slots, times, kinds, sessions)``
        (None when there are none), the sessions cleaned dropped; and the slots left without sessions."""
        due: list[tuple] = []
        emptied: list[int] = []
        for slot in list(self._overflow):
            keep = []
            for s in self._overflow[slot]:
                if previous < s[1] - 1 <= watermark:
                    due.append((slot, s[1] - 1, 0, s))
                cleanup = self._cleanup(s[1])
                if cleanup <= watermark and cleanup != MAX_TIMESTAMP:
                    if self._clears:
                        due.append((slot, cleanup, 1, s))
                else:
                    keep.append(s)
            if len(keep) < len(self._overflow[slot]):
                self._dirty[self._slots.groups[slot]] = True
            if keep:
                self._overflow[slot] = keep
            else:
                del self._overflow[slot]
                emptied.append(slot)
        if not due:
            return None, np.array(emptied, np.int64)
        slots, times, kinds, sessions = zip(*due)
        return (np.array(slots, np.int64), np.array(times, np.int64), np.array(kinds, np.int8),
                list(sessions)), np.array(emptied, np.int64)

    def _emit(self, rows: np.ndarray, owner: np.ndarray, fired: np.ndarray, cleared: np.ndarray, fire_at: np.ndarray,
              cleanup: np.ndarray, listed: tuple | None) -> None:
        """Fires and cleanups of packed rows and list-form sessions together, in timer order."""
        n_fired = len(fired)
        accs = self._function.unpack(rows[fired, 2:])
        sessions = [[s, e, a] for (s, e), a in zip(rows[fired, :2].tolist(), accs)]
        sessions += [[s, e, None] for s, e in rows[cleared, :2].tolist()]
        who = np.concatenate((owner[fired], owner[cleared]))
        times = np.concatenate((fire_at[fired], cleanup[cleared]))
        kinds = np.concatenate((np.zeros(n_fired, np.int8), np.ones(len(cleared), np.int8)))
        if listed is not None:
            who, times, kinds = (np.concatenate(pair) for pair in zip((who, times, kinds), listed[:3]))
            sessions += listed[3]
        order = self._pop_order(who, times, kinds).tolist()
        keys, kinds_l = self._slots.keys_at(who), kinds.tolist()
        sink = self._sink
        for a in order:
            s = sessions[a]
            if kinds_l[a] == 0:
                sink.fire_window(keys[a], TimeWindow(s[0], s[1]), s[2])
            else:
                sink.clear_window(keys[a], TimeWindow(s[0], s[1]))

    def _pop_order(self, slots: np.ndarray, times: np.ndarray, kinds: np.ndarray) -> np.ndarray:
        """``timer_order`` of due actions of the keys at ``slots``."""
        return timer_order(times, self._slots.groups[slots], self._slots.key_bytes(slots), kinds)

    # -- pages ---------------------------------------------------------------------------------
    def write_pages(self) -> None:
        """Write the page of every key group changed since the last write (a flush hook)."""
        groups = np.flatnonzero(self._dirty)
        if not len(groups):
            return
        self._dirty[:] = False
        row_group = self._slots.groups[self._owner]
        sel = np.flatnonzero(self._dirty_rows(row_group, groups))
        sel = sel[np.argsort(row_group[sel].astype(np.int16), kind="stable")]  # by group (a radix sort)
        owner, group = self._owner[sel], row_group[sel]
        first_at = np.empty(len(self._slots), np.int64)  # where each key is first met
        first_at[owner[::-1]] = np.arange(len(sel) - 1, -1, -1)
        first = first_at[owner] == np.arange(len(sel))
        key_slots = owner[first]  # each page's keys, in the order met
        key_index = np.empty(len(self._slots), np.int64)
        key_index[key_slots] = np.arange(len(key_slots))
        key_at = key_index[owner]  # each row's key, counted over all pages
        row_cut = np.searchsorted(group, groups).tolist() + [len(sel)]
        key_cut = np.searchsorted(group[first], groups).tolist() + [len(key_slots)]
        lengths = self._slots.kb_len[key_slots]
        byte_cut = np.concatenate(([0], np.cumsum(lengths, dtype=np.int64)))[key_cut].tolist()
        blob = self._slots.key_blob(key_slots)
        rows = np.take(self._rows, sel, axis=0)
        listed: dict[int, list[int]] = {}
        for slot in self._overflow:
            listed.setdefault(int(self._slots.groups[slot]), []).append(slot)
        values = []
        for j, g in enumerate(groups.tolist()):
            ra, rb, ka, kb = row_cut[j], row_cut[j + 1], key_cut[j], key_cut[j + 1]
            extra = listed.get(g, [])
            if ra == rb and not extra:
                values.append(None)
                continue
            try:
                values.append(encode_page(self._width, key_at[ra:rb] - ka, rows[ra:rb],
                                          np.concatenate((lengths[ka:kb], self._slots.kb_len[extra])),
                                          blob[byte_cut[j]:byte_cut[j + 1]] + self._slots.key_blob(np.array(extra, np.int64)),
                                          [[kb - ka + i, self._overflow[slot]] for i, slot in enumerate(extra)]))
            except Exception as e:  # a list-form accumulator msgpack cannot take
                raise SerializationError(f"state '{self.STATE}', key group {g}: cannot serialize the sessions of "
                                         f"keys {self._slots.keys_at(np.array(extra))!r}: {e}") from None
        start = self._groups[0]
        self._state.update_internal_many([self._page_keys[g - start] for g in groups.tolist()], values)

    def _dirty_rows(self, row_group: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """Which rows are in one of ``groups``."""
        mask = np.zeros(len(self._dirty), bool)
        mask[groups] = True
        return mask[row_group]

    def _load(self) -> None:
        """Take every stored page of this backend's key groups into the table."""
        pages = self._state.get_internal_many(self._page_keys)
        moved = False
        for g, page in zip(self._groups.tolist(), pages):
            if page is None:
                continue
            if page == MOVED_PAGE:
                moved = True
                continue
            try:
                _, row_key, rows, kbs, listed = decode_page(page, self._width)
                kb = KeyBytes.of(kbs)
                deserialized_keys(kb.array)  # a key that does not decode refuses the restore, not its first fire
            except (ValueError, SerializationError) as e:  # another format, or a damaged page
                raise StateError(f"state '{self.STATE}', key group {g}: cannot read its page ({len(page)} bytes): "
                                 f"{e}") from None
            slots = self._slots.add(np.full(len(kbs), g), kb)
            self._put(slots[row_key], rows)
            for index, sessions in listed:
                self._overflow[int(slots[index])] = [list(s) for s in sessions]
        self._settle()
        if moved:
            self._move()
        else:
            self._outgrown()

    @classmethod
    def readable(cls, stored: bytes, function: PackedAggregate, version: int) -> list:
        """A page as ``[[key, start, end, accumulator], ...]`` (``page_sessions``)."""
        return page_sessions(stored, function, version)

    @classmethod
    def cell_migration(cls, migrate: Callable[[int, Any], Any], packed: PackedAggregate | None = None) -> Callable[[int, Any], Any]:
        """A migration of stored pages (``session_pages.page_migration``)."""
        return page_migration(migrate, packed)
