"""The one rule that keeps values handed out and values stored apart.

Every value a user gets from state (a read, a window result) and every value written into state is
``detached``: immutable values (numbers, strings, bytes, None, and tuples/frozensets of them, window
types included) are shared as they are, anything else is deep-copied. So a user mutating what they
read or emitted never changes state, and a later write never changes what they already hold, on
every backend and whatever a backend caches.
"""

from __future__ import annotations

import copy
from typing import Any

IMMUTABLE_SCALARS = frozenset((int, float, complex, str, bytes, bool, type(None)))
"""Types whose values ``detached`` hands out as they are: per-record paths test for them inline and call
``detached`` for anything else."""


def is_immutable(value: Any) -> bool:
    """True for values that can be shared safely."""
    if type(value) in IMMUTABLE_SCALARS:
        return True
    if type(value) is tuple and IMMUTABLE_SCALARS.issuperset(map(type, value)):  # a row of scalars, checked in C
        return True
    if isinstance(value, (tuple, frozenset)):
        return all(is_immutable(v) for v in value)
    return False


def detached(value: Any) -> Any:
    """``value`` itself when immutable, else a deep copy."""
    if type(value) in IMMUTABLE_SCALARS or is_immutable(value):
        return value
    return copy.deepcopy(value)
