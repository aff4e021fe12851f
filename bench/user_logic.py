"""A user's own session logic, as a user would write it for ``run_keyed``: the "plain" variant of
``statekit bench spark`` (a Python ``AggregateFunction`` and a ``ProcessWindowFunction``) and the
"vectorized" one (the same sums and counts as a numpy ``VectorAggregate`` and an Arrow
``WindowBatchFunction``). The executors import this module by name, as they would a user's."""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import numpy as np

from statekit import AggregateFunction
from statekit.operators import (EventTimeSessionWindows, KeyedOperator, ProcessWindowFunction, VectorAggregate,
                                WindowBatchFunction, WindowOperator)


class SumAndCount(AggregateFunction):
    """The sum of a row's ``value`` and the number of rows (each row is the tuple ``(value,)``)."""

    def create_accumulator(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, row: tuple[int], accumulator: tuple[int, int]) -> tuple[int, int]:
        return (accumulator[0] + row[0], accumulator[1] + 1)

    def merge(self, acc_a: tuple[int, int], acc_b: tuple[int, int]) -> tuple[int, int]:
        return (acc_a[0] + acc_b[0], acc_a[1] + acc_b[1])

    def get_result(self, accumulator: tuple[int, int]) -> tuple[int, int]:
        return accumulator


class SessionRow(ProcessWindowFunction):
    """One ``(user_id, window_start, window_end, sum_value, count)`` per fired session."""

    def process(self, key: Any, context: Any, elements: Iterable[tuple[int, int]]) -> Iterator[tuple]:
        for total, count in elements:
            yield (key, context.window.start, context.window.end, total, count)


def session_operator(gap_ms: int, state_layout: str = "table") -> KeyedOperator:
    """The operator ``run_keyed`` builds in each task (pass ``functools.partial(session_operator, gap)``): by
    default the sessions of all keys kept as one columnar table, which takes an accumulator of a flat tuple of
    numbers; ``state_layout="cells"`` is ``WindowOperator``'s own default (a stored cell per key)."""
    return WindowOperator(EventTimeSessionWindows.with_gap(gap_ms), function=SumAndCount(),
                          window_function=SessionRow(), state_layout=state_layout)


class VectorSumAndCount(VectorAggregate):
    """``SumAndCount`` over whole runs of rows with numpy."""

    def accumulator_fields(self) -> dict[str, str]:
        return {"sum": "int64", "n": "int64"}

    def create(self) -> dict[str, int]:
        return {"sum": 0, "n": 0}

    def accumulate_runs(self, columns: list[np.ndarray], starts: np.ndarray) -> dict[str, np.ndarray]:
        (value,) = columns
        return {"sum": np.add.reduceat(value, starts), "n": np.diff(starts, append=len(value))}

    def merge_runs(self, accumulators: dict[str, np.ndarray], starts: np.ndarray) -> dict[str, np.ndarray]:
        return {name: np.add.reduceat(column, starts) for name, column in accumulators.items()}

    def results(self, accumulators: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"sum_value": accumulators["sum"], "count": accumulators["n"]}


class SessionColumns(WindowBatchFunction):
    """``SessionRow``'s outputs for a whole batch of fired sessions."""

    def batch(self, windows: Any) -> dict[str, Any]:
        return {"user_id": windows["key"], "window_start": windows["start"], "window_end": windows["end"],
                "sum_value": windows["sum_value"], "count": windows["count"]}


def vectorized_session_operator(gap_ms: int) -> KeyedOperator:
    """The vectorized variant's operator: its sessions of all keys kept as one columnar table."""
    return WindowOperator(EventTimeSessionWindows.with_gap(gap_ms), function=VectorSumAndCount(),
                          window_function=SessionColumns(), state_layout="table")
