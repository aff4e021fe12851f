"""Packed window cells: a key's open windows as one bytes value of int64 words, so the window engines
read, merge, write and fire a whole epoch's keys with numpy instead of per key in Python.

A cell is ``[timer, *bounds0, acc0..., *bounds1, acc1..., ...]``: the key's one event-time timer
(``NO_TIMER`` for none) and its windows in time order, each window's bounds (a session's start and end,
an aligned window's start) followed by its accumulator packed by a ``PackedAggregate``. Many cells
decode at once into a ``WindowTable`` (one row per window, the rows of a key together) and encode back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from statekit import PackedAggregate

NO_TIMER = -(1 << 63)
"""The timer word of a key without a timer (below every valid timestamp)."""


@dataclass(slots=True)
class WindowTable:
    """Windows of ``len(timers)`` keys: ``rows[i] = [*bounds, *accumulator words]`` belongs to key
    ``owner[i]``; rows are ordered by owner, then start; ``timers[k]`` is key k's timer or NO_TIMER."""

    timers: np.ndarray
    owner: np.ndarray
    rows: np.ndarray

    def counts(self) -> np.ndarray:
        """Windows per key."""
        return np.bincount(self.owner, minlength=len(self.timers))


class PackedCells:
    """The cell codec of one ``PackedAggregate`` and ``bounds`` words of bounds per window: bytes cells
    to window tables and back, and one cell to the engine's per-key form (``[[*bounds, accumulator], ...]``)
    and back."""

    def __init__(self, function: PackedAggregate, bounds: int) -> None:
        self.function = function
        self.bounds = bounds
        self.width = bounds + function.packed_width()

    def decode(self, cells: Sequence[bytes | None]) -> WindowTable:
        """The windows of packed cells (None: a key without windows)."""
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
        return WindowTable(timers, np.repeat(np.arange(n), counts), words[body].reshape(-1, self.width))

    def encode(self, table: WindowTable) -> list[bytes | None]:
        """One cell per key of ``table`` (None for a key left without windows)."""
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

    def to_windows(self, cell: bytes) -> tuple[int | None, list]:
        """One cell as ``(timer or None, [[*bounds, accumulator], ...])``."""
        table = self.decode([cell])
        timer = int(table.timers[0])
        accs = self.function.unpack(table.rows[:, self.bounds:])
        return (None if timer == NO_TIMER else timer), [[*b, a] for b, a in zip(table.rows[:, :self.bounds].tolist(), accs)]

    def from_windows(self, timer: int | None, windows: list) -> bytes | None:
        """The cell of ``to_windows``' form, or None when an accumulator cannot be packed."""
        accs = self.function.pack([w[-1] for w in windows])
        if accs is None:
            return None
        bounds = np.array([w[:-1] for w in windows], np.int64).reshape(-1, self.bounds)
        rows = np.concatenate((bounds, accs), axis=1)
        head = np.array([NO_TIMER if timer is None else timer], np.int64)
        return head.tobytes() + rows.tobytes()

    def unpack_version(self, cell: bytes, version: int) -> list:
        """A cell written by accumulator ``version`` in the per-key list form (``[timer, *bounds0, acc0, ...]``)."""
        width = self.bounds + self.function.packed_width(version)
        words = np.frombuffer(cell, np.int64)
        rows = words[1:].reshape(-1, width)
        timer = int(words[0])
        out: list = [None if timer == NO_TIMER else timer]
        for bounds, acc in zip(rows[:, :self.bounds].tolist(), self.function.unpack(rows[:, self.bounds:], version)):
            out += (*bounds, acc)
        return out
