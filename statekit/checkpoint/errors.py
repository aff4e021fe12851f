"""Errors of the checkpoint store; each names the operator, epoch, partition and file involved."""

from __future__ import annotations

from ..errors import StateError


class CheckpointError(StateError):
    """A checkpoint cannot be written or read (bad location, bad request, unusable layout)."""


class CorruptCheckpointError(CheckpointError):
    """A committed file is missing, truncated or fails its checksum."""


class NoCheckpointError(CheckpointError):
    """No committed epoch matches the request (nothing committed yet, or the epoch is not retained)."""


class CheckpointUnavailableError(CheckpointError):
    """The checkpoint location kept failing (I/O errors) through every attempt of the retry policy."""
