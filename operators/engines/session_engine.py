"""Event-time session windows an epoch at a time: Flink's ``WindowOperator`` with the
``EventTimeTrigger`` and an incremental function (aggregate or reduce), computed in bulk on one
cell per key (``operators.engines.cell_engine``), whose window bounds are each session's start and end.

Records are cut with numpy into runs (``operators.columns``) whose contents are aggregated in one
vectorized pass when the function has ``accumulate``, else folded by its ``add`` in one loop per run. When it is a ``PackedAggregate`` the cells are
packed (``operators.engines.packed_cells``), and an epoch's keys are decoded, merged (``operators.engines.packed_sessions``),
timed, fired and encoded together with numpy; a key whose accumulators do not pack keeps the list form.
Keys with records out of time order, or with a record whose own window is not after the watermark
(late, or firing at once), take one-record runs in arrival order instead. Either way the merges,
contents (order-sensitive functions included), results, late records and timers equal one-by-one
processing.
"""

from __future__ import annotations

import numpy as np

from ..columns import present_codes, session_runs
from .cell_engine import CellEngine, PackedEntries
from .packed_sessions import merged
from .session_rules import SessionRules
from .window_engine import Fold, PackedFold, Values, window_start

SESSIONS_STATE = "sessions"


class SessionEngine(SessionRules, CellEngine):
    """Sessions with gap ``gap``, a cell per key (the rest: ``SessionRules``' and ``CellEngine``'s)."""

    STATE = SESSIONS_STATE
    LAYOUT = "sessions-per-key"
    BOUNDS = 2

    def _ends(self, bounds: np.ndarray) -> np.ndarray:
        return bounds[:, 1]

    def _runs(self, codes: np.ndarray, ts: np.ndarray, rows: np.ndarray, cells: dict, value_of: Values,
              fold: Fold | None, fold_packed: PackedFold | None, old_timers: dict, new_cells: dict,
              wm: int) -> PackedEntries | None:
        """Keys whose records are in time order and all after the watermark: merged run by run, or all
        at once when their cells are packed (returned as ``_store``'s packed entries)."""
        gap = self.gap
        fast = present_codes(codes[rows])
        cell_list = [cells[code] for code in fast.tolist()]
        table = None
        if fold_packed is not None and self._cells is not None and all(type(x) is not list for x in cell_list):
            table = self._cells.decode(cell_list)
            runs = session_runs(codes, ts, rows, gap, fast[table.owner], table.rows[:, 0] - gap, table.rows[:, 1])
            accs = fold_packed(runs.order, runs.starts)
            if accs is not None:
                result = merged(table, np.searchsorted(fast, runs.codes), runs.firsts, runs.lasts + gap, accs,
                                self._cells.function)
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
        add, merge = self._add, self._merge
        if accs is None:  # each run's values in one list, in run order: a run folds a slice of it
            values = value_of.take(runs.order)
            bounds = np.append(runs.starts, len(runs.order)).tolist()
        codes_, firsts, lasts = runs.codes.tolist(), runs.firsts.tolist(), runs.lasts.tolist()
        j, n = 0, len(codes_)
        while j < n:
            code = codes_[j]
            sessions = stored[code]
            while j < n and codes_[j] == code:
                t0, tl = firsts[j], lasts[j]
                hits = [s for s in sessions if s[0] <= t0 + gap and s[1] >= t0] if sessions else None
                if hits:
                    target = self._merge_hits(sessions, hits, t0, tl + gap)
                    acc = target[2]
                else:
                    target = [t0, tl + gap, None]
                    sessions.append(target)
                    if len(sessions) > 1 and sessions[-2][0] > t0:  # (a key's new sessions come in time order)
                        sessions.sort(key=window_start)
                    acc = None
                if accs is not None:
                    target[2] = accs[j] if acc is None else merge(acc, accs[j])
                else:
                    target[2] = add.fold(acc, values[bounds[j]:bounds[j + 1]])
                j += 1
            new_cells[code] = sessions
        return None
