"""PackedRecords: a plain AggregateFunction whose accumulator is a flat tuple or list of ints, floats and
bools, made a PackedAggregate (one int64 word a field), so ``state_layout="table"`` keeps its sessions
as rows of the session table. The user's ``add`` and ``merge`` still run in Python, record by record;
what goes is the per-key state work of the cells layout (an encoded cell, a read, a write and a timer
per key), replaced by the table's bulk reads, merges, writes and fires per epoch."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from statekit import AggregateFunction, PackedAggregate, StateError
from statekit.descriptors import Migration, qualified_name

from ..columns import arrow_array

FIELD_KINDS = {int: "int64", float: "float64", bool: "bool"}
"""The Python type of an accumulator element -> the field it packs into (float64 by its bits, bool 0/1)."""


class PackedRecords(PackedAggregate):
    """``function``'s accumulators packed by position, the field kinds taken from one
    ``create_accumulator()``; an accumulator holding a value not exactly of its field's type (a float in
    an int field, an int beyond int64, a bool in an int field) does not pack, and the session table keeps
    its sessions unpacked. Every AggregateFunction method is the user's own."""

    def __init__(self, function: AggregateFunction) -> None:
        created = function.create_accumulator()
        kinds = _kinds(created)
        if kinds is None:
            shown = repr(created)
            raise ValueError(
                f"state_layout='table' takes event-time session windows of an AggregateFunction whose accumulator "
                f"packs into int64 words: {qualified_name(function)}.create_accumulator() returned "
                f"{type(created).__name__} {shown if len(shown) <= 120 else shown[:120] + '...'}, not a non-empty "
                f"flat tuple or list of ints, floats and bools. Keep the default state_layout='cells', which takes "
                f"any accumulator, or make the accumulator such a tuple")
        self.function = function
        self._container: type = type(created)
        self._kinds: tuple[type, ...] = kinds

    # -- AggregateFunction: the user's -----------------------------------------------------------
    def create_accumulator(self) -> Any:
        return self.function.create_accumulator()

    def add(self, value: Any, accumulator: Any) -> Any:
        return self.function.add(value, accumulator)

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        return self.function.merge(acc_a, acc_b)

    def get_result(self, accumulator: Any) -> Any:
        return self.function.get_result(accumulator)

    def state_layout(self) -> Any:
        """The user's layout and the packed field kinds: other kinds are another layout (refused on restore)."""
        return {"class": "PackedRecords", "function": self.function.state_layout(),
                "fields": [FIELD_KINDS[kind] for kind in self._kinds]}

    def accumulator_version(self) -> int:
        return self.function.accumulator_version()

    def accumulator_migration(self) -> Migration | None:
        return self.function.accumulator_migration()

    # -- ColumnarAggregate and PackedAggregate ---------------------------------------------------
    def accumulate(self, columns: Sequence[Sequence[Any]], order: Any, starts: Any) -> list:
        """The user's ``add`` folded over each run's row tuples, in order, from a new accumulator."""
        rows = _rows(columns, np.asarray(order, np.int64))
        bounds = np.asarray(starts, np.int64).tolist() + [len(rows)]
        create, add = self.function.create_accumulator, self.function.add
        out = []
        for a, b in zip(bounds, bounds[1:]):
            acc = create()
            for row in rows[a:b]:
                acc = add(row, acc)
            out.append(acc)
        return out

    def packed_width(self, version: int | None = None) -> int:
        self._current(version)
        return len(self._kinds)

    def pack(self, accumulators: Sequence[Any]) -> Any:
        """One int64 row per accumulator, or None when one is not a flat ``create_accumulator()``-like
        container with each value exactly of its field's type (and an int within int64)."""
        width = len(self._kinds)
        if not accumulators:
            return np.zeros((0, width), np.int64)
        if set(map(type, accumulators)) != {self._container} or set(map(len, accumulators)) != {width}:
            return None
        words = np.empty((len(accumulators), width), np.int64)
        for i, (kind, values) in enumerate(zip(self._kinds, zip(*accumulators))):
            if set(map(type, values)) != {kind}:
                return None
            if kind is float:
                words[:, i] = np.array(values, np.float64).view(np.int64)
            else:
                try:
                    words[:, i] = np.array(values, np.int64)
                except OverflowError:  # an int beyond int64
                    return None
        return words

    def unpack(self, words: Any, version: int | None = None) -> list:
        """New accumulators of the user's container type (a list mutated in place touches no stored word)."""
        self._current(version)
        words = np.asarray(words, np.int64).reshape(-1, len(self._kinds))
        fields = [words[:, i].view(np.float64).tolist() if kind is float else (words[:, i] != 0).tolist()
                  if kind is bool else words[:, i].tolist() for i, kind in enumerate(self._kinds)]
        return list(zip(*fields)) if self._container is tuple else list(map(list, zip(*fields)))

    def accumulate_packed(self, columns: Sequence[Sequence[Any]], order: Any, starts: Any) -> Any:
        return self.pack(self.accumulate(columns, order, starts))

    def merge_packed(self, words: Any, starts: Any) -> Any:
        """The user's ``merge`` folded over each group's accumulators, in order, packed (or None)."""
        accs = self.unpack(words)
        bounds = np.asarray(starts, np.int64).tolist() + [len(accs)]
        merge = self.function.merge
        out = []
        for a, b in zip(bounds, bounds[1:]):
            acc = accs[a]
            for other in accs[a + 1:b]:
                acc = merge(acc, other)
            out.append(acc)
        return self.pack(out)

    def _current(self, version: int | None) -> None:
        """Refuse packed words of another accumulator version: their field kinds are not known here."""
        current = self.function.accumulator_version()
        if version is not None and version != current:
            raise StateError(
                f"packed accumulators of {qualified_name(self.function)} version {version} cannot be read by its "
                f"version {current} on state_layout='table': only the current create_accumulator()'s fields are "
                f"known. Restore them with the version that wrote them (and finish that job with final=True), "
                f"or run the migration on state_layout='cells'")


def _kinds(created: Any) -> tuple[type, ...] | None:
    """The field kinds of a flat, non-empty tuple or list of ints, floats and bools; None for anything else."""
    if type(created) not in (tuple, list) or not created:
        return None
    kinds = tuple(map(type, created))
    return kinds if all(kind in FIELD_KINDS for kind in kinds) else None


def _rows(columns: Sequence[Sequence[Any]], order: np.ndarray) -> list[tuple]:
    """Rows ``order`` of the epoch's columns as tuples of the values the record path hands to ``add``
    (an Arrow column's Python values; any other column's items as they are)."""
    if not columns:
        return [()] * len(order)
    at = order.tolist()
    taken = []
    for column in columns:
        array = arrow_array(column)
        taken.append(array.take(pa.array(order)).to_pylist() if array is not None else [column[r] for r in at])
    return list(zip(*taken))
