"""The timer services of one keyed backend: made on first use over the backend's queues, counted, and
taken into and out of logical snapshots (Flink's ``InternalTimeServiceManager``)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .keygroups import key_groups_for_bytes
from .logical_snapshot import TimerSection
from .serialization import KEY_SERIALIZER, NamespaceBytes
from .timers import InternalTimerService, KeyScope, Timer, TimerQueue, TimerTarget, timer_sort_key, timer_sort_keys


class TimerServices:
    """The named timer services of a backend serving ``key_groups`` of ``max_parallelism``: ``create_queue(service,
    domain)`` makes a service's queues, ``check_open`` refuses a new service on a closed backend."""

    def __init__(self, scope: KeyScope, create_queue: Callable[[str, str], TimerQueue], check_open: Callable[[], None],
                 max_parallelism: int, key_groups: range) -> None:
        self._scope = scope
        self._create_queue = create_queue
        self._check_open = check_open
        self._max_parallelism = max_parallelism
        self._key_groups = key_groups
        self.services: dict[str, InternalTimerService] = {}
        """Each service by name (read it; ``service`` adds to it)."""

    def service(self, name: str, target: TimerTarget | None) -> InternalTimerService:
        """The named timer service (created on first use); ``target`` receives its timers."""
        svc = self.services.get(name)
        if svc is None:
            self._check_open()
            svc = InternalTimerService(name, self._scope, target, self._create_queue(name, "event"),
                                       self._create_queue(name, "processing"))
            self.services[name] = svc
        elif target is not None:
            svc.set_target(target)
        return svc

    def timer_count(self) -> int:
        """Registered timers of every service, both domains."""
        return sum(svc.num_event_time_timers() + svc.num_processing_time_timers() for svc in self.services.values())

    def clocks(self) -> dict[str, tuple[int, int]]:
        """Each service's watermark and processing time."""
        return {name: (svc.current_watermark(), svc.current_processing_time()) for name, svc in self.services.items()}

    def sections(self) -> dict[str, TimerSection]:
        """Each service's clocks and timers, for a logical snapshot."""
        return {name: TimerSection(svc.current_watermark(), svc.current_processing_time(),
                                   [list(t) for t in svc.event_time_timers()],
                                   [list(t) for t in svc.processing_time_timers()])
                for name, svc in self.services.items()}

    def restore(self, name: str, section: TimerSection) -> None:
        """Add a snapshot's timers of this backend's key groups to service ``name``, its clocks moved to the
        later of theirs and the section's."""
        svc = self.service(name, None)
        svc.restore_time(max(svc.current_watermark(), section.watermark),
                         max(svc.current_processing_time(), section.processing_time))
        kgs = self._key_groups
        for domain, queue in svc.queues():
            timers = section.event if domain == "event" else section.processing
            sort_keys, groups = self.sort_keys(timers)
            mine = np.flatnonzero((groups >= kgs.start) & (groups < kgs.stop)).tolist()
            if len(mine) < len(timers):
                sort_keys, timers = [sort_keys[i] for i in mine], [timers[i] for i in mine]
            queue.add_many(sort_keys, list(map(Timer._make, timers)))

    def sort_keys(self, timers: Sequence[Sequence[Any]]) -> tuple[list[bytes], np.ndarray]:
        """Sort keys and key groups of snapshotted timers ``[timestamp, key, namespace]``, in bulk (the
        keys serialized one by one, their groups hashed and the sort keys' prefixes built together)."""
        dumps = KEY_SERIALIZER.dumps
        kbs = [dumps(x[1]) for x in timers]
        groups = key_groups_for_bytes(kbs, self._max_parallelism)
        namespaces = NamespaceBytes("restored timers", limit=len(timers) + 1)
        try:
            nsbs = [namespaces(x[2]) for x in timers]
        except TypeError:  # an unhashable namespace: each serialized on its own
            nsbs, namespaces = [dumps(x[2]) for x in timers], None
        if namespaces is not None and len(namespaces) == 1:
            return timer_sort_keys([x[0] for x in timers], groups.tolist(), kbs, nsbs[0]), groups
        return [timer_sort_key(x[0], kg, kb, nsb) for x, kg, kb, nsb in zip(timers, groups.tolist(), kbs, nsbs)], groups
