"""The built-in vectorized aggregates: SQL-style ``sum``, ``count``, ``min``, ``max``, ``avg``, ``first`` and
``last`` over row tuples (``RowAggregate``), as an AggregateFunction, over columns (``ColumnarAggregate``)
and packed into int64 words (``PackedAggregate``), so the session engine keeps them as packed cells."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from statekit import PackedAggregate

from .columns import arrow_array

KINDS = ("sum", "count", "min", "max", "avg", "first", "last")

_NONE, _INT, _FLOAT, _BOOL = 0, 1, 2, 3
"""Packed value tags: each packed aggregate is ``[tag, value]`` (``avg``: ``[tag, sum, n]``; ``count``: ``[n]``)."""
_WIDTH = {"count": 1, "avg": 3}
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


class RowAggregate(PackedAggregate):
    """SQL-style aggregates over row tuples: ``count`` counts rows; the others skip null values
    (and are null when a session has none); ``first``/``last`` keep the first/last non-null value in
    the order the rows were added (order-sensitive: they are not commutative); ``min``/``max`` order
    NaN above every number, as Spark SQL does, and keep the earlier of equal values.

    Packed (``PackedAggregate``), an accumulator is one or more int64 words per aggregate: ``count``
    ``[n]``, ``avg`` ``[tag, sum, n]``, the others ``[tag, value]``, where the tag says whether the
    value is null, an int, a float (its IEEE bits) or a bool; values that do not fit stay unpacked."""

    def __init__(self, aggs: list[tuple[str, int | None]], names: Sequence[str] | None = None, version: int = 1,
                 earlier: dict[int, Sequence[str]] | None = None) -> None:
        self.aggs = aggs  # (kind, index of the column in the row)
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
        if not isinstance(layout, dict) or layout.get("class") != "RowAggregate":
            return None
        return cls([(kind, pos) for kind, pos in layout["aggregates"]])

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
                accumulator[i] = v if _below(v, cur) else cur
            elif kind == "max":
                accumulator[i] = v if _below(cur, v) else cur  # "first" keeps what it has
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
                out.append(a + b if kind == "sum" else (b if (_below(b, a) if kind == "min" else _below(a, b)) else a))
        return out

    def get_result(self, accumulator: list) -> tuple:
        return tuple((acc[0] / acc[1] if acc[1] else None) if kind == "avg" else acc
                     for (kind, _), acc in zip(self.aggs, accumulator))

    # -- packed accumulators (PackedAggregate) -------------------------------------------------------
    def _kinds(self, version: int | None) -> list[str]:
        """The aggregates' kinds of accumulator ``version`` (an earlier one's from its recorded names)."""
        if version is None or version == self.version:
            return [kind for kind, _ in self.aggs]
        names = self.earlier.get(version)
        if names is None:
            raise ValueError(f"no aggregates recorded for accumulator version {version} (known: {sorted(self.earlier)})")
        return [name.partition("_")[0] for name in names]

    def packed_width(self, version: int | None = None) -> int:
        return sum(_WIDTH.get(kind, 2) for kind in self._kinds(version))

    def pack(self, accumulators: Sequence[list]) -> Any:
        rows = []
        for acc in accumulators:
            row: list[int] = []
            for (kind, _), slot in zip(self.aggs, acc):
                if kind == "count":
                    row.append(slot)
                    continue
                value = slot[0] if kind == "avg" else slot
                t = type(value)
                if value is None:
                    row += (_NONE, 0)
                elif t is int and _I64_MIN <= value <= _I64_MAX:
                    row += (_INT, value)
                elif t is float:
                    row += (_FLOAT, int(np.float64(value).view(np.int64)))
                elif t is bool and kind != "avg":
                    row += (_BOOL, int(value))
                else:
                    return None
                if kind == "avg":
                    row.append(slot[1])
            rows.append(row)
        try:
            return np.array(rows, dtype=np.int64).reshape(len(rows), self.packed_width())
        except OverflowError:
            return None

    def unpack(self, words: Any, version: int | None = None) -> list[list]:
        per_agg: list[list] = []
        j = 0
        for kind in self._kinds(version):
            if kind == "count":
                per_agg.append(words[:, j].tolist())
                j += 1
                continue
            values = [_unpacked(t, i, f) for t, i, f in zip(words[:, j].tolist(), words[:, j + 1].tolist(),
                                                            words[:, j + 1].view(np.float64).tolist())]
            if kind == "avg":
                values = [[v, n] for v, n in zip(values, words[:, j + 2].tolist())]
            per_agg.append(values)
            j += _WIDTH.get(kind, 2)
        return [list(acc) for acc in zip(*per_agg)] if per_agg else [[] for _ in range(len(words))]

    def result_columns_packed(self, words: Any) -> list[list]:
        """``get_result``'s fields of packed rows, one list per aggregate: numpy where a column's values
        are all ints or all floats (nulls allowed), per value otherwise."""
        out: list[list] = []
        j = 0
        for kind, _ in self.aggs:
            if kind == "count":
                out.append(words[:, j].tolist())
                j += 1
                continue
            tags, bits = words[:, j], words[:, j + 1]
            if kind == "avg":
                out.append(_averages(tags, bits, words[:, j + 2]))
            else:
                out.append(_values(tags, bits))
            j += _WIDTH.get(kind, 2)
        return out

    def accumulate_packed(self, columns: Sequence[Sequence[Any]], order: Any, starts: Any) -> Any:
        """Vectorized over runs of rows for int and float columns (nulls allowed); None for other
        columns, and where ``accumulate``'s numpy reductions would not match ``add`` (see ``_numeric``)."""
        ends = np.append(starts[1:], len(order))
        counts = ends - starts
        out = []
        for kind, pos in self.aggs:
            if kind == "count":
                out.append(counts)
                continue
            found = _masked(columns[pos], order)
            if found is None:
                return None
            values, valid, tag = found
            present = np.add.reduceat(valid.astype(np.int64), starts) if len(order) else counts
            tags = np.where(present > 0, tag, _INT if kind == "avg" else _NONE)  # an empty avg is [0, 0]
            out += [tags, _reduced(kind, values, valid, starts, ends).view(np.int64)]
            if kind == "avg":
                out.append(present)
        return np.column_stack(out).astype(np.int64, copy=False) if out else np.zeros((len(starts), 0), np.int64)

    def merge_packed(self, words: Any, starts: Any) -> Any:
        """Vectorized ``merge`` per group where every group's non-null values share one type (ints or
        floats; bools only for first/last) and int sums stay within 62 bits; else None."""
        ends = np.append(starts[1:], len(words))
        out = []
        j = 0
        for kind, _ in self.aggs:
            if kind == "count":
                out.append(np.add.reduceat(words[:, j], starts))
                j += 1
                continue
            tags = words[:, j]
            present = words[:, j + 2] > 0 if kind == "avg" else tags != _NONE  # an empty avg adds int 0
            kinds = np.unique(tags[present])
            if len(kinds) > 1 or (len(kinds) and kinds[0] == _BOOL and kind not in ("first", "last")):
                return None
            tag = int(kinds[0]) if len(kinds) else _INT
            raw = words[:, j + 1]
            values = raw.view(np.float64) if tag == _FLOAT else raw
            if tag == _FLOAT and len(values):
                real = values[present]
                if np.isnan(real).any() or np.signbit(real[real == 0]).any():  # Python's ties and NaN order
                    return None
            if tag == _INT and kind in ("sum", "avg") and len(values) and \
                    max(int(values.max()), -int(values.min())) >= (1 << 62) // len(values):  # np.abs(-2**63) < 0
                return None
            group_tags = np.where(np.add.reduceat(present.astype(np.int64), starts) > 0, tag,
                                  _INT if kind == "avg" else _NONE)
            out += [group_tags, _reduced(kind, values, present, starts, ends).view(np.int64)]
            if kind == "avg":
                out.append(np.add.reduceat(words[:, j + 2], starts))
            j += _WIDTH.get(kind, 2)
        return np.column_stack(out).astype(np.int64, copy=False) if out else np.zeros((len(starts), 0), np.int64)


