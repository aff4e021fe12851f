"""KeyedProcessOperator: runs a ``KeyedProcessFunction`` with keyed state and timers (the escape hatch)."""

from __future__ import annotations

from typing import Any, Iterable

from statekit import VOID_NAMESPACE, KeyedStateBackend, State, StateDescriptor, Timer
from statekit.descriptors import qualified_name
from statekit.logical_snapshot import LogicalSnapshot

from ..batching import group_by_key
from ..functions import KeyedProcessFunction
from ..operator import KeyedOperator
from ..output import Output

TIMER_SERVICE = "user-timers"
EVENT_TIME = "event_time"
PROCESSING_TIME = "processing_time"


class TimerService:
    """Timers of the current key (in the void namespace) and the operator's clocks."""

    __slots__ = ("_svc",)

    def __init__(self, service) -> None:
        self._svc = service

    def current_watermark(self) -> int:
        return self._svc.current_watermark()

    def current_processing_time(self) -> int:
        return self._svc.current_processing_time()

    def register_event_time_timer(self, timestamp: int) -> None:
        self._svc.register_event_time_timer(VOID_NAMESPACE, timestamp)

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._svc.register_processing_time_timer(VOID_NAMESPACE, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._svc.delete_event_time_timer(VOID_NAMESPACE, timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._svc.delete_processing_time_timer(VOID_NAMESPACE, timestamp)


class ProcessContext:
    """``ctx`` of ``process_element`` and ``on_timer``: state, timers, key, timestamp, time domain."""

    __slots__ = ("_backend", "_timer_service", "_timestamp", "_domain")

    def __init__(self, backend: KeyedStateBackend, timer_service: TimerService) -> None:
        self._backend = backend
        self._timer_service = timer_service
        self._timestamp: int | None = None
        self._domain: str | None = None

    def get_state(self, descriptor: StateDescriptor) -> State:
        """Keyed state of the current key."""
        return self._backend.get_state(descriptor)

    get_list_state = get_map_state = get_reducing_state = get_aggregating_state = get_state

    def timer_service(self) -> TimerService:
        return self._timer_service

    def get_current_key(self) -> Any:
        return self._backend.get_current_key()

    def timestamp(self) -> int | None:
        """The element's timestamp, or the firing timer's."""
        return self._timestamp

    def time_domain(self) -> str | None:
        """In ``on_timer``: ``"event_time"`` or ``"processing_time"``."""
        return self._domain


class KeyedProcessOperator(KeyedOperator):
    """Calls ``process_element`` per element and ``on_timer`` per timer; outputs carry the element's
    timestamp or the event-time timer's (processing-time timer outputs have none, as in Flink)."""

    def __init__(self, function: KeyedProcessFunction) -> None:
        self.function = function
        self.metrics: dict[str, int] = {"records_in": 0, "timers_fired": 0}

    def describe(self) -> dict[str, Any]:
        return {"state": {"operator": "KeyedProcessOperator", "function": qualified_name(self.function)},
                "parameters": {}}

    def open(self, backend: KeyedStateBackend, output: Output) -> None:
        self._backend = backend
        self._output = output
        self._svc = backend.timer_service(TIMER_SERVICE, self)
        self._ctx = ProcessContext(backend, TimerService(self._svc))
        self.function.open(self._ctx)

    def restore_logical(self, snapshot: LogicalSnapshot) -> None:
        """Its backend's states and timers from a logical snapshot (``KeyedStateBackend.restore_logical``): a job
        started from state given as data (``statekit.spark.write_checkpoint``)."""
        self._backend.restore_logical(snapshot)

    def close(self) -> None:
        self.function.close()

    def process_element(self, key: Any, value: Any, timestamp: int | None = None) -> None:
        self._backend.set_current_key(key)
        self._process_key([(key, value, timestamp)])

    def process_batch(self, records: Iterable[tuple[Any, Any, int | None]]) -> None:
        """An epoch's records grouped per key (one key switch per key; order within a key kept)."""
        set_key = self._backend.set_current_key
        for items in group_by_key(records).values():
            set_key(items[0][0])
            self._process_key(items)

    def _process_key(self, items: list) -> None:
        self.metrics["records_in"] += len(items)
        ctx, fn, collect_all = self._ctx, self.function.process_element, self._output.collect_all
        ctx._domain = None
        for _, value, ts in items:
            ctx._timestamp = ts
            collect_all(fn(value, ctx), ts)

    def on_event_time(self, timer: Timer) -> None:
        self._on_timer(timer, EVENT_TIME, timer.timestamp)

    def on_processing_time(self, timer: Timer) -> None:
        self._on_timer(timer, PROCESSING_TIME, None)

    def _on_timer(self, timer: Timer, domain: str, out_ts: int | None) -> None:
        self.metrics["timers_fired"] += 1
        ctx = self._ctx
        ctx._timestamp = timer.timestamp
        ctx._domain = domain
        self._output.collect_all(self.function.on_timer(timer.timestamp, ctx), out_ts)
