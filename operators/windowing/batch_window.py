"""WindowBatchFunction: a window function that gets the windows a watermark fires as one Arrow record
batch (columns ``key``, ``start``, ``end`` and the aggregate's result fields) and returns the outputs as
columns, so a user's logic over fired windows is Arrow compute or numpy, not a call per window."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ..aggregates.row_aggregate import RowAggregate
from ..aggregates.vector_aggregate import VectorAggregate
from ..functions import WindowColumnsFunction

WINDOW_COLUMNS = ("key", "start", "end")
"""The batch's first columns: each window's key and bounds ``[start, end)``."""


class WindowBatchFunction(WindowColumnsFunction):
    """Fired windows as a ``pa.RecordBatch`` of ``key``, ``start``, ``end`` (int64) and the result fields,
    to ``batch``, which returns the outputs as columns. Result fields go by the aggregate's names
    (``result_names_of``), which ``WindowOperator(...)`` hands over (``name_results``), or by
    ``result_names`` given here instead; ``result_0``, ``result_1``, ... when there are none.
    Late-but-allowed re-fires come through it too, in batches of one."""

    result_names: list[str] | None = None
    _given = False  # (class defaults: a subclass's own __init__ need not call this one's)

    def __init__(self, result_names: Sequence[str] | None = None) -> None:
        given = result_names is not None
        self.result_names = self._checked(result_names, "given to it", "give other names") if given else None
        self._given = given

    def name_results(self, names: Sequence[str] | None) -> None:
        """The operator's aggregate names its result fields ``names`` (None: it does not name them); names
        given to the constructor stay. One instance serves aggregates of the same names only."""
        if self._given or names is None:
            return
        names = self._checked(names, "of its aggregate",
                              "rename the aggregate's results, or give this function names of its own")
        if self.result_names is not None and self.result_names != names:
            raise ValueError(f"{type(self).__qualname__}: this instance already names the result fields "
                             f"{self.result_names} (another operator's aggregate), this operator's aggregate names "
                             f"them {names}: give each operator its own {type(self).__qualname__}")
        self.result_names = names

    def _checked(self, names: Sequence[str], source: str, way_out: str) -> list[str]:
        """``names`` as a list, if they are distinct strings none of which is a window column."""
        names = list(names)
        distinct_strings = all(isinstance(n, str) for n in names) and len(set(names)) == len(names)
        if not distinct_strings or set(names) & set(WINDOW_COLUMNS):
            raise ValueError(f"{type(self).__qualname__}: result names {names!r} ({source}) must be distinct strings, "
                             f"none of {list(WINDOW_COLUMNS)}: {way_out}")
        return names

    @abstractmethod
    def batch(self, windows: pa.RecordBatch) -> pa.RecordBatch | pa.Table | Mapping[str, Any]:
        """The outputs of the fired ``windows``, one per window in order: a record batch or table whose
        columns are the output fields in order, or a dict of columns (Arrow, numpy or lists) by field."""

    def columns(self, keys: list, starts: Any, ends: Any, results: list[Sequence[Any]]) -> list[Sequence[Any]]:
        names = self.result_names if self.result_names is not None else [f"result_{i}" for i in range(len(results))]
        if len(names) != len(results):
            raise TypeError(f"{type(self).__qualname__}: the aggregate gives {len(results)} result fields, "
                            f"named {names} ({len(names)}): give the aggregate's result names, or none (the operator "
                            f"hands them over)")
        try:
            key_column = pa.array(keys)
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise TypeError(f"{type(self).__qualname__}: the windows' keys ({type(keys[0]).__name__}, ...) do not make "
                            f"an Arrow column ({e}): a WindowBatchFunction takes str, int or bytes keys") from None
        arrays = [key_column, pa.array(np.asarray(starts, np.int64)), pa.array(np.asarray(ends, np.int64)),
                  *(pa.array(r) for r in results)]
        out = self.batch(pa.RecordBatch.from_arrays(arrays, names=[*WINDOW_COLUMNS, *names]))
        if isinstance(out, (pa.RecordBatch, pa.Table)):
            columns: list = list(out.columns)
        elif isinstance(out, Mapping):
            columns = list(out.values())
        else:
            raise TypeError(f"{type(self).__qualname__}.batch returned a {type(out).__name__}: it returns a "
                            f"pa.RecordBatch, a pa.Table or a dict of columns")
        return [_output_column(c) for c in columns]


def result_names_of(function: Any) -> list[str] | None:
    """The names an aggregate gives its result fields: a VectorAggregate's ``result_names()``, a
    RowAggregate's ``names``; None for any other function (its fields go by position)."""
    if isinstance(function, VectorAggregate):
        return function.result_names()
    if isinstance(function, RowAggregate):
        return function.names
    return None


def _output_column(column: Any) -> Sequence[Any]:
    """An output column as ``Output.collect_columns`` keeps it: numbers and booleans without nulls as
    numpy (no copy from Arrow), any other Arrow column as Python values."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not isinstance(column, pa.Array):
        return column
    t = column.type
    if not column.null_count and (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
        return column.to_numpy(zero_copy_only=False)
    return column.to_pylist()
