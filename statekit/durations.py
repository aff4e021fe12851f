"""Durations as integer milliseconds, from Python numbers (milliseconds), timedeltas, or text with units such as
"30s", "5m", "1h30m" (text needs a unit, as Spark's intervals do: a bare "30" is refused, not read as 30 ms)."""

from __future__ import annotations

import math
import re
from datetime import timedelta
from decimal import Decimal, InvalidOperation

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|min|s|m|h|d)", re.IGNORECASE)
FORMS = "30s, 500ms, 5m, 1h30m; units ms, s, m or min, h, d"
"""The accepted forms of a duration given as text, as errors name them."""


def to_millis(value: int | float | str | timedelta, what: str = "duration") -> int:
    """Milliseconds of ``value``: an int or float is milliseconds (the operator API's unit, as in
    ``with_gap(10_000)``), a ``timedelta`` converts exactly, text needs a unit (``FORMS``; "0" alone is the same in
    every unit). A part finer than a millisecond is refused rather than dropped. ``what`` names the setting in
    errors."""
    if isinstance(value, bool):
        raise ValueError(f"{what}: expected a duration, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{what}: expected a finite duration, got {value!r}")
        return _whole(Decimal(value), value, what)
    if isinstance(value, timedelta):
        ms, rest = divmod(value, timedelta(milliseconds=1))
        if rest:
            raise ValueError(f"{what}: {value!r} is not a whole number of milliseconds")
        return ms
    if isinstance(value, str):
        return _text_millis(value, what)
    raise ValueError(f"{what}: expected a duration (forms: {FORMS}), got {value!r}")


def _text_millis(value: str, what: str) -> int:
    """Milliseconds of duration text ``value`` (see ``to_millis``)."""
    s = value.strip().replace(" ", "")
    try:
        number = Decimal(s)
    except InvalidOperation:
        number = None
    if number is not None and number.is_finite():
        if number == 0:
            return 0
        example = f", e.g. {s}s or {s}ms" if _PART.fullmatch(s + "s") else ""
        raise ValueError(f"{what} {value!r}: a duration needs a unit{example} (forms: {FORMS})")
    pos, total = 0, Decimal(0)
    for m in _PART.finditer(s):
        if m.start() != pos:
            break
        total += Decimal(m.group(1)) * _UNITS_MS[m.group(2).lower()]
        pos = m.end()
    if not s or pos != len(s):
        raise ValueError(f"{what}: cannot parse duration {value!r} (forms: {FORMS})")
    return _whole(total, value, what)


def _whole(ms: Decimal, value: object, what: str) -> int:
    """``ms`` as an int, refused when it has a part finer than a millisecond."""
    if ms != ms.to_integral_value():
        raise ValueError(f"{what}: {value!r} is not a whole number of milliseconds")
    return int(ms)
