"""Errors of the Spark integration: each names the file, column or setting at fault."""

from __future__ import annotations

from ..errors import StateError


class InputError(StateError, ValueError):
    """Input that cannot be processed: a missing path, a missing column, a column of the wrong type."""


class JavaNotFoundError(StateError, RuntimeError):
    """No usable Java (17+) for Spark: raised before Spark is started."""


class InjectedFault(RuntimeError):
    """Raised by a task when ``STATEKIT_INJECT_FAULT`` asks for it (tests of retries and restarts)."""


class StopRequested(RuntimeError):
    """A batch that arrived after Ctrl-C: it fails so that Spark keeps it for the next run."""
