"""An epoch's records as columns, cut with numpy into per-key runs for the window engines.

A session run is a stretch of one key's records in time order, consecutive timestamps at most
``gap`` apart, whose first record is the only one that may touch a session stored before the epoch;
an aligned run is one key's records of one aligned window, in arrival order. Either way all of a
run's records land in one window, so its contents can be aggregated in one vectorized pass and the
window bookkeeping costs per run, not per record.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from statekit import PLAIN_KEY_TYPES, key_identity


@dataclass(slots=True)
class Runs:
    """Runs in key order, then time order: key code, first and last timestamp, record count;
    ``order`` lists the rows run by run, ``starts`` where each run begins in it."""

    codes: np.ndarray
    firsts: np.ndarray
    lasts: np.ndarray
    counts: np.ndarray
    order: np.ndarray
    starts: np.ndarray


def arrow_array(column: Any) -> pa.Array | None:
    """``column`` as one Arrow array when it is an Arrow array or chunked array, else None."""
    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks()
    return column if isinstance(column, pa.Array) else None


def python_values(column: Sequence[Any]) -> Sequence[Any]:
    """``column`` indexable by row as Python values: an Arrow column converted, any other as given."""
    array = arrow_array(column)
    return column if array is None else array.to_pylist()


class ArrowValues(Sequence):
    """An Arrow array's values by position, each made a Python value only when asked for (an epoch's
    distinct keys: most never are)."""

    def __init__(self, array: pa.Array) -> None:
        self._array = array

    def __len__(self) -> int:
        return len(self._array)

    def __getitem__(self, i: int) -> Any:
        return self._array[i].as_py()


class RowView:
    """Row r of an epoch's value columns as ``tuple(c[r] for c in columns)`` of Python values; Arrow
    columns are converted once, when a row or ``python()`` is first asked for (the columnar path of
    numeric aggregates never asks)."""

    def __init__(self, columns: Sequence[Sequence[Any]]) -> None:
        self._columns = columns
        self._python: list[Sequence[Any]] | None = None

    def python(self) -> list[Sequence[Any]]:
        """Every column as Python values by row."""
        if self._python is None:
            self._python = [python_values(c) for c in self._columns]
        return self._python

    def __call__(self, r: int) -> tuple:
        return tuple(c[r] for c in self.python())

    def take(self, rows: np.ndarray) -> list[tuple]:
        """The rows ``rows`` in that order, made in one pass per column."""
        at = rows.tolist()
        columns = self.python()
        if not columns:
            return [()] * len(at)
        return list(zip(*([c[r] for r in at] for c in columns)))


class RecordValues:
    """The values of an epoch's ``(key, value, timestamp)`` records by row (``process_batch``'s)."""

    def __init__(self, records: list[tuple[Any, Any, int | None]]) -> None:
        self._records = records

    def __call__(self, r: int) -> Any:
        return self._records[r][1]

    def take(self, rows: np.ndarray) -> list:
        """The values of ``rows``, in that order."""
        records = self._records
        return [records[r][1] for r in rows.tolist()]


def _plain_arrow(t: pa.DataType) -> bool:
    """Arrow types whose values are plain keys (``PLAIN_KEY_TYPES``: str, int, bytes)."""
    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)
            or pa.types.is_binary(t) or pa.types.is_large_binary(t))


def arrow_codes(keys: Sequence[Any]) -> tuple[np.ndarray, pa.Array] | None:
    """Key codes per row and the distinct keys (an Arrow column, in order of first appearance) of an
    Arrow column of plain keys without nulls, with no Python object per row; None for other columns."""
    array = arrow_array(keys)
    if array is None or array.null_count or not _plain_arrow(array.type):
        return None
    encoded = array.dictionary_encode()
    return encoded.indices.to_numpy().astype(np.int64), encoded.dictionary


def factorize(keys: Sequence[Any]) -> tuple[np.ndarray, list[Any]]:
    """Key codes per row and the distinct keys in order of first appearance, told apart by
    ``key_identity`` (TypeError: an unhashable key). An Arrow column of plain keys without nulls is
    encoded as it is, with no Python object per row."""
    encoded = arrow_codes(keys)
    if encoded is not None:
        return encoded[0], encoded[1].to_pylist()
    array = arrow_array(keys)
    if array is not None:
        keys = array.to_pylist()
    index: dict[Any, int] = {}
    first: list[Any] = []
    types = set(map(type, keys))
    if len(types) == 1 and types <= PLAIN_KEY_TYPES:  # one plain type: Arrow's hash encoding, in C
        try:
            encoded = pa.array(keys).dictionary_encode()
        except (pa.ArrowException, OverflowError, UnicodeEncodeError):  # an int beyond 64 bits, a lone surrogate
            pass
        else:
            return encoded.indices.to_numpy().astype(np.int64), encoded.dictionary.to_pylist()
    if types <= PLAIN_KEY_TYPES:
        codes = np.fromiter((index.setdefault(k, len(index)) for k in keys), np.int64, len(keys))
        return codes, list(index)
    codes = np.empty(len(keys), np.int64)
    for r, k in enumerate(keys):
        code = index.setdefault(key_identity(k), len(index))
        if code == len(first):
            first.append(k)
        codes[r] = code
    return codes, first


def present_codes(codes: np.ndarray) -> np.ndarray:
    """The distinct values of non-negative int codes, ascending (``np.unique``'s answer by counting, not sorting)."""
    return np.flatnonzero(np.bincount(codes)) if len(codes) else np.zeros(0, np.int64)


def by_code(codes: np.ndarray) -> np.ndarray:
    """The stable order that groups equal non-negative int codes: a radix sort when they span 16 bits."""
    if len(codes):
        lo = codes.min()
        if codes.max() - lo < 1 << 16:
            codes = (codes - lo).astype(np.uint16)
    return np.argsort(codes, kind="stable")


def _ascending(values: np.ndarray) -> bool:
    return len(values) < 2 or bool((values[1:] >= values[:-1]).all())


def out_of_order_keys(codes: np.ndarray, timestamps: np.ndarray) -> np.ndarray:
    """Codes of the keys whose records are not in time order in arrival order."""
    if _ascending(timestamps):  # all in time order (the Spark tasks sort)
        return np.zeros(0, np.int64)
    by_key = by_code(codes)
    c, t = codes[by_key], timestamps[by_key]
    back = (c[1:] == c[:-1]) & (t[1:] < t[:-1])
    return present_codes(c[1:][back])


def session_runs(codes: np.ndarray, timestamps: np.ndarray, rows: np.ndarray, gap: int,
                 touch_codes: np.ndarray, touch_lo: np.ndarray, touch_hi: np.ndarray) -> Runs:
    """The runs of ``rows`` (indices into ``codes``/``timestamps``; ties in time keep row order).

    A run also starts at the first row of key ``touch_codes[i]`` with a timestamp in
    ``[touch_lo[i], touch_hi[i]]`` (where a stored session first comes within reach)."""
    times = timestamps[rows]
    if _ascending(rows) and _ascending(times):  # arrival order is time order (the Spark tasks sort): group keys stably
        order = rows[by_code(codes[rows])]
    else:
        order = rows[np.lexsort((rows, times, codes[rows]))]
    c, t = codes[order], timestamps[order]
    cut = np.ones(len(order), dtype=bool)
    cut[1:] = (c[1:] != c[:-1]) | (t[1:] - t[:-1] > gap)
    if len(touch_codes):
        first = first_at_or_after(c, t, touch_codes, touch_lo)
        inside = first < len(order)
        first = first[inside]
        cut[first[t[first] <= touch_hi[inside]]] = True
    starts = np.flatnonzero(cut)
    ends = np.append(starts[1:], len(order))
    return Runs(c[starts], t[starts], t[ends - 1], ends - starts, order, starts)


@dataclass(slots=True)
class AlignedRuns:
    """Runs of (key, aligned window) in key order, then window start: ``codes[j]`` and ``windows[j]``
    (the start) of run j; ``order`` lists the rows run by run, ``starts`` where each run begins in it."""

    codes: np.ndarray
    windows: np.ndarray
    order: np.ndarray
    starts: np.ndarray


def aligned_windows(timestamps: np.ndarray, size: int, slide: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """The windows of ``size`` every ``slide`` from ``offset`` (tumbling: slide == size) holding each
    timestamp, as (position in ``timestamps``, window start) pairs, a timestamp's windows latest first
    (as the assigners list them)."""
    last = np.floor_divide(timestamps - offset, slide) * slide + offset
    starts = last[:, None] - slide * np.arange(-(-size // slide), dtype=np.int64)
    held = starts > (timestamps - size)[:, None]
    return np.nonzero(held)[0], starts[held]


def aligned_runs(codes: np.ndarray, timestamps: np.ndarray, rows: np.ndarray, size: int, slide: int,
                 offset: int) -> AlignedRuns:
    """The runs of ``rows`` (indices into ``codes``/``timestamps``): each row in each of its windows,
    a run's rows in arrival (row) order."""
    at, windows = aligned_windows(timestamps[rows], size, slide, offset)
    held = rows[at]
    by = np.lexsort((held, windows, codes[held]))
    order, c, w = held[by], codes[held][by], windows[by]
    cut = np.ones(len(order), dtype=bool)
    cut[1:] = (c[1:] != c[:-1]) | (w[1:] != w[:-1])
    starts = np.flatnonzero(cut)
    return AlignedRuns(c[starts], w[starts], order, starts)


def first_at_or_after(c: np.ndarray, t: np.ndarray, qc: np.ndarray, qt: np.ndarray) -> np.ndarray:
    """For each query (qc[i], qt[i]): the first position p of the (code, time)-sorted rows with
    ``c[p] == qc[i] and t[p] >= qt[i]``, or ``len(c)`` (one past the end) when there is none."""
    n = len(c)
    if not n or not len(qc):
        return np.full(len(qc), n, np.int64)
    lo = min(int(t.min()), int(qt.min()))
    span = max(int(t.max()), int(qt.max())) - lo + 1
    if span * (max(int(c.max()), int(qc.max())) + 1) < (1 << 62):  # (code, time) as one int64: a binary search
        found = np.searchsorted(c * span + (t - lo), qc * span + (qt - lo))
        hit = found < n
        hit[hit] = c[found[hit]] == qc[hit]
        return np.where(hit, found, n)
    all_c = np.concatenate((c, qc))
    all_t = np.concatenate((t, qt))
    is_row = np.concatenate((np.ones(n, dtype=np.int8), np.zeros(len(qc), dtype=np.int8)))
    merged = np.lexsort((is_row, all_t, all_c))   # a query sorts before rows of equal time
    rows_before = np.cumsum(is_row[merged]) - is_row[merged]
    pos = np.empty(len(merged), dtype=np.int64)
    pos[merged] = rows_before
    found = pos[n:]
    hit = found < n
    hit[hit] = c[found[hit]] == qc[hit]
    return np.where(hit, found, n)
