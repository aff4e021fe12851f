"""Window functions wrapped once per kind (Flink's ``InternalWindowFunction``): a window operator holds one
``InternalWindowFunction`` and calls it to grow, merge and evaluate a window's contents and to hand the
results out, whatever the user gave: a ProcessWindowFunction over the window's elements, or a reduce
callable or an AggregateFunction (plain, columnar or packed), each with or without a window function (one
``process`` call per window, a ``WindowRowsFunction`` or a ``WindowColumnsFunction``).
``internal_function`` picks the wrappers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, Protocol, Sequence

import numpy as np

from statekit import AggregateFunction, ColumnarAggregate, PackedAggregate
from statekit.descriptors import qualified_name

from ..columns import RowView
from ..engines.window_engine import Fold, Incremental, PackedFold
from ..functions import ProcessWindowFunction, WindowColumnsFunction, WindowRowsFunction, window_columns, window_rows
from ..output import Output
from ..windows import TimeWindow
from .context import KeyedStateStore

PROCESS, AGGREGATE, REDUCE = "process", "aggregate", "reduce"
"""The kinds of window function, as a checkpoint's description records them."""
ABSENT: Any = object()
"""A window without contents yet (an accumulator may well be None)."""


class Firing(Protocol):
    """What a wrapper needs of its operator to run a ProcessWindowFunction on a fired window."""

    def enter_key(self, key: Any) -> None:
        """``key``'s windows are evaluated next (made the current key if the function takes keyed state)."""

    def process_window(self, fn: ProcessWindowFunction, window: Any, elements: list, timestamp: int) -> None:
        """``fn.process`` of the current key's ``window`` over ``elements``, its outputs stamped ``timestamp``."""


class InternalWindowFunction(ABC):
    """The user's window function(s) of one kind as a window operator calls them. ``open`` binds the
    operator (``Firing``) and its output; results of a window are stamped with its ``max_timestamp()``."""

    kind: ClassVar[str]
    """PROCESS, AGGREGATE or REDUCE (what ``describe()`` records)."""
    keeps_elements: ClassVar[bool] = False
    """A window's contents are its elements (a list state) rather than one accumulator."""

    def __init__(self, function: Any, process_function: ProcessWindowFunction | None) -> None:
        self.function = function
        self._process_fn = process_function
        self._firing: Firing | None = None
        self._output: Output | None = None

    # -- lifecycle and description --------------------------------------------------------------
    def open(self, store: KeyedStateStore, firing: Firing, output: Output) -> None:
        """Open the user's ProcessWindowFunction (if any) on ``store``; results go through ``firing`` and ``output``."""
        self._firing, self._output = firing, output
        if self._process_fn is not None:
            self._process_fn.open(store)

    def close(self) -> None:
        if self._process_fn is not None:
            self._process_fn.close()

    @property
    def clears_window_state(self) -> bool:
        """Whether the ProcessWindowFunction keeps per-window state, which ``clear`` drops."""
        fn = self._process_fn
        return fn is not None and type(fn).clear is not ProcessWindowFunction.clear

    def clear(self, context: Any) -> None:
        """The window ``context.window`` is cleaned up: its ProcessWindowFunction's per-window state goes."""
        self._process_fn.clear(context)

    def layout(self) -> Any:
        """What a window's contents are, as a checkpoint's description records it."""
        return qualified_name(self.function)

    @property
    def accumulating(self) -> AggregateFunction | None:
        """The AggregateFunction whose accumulators the operator stores (and versions), if any."""
        return None

    @property
    def packed(self) -> PackedAggregate | None:
        """The function when its accumulators pack into int64 words (engines then store them packed)."""
        return None

    # -- contents ------------------------------------------------------------------------------
    @abstractmethod
    def add(self, value: Any, accumulator: Any) -> Any:
        """``value`` added to a window's ``accumulator`` (ABSENT: the window has none yet)."""

    @abstractmethod
    def merge(self, a: Any, b: Any) -> Any:
        """Two windows' accumulators as one (``b``'s values after ``a``'s)."""

    @abstractmethod
    def incremental(self) -> Incremental:
        """``add`` as the engines apply it: one record, or a run of them (``Incremental``)."""

    def folds(self, rows: RowView, columns: Sequence[Sequence[Any]]) -> tuple[Fold | None, PackedFold | None]:
        """How an engine accumulates whole runs of an epoch's ``columns`` in one call: into accumulators,
        and into packed ones (None: record by record)."""
        return None, None

    # -- results -------------------------------------------------------------------------------
    @abstractmethod
    def emit(self, window: Any, contents: Any, timestamp: int) -> None:
        """A fired window's results out: ``contents`` is its accumulator, or its elements."""

    @abstractmethod
    def emit_elements(self, window: Any, elements: list, timestamp: int) -> None:
        """A fired window's results out, evaluated over its ``elements`` (what an evictor left)."""

    @abstractmethod
    def fire(self, keys: list, starts: list, ends: list, accumulators: list) -> None:
        """The results of many windows out, in this order: window i is ``[starts[i], ends[i])`` of ``keys[i]``."""

    def fire_packed(self, keys: list, starts: np.ndarray, ends: np.ndarray, words: np.ndarray) -> None:
        """``fire`` of windows whose accumulators are packed rows (only a packed function's windows are)."""
        raise TypeError(f"a {self.kind} window function's accumulators are not packed: "
                        f"{qualified_name(self.function)} does not pack them")


