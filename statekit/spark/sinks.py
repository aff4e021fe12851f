"""Where each committed epoch's results go besides the output directory: Spark writers, Delta Lake.

An ``EpochSink`` follows Spark's ``foreachBatch`` contract: ``write(results, epoch_id)`` is called once
per epoch after its results are published under the output directory and before the epoch commits,
so a replayed epoch (a retried job, a restarted query) calls it again with the same id and the same
rows; an idempotent writer (one transaction per epoch id) gets exactly-once results.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable

from ..checkpoint import pyarrow_uri

DELTA_APP_ID = "statekit"


class EpochSink(ABC):
    """Receives each committed epoch's results (and, if it wants them, its side outputs) as Spark DataFrames."""

    @abstractmethod
    def write(self, results: Any, epoch_id: int) -> None:
        """Write one epoch's results; may be called again for the same epoch (then with the same rows)."""

    def write_side(self, tag: str, rows: Any, epoch_id: int) -> None:
        """One epoch's side output ``tag`` (``late`` or ``invalid``: the input columns and a ``reason``),
        called before ``write`` of the same epoch, with the same contract. Default: not wanted (the
        rows stay under the output directory's ``_late/`` and ``_invalid/``)."""

    def open(self, checkpoint: str, operator_id: str) -> None:
        """Called once per run before its first epoch with the job's identity (a sink that fences earlier runs of
        the same job derives its id from it). Default: nothing."""

    def close(self) -> None:
        """Called once when the run ends, however it ends. Default: nothing."""


class FunctionSink(EpochSink):
    """A plain ``function(results_df, epoch_id)``, as for ``foreachBatch``; ``side``, if given, is called as
    ``side(tag, rows_df, epoch_id)`` for the side outputs."""

    def __init__(self, function: Callable[[Any, int], None],
                 side: Callable[[str, Any, int], None] | None = None) -> None:
        self.function, self.side = function, side

    def write(self, results: Any, epoch_id: int) -> None:
        self.function(results, epoch_id)

    def write_side(self, tag: str, rows: Any, epoch_id: int) -> None:
        if self.side is not None:
            self.side(tag, rows, epoch_id)


class DeltaSink(EpochSink):
    """Appends each epoch to a Delta table as one transaction, tagged with Delta's application
    transaction (``app_id``, epoch): an epoch the table already holds is not written again. Result
    columns a migrated job adds (an added aggregate) are added to the table's schema; earlier rows
    read them as null."""

    def __init__(self, path: str, app_id: str = DELTA_APP_ID) -> None:
        self.path = pyarrow_uri(path)
        self.app_id = app_id

    def written_through(self) -> int | None:
        """The last epoch the table holds (None: none, or no table yet)."""
        deltalake = _deltalake()
        try:
            return deltalake.DeltaTable(self.path).transaction_version(self.app_id)
        except deltalake.exceptions.TableNotFoundError:
            return None

    def write(self, results: Any, epoch_id: int) -> None:
        deltalake = _deltalake()
        done = self.written_through()
        if done is not None and done >= epoch_id:
            return
        txn = deltalake.CommitProperties(app_transactions=[deltalake.Transaction(self.app_id, epoch_id)])
        deltalake.write_deltalake(self.path, results.toArrow(), mode="append", schema_mode="merge",
                                  commit_properties=txn)


def _deltalake() -> Any:
    try:
        import deltalake
        import deltalake.exceptions  # noqa: F401
    except ImportError:
        raise ImportError("Delta output needs the delta extra: pip install 'statekit[delta]'") from None
    return deltalake


def as_sink(sink: EpochSink | Callable[[Any, int], None] | None) -> EpochSink | None:
    """An ``EpochSink`` from what ``run_keyed`` was given."""
    if sink is None or isinstance(sink, EpochSink):
        return sink
    if callable(sink):
        return FunctionSink(sink)
    raise TypeError(f"sink must be an EpochSink or a function (results_df, epoch_id), got {type(sink).__name__}")