def _below(a: Any, b: Any) -> bool:
    """``a < b`` in the order of ``min``/``max``, where NaN is above every other value (as in Spark SQL):
    a total order, so ``add`` one by one and ``merge`` of folded runs agree (ties keep the earlier value)."""
    return a < b or (b != b and a == a)


def _values(tags: np.ndarray, bits: np.ndarray) -> list:
    """The packed values ``(tags, bits)`` as Python values (None for a null)."""
    present = tags != _NONE
    kinds = np.unique(tags[present])
    if len(kinds) == 1 and kinds[0] in (_INT, _FLOAT):
        values = (bits if kinds[0] == _INT else bits.view(np.float64)).tolist()
        for i in np.flatnonzero(~present).tolist():
            values[i] = None
        return values
    if not len(kinds):
        return [None] * len(tags)
    return [_unpacked(t, i, f) for t, i, f in zip(tags.tolist(), bits.tolist(), bits.view(np.float64).tolist())]


def _averages(tags: np.ndarray, bits: np.ndarray, counts: np.ndarray) -> list:
    """``sum / n`` of packed averages (None where n is 0), as Python divides them: in numpy when the
    sums are floats, or ints that convert to float64 exactly (then one correctly rounded division)."""
    some = counts > 0
    kinds = np.unique(tags[some])
    sums = None
    if len(kinds) == 1 and int(counts.max()) <= 1 << 53:
        if kinds[0] == _FLOAT:
            sums = bits.view(np.float64)
        elif kinds[0] == _INT and max(int(bits[some].max()), -int(bits[some].min())) <= 1 << 53:
            sums = bits.astype(np.float64)
    if sums is None and len(kinds):
        return [(_unpacked(t, i, f) / n if n else None)
                for t, i, f, n in zip(tags.tolist(), bits.tolist(), bits.view(np.float64).tolist(), counts.tolist())]
    means = [None] * len(tags) if sums is None else (sums / np.where(some, counts, 1)).tolist()
    for i in np.flatnonzero(~some).tolist():
        means[i] = None
    return means


