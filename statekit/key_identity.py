"""Which keys (and which namespaces) are one: their serialized form decides, as it does for key groups
and the RocksDB backend, not Python equality (which makes ``1``, ``1.0`` and ``True`` one dict key, and
``0.0`` and ``-0.0``). Every backend and operator groups and stores keys and namespaces by
``key_identity``, so a backend never changes which records share state."""

from __future__ import annotations

from typing import Any

PLAIN_KEY_TYPES = frozenset((str, int, bytes))
"""Key types that are their own identity: callers on the per-record path test for them inline."""
SELF_IDENTICAL_TYPES = PLAIN_KEY_TYPES | {type(None)}
"""Types whose values are their own identity (None too: a namespace, never a key, may be None)."""
_TUPLE = object()
"""Tags a tuple's identity (no user key can hold it), so a tuple never equals another type's identity."""


def key_identity(key: Any) -> Any:
    """A hashable stand-in for ``key``, equal to another key's exactly when the two serialize alike:
    the key itself for ``str``, ``int`` and ``bytes`` keys and a None namespace (free on the common
    path), a type-tagged form otherwise. Raises TypeError for an unhashable key, like a dict lookup."""
    t = type(key)
    if t in SELF_IDENTICAL_TYPES:
        return key
    if t is tuple:
        return (_TUPLE, tuple(key_identity(k) for k in key))
    if t is float:
        return (float, key.hex())
    hash(key)
    return (t, key)


def key_problem(key: Any) -> str | None:
    """Why ``key`` cannot be a state key (None: it can): the one rule the backends and the Spark router
    both apply (a key that does not serialize is found where it is serialized)."""
    if key is None:
        return "null key"
    try:
        hash(key)
    except TypeError:
        return "unhashable key"
    return "NaN key" if key != key else None


def unhashable_reason(key: Any, *, shown: bool = False) -> str:
    """Why ``key`` cannot be a state key when ``key_identity`` (or a dict lookup) raised TypeError for it: the
    one wording of the backends' InvalidKeyError (``shown``: naming the key itself) and the operators'
    ``_invalid`` reason."""
    named = f"key {key!r}" if shown else "key"
    return f"{named} of type {type(key).__name__} is not hashable (use a tuple, not a list)"


def key_of_identity(identity: Any) -> Any:
    """The key ``key_identity`` was given."""
    if type(identity) is not tuple:
        return identity
    tag, value = identity
    if tag is _TUPLE:
        return tuple(key_of_identity(v) for v in value)
    if tag is float:
        return float.fromhex(value)
    return value