class InternalProcessWindowFunction(InternalWindowFunction):
    """A ProcessWindowFunction evaluated over a window's elements (Flink's ``InternalIterableProcessWindowFunction``)."""

    kind = PROCESS
    keeps_elements = True

    def __init__(self, function: ProcessWindowFunction) -> None:
        super().__init__(function, function)

    def add(self, value: Any, accumulator: Any) -> Any:
        raise self._no_accumulator()

    def merge(self, a: Any, b: Any) -> Any:
        raise self._no_accumulator()

    def incremental(self) -> Incremental:
        raise self._no_accumulator()

    def fire(self, keys: list, starts: list, ends: list, accumulators: list) -> None:
        raise self._no_accumulator()

    def _no_accumulator(self) -> TypeError:
        return TypeError(f"{qualified_name(self.function)} is a ProcessWindowFunction: its windows keep their "
                         f"elements, not an accumulator (only an AggregateFunction or a reduce callable adds up)")

    def emit(self, window: Any, contents: list, timestamp: int) -> None:
        self._firing.process_window(self.function, window, contents, timestamp)

    def emit_elements(self, window: Any, elements: list, timestamp: int) -> None:
        self._firing.process_window(self.function, window, elements, timestamp)


class Results(ABC):
    """How windows' results leave the operator: as they are, or through the window function given."""

    def __init__(self, window_function: ProcessWindowFunction | None) -> None:
        self.window_function = window_function

    @abstractmethod
    def one(self, firing: Firing, output: Output, window: Any, result: Any, timestamp: int) -> None:
        """One window's result out."""

    @abstractmethod
    def many(self, firing: Firing, output: Output, keys: list, starts: list, ends: list, results: list) -> None:
        """Many windows' results out, in order (window i: ``[starts[i], ends[i])`` of ``keys[i]``)."""

    def packed_columns(self, function: PackedAggregate, keys: list, starts: np.ndarray, ends: np.ndarray,
                       words: np.ndarray) -> list[Sequence[Any]] | None:
        """The output columns of windows whose accumulators are packed ``words``, made without a Python object
        per window; None when they are made from the unpacked accumulators instead (the default)."""
        return None


class PassThrough(Results):
    """No window function: each result is the output (Flink's ``PassThroughWindowFunction``)."""

    def one(self, firing: Firing, output: Output, window: Any, result: Any, timestamp: int) -> None:
        output.collect(result, timestamp)

    def many(self, firing: Firing, output: Output, keys: list, starts: list, ends: list, results: list) -> None:
        output.collect_many(results, [end - 1 for end in ends])

    def packed_columns(self, function: PackedAggregate, keys: list, starts: np.ndarray, ends: np.ndarray,
                       words: np.ndarray) -> list[Sequence[Any]] | None:
        return function.result_columns_packed(words) or None