def _unpacked(tag: int, bits: int, real: float) -> Any:
    """A packed value: None, the int, the float (``real``: the bits read as float64) or the bool."""
    if tag == _INT:
        return bits
    if tag == _FLOAT:
        return real
    return None if tag == _NONE else bool(bits)


def _reduced(kind: str, values: np.ndarray, valid: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``kind`` of the valid ``values`` of each segment ``[starts[j], ends[j])`` (anything where it has none)."""
    if not len(values):
        return np.zeros(len(starts), values.dtype)
    if kind in ("first", "last"):
        at = np.flatnonzero(valid)
        if kind == "first":
            i = np.searchsorted(at, starts)
            ok = i < len(at)
            ok[ok] = at[i[ok]] < ends[ok]
        else:
            i = np.searchsorted(at, ends) - 1
            ok = i >= 0
            ok[ok] = at[i[ok]] >= starts[ok]
        picked = np.zeros(len(starts), values.dtype)
        picked[ok] = values[at[i[ok]]]
        return picked
    if kind in ("sum", "avg"):
        return np.add.reduceat(np.where(valid, values, 0), starts)
    big = np.inf if values.dtype.kind == "f" else np.iinfo(np.int64).max
    if kind == "min":
        return np.minimum.reduceat(np.where(valid, values, big), starts)
    return np.maximum.reduceat(np.where(valid, values, -big if values.dtype.kind == "f" else -big - 1), starts)


def _masked(column: Sequence[Any], order: Any) -> tuple[np.ndarray, np.ndarray, int] | None:
    """``column`` in ``order`` as (values, valid mask, tag) for int or float columns with nulls, or None
    where ``_numeric`` would refuse the values (mixed types, NaN, -0.0, sums that could overflow)."""
    array = arrow_array(column)
    if array is not None:
        return _arrow_masked(array, order)
    if isinstance(column, np.ndarray) or None not in column:
        values = _numeric(column, order)
        if values is None:
            return None
        return values, np.ones(len(values), dtype=bool), _FLOAT if values.dtype.kind == "f" else _INT
    kinds = set(map(type, column)) - {type(None)}
    if not kinds:
        return np.zeros(len(order), np.int64), np.zeros(len(order), bool), _INT
    if len(kinds) != 1 or not kinds <= {int, float}:
        return None
    taken = [column[r] for r in order.tolist()]
    valid = np.fromiter((v is not None for v in taken), bool, len(taken))
    zero = 0.0 if float in kinds else 0
    filled = [zero if v is None else v for v in taken]
    values = _numeric(filled, np.arange(len(filled)))
    if values is None:
        return None
    return values, valid, _FLOAT if values.dtype.kind == "f" else _INT

def _arrow_masked(array: pa.Array, order: Any) -> tuple[np.ndarray, np.ndarray, int] | None:
    """``_masked`` of an Arrow column, read as numpy without Python values: the same answer as for
    the column's ``to_pylist()``."""
    if len(array) and array.null_count == len(array):  # no values at all, whatever the type
        return np.zeros(len(order), np.int64), np.zeros(len(order), bool), _INT
    t = array.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
        return None
    try:
        array = array.cast(pa.int64() if pa.types.is_integer(t) else pa.float64())
    except pa.ArrowInvalid:  # an unsigned value beyond int64
        return None
    values = _numeric(array.fill_null(0).to_numpy(), order)
    if values is None:
        return None
    valid = np.ones(len(values), bool) if not array.null_count else array.is_valid().to_numpy(zero_copy_only=False)[order]
    return values, valid, _FLOAT if values.dtype.kind == "f" else _INT


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
