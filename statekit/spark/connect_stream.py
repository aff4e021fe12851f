"""A streaming run on a Spark Connect session, whose ``foreachBatch`` function runs on the server.

Spark Connect pickles the ``foreachBatch`` function and calls it in a Python process of the Connect server,
with a session of its own. Each batch there runs as an epoch by a runner made in that process from a picklable
recipe (the same job, fenced by the client's lease token); the client holds the lease, follows the epochs the
server commits (the checkpoint's epoch log) and stops the query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from ..checkpoint import Storage, fence

POLL_SECONDS = 0.5
"""How often the client looks for epochs the server committed (and for a stop request)."""


@dataclass(frozen=True)
class LeaseToken:
    """The fence of a run's lease, checked by a process that does not hold it (the Connect server's
    foreachBatch): ``LeaseLostError`` once another run took the checkpoint over."""

    checkpoint: str
    token: int

    def check(self) -> None:
        fence(Storage(self.checkpoint), self.token, self.checkpoint)


class EpochsOnServer:
    """``foreachBatch`` function: batch ``batch_id`` runs as an epoch in this process, by a runner that
    ``make_runner(session)`` made on the first batch (kept for the query's later batches, each on its own session)."""

    def __init__(self, make_runner: Callable[[Any], Any]) -> None:
        self.make_runner = make_runner
        self.runner: Any = None

    def __getstate__(self) -> dict:
        return {"make_runner": self.make_runner}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["make_runner"])

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        if self.runner is None:
            self.runner = self.make_runner(batch_df.sparkSession)
        self.runner.spark = batch_df.sparkSession
        self.runner.run(batch_df, batch_id)


class FollowedRun(Protocol):
    """The client's side of a run whose epochs another process commits."""

    stop_requested: bool

    def follow_commits(self) -> None:
        """Take in (and report) the epochs committed since the last call."""


def stream_on_server(df: Any, run: FollowedRun, make_runner: Callable[[Any], Any], spark_checkpoint: str,
                     trigger: str, interval: str) -> None:
    """Run the streaming query of ``df`` with each batch an epoch on the Connect server, following its commits
    until the input is drained (available-now) or a stop is requested: the query then stops at once, and an epoch
    it interrupts is not committed (the next run replays it)."""
    writer = (df.writeStream.foreachBatch(EpochsOnServer(make_runner))
              .option("checkpointLocation", spark_checkpoint))
    writer = writer.trigger(availableNow=True) if trigger == "available-now" else writer.trigger(processingTime=interval)
    query = writer.start()
    try:
        while query.isActive and not run.stop_requested:
            query.awaitTermination(POLL_SECONDS)
            run.follow_commits()
    finally:
        if query.isActive:
            query.stop()
        run.follow_commits()
    if not run.stop_requested and query.exception() is not None:
        raise RuntimeError(f"streaming query failed on the Spark Connect server: {query.exception()}")
