"""Packed session cells: a key's sessions as one bytes value of int64 words, so the session engine
reads, merges, writes and fires a whole epoch's keys with numpy instead of per key in Python.

A cell is ``[timer, start0, end0, acc0..., start1, end1, acc1..., ...]``: the key's one event-time
timer (``NO_TIMER`` for none) and its sessions in time order, each session's bounds followed by its
accumulator packed by a ``PackedAggregate``. Many cells decode at once into a ``SessionTable`` (one
row per session, the rows of a key together) and encode back from one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from statekit import PackedAggregate

from .columns import first_at_or_after

NO_TIMER = -(1 << 63)
"""The timer word of a key without a timer (below every valid timestamp)."""


@dataclass(slots=True)
class SessionTable:
    """Sessions of ``len(timers)`` keys: ``rows[i] = [start, end, *accumulator words]`` belongs to key
    ``owner[i]``; rows are ordered by owner, then start; ``timers[k]`` is key k's timer or NO_TIMER."""

    timers: np.ndarray
    owner: np.ndarray
    rows: np.ndarray

    def counts(self) -> np.ndarray:
        """Sessions per key."""
        return np.bincount(self.owner, minlength=len(self.timers))


class PackedCells:
    """The cell codec of one ``PackedAggregate``: bytes cells to session tables and back, and one
    cell to the engine's per-key form (``[[start, end, accumulator], ...]``) and back."""

    def __init__(self, function: PackedAggregate) -> None:
        self.function = function
        self.width = 2 + function.packed_width()

    def decode(self, cells: Sequence[bytes | None]) -> SessionTable:
        """The sessions of packed cells (None: a key without sessions)."""
        n = len(cells)
        cells = [b"" if c is None else c for c in cells]
        lengths = np.fromiter(map(len, cells), np.int64, n) // 8
        words = np.frombuffer(b"".join(cells), np.int64)
        offsets = np.cumsum(lengths) - lengths
        has = lengths > 0
        timers = np.full(n, NO_TIMER, np.int64)
        timers[has] = words[offsets[has]]
        body = np.ones(len(words), dtype=bool)
        body[offsets[has]] = False
        counts = np.where(has, (lengths - 1) // self.width, 0)
        return SessionTable(timers, np.repeat(np.arange(n), counts), words[body].reshape(-1, self.width))

    def encode(self, table: SessionTable) -> list[bytes | None]:
        """One cell per key of ``table`` (None for a key left without sessions)."""
        counts = table.counts()
        size = np.where(counts > 0, 1 + counts * self.width, 0)
        ends = np.cumsum(size)
        offsets = ends - size
        words = np.empty(int(ends[-1]) if len(ends) else 0, np.int64)
        has = counts > 0
        words[offsets[has]] = table.timers[has]
        first_row = np.cumsum(counts) - counts
        within = np.arange(len(table.owner)) - first_row[table.owner]
        at = offsets[table.owner] + 1 + within * self.width
        words[at[:, None] + np.arange(self.width)] = table.rows
        data = words.tobytes()
        return [data[8 * a:8 * b] if a != b else None for a, b in zip(offsets.tolist(), ends.tolist())]

    def to_sessions(self, cell: bytes) -> tuple[int | None, list]:
        """One cell as ``(timer or None, [[start, end, accumulator], ...])``."""
        table = self.decode([cell])
        timer = int(table.timers[0])
        rows = table.rows
        accs = self.function.unpack(rows[:, 2:])
        return (None if timer == NO_TIMER else timer), [[s, e, a] for s, e, a in zip(rows[:, 0].tolist(), rows[:, 1].tolist(), accs)]

    def from_sessions(self, timer: int | None, sessions: list) -> bytes | None:
        """The cell of ``to_sessions``' form, or None when an accumulator cannot be packed."""
        accs = self.function.pack([s[2] for s in sessions])
        if accs is None:
            return None
        bounds = np.array([(s[0], s[1]) for s in sessions], np.int64).reshape(-1, 2)
        rows = np.concatenate((bounds, accs), axis=1)
        head = np.array([NO_TIMER if timer is None else timer], np.int64)
        return head.tobytes() + rows.tobytes()

    def unpack_version(self, cell: bytes, version: int) -> list:
        """A cell written by accumulator ``version`` in the per-key list form (``[timer, s0, e0, acc0, ...]``)."""
        width = 2 + self.function.packed_width(version)
        words = np.frombuffer(cell, np.int64)
        rows = words[1:].reshape(-1, width)
        timer = int(words[0])
        out: list = [None if timer == NO_TIMER else timer]
        for s, e, acc in zip(rows[:, 0].tolist(), rows[:, 1].tolist(), self.function.unpack(rows[:, 2:], version)):
            out += (s, e, acc)
        return out


def merged(table: SessionTable, run_owner: np.ndarray, run_lo: np.ndarray, run_hi: np.ndarray, run_accs: np.ndarray,
           function: PackedAggregate) -> SessionTable | None:
    """``table``'s sessions with an epoch's runs merged in, as one-by-one processing merges them; None
    when ``function.merge_packed`` cannot merge these accumulators (the caller merges per key).

    Runs (``operators.columns.session_runs``: window ``[run_lo, run_hi]`` = first timestamp to last
    plus the gap, packed accumulator) are in owner, then time order. A stored session joins the first
    run that touches it; a run joins its predecessor when the windows merged so far reach it. Each
    merged session's accumulator folds, in order: per run, the stored sessions it takes first (in
    time order), then the run, which is the order in which one-by-one processing merges contents."""
    n_runs = len(run_owner)
    owner, lo, hi = table.owner, table.rows[:, 0], table.rows[:, 1]
    taker = first_at_or_after(run_owner, run_hi, owner, lo)   # first run of the key reaching the session
    taken = taker < n_runs
    taken[taken] = run_lo[taker[taken]] <= hi[taken]
    reach = run_hi.copy()
    np.maximum.at(reach, taker[taken], hi[taken])
    ranks = np.unique(np.concatenate((reach, run_lo)), return_inverse=True)[1]
    scale = int(ranks.max()) + 1 if len(ranks) else 1
    so_far = np.maximum.accumulate(run_owner * scale + ranks[:n_runs]) - run_owner * scale
    joins = (run_owner[1:] == run_owner[:-1]) & (so_far[:-1] >= ranks[n_runs:][1:])
    group = np.cumsum(np.concatenate(([True], ~joins))) - 1
    e_group = np.concatenate((group[taker[taken]], group))
    e_rank = np.concatenate((taker[taken], np.arange(n_runs)))
    e_kind = np.concatenate((np.zeros(int(taken.sum()), np.int8), np.ones(n_runs, np.int8)))
    e_lo = np.concatenate((lo[taken], run_lo))
    e_hi = np.concatenate((hi[taken], run_hi))
    order = np.lexsort((e_lo, e_kind, e_rank, e_group))
    starts = np.flatnonzero(np.concatenate(([True], np.diff(e_group[order]) != 0)))
    accs = function.merge_packed(np.concatenate((table.rows[taken, 2:], run_accs))[order], starts)
    if accs is None:
        return None
    g_owner = run_owner[np.flatnonzero(np.concatenate(([True], ~joins)))]
    g_rows = np.column_stack((np.minimum.reduceat(e_lo[order], starts), np.maximum.reduceat(e_hi[order], starts), accs))
    all_owner = np.concatenate((owner[~taken], g_owner))
    all_rows = np.concatenate((table.rows[~taken], g_rows.astype(np.int64, copy=False)))
    by = np.lexsort((all_rows[:, 0], all_owner))
    return SessionTable(table.timers, all_owner[by], all_rows[by])
