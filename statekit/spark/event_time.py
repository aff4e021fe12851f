"""Event times as users have them, to the int64 milliseconds the operators work in, and window bounds back.

``TimeSpec`` is the one rule: a time column of Spark type TIMESTAMP or TIMESTAMP_NTZ, text (ISO-8601 with a date,
or a ``--time-format`` pattern; text without a zone is read in ``--time-zone``) or epoch numbers in
``--time-unit`` (as numbers or as text: seconds may carry a fraction, milliseconds and microseconds are whole
numbers, as a fraction of them is most likely seconds read in the wrong unit) becomes milliseconds in Spark SQL
(the ``try_`` forms: a value that does not convert is null, and the router gives the row a reason). Text with a
time but no date (``12:00``), which Spark would place on today's date, does not convert. Results come back in
the input's kind, as Spark's ``session_window`` gives them: timestamps for timestamps and text (TIMESTAMP_NTZ
stays NTZ), integers in the input's unit for numbers. Times are taken to the millisecond, rounded down: a finer
part is dropped. Epoch numbers are read as the decimal digits they are written with (a double as its shortest
text), so ``1772352003.244`` seconds is exactly ``1772352003244`` ms.
"""

from __future__ import annotations

import datetime
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable

import numpy as np

from .errors import InputError

UNITS = {"s": 1000, "ms": 1, "us": 1000}
"""Epoch units, with the factor between them and milliseconds (``us`` divides, the others multiply)."""
UNIT_NAMES = {"s": "seconds", "ms": "milliseconds", "us": "microseconds"}
MILLIS = "_time_ms"
"""The internal column of event-time milliseconds that the router reads (the user's time column stays as it is)."""
OUT_OF_RANGE = "time out of range [-2**62, 2**62] ms"
"""The reason of a time beyond ``records.TIME_BOUND`` milliseconds either side of 1970."""
PATTERNS = "https://spark.apache.org/docs/latest/sql-ref-datetime-pattern.html"
NUMBER = r"^[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?$"
"""Text that is an epoch number (a regex both Python and Spark SQL read)."""
DATELESS = r"^(T[0-9]|[0-9]+:)"
"""Text that starts as a time of day (``12:00``, ``T12:00``, ``12:00:00Z``): Spark reads it on today's date."""
NO_DATE = "time has no date"
"""The reason of a text time without a date."""
_DECIMAL = "decimal(38, 18)"
"""Epoch numbers with a fraction as Spark decimals: 20 digits before the point, 18 after."""
_OFFSET = re.compile(r"^[+-]\d{2}:\d{2}$")
_ZONE_LETTERS = re.compile(r"[VzOXxZ]")
_SHOWN = 60


EPOCH_SPANS = {"s": (10**9, 10**10), "ms": (10**12, 10**13), "us": (10**15, 10**16)}
"""Where epoch numbers of each unit fall for times from 2001-09-09 to 2286-11-20: a column all of whose numbers
fall in another unit's span is almost surely in that unit (seconds read as milliseconds are January 1970)."""


def apparent_unit(values: list[Any]) -> str | None:
    """The unit of ``EPOCH_SPANS`` whose span holds every epoch number among ``values`` (numbers, or text as a csv
    holds them; other values are passed over); None when there is no number or the numbers fall in no one span."""
    numbers = []
    for v in values:
        if isinstance(v, str):
            if not re.match(NUMBER, v.strip()):
                continue
            v = Decimal(v.strip())
        if isinstance(v, bool) or not isinstance(v, (int, float, Decimal)):
            continue
        if isinstance(v, float) and not math.isfinite(v):
            continue
        numbers.append(abs(v))
    if not numbers:
        return None
    low, high = min(numbers), max(numbers)
    return next((unit for unit, (a, b) in EPOCH_SPANS.items() if a <= low and high < b), None)


