"""The five state kinds behind one small adapter (descriptor, write, read, empty), the TTL settings the
contract uses, and the fill-every-kind helpers the snapshot and migration contracts share.
"""

from __future__ import annotations

from statekit import (KEY_SERIALIZER, AggregatingStateDescriptor, ListStateDescriptor, MapStateDescriptor,
                      ReducingStateDescriptor, StateTtlConfig, StateVisibility, UpdateType, ValueStateDescriptor)

from .aggregates import Concat, concat_strings


TTL = 100
NEVER = StateVisibility.NEVER_RETURN_EXPIRED
RETURN = StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP
ON_WRITE = UpdateType.ON_CREATE_AND_WRITE
ON_READ = UpdateType.ON_READ_AND_WRITE
KINDS = ["value", "list", "map", "reducing", "aggregating"]
MERGING = ["list", "reducing", "aggregating"]


def ttl(update_type: UpdateType = ON_WRITE, visibility: StateVisibility = NEVER, **kw) -> StateTtlConfig:
    """A TTL of ``TTL`` ms on the manual clock; ``kw`` goes to ``StateTtlConfig`` (cleanup settings)."""
    return StateTtlConfig(TTL, update_type=update_type, visibility=visibility, **kw)


def descriptor(kind: str, name: str | None = None):
    """A descriptor of ``kind``; reducing concatenates strings and aggregating uses ``Concat``."""
    name = name or kind
    return {"value": lambda: ValueStateDescriptor(name, default="dflt"),
            "list": lambda: ListStateDescriptor(name),
            "map": lambda: MapStateDescriptor(name),
            "reducing": lambda: ReducingStateDescriptor(name, concat_strings),
            "aggregating": lambda: AggregatingStateDescriptor(name, Concat())}[kind]()


def write(st, kind: str, token: str) -> None:
    """Put one observable element into a state of ``kind``."""
    if kind == "value":
        st.update(token)
    elif kind == "map":
        st.put(token, token.upper())
    else:
        st.add(token)


def read(st, kind: str):
    """The state's content in a comparable form; None/[]/{}/default mean empty."""
    if kind == "value":
        return st.value()
    if kind == "map":
        return dict(st.items())
    return st.get()


EMPTY = {"value": "dflt", "list": [], "map": {}, "reducing": None, "aggregating": None}


def read_one(kind: str, token: str):
    """What ``read`` returns after ``write(st, kind, token)`` on an empty state."""
    return {"value": token, "list": [token], "map": {token: token.upper()},
            "reducing": token, "aggregating": token}[kind]


def ttl_state(backend, kind: str, **kw):
    """A state of ``kind`` named ``ttl-<kind>`` with ``ttl(**kw)``, current key "u"."""
    d = descriptor(kind, f"ttl-{kind}")
    d.enable_time_to_live(ttl(**kw))
    backend.set_current_key("u")
    return backend.get_state(d)


def msgpack_round_trip(snapshot: dict) -> dict:
    """A snapshot through bytes, as a checkpoint store would keep it."""
    return KEY_SERIALIZER.loads(KEY_SERIALIZER.dumps(snapshot))


def populate(backend, keys, make=descriptor) -> None:
    """Two namespaces of every kind for each key; content derived from the key."""
    states = {k: backend.get_state(make(k)) for k in KINDS}
    for key in keys:
        backend.set_current_key(key)
        for kind, st in states.items():
            for ns in (None, ("w", 1)):
                st.set_current_namespace(ns)
                write(st, kind, f"{key}-{ns is None}")
                if kind != "value":
                    write(st, kind, "z")


def expected_content(kind: str, key, ns):
    """What ``populate`` left in ``kind`` for ``key`` in ``ns``."""
    token = f"{key}-{ns is None}"
    return {"value": token, "list": [token, "z"], "map": {token: token.upper(), "z": "Z"},
            "reducing": token + "z", "aggregating": token + "z"}[kind]


def check_content(backend, keys, present: bool = True, expected=expected_content, make=descriptor) -> None:
    """Every state of ``populate`` holds ``expected`` (nothing unless ``present``), registered by ``make(kind)``."""
    for kind in KINDS:
        st = backend.get_state(make(kind))
        for key in keys:
            backend.set_current_key(key)
            for ns in (None, ("w", 1)):
                st.set_current_namespace(ns)
                assert read(st, kind) == (expected(kind, key, ns) if present else EMPTY[kind]), (kind, key, ns)


def restored_value(make_backend, key, value):
    """A backend restored from one holding ``value`` for ``key`` in value state 'v' (nothing registered yet)."""
    src = make_backend()
    src.set_current_key(key)
    src.get_state(ValueStateDescriptor("v")).update(value)
    dst = make_backend()
    dst.restore_logical(src.snapshot_logical())
    return dst
