"""Output: where an operator's results and side outputs are collected between drains.

Results are ``detached`` from state: a result that is (or holds) an accumulator is copied as it is
emitted, so a later update of the window cannot change it. Side outputs carry the user's own input
elements (late or invalid records), which state never holds, as they are."""

from __future__ import annotations

from typing import Any, Callable, Iterable, NamedTuple, Sequence

import numpy as np

from statekit import detached


class Output:
    """Collects ``(value, timestamp)`` records, whole columns of rows, and tagged side outputs; with a
    consumer (``hand_over``), the records leave at the end of each bounded step of an operator's work
    (``end_step``), so a watermark that fires many windows holds one step's results, not all of them."""

    __slots__ = ("_rows", "_parts", "side_outputs", "_consumer")

    def __init__(self) -> None:
        self._rows: list[tuple[Any, int | None]] = []
        self._parts: list[list[tuple[Any, int | None]] | Columns] = []
        self.side_outputs: dict[str, list[tuple[Any, int | None]]] = {}
        self._consumer: Callable[[list], None] | None = None

    def hand_over(self, consumer: Callable[[list], None] | None) -> None:
        """From now on ``end_step`` gives the records collected so far to ``consumer`` (as ``drain_parts``,
        in order); None: they stay until drained."""
        self._consumer = consumer

    def end_step(self) -> None:
        """A bounded step of an operator's work ended (an engine calls it between steps of a watermark or an
        epoch; a runtime once after the watermark): its records go to the consumer, if one was handed over."""
        if self._consumer is not None and (self._rows or self._parts):
            self._consumer(self.drain_parts())

    def collect(self, value: Any, timestamp: int | None) -> None:
        self._rows.append((detached(value), timestamp))

    def collect_all(self, values: Iterable[Any] | None, timestamp: int | None) -> None:
        """Collect every value of a function's returned/yielded results (None means none)."""
        if values is not None:
            append = self._rows.append
            for v in values:
                append((detached(v), timestamp))

    def collect_many(self, values: list, timestamps: list) -> None:
        """``collect`` of each value with the timestamp at the same position."""
        self._rows.extend(zip(map(detached, values), timestamps))

    def collect_columns(self, columns: list[Sequence[Any]], timestamps: Any) -> None:
        """Rows given as columns (row i: ``tuple(c[i] for c in columns)``, stamped ``timestamps[i]``),
        kept as columns; they must not share objects with state (built fresh for the output)."""
        if self._rows:
            self._parts.append(self._rows)
            self._rows = []
        self._parts.append(Columns(columns, timestamps))

    @property
    def records(self) -> list[tuple[Any, int | None]]:
        """Every record collected since the last drain, in order (columns as row tuples)."""
        return records_of(self.parts())

    def parts(self) -> list:
        """The records since the last drain in order: lists of ``(value, timestamp)`` and ``Columns``."""
        return [*self._parts, self._rows] if self._rows else list(self._parts)

    def drain(self) -> list[tuple[Any, int | None]]:
        """The records collected since the last drain."""
        out = self.records
        self._rows, self._parts = [], []
        return out

    def drain_parts(self) -> list:
        """``parts()``, then forgotten (what the Spark glue turns into Arrow tables, columns as they are)."""
        out = self.parts()
        self._rows, self._parts = [], []
        return out

    def side_output(self, tag: str, value: Any, timestamp: int | None) -> None:
        self.side_outputs.setdefault(tag, []).append((value, timestamp))  # the user's own elements, never state

    def drain_side(self, tag: str) -> list[tuple[Any, int | None]]:
        """The side outputs under ``tag`` collected since the last drain of that tag."""
        out = self.side_outputs.get(tag)
        if not out:
            return []
        res = out[:]
        out.clear()
        return res


class Columns(NamedTuple):
    """Records collected as columns: row i is ``tuple(c[i] for c in columns)``, stamped ``timestamps[i]``."""

    columns: list
    timestamps: Any

    def records(self) -> list[tuple[Any, int | None]]:
        return list(zip(rows_of(self.columns), column_values(self.timestamps)))


def records_of(parts: list) -> list[tuple[Any, int | None]]:
    """``Output.parts`` (or what ``end_step`` handed over) as ``(value, timestamp)`` records, in order."""
    out: list[tuple[Any, int | None]] = []
    for part in parts:
        out += part.records() if isinstance(part, Columns) else part
    return out


def column_values(column: Sequence[Any]) -> list:
    """A column's values as Python objects (a numpy array's as ints, floats, ...)."""
    return column.tolist() if isinstance(column, np.ndarray) else list(column)


def rows_of(columns: list[Sequence[Any]]) -> list[tuple]:
    """Columns as row tuples of Python values."""
    return list(zip(*map(column_values, columns)))
