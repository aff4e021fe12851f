"""The one call the epoch protocol makes for a task's state work: in which process it runs."""

from __future__ import annotations

from .host import hosted_run
from .placement import PlacedJob, TaskEpoch
from .state_runs import LocalState, StateRun


def open_run(job: PlacedJob, epoch: TaskEpoch, index: int, local: LocalState) -> StateRun:
    """Partition ``index``'s state work in ``epoch``: on its state host (``state_host=process``, where hosts can
    be used), else ``local`` in this worker."""
    if job.placement.state_host == "process":
        return hosted_run(job, epoch, index, local)
    return local(job, epoch, index)
