"""The columns of a plain csv sample typed on the driver, as Spark's csv inference types them, without a Spark job.

Typing a sample through Spark's reader is the first Spark job of a run: on a fresh JVM it costs seconds that the
run's first epoch partly pays again. Where every value of the sample is plain (a whole number, or a word that no
Spark parser reads as a number, date, time or boolean), the types follow from Spark's rules alone: a column of whole
numbers is INT, or BIGINT once one passes INT's range, and a column with a word (or no value) is STRING. Anything
else (quotes, escapes, spaces, decimals, signs of dates or times, ragged rows) is left to Spark: ``None``.
"""

from __future__ import annotations

import re
from typing import Any

_WHOLE = re.compile(r"[+-]?[0-9]+\Z")
"""A whole number as Java's ``Integer.parseInt`` and ``Long.parseLong`` read it: ASCII digits, one optional sign."""
_WORD = re.compile(r"[A-EG-HJ-MO-SU-Za-eg-hj-mo-su-z][!#-\[\]-~]*\Z")
"""A value no Spark parser reads as a number, date, time or boolean: it starts with a letter that none of their
texts starts with (not N of NaN, I of Infinity, T of a time without a date, F/T of false/true, either case), and
the rest is printable ASCII but for white space (which Java's number parsers trim), quotes and escapes."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INT = 2**31
_LONG = 2**63


def plain_csv_schema(lines: list[str]) -> Any:
    """The StructType Spark's csv reader (``header``, default options, ``inferSchema``) gives ``lines`` (the header
    first), or None when a line is not plain (``_WHOLE``, ``_WORD`` or empty values split at commas, as many as the
    header's names, each a distinct identifier): Spark then types the sample itself."""
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    if not lines:
        return None
    names = lines[0].split(",")
    if not all(_NAME.match(n) for n in names) or len({n.lower() for n in names}) < len(names):
        return None
    widest = [0] * len(names)  # per column: 0 no value yet, 1 INT, 2 BIGINT, 3 STRING
    for line in lines[1:]:
        if not line:  # Spark's csv reader skips an empty line
            continue
        values = line.split(",")
        if len(values) != len(names):
            return None
        for i, value in enumerate(values):
            kind = _kind(value)
            if kind is None:
                return None
            widest[i] = max(widest[i], kind)
    types = {0: StringType(), 1: IntegerType(), 2: LongType(), 3: StringType()}
    return StructType([StructField(n, types[w], True) for n, w in zip(names, widest)])


def _kind(value: str) -> int | None:
    """0 for a null (an empty value), 1 INT, 2 BIGINT, 3 STRING; None: not plain."""
    if not value:
        return 0
    if _WHOLE.match(value):
        n = int(value)
        return 1 if -_INT <= n < _INT else 2 if -_LONG <= n < _LONG else None
    return 3 if _WORD.match(value) else None
