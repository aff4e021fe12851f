"""A deterministic keyed workload for the checkpoint tests: every state kind, namespaces, both timer
domains and callbacks that touch state. What happens to a key in an epoch depends only on
(epoch, key), so any partitioning (or a restore in between) must end in the same state and output.
"""

from __future__ import annotations

import operator
import random
from pathlib import Path
from typing import Any

from statekit import (AggregateFunction, AggregatingStateDescriptor, KeyedStateBackend, ListStateDescriptor,
                      MapStateDescriptor, ReducingStateDescriptor, StateConfig, Timer, TimerTarget,
                      ValueStateDescriptor, key_group_for)

MAX_PAR = 32
ALL = range(MAX_PAR)


def config(name: str, tmp_path: Path, tag: str = "b") -> StateConfig:
    """Backend ``name`` on ``MAX_PAR`` key groups, its local files in ``tmp_path/local-<tag>``."""
    return StateConfig(backend=name, max_parallelism=MAX_PAR, local_dir=str(tmp_path / f"local-{tag}"))


KEYS = [f"user-{i}" for i in range(120)] + [(i, "t") for i in range(40)] + list(range(1000, 1040))


class Average(AggregateFunction):
    def create_accumulator(self):
        return [0, 0]

    def add(self, value, accumulator):
        return [accumulator[0] + value, accumulator[1] + 1]

    def merge(self, acc_a, acc_b):
        return [acc_a[0] + acc_b[0], acc_a[1] + acc_b[1]]

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]


def descriptors() -> list:
    return [ValueStateDescriptor("count", default=0), ListStateDescriptor("events"), MapStateDescriptor("attrs"),
            ReducingStateDescriptor("total", operator.add), AggregatingStateDescriptor("avg", Average())]


class Job(TimerTarget):
    """Registers the states and the timer service on a backend and runs epochs on it."""

    def __init__(self, backend: KeyedStateBackend, output: list) -> None:
        self.backend = backend
        self.output = output
        self.count, self.events, self.attrs, self.total, self.avg = (backend.get_state(d) for d in descriptors())
        self.timers = backend.timer_service("job", self)

    def _scope(self, ns: Any) -> None:
        for st in (self.count, self.events, self.attrs, self.total, self.avg):
            st.set_current_namespace(ns)

    def on_event_time(self, timer: Timer) -> None:
        self._scope(timer.namespace)
        self.output.append(("event", timer.timestamp, timer.key, timer.namespace, self.events.get(), self.total.get()))
        self.events.clear()

    def on_processing_time(self, timer: Timer) -> None:
        self._scope(timer.namespace)
        self.output.append(("proc", timer.timestamp, timer.key, timer.namespace, self.count.value()))
        self.attrs.clear()

    def run_epoch(self, epoch: int, rate: float = 0.3) -> None:
        b = self.backend
        for key in keys_for(b.key_groups):
            rng = random.Random(f"{epoch}:{key!r}")
            if rng.random() >= rate:
                continue
            b.set_current_key(key)
            ns = ("w", rng.randrange(3))
            self._scope(ns)
            self.count.update(self.count.value() + 1)
            self.events.add(epoch)
            self.attrs.put(f"a{epoch % 4}", [epoch, str(key)])
            self.total.add(epoch)
            self.avg.add(epoch)
            if rng.random() < 0.15:
                self.attrs.remove(f"a{(epoch + 1) % 4}")
            if rng.random() < 0.1:
                self.count.clear()
            if rng.random() < 0.2:
                other = ("w", rng.randrange(3))
                self.events.merge_namespaces(other, [ns])
            ts = epoch * 10 + rng.randrange(40)
            self.timers.register_event_time_timer(ns, ts)
            if rng.random() < 0.2:
                self.timers.delete_event_time_timer(ns, ts)
            self.timers.register_processing_time_timer(ns, epoch * 10 + rng.randrange(25))
        self.timers.advance_watermark(epoch * 10)
        self.timers.advance_processing_time(epoch * 10 - 3)
        b.flush()


def keys_for(key_groups: range) -> list:
    return [k for k in KEYS if key_group_for(k, MAX_PAR) in key_groups]


def normalized(*backends: KeyedStateBackend) -> dict:
    """The logical content of one or several backends (partitions), comparable across backends."""
    states: dict[str, list] = {}
    timers: dict[str, dict] = {}
    for b in backends:
        snap = b.snapshot_logical()
        for name, s in snap["states"].items():
            states.setdefault(name, []).extend(repr(e) for e in s["entries"])
        for name, t in snap["timers"].items():
            cur = timers.setdefault(name, {"event": [], "processing": [], "watermark": t["watermark"],
                                           "processing_time": t["processing_time"]})
            cur["event"].extend(repr(x) for x in t["event"])
            cur["processing"].extend(repr(x) for x in t["processing"])
    for t in timers.values():
        t["event"].sort()
        t["processing"].sort()
    return {"states": {n: sorted(v) for n, v in states.items() if v}, "timers": timers}
