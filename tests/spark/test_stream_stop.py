"""Ctrl-C of a continuous run while Spark has just planned a batch: ``run_stream`` stops the query and the
planned batch is refused (left whole for the next run), with no deadlock between the stop and the batch.

Spark's ``query.stop()`` returns only once the batch thread is done, and that thread runs the planned
batch's foreachBatch callback, which takes the runner's lock to see the stop. A stub query reproduces
that order deterministically (the CLI test of the same race, in ``test_spark_continuous.py``, depends on
timing)."""

from __future__ import annotations

import threading
from typing import Any

from statekit.spark import StopRequested
from statekit.spark.epoch_runner import EpochRunner
from statekit.spark.micro_batches import run_stream


class Runner:
    """The lock and stop flag of an EpochRunner, with its own ``run`` (what the callback calls)."""

    run = EpochRunner.run

    def __init__(self) -> None:
        self.busy = threading.Lock()
        self.stop_requested = False
        self.epochs: list[int] = []
        self.quiet = Silence()


class Silence:
    """Records what ``SparkLogSilence`` would have been asked: Spark's log off for the refusal, then back."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def silence(self) -> None:
        self.calls.append("silence")

    def restore(self) -> None:
        self.calls.append("restore")

    def _run(self, df: Any, batch_id: int | None, final: bool) -> None:
        self.epochs.append(batch_id)


class Query:
    """A streaming query whose next batch is planned when the stop is requested: ``stop`` runs it on
    the batch thread and waits for that thread, as Spark does."""

    def __init__(self, runner: Runner, callback: Any) -> None:
        self.runner, self.callback = runner, callback
        self.isActive = True
        self.outcome: list[BaseException | None] = []
        self.stopped_in_time = None

    def awaitTermination(self, timeout: float) -> None:
        self.runner.stop_requested = True  # Ctrl-C while the query waits

    def stop(self) -> None:
        def planned_batch() -> None:
            try:
                self.callback(None, 7)
                self.outcome.append(None)
            except BaseException as e:
                self.outcome.append(e)

        thread = threading.Thread(target=planned_batch, daemon=True)
        thread.start()
        thread.join(timeout=10)
        self.stopped_in_time = not thread.is_alive()
        self.isActive = False

    def exception(self) -> None:
        return None


class Frame:
    """``df.writeStream.foreachBatch(f).option(...).trigger(...).start()`` returning the stub query."""

    def __init__(self, runner: Runner) -> None:
        self.runner, self.query = runner, None
        self.writeStream = self

    def foreachBatch(self, callback: Any) -> "Frame":
        self.query = Query(self.runner, callback)
        return self

    def option(self, *args: Any) -> "Frame":
        return self

    def trigger(self, **kwargs: Any) -> "Frame":
        return self

    def start(self) -> Query:
        return self.query


def test_a_stop_while_a_batch_is_planned_refuses_the_batch_without_a_deadlock():
    runner = Runner()
    frame = Frame(runner)
    run_stream(frame, runner, "unused", "continuous", "1 second")  # StopRequested of the refused batch is not raised
    query = frame.query
    assert query.stopped_in_time, "query.stop() waited on a batch that waited on the runner's lock"
    assert len(query.outcome) == 1 and isinstance(query.outcome[0], StopRequested)
    assert runner.epochs == [] and not runner.busy.locked()
    # silenced before the query stops (and again as the refused batch raises), restored once it stopped
    assert runner.quiet.calls[0] == "silence" and runner.quiet.calls[-1] == "restore"
    assert set(runner.quiet.calls[:-1]) == {"silence"}
