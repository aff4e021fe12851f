"""VectorAggregate: a user's aggregate written as numpy functions over runs of rows (create, accumulate a
run of columns, merge runs of accumulators, results), in the spirit of a pandas UDAF. Its accumulators
are named fields of int64, float64 or bool; the base class packs them into int64 words (one per field)
and derives every method of ``PackedAggregate`` and ``AggregateFunction`` from the four the user
writes, so the engines take it as they take ``RowAggregate``: packed cells, the session table, bulk
fires, and the record path."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from functools import cached_property
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from statekit import PackedAggregate
from statekit.descriptors import qualified_name

from ..columns import arrow_array

FIELD_TYPES = {"int64": np.dtype(np.int64), "float64": np.dtype(np.float64), "bool": np.dtype(bool)}
"""The types of accumulator fields, each stored as one int64 word (float64 by its bits, bool as 0/1)."""
EMPTY: tuple = ()
"""The record path's accumulator of no rows: ``merge_runs`` and ``results`` never see it."""
_ONE_RUN = np.zeros(1, np.int64)


class VectorAggregate(PackedAggregate):
    """An aggregate over row tuples written with numpy on whole runs of rows. Subclasses write
    ``accumulator_fields``, ``create``, ``accumulate_runs``, ``merge_runs`` and ``results``.

    A column of the row reaches ``accumulate_runs`` as a numpy array: int64 for integers, float64 for
    floats (or ints and floats mixed), bool for booleans, an object array for anything else. A column
    holding a null (None) in a row to aggregate is refused with an error naming its position: fill or
    drop nulls before the operator. Arrays handed to these methods are fresh copies, never stored state.

    ``merge_runs`` and ``results`` only see accumulators of at least one row, but for one call of
    ``results`` on ``create()``'s, which names the result fields (``result_names``). As for every
    ``ColumnarAggregate``, merging a run's accumulator after another must equal accumulating the rows
    after it, in order (order-sensitive functions work: runs and groups come in row order)."""

    @abstractmethod
    def accumulator_fields(self) -> dict[str, str]:
        """Accumulator field name -> "int64", "float64" or "bool", in order (a change of them is a new
        state layout: a checkpoint of the old one is refused)."""

    @abstractmethod
    def create(self) -> dict[str, Any]:
        """The field values of the accumulator of no rows."""

    @abstractmethod
    def accumulate_runs(self, columns: list[np.ndarray], starts: np.ndarray) -> dict[str, np.ndarray]:
        """One accumulator per run: run j is rows ``starts[j]:starts[j+1]`` of ``columns`` (the last one
        to the end), each run non-empty and in the order rows came; ``columns`` are the row tuple's
        values by position. Returns each field as an array of ``len(starts)`` values."""

    @abstractmethod
    def merge_runs(self, accumulators: dict[str, np.ndarray], starts: np.ndarray) -> dict[str, np.ndarray]:
        """One accumulator per group: group j merges accumulators ``starts[j]:starts[j+1]`` (the last
        one to the end) in order, each later one's rows after the earlier ones'."""

    @abstractmethod
    def results(self, accumulators: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The result fields of each accumulator, by name (the names are the result's field names)."""

    # -- what the user's methods declare, checked once ------------------------------------------
    @cached_property
    def _fields(self) -> tuple[tuple[str, np.dtype], ...]:
        """The accumulator fields with their numpy types, checked."""
        fields = self.accumulator_fields()
        if not isinstance(fields, Mapping) or not fields:
            raise TypeError(f"{self._where('accumulator_fields')} returned {fields!r}: a VectorAggregate "
                            f"declares a non-empty dict of field name -> one of {list(FIELD_TYPES)}")
        for name, kind in fields.items():
            if not isinstance(name, str) or kind not in FIELD_TYPES:
                raise TypeError(f"{self._where('accumulator_fields')}: field {name!r} has type {kind!r}: field "
                                f"names are strings, their types one of {list(FIELD_TYPES)}")
        return tuple((name, FIELD_TYPES[kind]) for name, kind in fields.items())

    @cached_property
    def _created(self) -> tuple:
        """``create()``'s values as the record path's accumulator, checked."""
        got = self.create()
        arrays = self._checked("create", {k: [v] for k, v in got.items()} if isinstance(got, Mapping) else got, 1)
        return self._tuples(arrays)[0]

    def result_names(self) -> list[str]:
        """The result fields' names, in order: those of ``results`` on ``create()``'s accumulator."""
        return list(self._result_names)

    @cached_property
    def _result_names(self) -> tuple[str, ...]:
        with np.errstate(all="ignore"):  # the accumulator of no rows: a mean may divide by zero
            got = self.results(self._arrays([self._created]))
        if not isinstance(got, Mapping) or not got or not all(isinstance(name, str) for name in got):
            raise TypeError(f"{self._where('results')} returned {_shown(got)} for create()'s accumulator: "
                            f"results returns a non-empty dict of result field name -> array")
        return tuple(got)

    # -- AggregateFunction: the record path, accumulators as tuples ------------------------------
    def state_layout(self) -> Any:
        """The class and its accumulator fields: another field list is another layout."""
        return {"class": "VectorAggregate", "function": qualified_name(self),
                "fields": [[name, _type_name(dtype)] for name, dtype in self._fields]}

    def create_accumulator(self) -> tuple:
        return EMPTY

    def add(self, value: tuple, accumulator: tuple) -> tuple:
        if not isinstance(value, (tuple, list)):
            raise TypeError(f"{self._where('accumulate_runs')}: a VectorAggregate aggregates row tuples (a column "
                            f"per position), got a {type(value).__name__} record")
        columns = [_column([v], position, self) for position, v in enumerate(value)]
        run = self._checked("accumulate_runs", self.accumulate_runs(columns, _ONE_RUN.copy()), 1)
        return self._tuples(run)[0] if accumulator == EMPTY else self.merge(accumulator, self._tuples(run)[0])

    def merge(self, acc_a: tuple, acc_b: tuple) -> tuple:
        if acc_a == EMPTY or acc_b == EMPTY:
            return acc_b if acc_a == EMPTY else acc_a
        return self._tuples(self._merged(self._arrays([acc_a, acc_b]), _ONE_RUN.copy()))[0]

    def get_result(self, accumulator: tuple) -> tuple:
        columns = self._results(self._arrays([self._created if accumulator == EMPTY else accumulator]))
        return tuple(column.tolist()[0] for column in columns)

    # -- ColumnarAggregate and PackedAggregate -----------------------------------------------------
    def accumulate(self, columns: Sequence[Sequence[Any]], order: Any, starts: Any) -> list[tuple]:
        return self._tuples(self._accumulated(columns, order, starts))

    def packed_width(self, version: int | None = None) -> int:
        return len(self._fields)

    def pack(self, accumulators: Sequence[tuple]) -> Any:
        """The accumulators as words, or None when a value does not fit its field."""
        rows = [self._created if acc == EMPTY else acc for acc in accumulators]
        try:
            arrays = {name: np.array([row[i] for row in rows], dtype) for i, (name, dtype) in enumerate(self._fields)}
        except (OverflowError, TypeError, ValueError, IndexError):
            return None
        return self._packed(arrays, len(rows))

    def unpack(self, words: Any, version: int | None = None) -> list[tuple]:
        return self._tuples(self._unpacked(words))

    def accumulate_packed(self, columns: Sequence[Sequence[Any]], order: Any, starts: Any) -> Any:
        return self._packed(self._accumulated(columns, order, starts), len(starts))

    def merge_packed(self, words: Any, starts: Any) -> Any:
        return self._packed(self._merged(self._unpacked(words), np.asarray(starts, np.int64)), len(starts))

    def result_columns_packed(self, words: Any) -> list[np.ndarray]:
        return self._results(self._unpacked(words))

    # -- between the user's arrays and the engines' forms ---------------------------------------
    def _accumulated(self, columns: Sequence[Sequence[Any]], order: Any, starts: Any) -> dict[str, np.ndarray]:
        """``accumulate_runs`` of the rows ``order`` cut at ``starts``, checked."""
        order, starts = np.asarray(order, np.int64), np.asarray(starts, np.int64)
        if not len(starts):
            return {name: np.zeros(0, dtype) for name, dtype in self._fields}
        gathered = [_gathered(column, order, position, self) for position, column in enumerate(columns)]
        return self._checked("accumulate_runs", self.accumulate_runs(gathered, starts.copy()), len(starts))

    def _merged(self, arrays: dict[str, np.ndarray], starts: np.ndarray) -> dict[str, np.ndarray]:
        if not len(starts):
            return {name: np.zeros(0, dtype) for name, dtype in self._fields}
        return self._checked("merge_runs", self.merge_runs(arrays, starts.copy()), len(starts))

    def _results(self, arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
        """``results`` of accumulators, checked: one array per result field, in ``result_names`` order."""
        n = len(arrays[self._fields[0][0]])
        got = self.results(arrays)
        names = self._result_names
        if not isinstance(got, Mapping) or set(got) != set(names):
            what = f"the result fields {list(got)}" if isinstance(got, Mapping) else _shown(got)
            raise TypeError(f"{self._where('results')} returned {what}: expected the result fields {list(names)} "
                            f"(those it returns for create()'s accumulator)")
        return [_array(got[name], n, self, "results", name) for name in names]

    def _checked(self, method: str, got: Any, n: int) -> dict[str, np.ndarray]:
        """What ``method`` returned as the accumulator fields' arrays of ``n`` values, in the fields' types."""
        names = [name for name, _ in self._fields]
        if not isinstance(got, Mapping):
            raise TypeError(f"{self._where(method)} returned {_shown(got)}: expected a dict of the accumulator "
                            f"fields {names}")
        missing, extra = [f for f in names if f not in got], [f for f in got if f not in names]
        if missing or extra:
            raise TypeError(f"{self._where(method)} returned fields {list(got)}: "
                            + "; ".join(([f"missing {missing}"] if missing else []) + ([f"not declared {extra}"] if extra else []))
                            + f" (accumulator_fields: {names})")
        out = {}
        for name, dtype in self._fields:
            array = _array(got[name], n, self, method, name)
            if not np.can_cast(array.dtype, dtype, casting="safe"):
                raise TypeError(f"{self._where(method)}: field {name!r} is {array.dtype}, which does not fit its "
                                f"declared type {_type_name(dtype)} without loss (cast it in {method})")
            out[name] = array.astype(dtype, copy=False)
        return out

    def _packed(self, arrays: dict[str, np.ndarray], n: int) -> np.ndarray:
        words = np.empty((n, len(self._fields)), np.int64)
        for i, (name, dtype) in enumerate(self._fields):
            words[:, i] = arrays[name].view(np.int64) if dtype == np.float64 else arrays[name]
        return words

    def _unpacked(self, words: Any) -> dict[str, np.ndarray]:
        """Packed rows as the fields' arrays (copies: a user's in-place change never reaches stored words)."""
        words = np.asarray(words, np.int64).reshape(-1, len(self._fields))
        out = {}
        for i, (name, dtype) in enumerate(self._fields):
            column = words[:, i].copy()
            out[name] = column.view(np.float64) if dtype == np.float64 else column != 0 if dtype == bool else column
        return out

    def _arrays(self, accumulators: list[tuple]) -> dict[str, np.ndarray]:
        """Record-path accumulators as the fields' arrays."""
        return {name: np.array([acc[i] for acc in accumulators], dtype) for i, (name, dtype) in enumerate(self._fields)}

    def _tuples(self, arrays: dict[str, np.ndarray]) -> list[tuple]:
        """The fields' arrays as record-path accumulators: immutable tuples of Python values."""
        return list(zip(*(arrays[name].tolist() for name, _ in self._fields)))

    def _where(self, method: str) -> str:
        return f"VectorAggregate {type(self).__qualname__}.{method}"


def _type_name(dtype: np.dtype) -> str:
    return next(name for name, t in FIELD_TYPES.items() if t == dtype)


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 120 else text[:120] + '...'}"


def _array(value: Any, n: int, fn: VectorAggregate, method: str, name: str) -> np.ndarray:
    """``value`` as a 1-d array of ``n`` values, or an error naming the method and field."""
    array = np.asarray(value)
    if array.ndim != 1 or len(array) != n:
        got = "a scalar" if array.ndim == 0 else f"shape {array.shape}"
        raise TypeError(f"{fn._where(method)}: field {name!r} is {got}; expected one value per "
                        f"{'run' if method == 'accumulate_runs' else 'group' if method == 'merge_runs' else 'accumulator'} "
                        f"({n})")
    return array


def _gathered(column: Sequence[Any], order: np.ndarray, position: int, fn: VectorAggregate) -> np.ndarray:
    """Rows ``order`` of a column of the epoch (Arrow, numpy or Python values) as a fresh numpy array."""
    array = arrow_array(column)
    if array is None:
        if isinstance(column, np.ndarray) and column.dtype != object:
            return _typed(column[order], position, fn)
        return _column([column[r] for r in order.tolist()], position, fn)
    t = array.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)) or (
            array.null_count and not array.is_valid().to_numpy(zero_copy_only=False)[order].all()):
        return _column(array.take(pa.array(order)).to_pylist(), position, fn)
    if array.null_count:
        array = array.fill_null(False if pa.types.is_boolean(t) else 0)  # only rows not taken were null
    if pa.types.is_integer(t):
        try:
            array = array.cast(pa.int64())
        except pa.ArrowInvalid:
            raise _too_wide(position, fn) from None
    elif pa.types.is_floating(t):
        array = array.cast(pa.float64())
    return array.to_numpy(zero_copy_only=False)[order]