@dataclass(frozen=True)
class TimeSpec:
    """How the time column's values are read: ``unit`` of epoch numbers (``s``, ``ms``, ``us``), ``format``
    of text (Spark's datetime pattern; None: ISO-8601, or text holding an epoch number) and ``zone`` of text
    that names none (a region such as ``Europe/Berlin``, ``UTC``, or an offset such as ``+01:00``)."""

    unit: str = "ms"
    format: str | None = None
    zone: str = "UTC"

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"--time-unit must be one of {', '.join(UNITS)}, got {self.unit!r}")
        if self.format is not None and not self.format.strip():
            raise ValueError("--time-format is empty: pass one of Spark's datetime patterns, e.g. 'yyyy-MM-dd HH:mm:ss'")
        if self.format is not None and not re.search(r"[yu]", re.sub(r"'[^']*'", "", self.format)):
            raise ValueError(f"--time-format {self.format!r} has no year (y): every time read by it would fall "
                             f"in 1970; pass a pattern with the date, e.g. 'yyyy-MM-dd HH:mm:ss'")
        if not _is_zone(self.zone):
            raise ValueError(f"--time-zone {self.zone!r} is not a time zone: pass a region such as Europe/Berlin, "
                             f"UTC, or an offset such as +01:00")

    def describe(self) -> dict[str, str]:
        """What a checkpoint records of the spec: the settings that are not the defaults (a job recorded before
        time specs existed read integer milliseconds, and still matches)."""
        return {k: v for k, v in (("unit", self.unit), ("format", self.format), ("zone", self.zone))
                if v != getattr(TimeSpec, k)}

    @classmethod
    def recorded(cls, time: dict[str, Any]) -> TimeSpec:
        """The spec a checkpoint's job record keeps (its ``time`` entry, ``describe``'s settings in it)."""
        return cls(**{k: time[k] for k in ("unit", "format", "zone") if k in time})

    def check(self, spark: Any, column: str, dtype: Any) -> None:
        """Refuse a time column of a type that holds no time (boolean, binary, struct...), a ``format`` for a
        column that is not text, and one that is not a datetime pattern, before anything runs."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import DateType, NumericType, StringType, TimestampNTZType, TimestampType

        if not isinstance(dtype, (NumericType, StringType, TimestampType, TimestampNTZType, DateType)):
            raise InputError(f"time column {column!r} has type {dtype.simpleString()}: statekit reads TIMESTAMP, "
                             f"TIMESTAMP_NTZ and DATE columns, epoch numbers (--time-unit s|ms|us) and text "
                             f"(ISO-8601, or --time-format PATTERN); convert the column to one of them")
        if self.format is not None and not isinstance(dtype, StringType):
            raise InputError(f"--time-format reads text, and time column {column!r} has type {dtype.simpleString()}: "
                             f"drop --time-format (or cast the column to text)")
        if self.format is not None:
            try:  # a literal pattern: Spark checks it as it plans this one-row query
                spark.range(1).select(F.try_to_timestamp(F.lit("0"), F.lit(self.format))).collect()
            except Exception as e:
                said = re.sub(r"^\[[^\]]*\]\s*", "", str(e)).split(". ")[0][:200]  # Spark's first sentence
                raise InputError(f"--time-format {self.format!r} is not one of Spark's datetime patterns ({said}); "
                                 f"see {PATTERNS}") from None

    def millis(self, column: str, dtype: Any) -> Any:
        """A Spark column of ``column``'s event time in milliseconds (bigint), null where a value does not
        convert. ``dtype``: the column's Spark type."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import (DateType, FractionalType, IntegralType, StringType, TimestampNTZType,
                                       TimestampType)

        c = F.col(column)
        if isinstance(dtype, TimestampType):
            return F.unix_millis(c)
        if isinstance(dtype, TimestampNTZType):  # wall-clock time, zone-free: its microseconds since 1970-01-01 00:00
            return _floor_div(f"timestampdiff(MICROSECOND, TIMESTAMP_NTZ'1970-01-01 00:00:00', {_quoted(column)})", 1000)
        if isinstance(dtype, IntegralType):
            return self._scaled(f"cast({_quoted(column)} as bigint)")
        if isinstance(dtype, FractionalType):  # decimal, float, double: null for NaN, infinities and overflows
            return self._fraction(_quoted(column))
        if isinstance(dtype, (StringType, DateType)):
            return self._text(column)
        raise InputError(f"time column {column!r} has type {dtype.simpleString()}")  # check() refused it before

    def _scaled(self, sql: str) -> Any:
        """Epoch numbers (the bigint SQL expression ``sql``) in ``unit`` as milliseconds; null where they overflow."""
        from pyspark.sql import functions as F

        if self.unit == "us":
            return _floor_div(sql, UNITS["us"])
        return F.expr(sql if self.unit == "ms" else f"try_multiply({sql}, {UNITS[self.unit]})")

    def _fraction(self, sql: str) -> Any:
        """Epoch numbers that may have a fraction (the SQL expression ``sql``: text or a number, read as decimal
        digits) in ``unit`` as milliseconds: seconds rounded down to the millisecond, the other units whole
        numbers only; null where they do not convert or overflow."""
        from pyspark.sql import functions as F

        digits = f"try_cast({sql} as {_DECIMAL})"
        if self.unit == "s":
            return F.expr(f"try_cast(floor(try_multiply({digits}, {UNITS['s']})) as bigint)")
        return F.when(F.expr(f"{digits} = floor({digits})"), self._scaled(f"try_cast({digits} as bigint)"))

    def _text(self, column: str) -> Any:
        """Text (or a date) as milliseconds: by ``format``, else an epoch number in ``unit`` or ISO-8601 with a date;
        text naming no zone is read in ``zone`` (a zone appended parses only where the text has none)."""
        from pyspark.sql import functions as F

        text = f"trim(cast({_quoted(column)} as string))"
        t = F.expr(text)
        zone = F.lit(" " + self.zone)
        if self.format is not None:
            if _ZONE_LETTERS.search(re.sub(r"'[^']*'", "", self.format)):  # the pattern reads the zone itself
                return F.unix_millis(F.try_to_timestamp(t, F.lit(self.format)))
            return F.unix_millis(F.try_to_timestamp(F.concat(t, zone), F.lit(self.format + " VV")))
        iso = F.coalesce(F.concat(t, zone).try_cast("timestamp_ltz"),  # a date and a time, no zone
                         F.concat(t, F.lit("T00:00:00"), zone).try_cast("timestamp_ltz"),  # a date alone
                         t.try_cast("timestamp_ltz"))  # text that names its zone
        dated = F.when(~t.rlike(DATELESS), F.unix_millis(iso))
        return F.coalesce(self._scaled(f"try_cast({text} as bigint)"), self._fraction(text), dated)

    def reason(self, value: Any) -> str:
        """Why ``value`` (a time column's value that is not null) gave no event time."""
        if isinstance(value, str):
            shown = value if len(value) <= _SHOWN else value[:_SHOWN] + "..."
            if self.format is None and re.match(NUMBER, value.strip()):
                return self._number_problem(Decimal(value.strip()), value.strip()) or OUT_OF_RANGE
            if self.format is None and re.match(DATELESS, value.strip()):
                return f"{NO_DATE}: {shown!r} (it would be read as today's)"
            expected = (f"format {self.format!r}" if self.format is not None
                        else f"ISO-8601 with a date, or a number in {self.unit}")
            return f"unparsable time: {shown!r} ({expected}; text without a zone in {self.zone})"
        if isinstance(value, datetime.time):
            return f"{NO_DATE}: {value.isoformat()!r} (a time of day)"
        if isinstance(value, (float, Decimal)):
            return self._number_problem(value, value) or OUT_OF_RANGE
        return OUT_OF_RANGE

    def _number_problem(self, number: float | Decimal, shown: Any) -> str | None:
        """Why epoch number ``number`` (written as ``shown``) can give no event time whatever its size; None: it can."""
        exact = isinstance(number, Decimal)
        if not (number.is_finite() if exact else math.isfinite(number)):
            return f"time is not a finite number: {shown}"
        whole = number == number.to_integral_value() if exact else number.is_integer()
        if self.unit != "s" and not whole:
            return f"time is not a whole number of {self.unit}: {shown} (epoch seconds? pass --time-unit s)"
        return None

    def may_convert(self, value: Any) -> bool:
        """Whether ``value`` (a time column's value as pyarrow reads a file) may give an event time: False only
        where it surely gives none (a time of day, NaN, text that is neither a number nor starts with a date; text
        read by ``format`` is not judged). Pre-flight's check of a file's first values, without Spark."""
        if isinstance(value, datetime.time):
            return False
        if isinstance(value, (float, Decimal)):
            return self._number_problem(value, value) is None
        if not isinstance(value, str) or self.format is not None:
            return True
        text = value.strip()
        if re.match(NUMBER, text):
            return self._number_problem(Decimal(text), text) is None
        return not re.match(DATELESS, text) and bool(re.match(r"^[+-]?[0-9]+-", text))

    def bounds_type(self, kind: Any) -> Any:
        """The Spark type window bounds come back in for times of type ``kind``: TIMESTAMP_NTZ for NTZ, a
        long in ``unit`` for numbers, TIMESTAMP for the rest (timestamps, dates, text)."""
        from pyspark.sql.types import LongType, NumericType, TimestampNTZType, TimestampType

        if isinstance(kind, NumericType):
            return LongType()
        return TimestampNTZType() if isinstance(kind, TimestampNTZType) else TimestampType()

    def bounds_unit(self, kind: Any) -> str:
        """The unit of the values of ``bounds_type(kind)``: Spark's timestamps count microseconds."""
        from pyspark.sql.types import LongType

        return self.unit if isinstance(self.bounds_type(kind), LongType) else "us"

    def kind(self, sample: Callable[[], Any], column: str, inferred: Any) -> Any:
        """The kind of the input's times (``bounds_type`` takes it) when a reader gives the time column as text
        (csv, json, so that a bad value reaches the invalid output) and inferred ``inferred`` from the first
        file's sample (``sample()``, its DataFrame, made only when needed): LongType for numbers, StringType for
        the rest; for values of mixed kinds (inferred as text), LongType when most of the sample's values are
        numbers (a few bad values among epoch numbers keep the bounds integers)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, NumericType, StringType

        if self.format is not None or not isinstance(inferred, (NumericType, StringType)):
            return StringType()
        if isinstance(inferred, NumericType):
            return LongType()
        numbers = F.trim(F.col(column)).rlike(NUMBER)
        row = sample().select(F.count(F.when(numbers, 1)).alias("i"), F.count(F.when(~numbers, 1)).alias("o")).first()
        return LongType() if row["i"] >= row["o"] else StringType()


def from_millis(values: np.ndarray, unit: str) -> np.ndarray:
    """Milliseconds (int64) as ``unit`` (``TimeSpec.bounds_unit``), rounded down."""
    if unit == "ms":
        return values
    return values * UNITS[unit] if unit == "us" else values // UNITS[unit]


def _floor_div(sql: str, n: int) -> Any:
    """The bigint SQL expression ``sql`` divided by ``n``, rounded down (``div`` rounds toward zero); null
    where it would overflow."""
    from pyspark.sql import functions as F

    return F.expr(f"try_subtract({sql}, pmod({sql}, {n})) div {n}")


def _quoted(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def _is_zone(zone: str) -> bool:
    """A zone Spark reads after a time: an offset, or a region or name of the IANA database."""
    import zoneinfo

    if _OFFSET.match(zone) or zone in ("UTC", "Z", "GMT"):
        return True
    try:
        zoneinfo.ZoneInfo(zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True
