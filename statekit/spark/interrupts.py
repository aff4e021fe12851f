"""Ctrl-C during a run: the first asks it to stop after the epoch in progress, a second aborts that epoch.

A stop leaves every committed epoch committed and the rest of the input for the next run. Aborting
cancels Spark's jobs from a thread of its own (py4j cannot be re-entered from a signal handler, which
is what PySpark's own Ctrl-C handler does) and ends the run with ``Interrupted``: the epoch in
progress is not committed, and the next run replays it. The CLI holds one handler for its whole command
(a Ctrl-C while Spark starts or plans asks the run to stop before its first epoch); ``run_keyed``'s
own, inside it, routes that request to its epochs.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import TracebackType
from typing import Any, Callable, Protocol


class Interrupted(KeyboardInterrupt):
    """A run aborted by a second Ctrl-C; its epoch in progress was not committed."""


class Stoppable(Protocol):
    """What Ctrl-C asks to stop: a run that checks ``stop_requested`` before each epoch."""

    stop_requested: bool


class CtrlC:
    """While entered on the main thread, SIGINT asks ``run`` (and the runs of nested handlers) to stop; a second
    SIGINT calls ``cancel`` (Spark's jobs) in another thread and makes the outermost block end with ``Interrupted``."""

    _active: "CtrlC | None" = None
    """The handler installed in this process, which nested ones join."""

    def __init__(self, run: Stoppable | None, cancel: Callable[[], None]) -> None:
        self.runs = [run] if run is not None else []
        self.cancel = cancel
        self.requested = self.aborted = False
        self.previous: Any = None
        self.outer: CtrlC | None = None

    def __enter__(self) -> "CtrlC":
        outer = CtrlC._active
        if outer is not None:
            self.outer = outer
            outer.runs.extend(self.runs)
            for run in self.runs:
                run.stop_requested = run.stop_requested or outer.requested
        elif threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handle)
            CtrlC._active = self
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if not self.requested:
            self.requested = True
            for run in self.runs:
                run.stop_requested = True
            print("statekit: stopping after the epoch in progress (Ctrl-C again to abort it)", file=sys.stderr, flush=True)
        elif not self.aborted:
            self.aborted = True
            print("statekit: aborting the epoch in progress", file=sys.stderr, flush=True)
            threading.Thread(target=self._cancel, name="statekit-cancel", daemon=True).start()

    def _cancel(self) -> None:
        try:
            self.cancel()
        except Exception:  # noqa: BLE001 -- Spark going down already: the run ends either way
            pass

    def __exit__(self, kind: type | None, value: BaseException | None, tb: TracebackType | None) -> None:
        if self.outer is not None:
            for run in self.runs:
                self.outer.runs.remove(run)
            aborted = self.outer.aborted
        else:
            if CtrlC._active is self:
                signal.signal(signal.SIGINT, self.previous)
                CtrlC._active = None
            aborted = self.aborted
        if aborted and kind is not None:
            raise Interrupted("aborted by Ctrl-C: the epoch in progress was not committed") from None
