"""The executor runtime: which process runs a task's state work and how statekit's processes are tuned.

Statekit's Python daemon (``daemon``: workers forked with the task modules loaded), state hosts (``host``,
started by the daemon's ``spawner``, reached over ``handshake`` and ``wire``), worker warm-up (``warmup``),
memory and import tuning (``memory``, ``lazy_pandas``, ``zip_importers``) and the one start-up of a task's
process (``startup``). Every PySpark or pyarrow internal these lean on is reached through
``pyspark_internals``, which turns an accelerator off (same results, one log line) when the internal is not
what it expects or the session has no JVM (Spark Connect).

The epoch protocol (``api``, ``epochs``, ``tasks``, ``records``, ``results``, ``slots``, sinks) imports only
this package, never its modules (an import-linter contract in pyproject.toml): ``open_run`` runs a task's
state work (its ``LocalState``, see ``state_runs``) in the right process, as the job's ``StatePlacement``
(``placement``) says; the runtime reads the job and epoch only through that module's interfaces. The daemon is named, not imported
(``session.DAEMON_MODULE``): Spark runs it as ``__main__``.
"""

from .host import application_secret
from .memory import peak_grown_bytes, release_free_memory, reset_peak, take_peak
from .placement import STATE_HOSTS, StatePlacement
from .pyspark_internals import accelerator_off, executor_pid, is_connect, spark_context
from .runs import open_run
from .spawner import HOST_NAME, SPAWNER_NAME
from .startup import start_task, task_scope
from .state_runs import LocalState, StateRun
from .warmup import warm_up_workers

__all__ = ["HOST_NAME", "LocalState", "SPAWNER_NAME", "STATE_HOSTS", "StatePlacement", "StateRun", "accelerator_off",
           "application_secret", "executor_pid", "is_connect", "open_run", "peak_grown_bytes", "release_free_memory",
           "reset_peak", "spark_context", "start_task", "take_peak", "task_scope", "warm_up_workers"]
