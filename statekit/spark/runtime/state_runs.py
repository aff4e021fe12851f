"""What the runtime runs for a task: the state side of an epoch, as the epoch protocol declares it.

The epoch protocol's state side (``statekit.spark.slots``: operators kept open per partition, restores and
commits) is the same whichever process runs it; the runtime only decides which one, this worker or the
partition's state host. It knows that side by these two interfaces, never by import: a host gets the
``LocalState`` with each task (pickled by reference, with the job).
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from .placement import PlacedJob, TaskEpoch


class StateRun(Protocol):
    """One task's state work: ``process`` the partition's records, then ``commit`` or ``abort``."""

    def process(self, valid: Any, results: Callable[[Any], None]) -> Any:
        """Run the operator over ``valid`` (a pyarrow table of the partition's records, in replay-stable order),
        handing its results to ``results`` as pyarrow tables, a bounded step at a time."""

    def commit(self, max_ts: int | None) -> Any:
        """Commit the processed state as the epoch's snapshot."""

    def abort(self) -> None:
        """Drop what a task that failed or went away before its commit left."""


class LocalState(Protocol):
    """The state side run in this process: a ``StateRun`` per task, and the partitions' state it keeps open."""

    def __call__(self, job: PlacedJob, epoch: TaskEpoch, index: int) -> StateRun:
        """The run of partition ``index`` in ``epoch``."""

    def kept(self) -> int:
        """How many partitions' state this process keeps open for a next epoch."""

    def close_all(self) -> None:
        """Close every kept partition's state (the process ends)."""
