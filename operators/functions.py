"""User function interfaces with PyFlink's Python signatures; results are returned or yielded."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Iterable


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