class SingleValueProcess(Results):
    """A ProcessWindowFunction called per window on its one result (Flink's ``InternalSingleValueProcessWindowFunction``)."""

    def one(self, firing: Firing, output: Output, window: Any, result: Any, timestamp: int) -> None:
        firing.process_window(self.window_function, window, [result], timestamp)

    def many(self, firing: Firing, output: Output, keys: list, starts: list, ends: list, results: list) -> None:
        process, enter = firing.process_window, firing.enter_key
        for key, start, end, result in zip(keys, starts, ends, results):
            enter(key)
            process(self.window_function, TimeWindow(start, end), [result], end - 1)


class RowsProcess(SingleValueProcess):
    """A WindowRowsFunction: many windows' outputs in one ``rows`` call."""

    def many(self, firing: Firing, output: Output, keys: list, starts: list, ends: list, results: list) -> None:
        output.collect_many(window_rows(self.window_function, keys, starts, ends, results), [end - 1 for end in ends])


class ColumnsProcess(RowsProcess):
    """A WindowColumnsFunction: outputs made as columns, from result fields given as columns."""

    def packed_columns(self, function: PackedAggregate, keys: list, starts: np.ndarray, ends: np.ndarray,
                       words: np.ndarray) -> list[Sequence[Any]] | None:
        fields = function.result_columns_packed(words)
        return window_columns(self.window_function, keys, starts, ends, fields) if fields else None


class InternalIncrementalFunction(InternalWindowFunction):
    """A function that adds each element into its window's one accumulator, the window's result handed to
    ``results`` (the window function, or none)."""

    def __init__(self, function: Any, results: Results) -> None:
        super().__init__(function, results.window_function)
        self._results = results

    @abstractmethod
    def result(self, accumulator: Any) -> Any:
        """A window's result from its accumulator."""

    @abstractmethod
    def evaluate(self, elements: list) -> Any:
        """The result of a window holding ``elements`` (in order; possibly none)."""

    def emit(self, window: Any, contents: Any, timestamp: int) -> None:
        self._results.one(self._firing, self._output, window, self.result(contents), timestamp)

    def emit_elements(self, window: Any, elements: list, timestamp: int) -> None:
        self._results.one(self._firing, self._output, window, self.evaluate(elements), timestamp)

    def fire(self, keys: list, starts: list, ends: list, accumulators: list) -> None:
        self._results.many(self._firing, self._output, keys, starts, ends, list(map(self.result, accumulators)))


class InternalReduceFunction(InternalIncrementalFunction):
    """A reduce callable ``(a, b) -> c``: a window's first element is its accumulator."""

    kind = REDUCE

    def add(self, value: Any, accumulator: Any) -> Any:
        return value if accumulator is ABSENT else self.function(accumulator, value)

    def merge(self, a: Any, b: Any) -> Any:
        return self.function(a, b)

    def incremental(self) -> Incremental:
        return ReduceAdd(self.function)

    def result(self, accumulator: Any) -> Any:
        return accumulator

    def evaluate(self, elements: list) -> Any:
        add, result = self.incremental(), None
        for value in elements:
            result = add(value, result)
        return result


class InternalAggregateFunction(InternalIncrementalFunction):
    """An AggregateFunction (anything with ``create_accumulator``, ``add``, ``merge`` and ``get_result``)."""

    kind = AGGREGATE

    def layout(self) -> Any:
        fn = self.accumulating
        return qualified_name(self.function) if fn is None else fn.state_layout()

    @property
    def accumulating(self) -> AggregateFunction | None:
        return self.function if isinstance(self.function, AggregateFunction) else None

    def add(self, value: Any, accumulator: Any) -> Any:
        fn = self.function
        return fn.add(value, fn.create_accumulator() if accumulator is ABSENT else accumulator)

    def merge(self, a: Any, b: Any) -> Any:
        return self.function.merge(a, b)

    def incremental(self) -> Incremental:
        return AggregateAdd(self.function.create_accumulator, self.function.add)

    def result(self, accumulator: Any) -> Any:
        return self.function.get_result(accumulator)

    def evaluate(self, elements: list) -> Any:
        return self.function.get_result(self.incremental().fold(None, elements))


