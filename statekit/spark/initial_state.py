"""A job's first epoch from state given as a table (``run_keyed(initial_state=...)``; ``statekit sessionize
--initial-state``), as Flink's State Processor API bootstraps a savepoint and Spark's ``transformWithState`` takes
an ``initialState``: the table's rows are routed by key group as records are, one task per partition puts its rows
into a fresh operator (``InitialState.restore``) and commits the epoch's snapshot, and the driver commits the epoch,
all as any epoch's (same manifests, signatures, job record). The job then goes on from that epoch as from one it ran.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from .epochs import EpochLog
from .errors import InputError
from .event_time import MILLIS
from .plan import JobPlan
from .records import routed_schema


@dataclass(frozen=True)
class InitialState:
    """State a new checkpoint starts from. ``df``: a Spark DataFrame of the key column, the columns ``restore``
    reads and ``event_time.MILLIS``, the time in ms of each row's last record (the epoch's max event time, which
    the next epoch's watermark follows). ``restore(operator, table)`` puts a task's rows (a pyarrow table of
    ``df``'s columns but MILLIS, in MILLIS order) into its operator, freshly opened on an empty backend, and
    returns how many keys it gave state. Its rows are checked before: a row the task cannot restore fails the
    epoch, and nothing of it is committed. ``only``: the run commits this epoch and ends, its input unread and
    no final epoch run (a checkpoint written offline, ``state_transform.write_checkpoint``)."""

    df: Any
    restore: Callable[[Any, Any], int]
    only: bool = False

    def job(self, job: JobPlan, arrow: Callable[[Any], Any]) -> JobPlan:
        """``job`` as its first epoch runs: its rows are this table's (``arrow``: a Spark schema as Spark's
        batches have it)."""
        state = self.df.drop(MILLIS)
        if state.columns[0] != job.columns[0]:
            raise InputError(f"the initial state's first column is {state.columns[0]!r}; it must be the key "
                             f"column {job.columns[0]!r}")
        return replace(job, columns=tuple(state.columns), row_columns=tuple(state.columns[1:]),
                       routed_schema=arrow(routed_schema(state.schema)))


def refuse_started(checkpoint: str) -> None:
    """InputError when ``checkpoint`` has a committed epoch: an initial state starts a new checkpoint only (its
    state would be put over the job's)."""
    last = EpochLog(checkpoint).last()
    if last is not None:
        raise InputError(f"checkpoint {checkpoint} has committed epochs (the newest: {last.epoch}): an initial "
                         f"state starts a new checkpoint; drop --initial-state to resume it, or pass a new "
                         f"--checkpoint (and --output)")
