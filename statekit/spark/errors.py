"""Errors of the Spark integration: each names the file, column or setting at fault."""

from __future__ import annotations

import re

from ..errors import StateError


class InputError(StateError, ValueError):
    """Input that cannot be processed: a missing path, a missing column, a column of the wrong type."""


class JavaNotFoundError(StateError, RuntimeError):
    """No usable Java (17+) for Spark: raised before Spark is started."""


class InjectedFault(RuntimeError):
    """Raised by a task when ``STATEKIT_INJECT_FAULT`` asks for it (tests of retries and restarts)."""


class StopRequested(RuntimeError):
    """A batch that arrived after Ctrl-C: it fails so that Spark keeps it for the next run."""


_RAISED = re.compile(r"^(statekit(?:\.\w+)+): (.+)$", re.M)


def _statekit_errors(cls: type = StateError) -> dict[str, type]:
    """Every loaded statekit error class by its qualified name."""
    found = {f"{cls.__module__}.{cls.__qualname__}": cls}
    for sub in cls.__subclasses__():
        found.update(_statekit_errors(sub))
    return found


def task_failure(error: BaseException) -> BaseException:
    """The statekit error a failed Spark task raised, rebuilt from the failure's text (its class looked up
    among the statekit errors loaded here, never imported on the text's word); else ``error`` itself. So a
    run fails with the one clear message a task gave, not with Spark's traceback around it."""
    known = _statekit_errors()
    for name, message in reversed(_RAISED.findall(str(error))):
        cls = known.get(name)
        if cls is not None:
            try:
                return cls(message)
            except TypeError:  # a constructor of another shape: Spark's error stands
                return error
    return error
