"""An epoch's records as columns, cut with numpy into per-key session segments.

A segment is a maximal run of one key's records, in event-time order, whose consecutive
timestamps are at most ``gap`` apart: every record of it lands in the same session (touching
sessions merge), so its contents can be aggregated in one vectorized pass before the session
bookkeeping, which then costs per segment instead of per record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np


@dataclass(slots=True)
class Segments:
    """Segments in key order, then time order: key code, first timestamp, last timestamp + gap,
    record count; ``order`` lists the rows by segment, ``starts`` where each segment begins in it."""

    codes: list[int]
    lows: list[int]
    highs: list[int]
    counts: list[int]
    order: np.ndarray
    starts: np.ndarray


def factorize(keys: Sequence[Any]) -> tuple[np.ndarray, list[Any]]:
    """Key codes per row and the distinct keys in order of first appearance (TypeError: unhashable key)."""
    index: dict[Any, int] = {}
    codes = np.fromiter((index.setdefault(k, len(index)) for k in keys), np.int64, len(keys))
    return codes, list(index)


def out_of_order_keys(codes: np.ndarray, timestamps: np.ndarray) -> np.ndarray:
    """Codes of the keys whose records are not in time order in arrival order."""
    by_key = np.argsort(codes, kind="stable")
    c, t = codes[by_key], timestamps[by_key]
    back = (c[1:] == c[:-1]) & (t[1:] < t[:-1])
    return np.unique(c[1:][back])


def session_segments(codes: np.ndarray, timestamps: np.ndarray, rows: np.ndarray, gap: int) -> Segments:
    """The session segments of ``rows`` (indices into ``codes``/``timestamps``); ties in time keep row order."""
    order = rows[np.lexsort((rows, timestamps[rows], codes[rows]))]
    c, t = codes[order], timestamps[order]
    cut = np.ones(len(order), dtype=bool)
    cut[1:] = (c[1:] != c[:-1]) | (t[1:] - t[:-1] > gap)
    starts = np.flatnonzero(cut)
    lasts = np.append(starts[1:], len(order)) - 1
    return Segments(c[starts].tolist(), t[starts].tolist(), (t[lasts] + gap).tolist(),
                    (lasts - starts + 1).tolist(), order, starts)
