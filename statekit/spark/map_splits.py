"""How an epoch's tasks know their input is whole before they commit.

Each map split that routes the epoch's rows (``records.Router``) sends every task an end marker after its rows, so a
task whose input ended early (the orphaned worker of a lost executor) sees fewer markers than there are splits and
refuses to commit. How many splits there are: known when the epoch is planned on a classic session (its plan's RDD,
no job runs), or, on Spark Connect, which has no RDD to ask, counted from the marks each split leaves in the epoch's
staging area once it routed its rows. Spark starts an epoch's tasks only after every split of the stage before has
finished, so each task finds every split's mark; a separate job to count the splits would read the input again.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Protocol

from ..checkpoint import Storage


class Staging(Protocol):
    """Where an epoch's tasks stage their files (``output_dir.OutputDir``): its storage holds the marks."""

    storage: Storage


@dataclass(frozen=True)
class MapSplits:
    """The map splits of one run of an epoch's job: ``known`` of them, or (``known`` None) as many as left a mark
    under ``marks`` (a directory of the output's staging area, new for each run of the job, so a replay's count is
    its own). A mark put there by anyone else can only make a task count more splits than sent it markers, and
    refuse: never commit on a short input."""

    known: int | None = None
    marks: str | None = None

    @classmethod
    def counted(cls, staging_dir: str) -> "MapSplits":
        """Splits counted from their marks, in a new directory named after ``staging_dir`` (a path of the epoch's
        staging area)."""
        return cls(None, f"{staging_dir}-{uuid.uuid4().hex}")

    def mark(self, output: Staging, split: int) -> None:
        """Map side: split ``split`` routed all its rows (a no-op when the count is known)."""
        if self.marks is not None:
            output.storage.write(f"{self.marks}/{split}", b"")

    def check(self, output: Staging, ends: int, epoch: int, partition: int) -> None:
        """Task side: refuse (``RuntimeError``) to commit ``partition``'s part of ``epoch`` unless the end markers of
        ``ends`` distinct splits are those of every split."""
        splits = self.known if self.known is not None else len(output.storage.list_files(self.marks))
        if ends != splits:
            raise RuntimeError(f"epoch {epoch} partition {partition}: input truncated ({ends} of {splits} map outputs "
                               f"received); not committing")
