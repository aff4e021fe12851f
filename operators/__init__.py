"""Window and keyed-process operators written once against statekit (Flink's semantics).

Operators never import a backend or Spark: a runtime (the test harness, the Spark glue) hands
them a backend and an ``Output`` and drives ``process_batch`` / ``process_watermark`` per epoch.
"""

from .aggregates.row_aggregate import RowAggregate
from .aggregates.vector_aggregate import VectorAggregate
from .engines.window_engine import STATE_LAYOUTS
from .functions import KeyedProcessFunction, ProcessWindowFunction, WindowColumnsFunction, WindowRowsFunction
from .gc_pause import gc_paused
from .invalid import MAX_EVENT_TIMESTAMP, MIN_EVENT_TIMESTAMP, InvalidRecord, InvalidRecordError
from .operator import KeyedOperator
from .output import Columns, Output
from .process.keyed_process import KeyedProcessOperator
from .windowing.assigners import (DynamicEventTimeSessionWindows, DynamicProcessingTimeSessionWindows,
                                  EventTimeSessionWindows, GlobalWindows, MergingWindowAssigner,
                                  ProcessingTimeSessionWindows, SlidingEventTimeWindows, SlidingProcessingTimeWindows,
                                  TumblingEventTimeWindows, TumblingProcessingTimeWindows, WindowAssigner, count_window)
from .windowing.batch_window import WindowBatchFunction
from .windowing.evictors import CountEvictor, Evictor, TimeEvictor, TimestampedValue
from .windowing.merging_window_set import MergingWindowSet
from .windowing.triggers import (ContinuousEventTimeTrigger, ContinuousProcessingTimeTrigger, CountTrigger,
                                 EventTimeTrigger, NeverTrigger, ProcessingTimeTrigger, PurgingTrigger, Trigger,
                                 TriggerResult)
from .windowing.window_operator import WindowOperator, state_layout_of
from .windows import GLOBAL_WINDOW, GlobalWindow, TimeWindow

__all__ = [
    "Columns", "VectorAggregate", "WindowBatchFunction",
    "ContinuousEventTimeTrigger", "ContinuousProcessingTimeTrigger", "CountEvictor", "CountTrigger",
    "DynamicEventTimeSessionWindows", "DynamicProcessingTimeSessionWindows", "EventTimeSessionWindows",
    "EventTimeTrigger", "Evictor", "GLOBAL_WINDOW", "GlobalWindow", "GlobalWindows", "InvalidRecord", "InvalidRecordError", "KeyedProcessFunction",
    "KeyedOperator", "KeyedProcessOperator", "MAX_EVENT_TIMESTAMP", "MIN_EVENT_TIMESTAMP", "MergingWindowAssigner", "MergingWindowSet", "NeverTrigger", "Output",
    "ProcessWindowFunction", "ProcessingTimeSessionWindows", "ProcessingTimeTrigger", "PurgingTrigger",
    "SlidingEventTimeWindows", "SlidingProcessingTimeWindows", "TimeEvictor", "TimeWindow", "TimestampedValue",
    "Trigger", "TriggerResult", "TumblingEventTimeWindows", "TumblingProcessingTimeWindows", "WindowAssigner", "WindowColumnsFunction", "WindowRowsFunction",
    "RowAggregate", "STATE_LAYOUTS", "WindowOperator", "count_window", "gc_paused", "state_layout_of",
]
