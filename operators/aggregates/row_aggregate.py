"""RowAggregate: SQL-style built-in aggregates (``operators.aggregates.builtin_aggregates``: ``sum``, ``count``, ``min``,
``max``, ``avg``, ``first``, ``last``) over row tuples, composed into one accumulator: as an AggregateFunction,
over columns (``ColumnarAggregate``) and packed into int64 words (``PackedAggregate``), so the session
engine keeps them as packed cells."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from statekit import PackedAggregate

from .builtin_aggregates import AGGREGATES, Aggregate, aggregate_named, aggregate_of_output

KINDS = tuple(AGGREGATES)
"""The built-in aggregates' names."""


@dataclass(frozen=True)
class RecordedAggregates:
    """What a stored RowAggregate layout says of its accumulators: their ``version``, the aggregates'
    names (``Aggregate.output_name``) of each ``earlier`` version and of this one (``names``)."""

    version: int
    earlier: dict[int, tuple[str, ...]]
    names: tuple[str, ...]


class RowAggregate(PackedAggregate):
    """SQL-style aggregates over row tuples: ``count`` counts rows; the others skip null values
    (and are null when a session has none); ``first``/``last`` keep the first/last non-null value in
    the order the rows were added (order-sensitive: they are not commutative); ``min``/``max`` order
    NaN above every number, as Spark SQL does, and keep the earlier of equal values.

    The accumulator is one slot per aggregate; packed (``PackedAggregate``), each slot is the
    aggregate's ``WIDTH`` int64 words; values that do not fit stay unpacked."""

    def __init__(self, aggs: list[tuple[str, int | None]], names: Sequence[str] | None = None, version: int = 1,
                 earlier: dict[int, Sequence[str]] | None = None) -> None:
        self.aggs = aggs  # (kind, index of the column in the row)
        self._parts = [(aggregate_named(kind), pos) for kind, pos in aggs]
        self._adds = [(part.add_row, pos) for part, pos in self._parts]  # bound once: ``add`` runs per row
        self.names = list(names) if names is not None else None
        self.version = version
        self.earlier = {int(v): list(n) for v, n in (earlier or {}).items()}
        """The aggregates' names (``Agg.name``) of each earlier accumulator version: what migrates them."""
        if self.earlier and (self.names is None or len(self.names) != len(aggs) or max(self.earlier) >= version):
            raise ValueError("RowAggregate: earlier layouts need the aggregates' names and a later version")

    @classmethod
    def from_layout(cls, layout: Any) -> "RowAggregate | None":
        """A RowAggregate with the accumulators a ``state_layout()`` describes (enough to unpack what it
        stored), or None when ``layout`` is not a RowAggregate's: what reads stored state offline."""
        if not _is_layout(layout):
            return None
        return cls([(kind, pos) for kind, pos in layout["aggregates"]])

    @classmethod
    def recorded(cls, layout: Any, columns: Sequence[str]) -> RecordedAggregates | None:
        """The accumulators a stored ``state_layout()`` describes, its aggregates named over the row's
        ``columns``; None when ``layout`` is not a RowAggregate's."""
        if not _is_layout(layout):
            return None
        if any(pos is not None and not 0 <= pos < len(columns) for _, pos in layout["aggregates"]):
            raise ValueError(f"the recorded aggregates {layout['aggregates']} name columns beyond the recorded row "
                             f"{list(columns)}: the checkpoint's job record is damaged")
        earlier = {int(v): tuple(n) for v, n in layout.get("earlier", {}).items()}
        names = tuple(aggregate_named(kind).output_name(None if pos is None else columns[pos])
                      for kind, pos in layout["aggregates"])
        return RecordedAggregates(int(layout.get("version", 1)), earlier, names)

    def state_layout(self) -> Any:
        """The accumulator is one slot per aggregate, in order: adding or removing one changes it (a
        later version records the earlier ones' aggregates, which its migration maps from)."""
        layout: dict[str, Any] = {"class": "RowAggregate", "aggregates": [[kind, pos] for kind, pos in self.aggs]}
        if self.version > 1:
            layout.update(version=self.version, earlier={str(v): n for v, n in sorted(self.earlier.items())})
        return layout

    def accumulator_version(self) -> int:
        return self.version

    def accumulator_migration(self) -> Any:
        """Slots of aggregates an earlier version had move to their place; added aggregates start empty
        (a session open across the change aggregates its later records only); removed ones are dropped."""
        return self._migrate if self.earlier else None

    def _earlier_names(self, version: int) -> list[str]:
        """The aggregates' names of earlier accumulator ``version``."""
        names = self.earlier.get(version)
        if names is None:
            raise ValueError(f"no aggregates recorded for accumulator version {version} (known: {sorted(self.earlier)})")
        return names

    def _migrate(self, version: int, accumulator: list) -> list:
        slot = {name: i for i, name in enumerate(self._earlier_names(version))}
        fresh = self.create_accumulator()
        return [accumulator[slot[name]] if name in slot else fresh[i] for i, name in enumerate(self.names)]

    def create_accumulator(self) -> list:
        return [part.create() for part, _ in self._parts]

    def add(self, value: tuple, accumulator: list) -> list:
        for i, (add_row, pos) in enumerate(self._adds):
            accumulator[i] = add_row(accumulator[i], value, pos)
        return accumulator

    def accumulate(self, columns: Sequence[Sequence[Any]], order: Any, starts: Any) -> list[list]:
        """Vectorized ``add`` over segments of rows (see ``AggregateFunction``): numpy reductions for
        integer and float columns without nulls, a per-row fold otherwise. Float sums may differ
        from one-by-one addition in the last bits (the order of additions differs)."""
        ends = np.append(starts[1:], len(order))
        per_agg = [part.accumulate(() if pos is None else columns[pos], order, starts, ends) for part, pos in self._parts]
        return [list(acc) for acc in zip(*per_agg)]

    def merge(self, acc_a: list, acc_b: list) -> list:
        return [part.merge(a, b) for (part, _), a, b in zip(self._parts, acc_a, acc_b)]

    def get_result(self, accumulator: list) -> tuple:
        return tuple(part.result(slot) for (part, _), slot in zip(self._parts, accumulator))

    def accumulators_of(self, columns: Sequence[Sequence[Any]], n: int) -> list[list]:
        """The accumulators of ``n`` sessions from the values of their state columns (each aggregate's
        ``STATE_FIELDS``, in order): what a table of open sessions restores."""
        slots, j = [], 0
        for part, _ in self._parts:
            width = len(part.STATE_FIELDS)
            slots.append([part.slot_of(values) for values in zip(*columns[j:j + width])])
            j += width
        return [list(acc) for acc in zip(*slots)] if slots else [[] for _ in range(n)]

    # -- packed accumulators (PackedAggregate) -------------------------------------------------------
    def _aggregates(self, version: int | None) -> list[Aggregate]:
        """The aggregates of accumulator ``version`` (an earlier one's from its recorded names)."""
        if version is None or version == self.version:
            return [part for part, _ in self._parts]
        return [aggregate_of_output(name) for name in self._earlier_names(version)]

    def packed_width(self, version: int | None = None) -> int:
        return sum(part.WIDTH for part in self._aggregates(version))

    def pack(self, accumulators: Sequence[list]) -> Any:
        rows = []
        for acc in accumulators:
            row: list[int] = []
            for (part, _), slot in zip(self._parts, acc):
                words = part.pack_slot(slot)
                if words is None:
                    return None
                row += words
            rows.append(row)
        try:
            return np.array(rows, dtype=np.int64).reshape(len(rows), self.packed_width())
        except OverflowError:
            return None

    def _columns(self, words: Any, parts: list[Aggregate]) -> list[tuple[Aggregate, Any]]:
        """Each aggregate with its columns of packed ``words``."""
        out, j = [], 0
        for part in parts:
            out.append((part, words[:, j:j + part.WIDTH]))
            j += part.WIDTH
        return out

    def unpack(self, words: Any, version: int | None = None) -> list[list]:
        per_agg = [part.unpack(w) for part, w in self._columns(words, self._aggregates(version))]
        return [list(acc) for acc in zip(*per_agg)] if per_agg else [[] for _ in range(len(words))]

    def result_columns_packed(self, words: Any) -> list[list]:
        """``get_result``'s fields of packed rows, one list per aggregate: numpy where a column's values
        are all ints or all floats (nulls allowed), per value otherwise."""
        return [part.result_column(w) for part, w in self._columns(words, self._aggregates(None))]

    def accumulate_packed(self, columns: Sequence[Sequence[Any]], order: Any, starts: Any) -> Any:
        """Vectorized over runs of rows for int and float columns (nulls allowed); None for other
        columns, and where ``accumulate``'s numpy reductions would not match ``add``."""
        ends = np.append(starts[1:], len(order))
        counts = ends - starts
        out = []
        for part, pos in self._parts:
            words = part.accumulate_packed(() if pos is None else columns[pos], order, starts, ends, counts)
            if words is None:
                return None
            out += words
        return np.column_stack(out).astype(np.int64, copy=False) if out else np.zeros((len(starts), 0), np.int64)

    def merge_packed(self, words: Any, starts: Any) -> Any:
        """Vectorized ``merge`` per group where every group's non-null values share one type (ints or
        floats; bools only for first/last) and int sums stay within 62 bits; else None."""
        ends = np.append(starts[1:], len(words))
        out = []
        for part, w in self._columns(words, self._aggregates(None)):
            merged = part.merge_packed(w, starts, ends)
            if merged is None:
                return None
            out += merged
        return np.column_stack(out).astype(np.int64, copy=False) if out else np.zeros((len(starts), 0), np.int64)


def _is_layout(layout: Any) -> bool:
    """Whether ``layout`` (read from a checkpoint: anyone may have written it) is a RowAggregate's
    ``state_layout()`` of known aggregates."""
    if not isinstance(layout, dict) or layout.get("class") != "RowAggregate" or not isinstance(layout.get("aggregates"), list):
        return False
    return all(isinstance(a, list) and len(a) == 2 and a[0] in AGGREGATES and (a[1] is None or type(a[1]) is int)
               for a in layout["aggregates"])
