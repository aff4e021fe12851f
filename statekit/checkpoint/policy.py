"""CheckpointPolicy: how many epochs to keep and when an incremental chain is cut by a full snapshot."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import CheckpointError


@dataclass(frozen=True, slots=True)
class CheckpointPolicy:
    """``retain``: committed epochs kept per partition (>= 1). ``full_every``: a changelog backend
    (heap) writes a full snapshot at least every N epochs. ``max_changelog_fraction``: ... or as soon
    as the changes accumulated since its last full snapshot exceed this fraction of the state's entries."""

    retain: int = 3
    full_every: int = 10
    max_changelog_fraction: float = 0.5

    def __post_init__(self) -> None:
        if not isinstance(self.retain, int) or self.retain < 1:
            raise CheckpointError(f"retain must be an int >= 1 (epochs kept per partition), got {self.retain!r}")
        if not isinstance(self.full_every, int) or self.full_every < 1:
            raise CheckpointError(f"full_every must be an int >= 1, got {self.full_every!r}")
        if not 0 < self.max_changelog_fraction:
            raise CheckpointError(f"max_changelog_fraction must be > 0, got {self.max_changelog_fraction!r}")
