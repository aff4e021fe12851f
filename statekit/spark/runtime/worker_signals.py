"""Ctrl-C belongs to the driver: Python workers ignore SIGINT.

A terminal sends Ctrl-C to the whole process group, Spark's Python workers included, and PySpark's
workers turn it into KeyboardInterrupt. An epoch's task interrupted that way would fail the epoch the
driver means to finish (a continuous run stops after the epoch in progress), so statekit's tasks ignore
SIGINT in the worker processes that run them.
"""

from __future__ import annotations

import signal
import threading


def ignore_interrupts() -> None:
    """Ignore SIGINT in this (worker) process; a no-op outside the main thread, where it cannot be set."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
