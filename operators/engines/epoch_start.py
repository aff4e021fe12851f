"""The start of an epoch, written once for the engines that take an epoch's records by key code (the cell
engines and the session table): timestamps checked, keys coded, bad rows named in the invalid side output,
and the rows of keys that must be taken one record at a time, key by key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..columns import by_code, python_values
from .window_engine import WindowEngine, key_codes, timestamps_of


@dataclass
class KeyCodes:
    """An epoch's keys coded: each row's key code (in order of first appearance), the distinct keys by code,
    and the keys the backend refused, code -> why (empty when an engine resolves its keys later)."""

    codes: np.ndarray
    distinct: Sequence[Any]
    refused: dict[int, Exception]


Locate = Callable[[Sequence[Any], np.ndarray, dict[int, tuple[str, str]]], KeyCodes]
"""``locate(keys, good, problems)``: the epoch's keys coded, the rows of keys that cannot be (unhashable
ones) added to ``problems`` and unmarked in ``good``."""


def coded_keys(keys: Sequence[Any], good: np.ndarray, problems: dict[int, tuple[str, str]]) -> KeyCodes:
    """``key_codes`` as a ``Locate``: the keys are resolved (and refused) later."""
    return KeyCodes(*key_codes(keys, good, problems), {})


@dataclass
class EpochStart:
    """An epoch's records as an engine starts on them: the keys (Python values once a row is named in a side
    output), int64 timestamps, the coded keys, the rows with a valid key and timestamp, and the watermark."""

    keys: Sequence[Any]
    ts: np.ndarray
    coded: KeyCodes
    rows: np.ndarray
    wm: int


class KeyCodedEngine(WindowEngine):
    """A window engine that takes an epoch's records by key code."""

    def _start_epoch(self, keys: Sequence[Any], timestamps: Any, value_of: Callable[[int], Any],
                     locate: Locate) -> EpochStart:
        """What every epoch starts with: timestamps checked, keys coded (``locate``) and the rows with a bad
        timestamp or key named in the invalid side output."""
        ts, good, problems = timestamps_of(timestamps)
        if problems:  # coded row by row and named in side outputs: the keys as Python values, once
            keys = python_values(keys)
        coded = locate(keys, good, problems)
        if problems or coded.refused:  # unhashable or refused keys, named in side outputs (a no-op once converted)
            keys = python_values(keys)
        self._refuse_rows(keys, timestamps, value_of, problems)
        return EpochStart(keys, ts, coded, np.flatnonzero(good), self._timers.current_watermark())

    def _slow_key_rows(self, keys: Sequence[Any], ts: np.ndarray, value_of: Callable[[int], Any], codes: np.ndarray,
                       rows: np.ndarray, slow: np.ndarray, refused: dict) -> Iterator[tuple[int, list[int]]]:
        """``(code, rows)`` of each key ``slow`` marks (by code) among ``rows``, its rows in arrival order, keys
        in order of first appearance: as one-by-one processing takes them. A refused key's rows go to the
        invalid side output in their turn instead."""
        slow_codes = np.flatnonzero(slow)
        if not len(slow_codes):
            return
        slow_rows = rows[slow[codes[rows]]]
        slow_of = codes[slow_rows]
        by_key = slow_rows[by_code(slow_of)]  # each slow key's rows together, in arrival order
        bounds = np.concatenate(([0], np.cumsum(np.bincount(slow_of, minlength=len(slow))))).tolist()
        for i in slow_codes.tolist():
            key_rows = by_key[bounds[i]:bounds[i + 1]].tolist()
            if i in refused:
                self._refuse_key(keys, ts, value_of, key_rows, refused[i])
            else:
                yield i, key_rows
