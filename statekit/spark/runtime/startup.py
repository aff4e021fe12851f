"""What every statekit process that runs a task does first, and what it gives back when the task ends.

One start-up for a router task, an epoch task and a state host: Ctrl-C is the driver's (``worker_signals``)
and pandas waits until something uses it (``lazy_pandas``), both before the process's first Arrow
conversion or user code. ``task_scope`` adds the end of a task: the memory it freed goes back to the
system, so an idle worker or host waits for its next epoch at the size of what it keeps.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from .lazy_pandas import defer_pandas
from .memory import mark_start, release_free_memory
from .worker_signals import ignore_interrupts


def start_task() -> None:
    """Set this (worker or host) process up for a statekit task: its starting memory recorded, SIGINT ignored,
    pandas deferred; idempotent."""
    mark_start()
    ignore_interrupts()
    defer_pandas()


@contextmanager
def task_scope() -> Iterator[None]:
    """A task from ``start_task`` to its end, after which the memory it freed is released (also when it fails:
    the process idles either way)."""
    start_task()
    try:
        yield
    finally:
        release_free_memory()
