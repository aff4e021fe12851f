"""Event-time tumbling and sliding windows an epoch at a time: Flink's ``WindowOperator`` with the
``EventTimeTrigger`` and an incremental function (aggregate or reduce), computed in bulk on one cell
per key (``operators.engines.cell_engine``), whose window bounds are each window's start.

Aligned windows never merge, so a window's contents are its records in arrival order whatever their
timestamps: an epoch's records are cut with numpy into runs of (key, window) (``operators.columns``),
each run folded in one vectorized pass when the function has ``accumulate``, else by its ``add`` in one
loop per run (``Incremental.fold``), and merged after the window's stored accumulator (packed cells of
a ``PackedAggregate`` for all keys at once). Keys with a record that has a window not after the
watermark (late, or firing at once) or no window at all take the records one at a time in arrival
order instead. Either way contents (order-sensitive functions included), results, late records and
timers equal one-by-one processing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from statekit import PackedAggregate

from ..columns import aligned_runs, aligned_windows, present_codes
from ..windows import TimeWindow
from .cell_engine import CellEngine, PackedEntries
from .packed_cells import WindowTable
from .window_engine import Fold, PackedFold, Values, window_start

ALIGNED_STATE = "aligned-windows"


class AlignedEngine(CellEngine):
    """Windows of ``size`` every ``slide`` from ``offset`` (tumbling: ``slide == size``; the rest:
    ``CellEngine``'s)."""

    STATE = ALIGNED_STATE
    LAYOUT = "windows-per-key"
    BOUNDS = 1

    def __init__(self, size: int, slide: int, offset: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.size = size
        self.slide = slide
        self.offset = offset

    def _ends(self, bounds: np.ndarray) -> np.ndarray:
        return bounds[:, 0] + self.size

    def _slow_codes(self, codes: np.ndarray, timestamps: np.ndarray, wm: int) -> np.ndarray:
        """Keys with a record that has a window whose end is not after the watermark, or none."""
        at, starts = aligned_windows(timestamps, self.size, self.slide, self.offset)
        behind = at[starts + (self.size - 1) <= wm]
        windowless = np.bincount(at, minlength=len(timestamps)) == 0
        return codes[np.concatenate((behind, np.flatnonzero(windowless)))]

    def _record(self, key: Any, windows: list, t: int, value: Any, wm: int) -> None:
        """One record, as one-by-one processing sees it: into each of its windows not cleaned up (latest
        first), firing those whose end passed at once; late when there is none."""
        starts = aligned_windows(np.array([t], np.int64), self.size, self.slide, self.offset)[1].tolist()
        taken = False
        for start in starts:
            end = start + self.size
            if self._cleanup(end) <= wm:
                continue
            taken = True
            window = next((w for w in windows if w[0] == start), None)
            if window is None:
                window = [start, self._add(value, None)]
                windows.append(window)
                windows.sort(key=window_start)
            else:
                window[1] = self._add(value, window[1])
            if end - 1 <= wm:
                self._sink.fire_window(key, TimeWindow(start, end), window[1])
        if not taken:
            self._sink.late_record(value, t)

    def _runs(self, codes: np.ndarray, ts: np.ndarray, rows: np.ndarray, cells: dict, value_of: Values,
              fold: Fold | None, fold_packed: PackedFold | None, old_timers: dict, new_cells: dict,
              wm: int) -> PackedEntries | None:
        """Keys whose records' windows are all after the watermark: each (key, window) run merged after
        the window's stored accumulator (vectorized by ``fold``, else folded by the function's ``add``
        in one loop), all at once when their cells are packed."""
        runs = aligned_runs(codes, ts, rows, self.size, self.slide, self.offset)
        fast = present_codes(runs.codes)
        cell_list = [cells[code] for code in fast.tolist()]
        if fold_packed is not None and self._cells is not None and all(type(x) is not list for x in cell_list):
            accs = fold_packed(runs.order, runs.starts)
            if accs is not None:
                table = self._cells.decode(cell_list)
                result = merged_by_start(table, np.searchsorted(fast, runs.codes), runs.windows, accs,
                                         self._cells.function)
                if result is not None:
                    result.timers = self._next_timers(result.owner, self._ends(result.rows[:, :1]), len(fast), wm)
                    return fast.tolist(), self._cells.encode(result), result.timers, table.timers
        stored: dict[int, dict[int, list]] = {}
        for code, cell in zip(fast.tolist(), cell_list):
            old_timers[code], windows = self._decode(cell)
            stored[code] = {w[0]: w for w in windows}
        accs = fold(runs.order, runs.starts) if fold is not None else None
        if accs is None:  # each run's values in one list, in run order: a run folds a slice of it
            values = value_of.take(runs.order)
            bounds = np.append(runs.starts, len(runs.order)).tolist()
        add, merge = self._add, self._merge
        for j, (code, start) in enumerate(zip(runs.codes.tolist(), runs.windows.tolist())):
            by_start = stored[code]
            window = by_start.get(start)
            acc = None if window is None else window[1]
            if accs is not None:
                acc = accs[j] if acc is None else merge(acc, accs[j])
            else:
                acc = add.fold(acc, values[bounds[j]:bounds[j + 1]])
            if window is None:
                by_start[start] = [start, acc]
            else:
                window[1] = acc
        for code, by_start in stored.items():
            new_cells[code] = [by_start[start] for start in sorted(by_start)]
        return None


def merged_by_start(table: WindowTable, run_owner: np.ndarray, run_starts: np.ndarray, run_accs: np.ndarray,
                    function: PackedAggregate) -> WindowTable | None:
    """``table``'s windows (bounds: the start) with runs (owner and start ordered, packed accumulators)
    merged after the stored window of their start, or added as new windows; None when
    ``function.merge_packed`` cannot merge these accumulators (the caller merges per key)."""
    owner = np.concatenate((table.owner, run_owner))
    start = np.concatenate((table.rows[:, 0], run_starts))
    stored_first = np.concatenate((np.zeros(len(table.owner), np.int8), np.ones(len(run_owner), np.int8)))
    order = np.lexsort((stored_first, start, owner))
    owner, start = owner[order], start[order]
    words = np.concatenate((table.rows[:, 1:], run_accs.astype(np.int64, copy=False)))[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (owner[1:] != owner[:-1]) | (start[1:] != start[:-1])
    groups = np.flatnonzero(first)
    accs = words[groups]
    pairs = np.flatnonzero(~first)  # a stored window and its run (one run per key and window)
    if len(pairs):
        both = np.column_stack((pairs - 1, pairs)).ravel()
        sums = function.merge_packed(words[both], np.arange(0, len(both), 2))
        if sums is None:
            return None
        accs[np.cumsum(first)[pairs] - 1] = sums
    return WindowTable(table.timers, owner[groups], np.column_stack((start[groups], accs)))
