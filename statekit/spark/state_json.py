"""Stored state values as JSON text that comes back exactly (``read_states``/``write_checkpoint``): the types a
checkpoint's msgpack holds (None, bool, int, float, str, bytes, list, tuple, dict) each get a form that decodes to
the same value and type; plain JSON where it is exact (null, booleans, integers, finite floats, text, lists, objects
of text keys), a one-key ``$`` object otherwise: ``{"$tuple": [...]}``, ``{"$bytes": "<base64>"}``,
``{"$float": "nan"}``, ``{"$map": [[k, v], ...]}`` (keys that are not text, or start with ``$``). A value of a
registered type (``statekit.register_type``) has no such form and is refused, named."""

from __future__ import annotations

import base64
import json
import math
from typing import Any


class StateJsonError(ValueError):
    """A value with no exact JSON form here, or text that is not one."""


def _plain(value: Any) -> Any:
    t = type(value)
    if value is None or t in (bool, int, str):
        return value
    if t is float:
        return value if math.isfinite(value) else {"$float": repr(value)}
    if t is bytes:
        return {"$bytes": base64.b64encode(value).decode()}
    if t is list:
        return [_plain(v) for v in value]
    if t is tuple:
        return {"$tuple": [_plain(v) for v in value]}
    if t is dict:
        if all(type(k) is str and not k.startswith("$") for k in value):
            return {k: _plain(v) for k, v in value.items()}
        pairs = [[_plain(k), _plain(v)] for k, v in value.items()]
        return {"$map": sorted(pairs, key=lambda p: json.dumps(p[0], sort_keys=True))}
    raise StateJsonError(f"a value of type {t.__module__}.{t.__qualname__} has no exact JSON form (a registered "
                         f"type): read it raw with statekit.checkpoint.read_state")


def to_json(value: Any) -> str:
    """``value`` as JSON text that ``from_json`` turns back into an equal value of the same types; a map's entries
    in the order of their keys' text, so equal values read as equal text (a backend keeps no map order)."""
    return json.dumps(_plain(value), separators=(",", ":"), allow_nan=False, sort_keys=True)


def _value(data: Any) -> Any:
    if isinstance(data, list):
        return [_value(v) for v in data]
    if not isinstance(data, dict):
        return data
    if len(data) == 1 and next(iter(data)).startswith("$"):
        (tag, inner), = data.items()
        if tag == "$tuple" and isinstance(inner, list):
            return tuple(_value(v) for v in inner)
        if tag == "$bytes" and isinstance(inner, str):
            return base64.b64decode(inner, validate=True)
        if tag == "$float" and inner in ("nan", "inf", "-inf"):
            return float(inner)
        if tag == "$map" and isinstance(inner, list) and all(isinstance(p, list) and len(p) == 2 for p in inner):
            found = {}
            for k, v in inner:
                key = _value(k)
                try:
                    found[key] = _value(v)
                except TypeError:
                    raise StateJsonError(f"a $map key {k!r} is not hashable") from None
            return found
        raise StateJsonError(f"{json.dumps(data)[:80]} is not a tagged value ($tuple, $bytes, $float or $map)")
    if any(k.startswith("$") for k in data):
        raise StateJsonError(f"object keys starting with $ go in a $map: {json.dumps(data)[:80]}")
    return {k: _value(v) for k, v in data.items()}


def from_json(text: str) -> Any:
    """The value ``to_json`` wrote as ``text``; ``StateJsonError`` naming what is wrong otherwise."""
    try:
        data = json.loads(text, parse_constant=lambda c: _refuse(c))
    except json.JSONDecodeError as e:
        raise StateJsonError(f"not JSON: {e}") from None
    try:
        return _value(data)
    except (ValueError, TypeError) as e:
        raise StateJsonError(str(e)) from None


def _refuse(constant: str) -> Any:
    raise StateJsonError(f"{constant} is not JSON; write {{\"$float\": \"{constant.lower().replace('infinity', 'inf')}\"}}")
