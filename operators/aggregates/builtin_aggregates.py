"""The built-in aggregates of ``RowAggregate``, one class each (as Quix Streams' ``Count``, ``Sum``, ``Mean``):
how each keeps its accumulator slot row by row, over numpy runs and packed into int64 words, and what it
declares to the jobs (CLI name, help, Spark result type). ``AGGREGATES`` is the one registry every caller reads."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Sequence

import numpy as np

from .packed_values import (BOOL, FLOAT, I64_MAX, I64_MIN, INT, NONE, below, masked, numeric, unpacked,
                            unpacked_column, unpacked_means)

INTEGRAL_TYPES = ("tinyint", "smallint", "int", "bigint")
"""Spark's integer type names (``DataType.simpleString``)."""
NUMERIC_TYPES = INTEGRAL_TYPES + ("float", "double")
"""The Spark type names a numeric aggregate takes."""


class Aggregate(ABC):
    """One aggregate's slot of a RowAggregate accumulator, over the value at ``pos`` of each row.

    Packed, a slot is ``WIDTH`` int64 words; ``pack_slot`` refuses (None) a value that does not fit."""

    NAME: ClassVar[str]
    """The name in ``--agg`` specs and stored layouts (never changed: checkpoints record it)."""
    HELP: ClassVar[str]
    """What it computes, in a word or two (the CLI's ``--agg`` help)."""
    COLUMN: ClassVar[bool] = True
    """Whether it reads an input column."""
    NUMERIC: ClassVar[bool] = False
    """Whether its column must be an integer or floating-point one."""
    WIDTH: ClassVar[int] = 2
    """Packed words per slot."""

    STATE_FIELDS: ClassVar[tuple[str, ...]] = ("",)
    """The columns a table of open sessions holds the slot in (``sessionize --initial-state``): the result
    column's name with each suffix; the result column itself where the result is the slot."""
    STATE_NULLABLE: ClassVar[bool] = True
    """Whether a state column may be null."""

    def result_type(self, input_type: str | None) -> str | None:
        """The Spark type name of the result for a column of Spark type name ``input_type``."""
        return input_type

    def state_types(self, input_type: str | None) -> list[str | None]:
        """The Spark type names of the ``STATE_FIELDS`` columns for a column of Spark type name ``input_type``."""
        return [self.result_type(input_type)]

    def slot_of(self, values: tuple) -> Any:
        """The slot a session's ``STATE_FIELDS`` values make."""
        return values[0]

    def output_name(self, column: str | None) -> str:
        """The result column's name: ``<NAME>_<column>``."""
        return f"{self.NAME}_{column}"

    def spec(self) -> str:
        """How ``--agg`` asks for it."""
        return f"{self.NAME}:COL" if self.COLUMN else self.NAME

    # -- row by row ------------------------------------------------------------------------------
    def create(self) -> Any:
        """The empty slot."""
        return None

    @abstractmethod
    def add_row(self, slot: Any, row: tuple, pos: int | None) -> Any:
        """``slot`` with ``row`` added."""

    @abstractmethod
    def merge(self, a: Any, b: Any) -> Any:
        """The slot of ``a``'s rows followed by ``b``'s."""

    def result(self, slot: Any) -> Any:
        """The result of a slot."""
        return slot

    # -- numpy runs ------------------------------------------------------------------------------
    def accumulate(self, column: Sequence[Any], order: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list:
        """The slot of each run ``order[starts[j]:ends[j]]`` of ``column``'s rows: numpy where the column
        is int64 or float64 without nulls (``packed_values.numeric``), row by row otherwise."""
        values = numeric(column, order)
        if values is not None:
            return self._runs(values, starts, ends)
        rows, out = order.tolist(), []
        for s, e in zip(starts.tolist(), ends.tolist()):
            slot = self.create()
            for r in rows[s:e]:
                slot = self.add_row(slot, (column[r],), 0)
            out.append(slot)
        return out

    @abstractmethod
    def _runs(self, values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list:
        """The slots of runs of numeric ``values`` (no nulls)."""

    # -- packed ----------------------------------------------------------------------------------
    @abstractmethod
    def pack_slot(self, slot: Any) -> list[int] | None:
        """A slot's words, or None when a value does not pack."""

    @abstractmethod
    def unpack(self, words: np.ndarray) -> list:
        """The slots of packed rows (``words``: this aggregate's columns)."""

    @abstractmethod
    def result_column(self, words: np.ndarray) -> list:
        """``result`` of packed rows' slots."""

    @abstractmethod
    def accumulate_packed(self, column: Sequence[Any], order: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                          counts: np.ndarray) -> list[np.ndarray] | None:
        """``accumulate`` packed (one array per word), or None where it would not equal ``add_row``."""

    @abstractmethod
    def merge_packed(self, words: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list[np.ndarray] | None:
        """``merge`` of the packed rows of each group ``[starts[j], ends[j])``, or None where numpy would not
        equal ``merge``."""


class Count(Aggregate):
    """Rows, nulls included; its slot is the count itself (one word packed)."""

    NAME = "count"
    HELP = "rows"
    COLUMN = False
    WIDTH = 1
    STATE_NULLABLE = False

    def result_type(self, input_type: str | None) -> str | None:
        return "bigint"

    def output_name(self, column: str | None) -> str:
        return self.NAME

    def create(self) -> Any:
        return 0

    def add_row(self, slot: Any, row: tuple, pos: int | None) -> Any:
        return slot + 1

    def merge(self, a: Any, b: Any) -> Any:
        return a + b

    def accumulate(self, column: Sequence[Any], order: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list:
        return (ends - starts).tolist()

    def _runs(self, values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list:
        return (ends - starts).tolist()

    def pack_slot(self, slot: Any) -> list[int] | None:
        return [slot]

    def unpack(self, words: np.ndarray) -> list:
        return words[:, 0].tolist()

    def result_column(self, words: np.ndarray) -> list:
        return words[:, 0].tolist()

    def accumulate_packed(self, column: Sequence[Any], order: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                          counts: np.ndarray) -> list[np.ndarray] | None:
        return [counts]

    def merge_packed(self, words: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list[np.ndarray] | None:
        return [np.add.reduceat(words[:, 0], starts)]


def _tagged(value: Any, bools: bool) -> tuple[int, int] | None:
    """``value`` as ``(tag, bits)``, or None when it does not pack (``bools``: whether a bool may)."""
    t = type(value)
    if value is None:
        return NONE, 0
    if t is int and I64_MIN <= value <= I64_MAX:
        return INT, value
    if t is float:
        return FLOAT, int(np.float64(value).view(np.int64))
    if t is bool and bools:
        return BOOL, int(value)
    return None


def _group_type(tags: np.ndarray, present: np.ndarray, bools: bool, values_of: np.ndarray,
                summed: bool) -> tuple[int, np.ndarray] | None:
    """The one tag of every group's present packed values and their values as numpy (bits read as float64
    for floats), or None where numpy would not merge them as Python does: mixed types, bools unless
    ``bools``, NaN or -0.0 (Python's ties and NaN order), int sums (``summed``) beyond 62 bits."""
    kinds = np.unique(tags[present])
    if len(kinds) > 1 or (len(kinds) and kinds[0] == BOOL and not bools):
        return None
    tag = int(kinds[0]) if len(kinds) else INT
    values = values_of.view(np.float64) if tag == FLOAT else values_of
    if tag == FLOAT and len(values):
        real = values[present]
        if np.isnan(real).any() or np.signbit(real[real == 0]).any():
            return None
    if tag == INT and summed and len(values) and \
            max(int(values.max()), -int(values.min())) >= (1 << 62) // len(values):  # np.abs(-2**63) < 0
        return None
    return tag, values


class ValueAggregate(Aggregate):
    """An aggregate keeping one value (null until a non-null one comes), packed as ``[tag, value]``."""

    BOOLS: ClassVar[bool] = False
    """Whether packed bools merge in numpy (they do for aggregates that only pick a value)."""
    SUMMED: ClassVar[bool] = False
    """Whether packed merges add ints (then they must stay within 62 bits)."""

    def add_row(self, slot: Any, row: tuple, pos: int | None) -> Any:
        v = row[pos]
        if v is None:
            return slot
        return v if slot is None else self._add(slot, v)

    @abstractmethod
    def _add(self, slot: Any, value: Any) -> Any:
        """A non-null ``value`` into a non-null ``slot``."""

    def merge(self, a: Any, b: Any) -> Any:
        if a is None or b is None:
            return b if a is None else a
        return self._add(a, b)

    @abstractmethod
    def _reduced(self, values: np.ndarray, valid: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """The slot value of the ``valid`` ``values`` of each run (anything where a run has none)."""

    def _runs(self, values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list:
        return self._reduced(values, np.ones(len(values), bool), starts, ends).tolist()

    def pack_slot(self, slot: Any) -> list[int] | None:
        tagged = _tagged(slot, True)
        return None if tagged is None else list(tagged)

    def unpack(self, words: np.ndarray) -> list:
        return [unpacked(t, i, f) for t, i, f in zip(words[:, 0].tolist(), words[:, 1].tolist(),
                                                     words[:, 1].view(np.float64).tolist())]

    def result_column(self, words: np.ndarray) -> list:
        return unpacked_column(words[:, 0], words[:, 1])

    def accumulate_packed(self, column: Sequence[Any], order: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                          counts: np.ndarray) -> list[np.ndarray] | None:
        found = masked(column, order)
        if found is None:
            return None
        values, valid, tag = found
        present = np.add.reduceat(valid.astype(np.int64), starts) if len(order) else counts
        return [np.where(present > 0, tag, NONE), self._reduced(values, valid, starts, ends).view(np.int64)]

    def merge_packed(self, words: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list[np.ndarray] | None:
        tags = words[:, 0]
        present = tags != NONE
        typed = _group_type(tags, present, self.BOOLS, words[:, 1], self.SUMMED)
        if typed is None:
            return None
        tag, values = typed
        group_tags = np.where(np.add.reduceat(present.astype(np.int64), starts) > 0, tag, NONE)
        return [group_tags, self._reduced(values, present, starts, ends).view(np.int64)]


def _sums(values: np.ndarray, valid: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The sum of the valid ``values`` of each run starting at ``starts``."""
    if not len(values):
        return np.zeros(len(starts), values.dtype)
    return np.add.reduceat(np.where(valid, values, 0), starts)


class Sum(ValueAggregate):
    """The sum of the non-null values (null when there is none)."""

    NAME = "sum"
    HELP = "sum"
    NUMERIC = True
    SUMMED = True

    def result_type(self, input_type: str | None) -> str | None:
        return "bigint" if input_type in INTEGRAL_TYPES else "double"

    def _add(self, slot: Any, value: Any) -> Any:
        return slot + value

    def _reduced(self, values: np.ndarray, valid: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        return _sums(values, valid, starts)


class _Extreme(ValueAggregate):
    """Min and Max: the one value kept by ``KEEPS_NEW(value, slot)``, reduced by ``REDUCE`` over runs."""

    REDUCE: np.ufunc
    FILL: tuple[float, int]
    """What an invalid row is replaced by before reducing: (for floats, for integers)."""

    @staticmethod
    @abstractmethod
    def _keeps_new(value: Any, slot: Any) -> bool:
        """Whether ``value`` replaces the kept ``slot``."""

    def _add(self, slot: Any, value: Any) -> Any:
        return value if self._keeps_new(value, slot) else slot

    def _reduced(self, values: np.ndarray, valid: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        if not len(values):
            return np.zeros(len(starts), values.dtype)
        fill = self.FILL[0] if values.dtype.kind == "f" else self.FILL[1]
        return self.REDUCE.reduceat(np.where(valid, values, fill), starts)


class Min(_Extreme):
    """The least non-null value, NaN above every number (as Spark SQL); ties keep the earlier value."""

    NAME = "min"
    HELP = "least"
    REDUCE = np.minimum
    FILL = (np.inf, np.iinfo(np.int64).max)

    @staticmethod
    def _keeps_new(value: Any, slot: Any) -> bool:
        return below(value, slot)


class Max(_Extreme):
    """The greatest non-null value, NaN above every number (as Spark SQL); ties keep the earlier value."""

    NAME = "max"
    HELP = "greatest"
    REDUCE = np.maximum
    FILL = (-np.inf, np.iinfo(np.int64).min)

    @staticmethod
    def _keeps_new(value: Any, slot: Any) -> bool:
        return below(slot, value)


class First(ValueAggregate):
    """The first non-null value in the order rows were added (order-sensitive)."""

    NAME = "first"
    HELP = "first non-null"
    BOOLS = True

    def _add(self, slot: Any, value: Any) -> Any:
        return slot

    def _reduced(self, values: np.ndarray, valid: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        at = np.flatnonzero(valid)
        i = np.searchsorted(at, starts)
        ok = i < len(at)
        ok[ok] = at[i[ok]] < ends[ok]
        return _picked(values, at, i, ok)


class Last(ValueAggregate):
    """The last non-null value in the order rows were added (order-sensitive)."""

    NAME = "last"
    HELP = "last non-null"
    BOOLS = True

    def add_row(self, slot: Any, row: tuple, pos: int | None) -> Any:
        v = row[pos]
        return slot if v is None else v

    def _add(self, slot: Any, value: Any) -> Any:
        return value

    def _reduced(self, values: np.ndarray, valid: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        at = np.flatnonzero(valid)
        i = np.searchsorted(at, ends) - 1
        ok = i >= 0
        ok[ok] = at[i[ok]] >= starts[ok]
        return _picked(values, at, i, ok)


def _picked(values: np.ndarray, at: np.ndarray, i: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """``values[at[i]]`` where ``ok`` (zero elsewhere): the value First or Last picks per run."""
    picked = np.zeros(len(ok), values.dtype)
    if len(values):
        picked[ok] = values[at[i[ok]]]
    return picked


class Avg(Aggregate):
    """The mean of the non-null values (null when there is none); its slot is ``[sum, n]``, packed as
    ``[tag, sum, n]``."""

    NAME = "avg"
    HELP = "mean"
    NUMERIC = True
    WIDTH = 3
    STATE_FIELDS = ("_sum", "_count")
    STATE_NULLABLE = False

    def result_type(self, input_type: str | None) -> str | None:
        return "double"

    def state_types(self, input_type: str | None) -> list[str | None]:
        return ["bigint" if input_type in INTEGRAL_TYPES else "double", "bigint"]

    def slot_of(self, values: tuple) -> Any:
        return [values[0], values[1]]

    def create(self) -> Any:
        return [0, 0]

    def add_row(self, slot: Any, row: tuple, pos: int | None) -> Any:
        v = row[pos]
        if v is not None:
            slot[0] += v
            slot[1] += 1
        return slot

    def merge(self, a: Any, b: Any) -> Any:
        return [a[0] + b[0], a[1] + b[1]]

    def result(self, slot: Any) -> Any:
        return slot[0] / slot[1] if slot[1] else None

    def _runs(self, values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list:
        return [[s, n] for s, n in zip(np.add.reduceat(values, starts).tolist(), (ends - starts).tolist())]

    def pack_slot(self, slot: Any) -> list[int] | None:
        tagged = _tagged(slot[0], False)
        return None if tagged is None else [*tagged, slot[1]]

    def unpack(self, words: np.ndarray) -> list:
        sums = [unpacked(t, i, f) for t, i, f in zip(words[:, 0].tolist(), words[:, 1].tolist(),
                                                     words[:, 1].view(np.float64).tolist())]
        return [[s, n] for s, n in zip(sums, words[:, 2].tolist())]

    def result_column(self, words: np.ndarray) -> list:
        return unpacked_means(words[:, 0], words[:, 1], words[:, 2])

    def accumulate_packed(self, column: Sequence[Any], order: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                          counts: np.ndarray) -> list[np.ndarray] | None:
        found = masked(column, order)
        if found is None:
            return None
        values, valid, tag = found
        present = np.add.reduceat(valid.astype(np.int64), starts) if len(order) else counts
        # an empty avg is [0, 0]: an int sum
        return [np.where(present > 0, tag, INT), _sums(values, valid, starts).view(np.int64), present]

    def merge_packed(self, words: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list[np.ndarray] | None:
        tags, counts = words[:, 0], words[:, 2]
        present = counts > 0  # an empty avg adds int 0
        typed = _group_type(tags, present, False, words[:, 1], True)
        if typed is None:
            return None
        tag, values = typed
        group_tags = np.where(np.add.reduceat(present.astype(np.int64), starts) > 0, tag, INT)
        return [group_tags, _sums(values, present, starts).view(np.int64), np.add.reduceat(counts, starts)]


AGGREGATES: dict[str, Aggregate] = {a.NAME: a for a in (Sum(), Count(), Min(), Max(), Avg(), First(), Last())}
"""The built-in aggregates by name: what ``--agg``, the Spark result types and stored layouts read."""


def aggregate_named(name: str) -> Aggregate:
    """The built-in aggregate called ``name``; an unknown name is an error listing the known ones."""
    found = AGGREGATES.get(name)
    if found is None:
        raise ValueError(f"no built-in aggregate {name!r}: one of {', '.join(AGGREGATES)}")
    return found


def aggregate_of_output(name: str) -> Aggregate:
    """The aggregate whose result column is called ``name`` (its ``output_name``)."""
    return aggregate_named(name.partition("_")[0])
