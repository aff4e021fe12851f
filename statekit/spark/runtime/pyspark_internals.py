"""Every PySpark and pyarrow internal the executor runtime leans on, each checked for the shape it expects.

The runtime's accelerators (statekit's Python daemon, state hosts, worker warm-up, deferred pandas, the
executor lookup) make runs leaner or sooner, never different. Each reaches the internal it needs only
through this module, which checks its shape first; one that is not what it expects (another PySpark or
pyarrow release), or a driver without a JVM (a Spark Connect session), turns that accelerator off: one
log line per process names what is off and why, and the run gives the same results without it.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Callable

PYSPARK_MAJOR = 4
"""The PySpark release line whose daemon protocol (its port on stdout, its own process group) the daemon was
written against (pyproject.toml's ``pyspark>=4.0,<5``)."""

_log = logging.getLogger("statekit")
_reported: set[str] = set()
_lock = threading.Lock()


def accelerator_off(what: str, why: str) -> None:
    """Say once per process that accelerator ``what`` is off and ``why`` (a warning: on stderr where logging
    is not set up, as in executors' Python processes)."""
    with _lock:
        if what in _reported:
            return
        _reported.add(what)
    _log.warning("statekit: %s off (results are the same without it): %s", what, why)


def spark_daemon_manager() -> Callable[[], None] | None:
    """PySpark's daemon loop (``pyspark.daemon.manager``) that statekit's daemon runs after its preload; None,
    said once, when this PySpark is outside the release line it was written for or has no such function:
    the daemon then runs Spark's own module unchanged."""
    import pyspark

    version = getattr(pyspark, "__version__", "unknown")
    if not version.split(".", 1)[0] == str(PYSPARK_MAJOR):
        accelerator_off("statekit's Python daemon", f"pyspark {version} is not a {PYSPARK_MAJOR}.x release, whose "
                        f"daemon protocol it was written for; workers fork from Spark's own daemon")
        return None
    import pyspark.daemon

    manager = getattr(pyspark.daemon, "manager", None)
    if not callable(manager):
        accelerator_off("statekit's Python daemon", f"pyspark {version} has no pyspark.daemon.manager(); workers "
                        f"fork from Spark's own daemon")
        return None
    return manager


def job_pickler() -> Callable[[Any], bytes] | None:
    """PySpark's cloudpickle ``dumps`` (a job's operator factory may be a closure of the user's script), which
    hands a job to a state host; None, said once, when this PySpark has none: state stays in the workers."""
    try:
        from pyspark import cloudpickle
    except ImportError as e:
        accelerator_off("state hosts", f"pyspark.cloudpickle cannot be imported ({e}); partitions' state stays in "
                        f"the Python workers")
        return None
    dumps = getattr(cloudpickle, "dumps", None)
    if not callable(dumps):
        accelerator_off("state hosts", "pyspark.cloudpickle has no dumps(); partitions' state stays in the Python "
                        "workers")
        return None
    return dumps


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (no JVM, no SparkContext on this side), told by its type:
    ``pyspark.sql.connect.session.SparkSession``."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def spark_context(spark: Any, what: str) -> Any | None:
    """``spark``'s SparkContext for accelerator ``what``; None, said once, on a Spark Connect session, which has
    none."""
    if is_connect(spark):
        accelerator_off(what, "a Spark Connect session has no SparkContext or JVM on the driver")
        return None
    return spark.sparkContext


def pandas_shim() -> Any | None:
    """pyarrow's lazy pandas importer (``pyarrow.lib._pandas_api``), which checks for pandas on its first use
    and remembers the answer (as its conversion of Python sequences does); None, said once, when this pyarrow
    has no such object: pandas is then not deferred."""
    import pyarrow
    import pyarrow.lib

    shim = getattr(pyarrow.lib, "_pandas_api", None)
    if shim is None or not hasattr(type(shim), "have_pandas"):  # on the type: reading it is the check itself
        accelerator_off("deferred pandas", f"pyarrow {pyarrow.__version__} has no pandas shim "
                        f"(pyarrow.lib._pandas_api.have_pandas) that checks for pandas once")
        return None
    return shim


def executor_pid(proc: str = "/proc") -> int:
    """The nearest JVM above this worker (worker -> Python daemon -> executor JVM), found in ``proc``; the
    parent if none is found. Where there is no ``proc`` (not Linux) the parent, said once: a state host then
    outlives a killed executor until its idle timeout or its daemon's hang-up."""
    if not os.path.isdir(os.path.join(proc, "self")):
        accelerator_off("the executor lookup", f"no process table at {proc}: state hosts end with their daemon "
                        f"or their idle timeout, not with the executor's JVM")
        return os.getppid()
    pid = os.getppid()
    while pid > 1:
        try:
            with open(f"{proc}/{pid}/comm") as f:
                if f.read().startswith("java"):
                    return pid
            with open(f"{proc}/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return os.getppid()
