"""The driver's record of committed epochs, kept under the checkpoint: ``_driver/epoch=<e>.json``.

A record is written atomically after an epoch's state and output are committed; it is the
epoch's commit point. It carries what the next epoch needs to be replay-safe: the watermark
(max event time through the epoch minus the delay, never decreasing), the Spark batch ids
already consumed, and the partition count the state was written with. Before an epoch runs, its
intent (the decisions a replay must repeat, like the clock's time limit) is kept next to them.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from ..checkpoint import Storage

DRIVER_DIR = "_driver"


@dataclass(frozen=True)
class EpochRecord:
    """A committed epoch as the driver saw it."""

    epoch: int
    watermark: int
    max_ts: int | None
    last_batch_id: int
    final: bool
    partitions: int
    operator: str

    def next_watermark(self, delay_ms: int) -> int:
        """Spark's rule: the next epoch's watermark is the max event time seen so far minus the delay."""
        if self.max_ts is None:
            return self.watermark
        return max(self.watermark, self.max_ts - delay_ms)


class EpochLog:
    """Reads and writes epoch records at a checkpoint location (path or pyarrow URI); keeps the last ``keep``."""

    def __init__(self, checkpoint: str, keep: int = 20) -> None:
        self.storage = Storage(checkpoint)
        self.keep = keep

    def epochs(self) -> list[int]:
        names = (f.path.rsplit("/", 1)[-1] for f in self.storage.list_files(DRIVER_DIR))
        return sorted(int(n[6:-5]) for n in names if n.startswith("epoch=") and n.endswith(".json"))

    def last(self) -> EpochRecord | None:
        """The newest committed epoch, or None before the first."""
        epochs = self.epochs()
        if not epochs:
            return None
        return EpochRecord(**json.loads(self.storage.read(f"{DRIVER_DIR}/epoch={epochs[-1]}.json")))

    def intent(self, epoch: int, values: dict[str, Any]) -> dict[str, Any]:
        """What the first attempt of ``epoch`` decided (a replay must decide the same), else ``values``,
        recorded for the replays to come."""
        rel = f"{DRIVER_DIR}/intent={epoch}.json"
        try:
            return json.loads(self.storage.read(rel))
        except FileNotFoundError:
            self._write(rel, values)
            return values

    def commit(self, record: EpochRecord) -> None:
        """Write ``record`` atomically, then forget its intent and records beyond the last ``keep``."""
        self._write(f"{DRIVER_DIR}/epoch={record.epoch}.json", asdict(record))
        self.storage.delete(f"{DRIVER_DIR}/intent={record.epoch}.json")
        for e in self.epochs()[:-self.keep]:
            self.storage.delete(f"{DRIVER_DIR}/epoch={e}.json")

    def _write(self, rel: str, data: dict[str, Any]) -> None:
        self.storage.commit(rel, json.dumps(data, sort_keys=True).encode(), f"{DRIVER_DIR}/_tmp/{uuid.uuid4().hex}.json")
