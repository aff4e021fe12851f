"""Packed aggregate values and numeric column reads shared by the built-in aggregates
(``operators.aggregates.builtin_aggregates``): a packed value is ``[tag, bits]`` where the tag says whether it is
null, an int, a float (its IEEE bits) or a bool; columns are read as int64 or float64 numpy arrays
only where numpy's reductions give what adding one by one gives."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ..columns import arrow_array

NONE, INT, FLOAT, BOOL = 0, 1, 2, 3
"""Packed value tags."""
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


def below(a: Any, b: Any) -> bool:
    """``a < b`` in the order of ``min``/``max``, where NaN is above every other value (as in Spark SQL):
    a total order, so ``add`` one by one and ``merge`` of folded runs agree (ties keep the earlier value)."""
    return a < b or (b != b and a == a)


def unpacked_column(tags: np.ndarray, bits: np.ndarray) -> list:
    """The packed values ``(tags, bits)`` as Python values (None for a null)."""
    present = tags != NONE
    kinds = np.unique(tags[present])
    if len(kinds) == 1 and kinds[0] in (INT, FLOAT):
        values = (bits if kinds[0] == INT else bits.view(np.float64)).tolist()
        for i in np.flatnonzero(~present).tolist():
            values[i] = None
        return values
    if not len(kinds):
        return [None] * len(tags)
    return [unpacked(t, i, f) for t, i, f in zip(tags.tolist(), bits.tolist(), bits.view(np.float64).tolist())]


def unpacked_means(tags: np.ndarray, bits: np.ndarray, counts: np.ndarray) -> list:
    """``sum / n`` of packed averages (None where n is 0), as Python divides them: in numpy when the
    sums are floats, or ints that convert to float64 exactly (then one correctly rounded division)."""
    some = counts > 0
    kinds = np.unique(tags[some])
    sums = None
    if len(kinds) == 1 and int(counts.max()) <= 1 << 53:
        if kinds[0] == FLOAT:
            sums = bits.view(np.float64)
        elif kinds[0] == INT and max(int(bits[some].max()), -int(bits[some].min())) <= 1 << 53:
            sums = bits.astype(np.float64)
    if sums is None and len(kinds):
        return [(unpacked(t, i, f) / n if n else None)
                for t, i, f, n in zip(tags.tolist(), bits.tolist(), bits.view(np.float64).tolist(), counts.tolist())]
    means = [None] * len(tags) if sums is None else (sums / np.where(some, counts, 1)).tolist()
    for i in np.flatnonzero(~some).tolist():
        means[i] = None
    return means


def unpacked(tag: int, bits: int, real: float) -> Any:
    """A packed value: None, the int, the float (``real``: the bits read as float64) or the bool."""
    if tag == INT:
        return bits
    if tag == FLOAT:
        return real
    return None if tag == NONE else bool(bits)


def masked(column: Sequence[Any], order: Any) -> tuple[np.ndarray, np.ndarray, int] | None:
    """``column`` in ``order`` as (values, valid mask, tag) for int or float columns with nulls, or None
    where ``numeric`` would refuse the values (mixed types, NaN, -0.0, sums that could overflow)."""
    array = arrow_array(column)
    if array is not None:
        return _arrow_masked(array, order)
    if isinstance(column, np.ndarray) or None not in column:
        values = numeric(column, order)
        if values is None:
            return None
        return values, np.ones(len(values), dtype=bool), FLOAT if values.dtype.kind == "f" else INT
    kinds = set(map(type, column)) - {type(None)}
    if not kinds:
        return np.zeros(len(order), np.int64), np.zeros(len(order), bool), INT
    if len(kinds) != 1 or not kinds <= {int, float}:
        return None
    taken = [column[r] for r in order.tolist()]
    valid = np.fromiter((v is not None for v in taken), bool, len(taken))
    zero = 0.0 if float in kinds else 0
    filled = [zero if v is None else v for v in taken]
    values = numeric(filled, np.arange(len(filled)))
    if values is None:
        return None
    return values, valid, FLOAT if values.dtype.kind == "f" else INT

def _arrow_masked(array: pa.Array, order: Any) -> tuple[np.ndarray, np.ndarray, int] | None:
    """``masked`` of an Arrow column, read as numpy without Python values: the same answer as for
    the column's ``to_pylist()``."""
    if len(array) and array.null_count == len(array):  # no values at all, whatever the type
        return np.zeros(len(order), np.int64), np.zeros(len(order), bool), INT
    t = array.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
        return None
    try:
        array = array.cast(pa.int64() if pa.types.is_integer(t) else pa.float64())
    except pa.ArrowInvalid:  # an unsigned value beyond int64
        return None
    values = numeric(array.fill_null(0).to_numpy(), order)
    if values is None:
        return None
    valid = np.ones(len(values), bool) if not array.null_count else array.is_valid().to_numpy(zero_copy_only=False)[order]
    return values, valid, FLOAT if values.dtype.kind == "f" else INT


def numeric(column: Sequence[Any], order: Any) -> Any:
    """``column`` in ``order`` as an int64 or float64 array, or None when it has nulls or other types
    (a list mixing ints, floats or bools: their results keep the type the row path gives them),
    NaN or -0.0 (numpy orders and breaks min/max ties differently) or an int64 sum could overflow."""
    try:
        values = np.asarray(column)
    except (ValueError, OverflowError):
        return None
    kind = values.dtype.kind
    if kind not in "if" or values.dtype.itemsize != 8:
        return None
    if not isinstance(column, np.ndarray) and set(map(type, column)) != {int if kind == "i" else float}:
        return None
    values = values[order]
    if not len(values):
        return values
    if kind == "f":
        return None if np.isnan(values).any() or np.signbit(values[values == 0]).any() else values
    if max(int(values.max()), -int(values.min())) >= (1 << 62) // len(values):
        return None
    return values
