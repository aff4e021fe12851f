"""Whether a sessionize run's checkpoint is in use by another run, asked before Spark starts: a second run on it is
refused at once, with the message the run itself gives when it takes the lease (``CheckpointLease``)."""

from __future__ import annotations

import os

from ..checkpoint import CheckpointLease
from ..spark.output_dir import DEFAULT_CHECKPOINT


def job_checkpoint(files: str, checkpoint: str | None) -> str:
    """The checkpoint of a run writing its files to ``files``: ``checkpoint``, else ``<files>/_checkpoint``."""
    return checkpoint or f"{files.rstrip('/')}/{DEFAULT_CHECKPOINT}"


def refuse_checkpoint_in_use(checkpoint: str) -> None:
    """Raise ``LeaseHeldError`` naming the holder when another run holds the lease of local ``checkpoint`` now (the
    run takes the lease itself later); named as the run names it, by its absolute path."""
    CheckpointLease(os.path.abspath(checkpoint)).refuse_if_held()
