"""Packed sessions merged in bulk: an epoch's runs of records joined to a key's stored sessions (packed
cells, ``operators.engines.packed_cells``, whose bounds are start and end) with numpy, as one-by-one
processing merges them.
"""

from __future__ import annotations

import numpy as np

from statekit import PackedAggregate

from ..columns import first_at_or_after
from .packed_cells import WindowTable


def merged(table: WindowTable, run_owner: np.ndarray, run_lo: np.ndarray, run_hi: np.ndarray, run_accs: np.ndarray,
           function: PackedAggregate) -> WindowTable | None:
    """``table``'s sessions with an epoch's runs merged in, as one-by-one processing merges them; None
    when ``function.merge_packed`` cannot merge these accumulators (the caller merges per key).

    Runs (``operators.columns.session_runs``: window ``[run_lo, run_hi]`` = first timestamp to last
    plus the gap, packed accumulator) are in owner, then time order. Runs of keys with no stored
    session are sessions as they are (runs of one key are apart by more than the gap); the others
    merge with the stored sessions (``_joined``)."""
    stored = np.bincount(table.owner, minlength=len(table.timers)) > 0
    alone = ~stored[run_owner]
    owners, rows = [run_owner[alone]], [np.column_stack((run_lo[alone], run_hi[alone], np.compress(alone, run_accs, axis=0)))]
    if len(table.owner):
        mix = ~alone
        joined = _joined(table, run_owner[mix], run_lo[mix], run_hi[mix], np.compress(mix, run_accs, axis=0), function)
        if joined is None:
            return None
        owners += joined[0]
        rows += joined[1]
    all_owner = np.concatenate(owners)
    all_rows = np.concatenate(rows).astype(np.int64, copy=False)
    by = np.lexsort((all_rows[:, 0], all_owner))
    return WindowTable(table.timers, all_owner[by], np.take(all_rows, by, axis=0))  # (2-d fancy indexing is slow)


def _joined(table: WindowTable, run_owner: np.ndarray, run_lo: np.ndarray, run_hi: np.ndarray, run_accs: np.ndarray,
            function: PackedAggregate) -> tuple[list, list] | None:
    """Owners and rows of ``table``'s sessions merged with runs of their keys. A stored session joins the
    first run that touches it; a run joins its predecessor when the windows merged so far reach it. Each
    merged session's accumulator folds, in order: per run, the stored sessions it takes first (in time
    order), then the run, which is the order in which one-by-one processing merges contents."""
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
    accs = function.merge_packed(np.take(np.concatenate((table.rows[taken, 2:], run_accs)), order, axis=0), starts)
    if accs is None:
        return None
    g_owner = run_owner[np.flatnonzero(np.concatenate(([True], ~joins)))]
    g_rows = np.column_stack((np.minimum.reduceat(e_lo[order], starts), np.maximum.reduceat(e_hi[order], starts), accs))
    return [owner[~taken], g_owner], [np.compress(~taken, table.rows, axis=0), g_rows.astype(np.int64, copy=False)]
