"""State time-to-live configuration (Flink's StateTtlConfig), measured on processing time."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class UpdateType(Enum):
    """When an entry's last-access timestamp is refreshed."""

    ON_CREATE_AND_WRITE = "on_create_and_write"
    ON_READ_AND_WRITE = "on_read_and_write"


class StateVisibility(Enum):
    """Whether an expired entry that is still stored may be returned by a read."""

    NEVER_RETURN_EXPIRED = "never_return_expired"
    RETURN_EXPIRED_IF_NOT_CLEANED_UP = "return_expired_if_not_cleaned_up"


@dataclass(frozen=True, slots=True)
class StateTtlConfig:
    """Entries expire ``ttl_ms`` after their last refresh; expired entries are deleted from storage.

    Cleanup strategies: a read that meets an expired entry deletes it; ``cleanup_incremental=N``
    checks N more entries of the state on every access and N per state at each epoch end
    (``backend.flush``); ``cleanup_in_snapshot`` leaves expired entries out of snapshots.
    List and map state expire per element / per map entry, like Flink.
    """

    ttl_ms: int
    update_type: UpdateType = UpdateType.ON_CREATE_AND_WRITE
    visibility: StateVisibility = StateVisibility.NEVER_RETURN_EXPIRED
    cleanup_incremental: int = 0
    cleanup_in_snapshot: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.ttl_ms, int) or self.ttl_ms <= 0:
            raise ValueError(f"ttl_ms must be a positive integer of milliseconds, got {self.ttl_ms!r}")
        if self.cleanup_incremental < 0:
            raise ValueError(f"cleanup_incremental must be >= 0, got {self.cleanup_incremental}")

    @property
    def refresh_on_read(self) -> bool:
        return self.update_type is UpdateType.ON_READ_AND_WRITE

    @property
    def return_expired(self) -> bool:
        return self.visibility is StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP
