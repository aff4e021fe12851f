"""The columns a job needs, checked by name against those of its input's first file: one rule and one
message, for Spark's reader (``files.read_files``) and for the check before Spark starts (``jobs.preflight``)."""

from __future__ import annotations

from .errors import InputError


def check_columns(source: str, names: list[str], required: list[tuple[str, str]]) -> None:
    """Raise ``InputError`` naming ``source`` (the file read), the first ``(column, what it is for)`` of
    ``required`` that is not in ``names``, and the columns there are."""
    for col, what in required:
        if col not in names:
            raise InputError(f"input {source}: {what} column {col!r} not found; columns: {', '.join(names)}")
