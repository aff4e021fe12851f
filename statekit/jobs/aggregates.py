"""Session aggregates from ``--agg`` specs (``sum:value``, ``count``, ``min:x``, ``max:x``, ``avg:x``,
``first:x``, ``last:x``):
parsing, the incremental AggregateFunction over input rows, and the output column types."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from ..descriptors import ColumnarAggregate

KINDS = ("sum", "count", "min", "max", "avg", "first", "last")


@dataclass(frozen=True)
class Agg:
    """One output aggregate: ``kind`` of input ``column`` (None for ``count``), named ``name``."""

    kind: str
    column: str | None

    @property
    def name(self) -> str:
        return "count" if self.kind == "count" else f"{self.kind}_{self.column}"


def parse_aggs(specs: Iterable[str]) -> list[Agg]:
    """``["sum:value", "count"]`` -> Aggs; a bad spec is an error naming it and the valid kinds."""
    aggs = []
    for spec in specs:
        kind, _, column = spec.partition(":")
        kind, column = kind.strip().lower(), column.strip()
        if kind not in KINDS or (kind == "count") != (not column):
            raise ValueError(f"--agg {spec!r}: expected count or KIND:COLUMN with KIND one of sum, min, max, avg, first, last")
        aggs.append(Agg(kind, column or None))
    names = [a.name for a in aggs]
    if len(set(names)) != len(names):
        raise ValueError(f"--agg: the same aggregate is asked twice: {', '.join(names)}")
    return aggs


class RowAggregate(ColumnarAggregate):
    """SQL-style aggregates over row tuples: ``count`` counts rows; the others skip null values
    (and are null when a session has none); ``first``/``last`` keep the first/last non-null value in
    the order the rows were added (order-sensitive: they are not commutative)."""

    def __init__(self, aggs: list[tuple[str, int | None]], names: Sequence[str] | None = None, version: int = 1,
                 earlier: dict[int, Sequence[str]] | None = None) -> None:
        self.aggs = aggs  # (kind, index of the column in the row)
        self.names = list(names) if names is not None else None
        self.version = version
        self.earlier = {int(v): list(n) for v, n in (earlier or {}).items()}
        """The aggregates' names (``Agg.name``) of each earlier accumulator version: what migrates them."""
        if self.earlier and (self.names is None or len(self.names) != len(aggs) or max(self.earlier) >= version):
            raise ValueError("RowAggregate: earlier layouts need the aggregates' names and a later version")

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

    def _migrate(self, version: int, accumulator: list) -> list:
        names = self.earlier.get(version)
        if names is None:
            raise ValueError(f"no aggregates recorded for accumulator version {version} "
                             f"(known: {sorted(self.earlier)})")
        slot = {name: i for i, name in enumerate(names)}
        fresh = self.create_accumulator()
        return [accumulator[slot[name]] if name in slot else fresh[i] for i, name in enumerate(self.names)]

    def create_accumulator(self) -> list:
        return [0 if kind == "count" else ([0, 0] if kind == "avg" else None) for kind, _ in self.aggs]

    def add(self, value: tuple, accumulator: list) -> list:
        for i, (kind, pos) in enumerate(self.aggs):
            if kind == "count":
                accumulator[i] += 1
                continue
            v = value[pos]
            if v is None:
                continue
            cur = accumulator[i]
            if kind == "avg":
                cur[0] += v
                cur[1] += 1
            elif kind == "last":
                accumulator[i] = v
            elif cur is None:
                accumulator[i] = v
            elif kind == "sum":
                accumulator[i] = cur + v
            elif kind == "min":
                accumulator[i] = v if v < cur else cur
            elif kind == "max":
                accumulator[i] = v if v > cur else cur  # "first" keeps what it has
        return accumulator

    def accumulate(self, columns: Sequence[Sequence[Any]], order: Any, starts: Any) -> list[list]:
        """Vectorized ``add`` over segments of rows (see ``AggregateFunction``): numpy reductions for
        integer and float columns without nulls, a per-row fold otherwise. Float sums may differ
        from one-by-one addition in the last bits (the order of additions differs)."""
        ends = np.append(starts[1:], len(order))
        per_agg = []
        for kind, pos in self.aggs:
            if kind == "count":
                per_agg.append((ends - starts).tolist())
                continue
            values = _numeric(columns[pos], order)
            if values is None:
                per_agg.append(self._fold(kind, columns[pos], order.tolist(), starts.tolist(), ends.tolist()))
            elif kind == "avg":
                per_agg.append([[s, n] for s, n in zip(np.add.reduceat(values, starts).tolist(), (ends - starts).tolist())])
            elif kind in ("first", "last"):
                per_agg.append(values[starts if kind == "first" else ends - 1].tolist())
            else:
                ufunc = np.add if kind == "sum" else (np.minimum if kind == "min" else np.maximum)
                per_agg.append(ufunc.reduceat(values, starts).tolist())
        return [list(acc) for acc in zip(*per_agg)]

    @staticmethod
    def _fold(kind: str, column: Sequence[Any], order: list[int], starts: list[int], ends: list[int]) -> list:
        """``add`` of one aggregate over each segment, row by row."""
        one = RowAggregate([(kind, 0)])
        out = []
        for s, e in zip(starts, ends):
            acc = one.create_accumulator()
            for r in order[s:e]:
                acc = one.add((column[r],), acc)
            out.append(acc[0])
        return out

    def merge(self, acc_a: list, acc_b: list) -> list:
        out = []
        for (kind, _), a, b in zip(self.aggs, acc_a, acc_b):
            if kind in ("count", "avg"):
                out.append(a + b if kind == "count" else [a[0] + b[0], a[1] + b[1]])
            elif a is None or b is None:
                out.append(b if a is None else a)
            elif kind in ("first", "last"):
                out.append(a if kind == "first" else b)
            else:
                out.append(a + b if kind == "sum" else (min(a, b) if kind == "min" else max(a, b)))
        return out

    def get_result(self, accumulator: list) -> tuple:
        return tuple((acc[0] / acc[1] if acc[1] else None) if kind == "avg" else acc
                     for (kind, _), acc in zip(self.aggs, accumulator))


def _numeric(column: Sequence[Any], order: Any) -> Any:
    """``column`` in ``order`` as an int64 or float64 array, or None when it has nulls or other types
    (a list mixing ints, floats or bools: their results keep the type the row path gives them),
    NaN or -0.0 (numpy orders and breaks min/max ties differently) or an int64 sum could overflow."""
    try:
        values = np.asarray(column)
    except (ValueError, OverflowError):
        return None
    kind = values.dtype.kind
    if kind not in "if" or values.dtype.itemsize != 8:
        return None
    if not isinstance(column, np.ndarray) and set(map(type, column)) != {int if kind == "i" else float}:
        return None
    values = values[order]
    if not len(values):
        return values
    if kind == "f":
        return None if np.isnan(values).any() or np.signbit(values[values == 0]).any() else values
    if max(int(values.max()), -int(values.min())) >= (1 << 62) // len(values):
        return None
    return values
