"""Durations as integer milliseconds, from ints, timedeltas or strings such as "30s", "5m", "1h30m"."""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|min|s|m|h|d)", re.IGNORECASE)


def to_millis(value: int | float | str | timedelta, what: str = "duration") -> int:
    """Milliseconds of ``value``; a bare number is milliseconds. ``what`` names the setting in errors."""
    if isinstance(value, bool):
        raise ValueError(f"{what}: expected a duration, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{what}: expected a finite duration, got {value!r}")
        return int(value)
    if isinstance(value, timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, str):
        s = value.strip().replace(" ", "")
        if s.lstrip("-").isdigit():
            return int(s)
        pos, total = 0, 0.0
        for m in _PART.finditer(s):
            if m.start() != pos:
                break
            total += float(m.group(1)) * _UNITS_MS[m.group(2).lower()]
            pos = m.end()
        if s and pos == len(s):
            return int(total)
    raise ValueError(f"{what}: cannot parse duration {value!r} (use e.g. 30s, 500ms, 5m, 1h30m, or milliseconds)")
