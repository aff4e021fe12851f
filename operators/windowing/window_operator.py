"""WindowOperator(...): Flink's window operator on the statekit state layer, made as the one of its three
shapes that fits what it is given: columnar (``operators.windowing.columnar_window``: the assigner's engine, for the
default event-time trigger, no evictor and an incremental function), evicting (``operators.windowing.evicting_window``)
or record by record (``operators.windowing.record_window``). All three describe themselves alike, so a checkpoint
restores into whichever ``WindowOperator(...)`` makes from the same arguments.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from statekit import AggregateFunction, PackedAggregate

from ..aggregates.packed_records import PackedRecords
from ..engines.session_table import SessionTable
from ..engines.window_engine import STATE_LAYOUTS
from ..functions import ProcessWindowFunction
from .assigners import WindowAssigner
from .batch_window import WindowBatchFunction, result_names_of
from .columnar_window import ColumnarWindowOperator
from .evicting_window import EvictingWindowOperator
from .evictors import Evictor
from .internal_functions import internal_function
from .record_window import RecordWindowOperator
from .triggers import EventTimeTrigger, Trigger
from .window_base import BaseWindowOperator


def WindowOperator(assigner: WindowAssigner, function: Any, window_function: ProcessWindowFunction | None = None,  # noqa: N802 (the operator's public name)
                   trigger: Trigger | None = None, evictor: Evictor | None = None,
                   allowed_lateness: int | timedelta | str = 0, late_output_tag: str | None = "late",
                   invalid_output_tag: str | None = None, columnar: bool = True,
                   state_layout: str = "cells") -> BaseWindowOperator:
    """Windows a keyed stream: assigner + trigger (+ evictor) + function, with allowed lateness and a
    side output for late elements (see ``BaseWindowOperator``).

    Windows whose assigner declares an engine (event-time sessions, tumbling and sliding windows) with the
    default trigger, no evictor and an incremental function run columnar, on one stored value per key;
    ``columnar=False`` keeps them on the record path, which gives the same results (for comparisons and
    benchmarks). ``state_layout="table"`` stores event-time sessions of a PackedAggregate (such as
    RowAggregate) as one columnar table of all keys; another AggregateFunction whose accumulator is a
    flat tuple or list of ints, floats and bools is packed for it (``PackedRecords``)."""
    if not isinstance(assigner, WindowAssigner):
        raise TypeError(f"assigner must be a WindowAssigner, got {type(assigner).__name__}")
    if state_layout not in STATE_LAYOUTS:
        raise ValueError(f"state_layout must be one of {STATE_LAYOUTS}, got {state_layout!r}")
    if state_layout == "table" and isinstance(function, AggregateFunction) and not isinstance(function, PackedAggregate):
        function = PackedRecords(function)
    trigger = trigger if trigger is not None else assigner.get_default_trigger()
    evictor = evictor if evictor is not None else assigner.get_default_evictor()
    args = (assigner, function, window_function, trigger, evictor, allowed_lateness, late_output_tag, invalid_output_tag)
    spec = (assigner.columnar_engine(state_layout) if columnar and type(trigger) is EventTimeTrigger and evictor is None
            and not internal_function(function, window_function).keeps_elements else None)
    if spec is not None:
        operator: BaseWindowOperator = ColumnarWindowOperator(spec, *args)
    else:
        operator = EvictingWindowOperator(*args) if evictor is not None else RecordWindowOperator(*args)
    if state_layout == "table" and (spec is None or not isinstance(function, PackedAggregate)):
        raise ValueError("state_layout='table' takes event-time session windows with the default trigger, "
                         "no evictor, columnar=True and an AggregateFunction (a PackedAggregate such as RowAggregate, or "
                         "one whose accumulator is a flat tuple or list of numbers)")
    if isinstance(window_function, WindowBatchFunction):  # its batches' result fields go by the aggregate's names
        window_function.name_results(result_names_of(function))
    return operator


def state_layout_of(description: dict[str, Any] | None) -> str | None:
    """The one of STATE_LAYOUTS a WindowOperator described by ``description`` (its ``describe()``, as a
    checkpoint records it) stores its windows in; None without a description."""
    if not isinstance(description, dict):
        return None
    return "table" if description.get("state", {}).get("layout") == SessionTable.LAYOUT else "cells"
