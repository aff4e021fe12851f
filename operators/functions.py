"""User function interfaces with PyFlink's Python signatures; results are returned or yielded."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Iterable, Sequence

import numpy as np

from .output import rows_of


class ProcessWindowFunction(ABC):
    """Evaluates a window's contents: all elements, or the single aggregate of an incremental function.

    ``context`` offers ``window``, ``current_watermark``, ``current_processing_time``,
    ``window_state`` (state scoped to this window; remove it in ``clear``) and ``global_state``
    (state of the key across windows).
    """

    def open(self, context: Any) -> None:
        """Called once before processing; ``context.get_state(descriptor)`` gives keyed state."""

    @abstractmethod
    def process(self, key: Any, context: Any, elements: Iterable[Any]) -> Iterable[Any] | None:
        """Return or yield the outputs for one firing of ``context.window``."""

    def clear(self, context: Any) -> None:
        """The window is being cleaned up: drop what was kept in ``context.window_state``."""

    def close(self) -> None:
        """Called once when the operator closes."""


class WindowRowsFunction(ProcessWindowFunction):
    """A window function of an incremental aggregate that makes one output per fired window from its
    key, bounds and result alone (no state, no watermark): the session engine fires many windows
    with one ``rows`` call instead of a ``process`` call per window."""

    @abstractmethod
    def rows(self, keys: list, starts: list, ends: list, results: list) -> list:
        """One output per window, in order: window i is ``[starts[i], ends[i])`` of ``keys[i]``."""

    def process(self, key: Any, context: Any, elements: Iterable[Any]) -> Iterable[Any]:
        w = context.window
        return window_rows(self, [key], [w.start], [w.end], list(elements))


def window_rows(fn: WindowRowsFunction, keys: list, starts: list, ends: list, results: list) -> list:
    """``fn.rows(...)``, checked to make one output per window."""
    rows = fn.rows(keys, starts, ends, results)
    if len(rows) != len(keys):
        raise TypeError(f"{type(fn).__qualname__}.rows made {len(rows)} outputs for {len(keys)} windows: "
                        f"a WindowRowsFunction makes one output per window")
    return rows


class WindowColumnsFunction(WindowRowsFunction):
    """A ``WindowRowsFunction`` that makes its outputs as columns: when the aggregate's results come
    as columns too (``PackedAggregate.result_columns_packed``), fired windows reach the output
    (and a Spark job's Arrow tables) without a Python object per window."""

    @abstractmethod
    def columns(self, keys: list, starts: Any, ends: Any, results: list[list]) -> list[Sequence[Any]]:
        """One column per output field, one entry per window: window i is ``[starts[i], ends[i])``
        (int64 arrays) of ``keys[i]``, its result's fields ``results[f][i]``."""

    def rows(self, keys: list, starts: list, ends: list, results: list) -> list:
        if not keys:
            return []
        fields = [list(field) for field in zip(*results)]
        return rows_of(window_columns(self, keys, np.asarray(starts, np.int64), np.asarray(ends, np.int64), fields))


def window_columns(fn: WindowColumnsFunction, keys: list, starts: Any, ends: Any, results: list[list]) -> list:
    """``fn.columns(...)``, checked to make one entry per window in every column."""
    columns = fn.columns(keys, starts, ends, results)
    if not columns or any(len(c) != len(keys) for c in columns):
        raise TypeError(f"{type(fn).__qualname__}.columns made columns of {[len(c) for c in columns]} entries for "
                        f"{len(keys)} windows: a WindowColumnsFunction makes one entry per window in each column")
    return columns


class KeyedProcessFunction(ABC):
    """Processes each element of a keyed stream with keyed state and timers (``ctx.timer_service()``)."""

    def open(self, context: Any) -> None:
        """Called once before processing; ``context.get_state(descriptor)`` gives keyed state."""

    @abstractmethod
    def process_element(self, value: Any, ctx: Any) -> Iterable[Any] | None:
        """Return or yield outputs; they carry the element's timestamp."""

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any] | None:
        """A registered timer fired (``ctx.time_domain()`` says which); outputs carry its timestamp."""
        return None

    def close(self) -> None:
        """Called once when the operator closes."""