def _column(values: list, position: int, fn: VectorAggregate) -> np.ndarray:
    """Python values of one column as a numpy array (see ``VectorAggregate``); a null is refused."""
    if any(v is None for v in values):
        row = next(i for i, v in enumerate(values) if v is None)
        raise ValueError(f"{fn._where('accumulate_runs')}: column {position} of the row holds a null (None, in "
                         f"row {row} of those aggregated): a VectorAggregate takes columns without nulls; fill "
                         f"or drop them before the operator (for example with coalesce in Spark)")
    kinds = set(map(type, values))
    if kinds == {bool}:
        return np.array(values, bool)
    if kinds <= {int, bool}:
        try:
            return np.array(values, np.int64)
        except OverflowError:
            raise _too_wide(position, fn) from None
    if kinds <= {int, float, bool}:
        return np.array(values, np.float64)
    array = np.asarray(values) if kinds and all(issubclass(k, np.generic) for k in kinds) else None
    if array is not None and array.ndim == 1:
        return _typed(array, position, fn)
    return np.fromiter(values, dtype=object, count=len(values))


def _typed(array: np.ndarray, position: int, fn: VectorAggregate) -> np.ndarray:
    """A numpy column with its ints as int64 and floats as float64, as an Arrow or Python column becomes."""
    kind = array.dtype.kind
    if kind in "iu" and array.dtype != np.int64:
        if kind == "u" and len(array) and int(array.max()) > np.iinfo(np.int64).max:
            raise _too_wide(position, fn)
        return array.astype(np.int64)
    if kind == "f" and array.dtype != np.float64:
        return array.astype(np.float64)
    return array


def _too_wide(position: int, fn: VectorAggregate) -> ValueError:
    return ValueError(f"{fn._where('accumulate_runs')}: column {position} of the row holds an integer beyond int64, "
                      f"which numpy cannot hold as int64: cast the column (to double or string) before the operator")
