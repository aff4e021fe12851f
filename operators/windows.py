"""Windows: ``TimeWindow`` [start, end) and the ``GlobalWindow`` singleton, both usable as state namespaces.

Context objects hand windows to user code as attributes; a window is also callable (returning
itself) so PyFlink-style ``context.window()`` works too.
"""

from __future__ import annotations

from typing import Callable, Iterable, NamedTuple

from statekit import MAX_TIMESTAMP, register_type

TIME_WINDOW_TYPE_CODE = 10
GLOBAL_WINDOW_TYPE_CODE = 11


def touch(start_a: int, end_a: int, start_b: int, end_b: int) -> bool:
    """Windows [start_a, end_a) and [start_b, end_b) overlap or touch: the rule by which sessions merge."""
    return start_a <= end_b and end_a >= start_b


class TimeWindow(NamedTuple):
    """The half-open interval [start, end) of event or processing time, in ms."""

    start: int
    end: int

    def max_timestamp(self) -> int:
        """The largest timestamp inside the window: ``end - 1``."""
        return self[1] - 1

    def intersects(self, other: "TimeWindow") -> bool:
        """True when the windows overlap or touch (so touching session windows merge)."""
        return touch(self[0], self[1], other[0], other[1])

    def cover(self, other: "TimeWindow") -> "TimeWindow":
        """The smallest window containing both."""
        return TimeWindow(min(self[0], other[0]), max(self[1], other[1]))

    def __call__(self) -> "TimeWindow":
        return self

    def __repr__(self) -> str:
        return f"TimeWindow(start={self[0]}, end={self[1]})"

    @staticmethod
    def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
        """Start of the window of ``window_size`` (aligned to ``offset``) that holds ``timestamp``."""
        return timestamp - (timestamp - offset) % window_size

    @staticmethod
    def merge_windows(windows: Iterable["TimeWindow"],
                      callback: Callable[[list["TimeWindow"], "TimeWindow"], None]) -> None:
        """Group intersecting windows; ``callback(group, cover)`` for each group of two or more.

        Windows are de-duplicated and visited in (start, end) order, so groups and their order
        do not depend on the order of ``windows``.
        """
        current = None
        group: list[TimeWindow] = []
        for w in sorted(set(windows)):
            if current is not None and touch(current[0], current[1], w[0], w[1]):
                if w[1] > current[1]:
                    current = TimeWindow(current[0], w[1])
                group.append(w)
                continue
            if len(group) > 1:
                callback(group, current)
            current = w
            group = [w]
        if len(group) > 1:
            callback(group, current)


class GlobalWindow:
    """The single window of ``GlobalWindows``; never cleaned up (max timestamp = max int64)."""

    __slots__ = ()
    _instance: "GlobalWindow | None" = None

    def __new__(cls) -> "GlobalWindow":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    @classmethod
    def get(cls) -> "GlobalWindow":
        return cls()

    def max_timestamp(self) -> int:
        return MAX_TIMESTAMP

    def __call__(self) -> "GlobalWindow":
        return self

    def __eq__(self, other: object) -> bool:
        return other is self

    def __hash__(self) -> int:
        return 0x6C0BA1

    def __lt__(self, other: object) -> bool:
        if other is self:
            return False
        return NotImplemented

    def __reduce__(self):
        return (GlobalWindow, ())

    def __repr__(self) -> str:
        return "GlobalWindow"


GLOBAL_WINDOW = GlobalWindow()

register_type(TIME_WINDOW_TYPE_CODE, TimeWindow, lambda w: [w[0], w[1]], lambda p: TimeWindow(p[0], p[1]))
register_type(GLOBAL_WINDOW_TYPE_CODE, GlobalWindow, lambda w: 0, lambda p: GLOBAL_WINDOW)
