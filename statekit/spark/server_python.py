"""Whether a Spark Connect server's Python workers can run statekit, asked before a run's first epoch: a server
started without ``PYSPARK_PYTHON`` runs ``python3`` from its PATH, often a Python without statekit, and every
epoch would then fail with Spark's "Python worker failed to connect back"."""

from __future__ import annotations

import os
import re
import sys
import threading
from concurrent.futures import Future
from typing import Any

from ..errors import StateError
from .runtime import is_connect

PYTHON_ENV = "PYSPARK_PYTHON"
"""The environment variable naming the Python that Spark's workers run (default: ``python3`` on the PATH)."""
_PYTHON_ERROR = re.compile(r"^\s*\w+(Error|Exception): .+")
"""A Python exception's line in Spark's error text, as a worker that failed reports it."""
_probes: dict[str, Future] = {}
"""The answer of the probe started for each Connect session (by its session id), until a check takes it."""
_lock = threading.Lock()


class ServerPythonError(StateError, RuntimeError):
    """The Spark Connect server's Python workers cannot run statekit."""


def probe_server_python(spark: Any) -> None:
    """On a Spark Connect session, start ``check_server_python``'s task in the background (once until that check
    takes its answer), so that it runs while the run reads its input and plans; its worker stays warm for the
    first epoch. Nothing on a classic session."""
    if not is_connect(spark):
        return
    with _lock:
        if spark.session_id in _probes:
            return
        answer: Future = Future()
        _probes[spark.session_id] = answer

    def run() -> None:
        try:
            answer.set_result(_ask(spark))
        except BaseException as e:  # noqa: BLE001 -- the check raises it in the run's own thread
            answer.set_exception(e)

    threading.Thread(target=run, name="statekit-server-python", daemon=True).start()


def check_server_python(spark: Any) -> None:
    """On a Spark Connect session, one task on the server that imports statekit and reports its interpreter (the
    one ``probe_server_python`` started, else one now); ``ServerPythonError`` naming ``PYSPARK_PYTHON``, the
    workers' Python and the fix when it cannot. A classic session's workers are set up by ``spark_session`` or the
    cluster: nothing is asked."""
    if not is_connect(spark):
        return
    with _lock:
        started = _probes.pop(spark.session_id, None)
    python, failure = _ask(spark) if started is None else _answer(spark, started)
    if failure is not None:
        raise ServerPythonError(_message(f"cannot import statekit ({failure})", python))


def _answer(spark: Any, started: Future) -> tuple[str, str | None]:
    """The background probe's answer; asked again when its job failed for a passing reason (an interrupt, a session
    busy with an earlier run that failed before its check took the answer), so only the server's own refusal
    stands."""
    try:
        return started.result()
    except ServerPythonError:
        raise
    except Exception:  # noqa: BLE001 -- any other failure of the background job is not the server's answer
        return _ask(spark)


def _ask(spark: Any) -> tuple[str, str | None]:
    """Run the probe task: the workers' interpreter and why statekit does not import there (None: it does);
    ``ServerPythonError`` when no task runs at all."""
    try:
        [(python, failure)] = spark.range(0, 1, 1, 1).mapInArrow(_probe(), "python STRING, failure STRING").collect()
    except Exception as e:  # noqa: BLE001 -- pyspark's errors differ by version; those of a Python worker are told below
        if "python worker" not in str(e).lower() and not any(map(_PYTHON_ERROR.match, str(e).splitlines())):
            raise
        runs = (f"{PYTHON_ENV} of the server's environment, else python3 on its PATH ({PYTHON_ENV} is "
                f"{os.environ.get(PYTHON_ENV) or 'not set'} in this process)")
        raise ServerPythonError(_message(f"cannot run a task ({_cause(e)})", runs)) from None
    return python, failure


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
