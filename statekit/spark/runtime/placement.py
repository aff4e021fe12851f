"""Where a job's partitions' state runs on the executors, and what the runtime reads of the job and epoch it gets.

The driver decides the placement once per run (``spark.statekit.state_host``, ``state_hosts``,
``host_idle_timeout``, ``cache_size``) and ships it inside the job; the runtime reads only these settings and
the two small interfaces below, so it never imports the epoch protocol that defines the job.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

STATE_HOSTS = ("process", "worker")
"""Where a partition's state stays open between epochs (``spark.statekit.state_host``)."""


@dataclass(frozen=True)
class StatePlacement:
    """``state_host``: where a partition's state stays open between epochs, ``process`` (a state host on the
    machine, see ``host``: partition ``i`` goes to host ``i % state_hosts``, which keeps every partition it is
    given; one ends after ``host_idle_seconds`` without a task) or ``worker`` (the Python worker that ran the
    epoch, up to ``cache_size`` partitions each); ``app_id``: the Spark application, whose hosts they are."""

    state_host: str = "process"
    state_hosts: int = 1
    host_idle_seconds: float = 600.0
    cache_size: int = 8
    app_id: str = ""
    secret: bytes = field(default=b"", repr=False)
    """The application's secret that its state hosts and workers prove to each other (``host``; empty: none
    made, no host admits the task). Never shown: not in a repr, a log or an error."""

    def slots_kept(self, partitions: int) -> int:
        """How many of a job's ``partitions``' state one process keeps open: a host, all it is given; a worker,
        ``cache_size``."""
        return -(-partitions // self.state_hosts) if self.state_host == "process" else self.cache_size

    def in_worker(self) -> StatePlacement:
        """This placement with the state kept in the Python worker that runs the task."""
        return replace(self, state_host="worker")


class PlacedJob(Protocol):
    """What the runtime reads of the job a task runs: whose state it is and where that state runs."""

    @property
    def operator_id(self) -> str: ...

    @property
    def checkpoint(self) -> str: ...

    @property
    def placement(self) -> StatePlacement: ...

    def placed(self, placement: StatePlacement) -> PlacedJob:
        """The same job with its state run by ``placement``."""


class TaskEpoch(Protocol):
    """What the runtime reads of the epoch a task runs: its number, and whether it is the run's final one."""

    @property
    def epoch(self) -> int: ...

    @property
    def final(self) -> bool: ...
