"""Whether a Spark Connect server's Python workers can run statekit, asked before a run's first epoch: a server
started without ``PYSPARK_PYTHON`` runs ``python3`` from its PATH, often a Python without statekit, and every
epoch would then fail with Spark's "Python worker failed to connect back"."""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from ..errors import StateError
from .runtime import is_connect

PYTHON_ENV = "PYSPARK_PYTHON"
"""The environment variable naming the Python that Spark's workers run (default: ``python3`` on the PATH)."""
_PYTHON_ERROR = re.compile(r"^\s*\w+(Error|Exception): .+")
"""A Python exception's line in Spark's error text, as a worker that failed reports it."""


class ServerPythonError(StateError, RuntimeError):
    """The Spark Connect server's Python workers cannot run statekit."""


def check_server_python(spark: Any) -> None:
    """On a Spark Connect session, one task on the server that imports statekit and reports its interpreter;
    ``ServerPythonError`` naming ``PYSPARK_PYTHON``, the workers' Python and the fix when it cannot. A classic
    session's workers are set up by ``spark_session`` or the cluster: nothing is asked."""
    if not is_connect(spark):
        return
    try:
        [(python, failure)] = spark.range(0, 1, 1, 1).mapInArrow(_probe(), "python STRING, failure STRING").collect()
    except Exception as e:  # noqa: BLE001 -- pyspark's errors differ by version; those of a Python worker are told below
        if "python worker" not in str(e).lower() and not any(map(_PYTHON_ERROR.match, str(e).splitlines())):
            raise
        runs = (f"{PYTHON_ENV} of the server's environment, else python3 on its PATH ({PYTHON_ENV} is "
                f"{os.environ.get(PYTHON_ENV) or 'not set'} in this process)")
        raise ServerPythonError(_message(f"cannot run a task ({_cause(e)})", runs)) from None
    if failure is not None:
        raise ServerPythonError(_message(f"cannot import statekit ({failure})", python))


def _cause(e: Exception) -> str:
    """What failed in the worker, from Spark's error text: the line after "Error from python worker:" (it names the
    worker's Python and the error), else the last Python exception line (``ModuleNotFoundError: No module named
    'pyarrow'``), else the first line."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()] or [type(e).__name__]
    for line, after in zip(lines, lines[1:]):
        if line.lower() == "error from python worker:":
            return after
    return next((line for line in reversed(lines) if _PYTHON_ERROR.match(line)), lines[0])


def _message(what: str, runs: str) -> str:
    return (f"the Spark Connect server's Python workers {what}: they run {runs}. They need a Python with statekit "
            f"installed, as this one ({sys.executable}): set {PYTHON_ENV}={sys.executable} in the environment before "
            f"the session starts its server (for SparkSession.builder.remote('local[N]'): before getOrCreate(), "
            f"e.g. by activating the virtualenv or os.environ['{PYTHON_ENV}'] = sys.executable; for an sc:// "
            f"server: in the server's environment, then restart it), or install statekit into the workers' Python")


def _probe() -> Any:
    """The mapInArrow function, made here so that it is shipped by value: its worker needs no statekit to run it."""

    def probe(batches: Any) -> Any:
        import sys

        import pyarrow as pa

        for _ in batches:
            pass
        try:
            import statekit  # noqa: F401
            failure = None
        except Exception as e:  # noqa: BLE001 -- any failure to import is the answer
            failure = f"{type(e).__name__}: {e}"
        yield pa.RecordBatch.from_pydict({"python": [sys.executable], "failure": [failure]})

    return probe