class InternalColumnarAggregate(InternalAggregateFunction):
    """A ColumnarAggregate: an engine accumulates whole runs of an epoch's rows with its ``accumulate``."""

    def folds(self, rows: RowView, columns: Sequence[Sequence[Any]]) -> tuple[Fold | None, PackedFold | None]:
        fn = self.function
        return (lambda order, starts: fn.accumulate(rows.python(), order, starts)), None


class InternalPackedAggregate(InternalColumnarAggregate):
    """A PackedAggregate: accumulators packed into int64 words, runs accumulated straight into them, and
    results made as columns from them when the window function (if any) takes columns."""

    @property
    def packed(self) -> PackedAggregate:
        return self.function

    def folds(self, rows: RowView, columns: Sequence[Sequence[Any]]) -> tuple[Fold | None, PackedFold | None]:
        fn = self.function
        fold, _ = super().folds(rows, columns)
        return fold, (lambda order, starts: fn.accumulate_packed(columns, order, starts))

    def fire_packed(self, keys: list, starts: np.ndarray, ends: np.ndarray, words: np.ndarray) -> None:
        columns = self._results.packed_columns(self.function, keys, starts, ends, words)
        if columns is None:
            self.fire(keys, starts.tolist(), ends.tolist(), self.function.unpack(words))
            return
        self._output.collect_columns(columns, ends - 1)  # each window's max_timestamp()


class AggregateAdd(Incremental):
    """An AggregateFunction's ``add``, a new window's accumulator made by ``create_accumulator``."""

    def __init__(self, create: Callable[[], Any], add: Callable[[Any, Any], Any]) -> None:
        self._create, self._add = create, add

    def __call__(self, value: Any, accumulator: Any) -> Any:
        return self._add(value, self._create() if accumulator is None else accumulator)

    def fold(self, accumulator: Any, values: list) -> Any:
        add = self._add
        acc = self._create() if accumulator is None else accumulator
        for value in values:
            acc = add(value, acc)
        return acc


class ReduceAdd(Incremental):
    """A reduce function's step ``reduce(accumulator, value)``, a new window's first value its accumulator."""

    def __init__(self, reduce: Callable[[Any, Any], Any]) -> None:
        self._reduce = reduce

    def __call__(self, value: Any, accumulator: Any) -> Any:
        return value if accumulator is None else self._reduce(accumulator, value)

    def fold(self, accumulator: Any, values: list) -> Any:
        reduce = self._reduce
        it = iter(values)
        acc = next(it) if accumulator is None else accumulator
        for value in it:
            acc = reduce(acc, value)
        return acc


def internal_function(function: Any, window_function: ProcessWindowFunction | None) -> InternalWindowFunction:
    """The wrapper of ``function`` (and ``window_function``, applied to an incremental function's results);
    TypeError naming what is accepted for anything else."""
    process = isinstance(function, ProcessWindowFunction)
    aggregate = all(callable(getattr(function, m, None)) for m in ("create_accumulator", "add", "merge", "get_result"))
    if not (process or aggregate or callable(function)):
        raise TypeError(f"window function must be an AggregateFunction, a reduce callable (a, b) -> c or a "
                        f"ProcessWindowFunction, got {type(function).__name__}")
    if window_function is not None and (process or not isinstance(window_function, ProcessWindowFunction)):
        raise TypeError("window_function must be a ProcessWindowFunction applied to an AggregateFunction's "
                        "or reduce function's result")
    if process:
        return InternalProcessWindowFunction(function)
    results = (PassThrough(None) if window_function is None
               else ColumnsProcess(window_function) if isinstance(window_function, WindowColumnsFunction)
               else RowsProcess(window_function) if isinstance(window_function, WindowRowsFunction)
               else SingleValueProcess(window_function))
    if not aggregate:
        return InternalReduceFunction(function, results)
    kind = (InternalPackedAggregate if isinstance(function, PackedAggregate)
            else InternalColumnarAggregate if isinstance(function, ColumnarAggregate) else InternalAggregateFunction)
    return kind(function, results)
