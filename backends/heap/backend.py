"""The heap backend: all state in Python dicts, for state that fits in the executor's memory."""

from __future__ import annotations

from statekit import KeyedStateBackend, OptionSpec, StateDescriptor, StateDescriptorError

from .snapshot import HeapSnapshots
from .state import HeapState
from .states import KINDS
from .timers import HeapTimerQueue


class HeapKeyedStateBackend(HeapSnapshots, KeyedStateBackend):
    """Dict-backed keyed state; tracks changed cells per state for incremental snapshots."""

    name = "heap"
    OPTIONS = (
        OptionSpec("heap.validate_writes", "bool", True,
                   "check on every write that values serialize (off: errors surface at snapshot time)"),
    )

    def __init__(self, config, key_groups, time_provider) -> None:
        super().__init__(config, key_groups, time_provider)
        self._validate = bool(config.get("heap.validate_writes"))

    def _create_state(self, descriptor: StateDescriptor) -> HeapState:
        cls = KINDS.get(descriptor.kind)
        if cls is None:
            raise StateDescriptorError(f"state '{descriptor.name}': unknown state kind {descriptor.kind!r}")
        return cls(self, descriptor, self._validate)

    def _create_timer_queue(self, service: str, domain: str) -> HeapTimerQueue:
        return HeapTimerQueue()

    def close(self) -> None:
        for st in self._registry.states.values():
            st._table.clear()
            st._dirty.clear()
        for svc in self._timers.services.values():
            for _, queue in svc.queues():
                queue.clear()
        self._closed = True
