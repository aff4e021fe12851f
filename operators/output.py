"""Output: where an operator's results and side outputs are collected between drains.

Results are ``detached`` from state: a result that is (or holds) an accumulator is copied as it is
emitted, so a later update of the window cannot change it. Side outputs carry the user's own input
elements (late or invalid records), which state never holds, as they are."""

from __future__ import annotations

from typing import Any, Iterable

from statekit import detached


class Output:
    """Collects ``(value, timestamp)`` records and tagged side outputs."""

    __slots__ = ("records", "side_outputs")

    def __init__(self) -> None:
        self.records: list[tuple[Any, int | None]] = []
        self.side_outputs: dict[str, list[tuple[Any, int | None]]] = {}

    def collect(self, value: Any, timestamp: int | None) -> None:
        self.records.append((detached(value), timestamp))

    def collect_all(self, values: Iterable[Any] | None, timestamp: int | None) -> None:
        """Collect every value of a function's returned/yielded results (None means none)."""
        if values is not None:
            append = self.records.append
            for v in values:
                append((detached(v), timestamp))

    def collect_many(self, values: list, timestamps: list) -> None:
        """``collect`` of each value with the timestamp at the same position."""
        self.records.extend(zip(map(detached, values), timestamps))

    def side_output(self, tag: str, value: Any, timestamp: int | None) -> None:
        self.side_outputs.setdefault(tag, []).append((value, timestamp))  # the user's own elements, never state

    def drain(self) -> list[tuple[Any, int | None]]:
        """The records collected since the last drain."""
        out = self.records[:]
        self.records.clear()
        return out

    def drain_side(self, tag: str) -> list[tuple[Any, int | None]]:
        """The side outputs under ``tag`` collected since the last drain of that tag."""
        out = self.side_outputs.get(tag)
        if not out:
            return []
        res = out[:]
        out.clear()
        return res
