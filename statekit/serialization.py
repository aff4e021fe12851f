"""Serializers for keys, namespaces and values.

The default is msgpack with exact types: a tuple comes back as a tuple (so tuple keys and
namespaces stay hashable), a list as a list, and classes registered with ``register_type``
(window classes, for instance) come back as themselves. msgpack is prefix-free, so an encoded
key followed by an encoded namespace can be split again and byte prefixes select one key.

Decoding never depends on what a process happened to import: an extension code not registered yet
is looked up among the ``statekit.types`` entry points (a package declares its types there, named by
code) and among the types a snapshot recorded (``registered_types`` at commit time, handed to
``expect_types`` before a restore), and the module that registers it is imported.
"""

from __future__ import annotations

import importlib
import threading
from importlib.metadata import entry_points
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

import msgpack

from .errors import SerializationError
from .key_identity import key_identity

_TUPLE_CODE = 1
_INT64_MIN = -(1 << 63)
_UINT64_MAX = (1 << 64) - 1
_SCALARS = frozenset((str, float, bool, bytes, type(None)))

_encoders: dict[type, tuple[int, Callable[[Any], Any]]] = {}
_decoders: dict[int, Callable[[Any], Any]] = {}
_names: dict[int, str] = {}
"""Registered code -> ``module:qualname`` of its class (what a snapshot records)."""
_expected: dict[int, str] = {}
"""Code -> ``module:qualname`` that snapshots about to be restored recorded."""
TYPES_ENTRY_POINT_GROUP = "statekit.types"


@runtime_checkable
class Serializer(Protocol):
    """What a descriptor's serializer must offer: bytes out, the same value back."""

    def dumps(self, value: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


def register_type(code: int, cls: type, to_plain: Callable[[Any], Any], from_plain: Callable[[Any], Any]) -> None:
    """Teach the msgpack serializer a class: ``to_plain`` gives msgpack-able data, ``from_plain`` rebuilds it."""
    if not 2 <= code <= 127:
        raise ValueError(f"extension code must be in [2, 127] (1 is the tuple), got {code}")
    known = _decoders.get(code)
    if known is not None and _encoders.get(cls, (None,))[0] != code:
        raise ValueError(f"extension code {code} is already registered for another type")
    _encoders[cls] = (code, to_plain)
    _decoders[code] = from_plain
    _names[code] = f"{cls.__module__}:{cls.__qualname__}"


def registered_types() -> dict[int, str]:
    """Every registered extension code with the ``module:qualname`` of its class."""
    return dict(_names)


def expect_types(types: Mapping[Any, str]) -> None:
    """Note the types a snapshot was written with (code -> ``module:qualname``), so that decoding it
    imports their modules when their codes are not registered yet."""
    for code, name in types.items():
        _expected.setdefault(int(code), name)


def _import_module_of(code: int, name: str, source: str) -> None:
    module = name.partition(":")[0]
    try:
        importlib.import_module(module)
    except ImportError as e:
        raise SerializationError(f"msgpack extension code {code} is type {name} ({source}), but its module "
                                 f"{module!r} cannot be imported: {e}") from None


def _decoder(code: int) -> Callable[[Any], Any]:
    """The decoder of ``code``, importing the module that registers it when it is not registered yet."""
    dec = _decoders.get(code)
    if dec is not None:
        return dec
    eps = {ep.name: ep for ep in entry_points(group=TYPES_ENTRY_POINT_GROUP)}
    ep = eps.get(str(code))
    if ep is not None:
        _import_module_of(code, ep.value, f"entry point {ep.name} of {TYPES_ENTRY_POINT_GROUP}")
    elif code in _expected:
        _import_module_of(code, _expected[code], "recorded in the snapshot")
    dec = _decoders.get(code)
    if dec is not None:
        return dec
    expected = _expected.get(code) or (ep.value if ep is not None else None)
    what = f"the snapshot expects type {expected}, whose module did not register it" if expected else \
        "no entry point or snapshot names its type"
    raise SerializationError(f"unknown msgpack extension code {code}: {what}; register the type with "
                             f"statekit.register_type (and declare it under the {TYPES_ENTRY_POINT_GROUP} entry point)")


def _default(obj: Any) -> Any:
    t = type(obj)
    enc = _encoders.get(t)
    if enc is not None:
        return msgpack.ExtType(enc[0], _packb(enc[1](obj)))
    if isinstance(obj, tuple):
        return msgpack.ExtType(_TUPLE_CODE, _packb(list(obj)))
    if isinstance(obj, dict):
        return dict(obj)
    if isinstance(obj, list):
        return list(obj)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, str):
        return str(obj)
    raise TypeError(f"cannot serialize object of type {t.__name__}")


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _TUPLE_CODE:
        return tuple(_unpackb(data))
    return _decoder(code)(_unpackb(data))


_local = threading.local()


def _packb(obj: Any) -> bytes:
    """Pack with a reused Packer per nesting depth (``_default`` packs nested tuples and registered
    types re-entrantly) and per thread; creating a Packer per call costs more than the packing."""
    pool = getattr(_local, "pool", None)
    if pool is None:
        pool = _local.pool = []
        _local.depth = 0
    depth = _local.depth
    if depth == len(pool):
        pool.append(msgpack.Packer(default=_default, strict_types=True, use_bin_type=True))
    packer = pool[depth]
    _local.depth = depth + 1
    try:
        return packer.pack(obj)
    except BaseException:
        packer.reset()
        raise
    finally:
        _local.depth = depth


def _unpackb(data: bytes) -> Any:
    return msgpack.unpackb(data, ext_hook=_ext_hook, raw=False, strict_map_key=False, use_list=True)


class MsgpackSerializer:
    """Exact-type msgpack; fails with a SerializationError naming the type it cannot encode."""

    __slots__ = ("_packer",)

    def __init__(self) -> None:
        self._packer = msgpack.Packer(default=_default, strict_types=True, use_bin_type=True)

    def __reduce__(self) -> tuple:
        """Picklable (its packer is not): descriptors of functions defined in a notebook or ``__main__``
        travel to Spark executors by value."""
        return (MsgpackSerializer, ())

    def dumps(self, value: Any) -> bytes:
        try:
            return self._packer.pack(value)
        except SerializationError:
            raise
        except (TypeError, ValueError, OverflowError) as e:
            self._packer.reset()
            raise SerializationError(f"{e} (value of type {type(value).__name__})") from None

    def dumps_many(self, values: Sequence[Any]) -> list[bytes]:
        """``dumps`` of each value: packed in one C-level pass, or one by one when one fails (which then
        raises its own SerializationError)."""
        try:
            return list(map(self._packer.pack, values))
        except Exception:
            self._packer.reset()
            return [self.dumps(v) for v in values]

    def loads(self, data: bytes) -> Any:
        try:
            return _unpackb(data)
        except SerializationError:
            raise
        except Exception as e:  # msgpack raises several unrelated types on corrupt input
            raise SerializationError(f"cannot decode {len(data)} bytes: {e}") from None

    def check(self, value: Any) -> None:
        """Raise SerializationError if ``value`` cannot be encoded; cheap for scalars."""
        t = type(value)
        if t is int:
            if not _INT64_MIN <= value <= _UINT64_MAX:
                raise SerializationError(f"integer {value} does not fit in 64 bits (value of type int)")
        elif t not in _SCALARS:
            self.dumps(value)


KEY_SERIALIZER = MsgpackSerializer()


class NamespaceBytes:
    """Namespaces serialized by ``KEY_SERIALIZER``, cached by ``key_identity`` (``1``, ``1.0`` and ``True``
    are equal in Python but three namespaces, as they serialize): a window's state and timers meet the
    same few namespaces over and over. Past ``limit`` entries the cache starts over."""

    __slots__ = ("_owner", "_limit", "_cache")

    def __init__(self, owner: str, limit: int = 1 << 14) -> None:
        self._owner, self._limit = owner, limit
        self._cache: dict[Any, bytes] = {}

    def __call__(self, namespace: Any) -> bytes:
        """The namespace's bytes; SerializationError naming the owner when it cannot be serialized, TypeError
        when it is unhashable."""
        ident = key_identity(namespace)
        nsb = self._cache.get(ident)
        if nsb is None:
            try:
                nsb = KEY_SERIALIZER.dumps(namespace)
            except SerializationError as e:
                raise SerializationError(f"{self._owner}: namespace {namespace!r} cannot be serialized: {e}") from None
            if len(self._cache) >= self._limit:
                self._cache.clear()
            self._cache[ident] = nsb
        return nsb

    def __len__(self) -> int:
        return len(self._cache)


def loads_prefix(data: bytes, count: int) -> tuple[list, int]:
    """Decode the first ``count`` msgpack objects of ``data``; also returns how many bytes they took."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, ext_hook=_ext_hook)
    unpacker.feed(data)
    try:
        objs = [unpacker.unpack() for _ in range(count)]
    except msgpack.OutOfData:
        raise SerializationError(f"truncated data: expected {count} msgpack objects in {len(data)} bytes") from None
    return objs, unpacker.tell()


def loads_stream(data: bytes) -> list:
    """Every msgpack object of ``data``, written one after another, decoded in one pass."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, ext_hook=_ext_hook)
    unpacker.feed(data)
    objs = list(unpacker)
    if unpacker.tell() != len(data):
        raise SerializationError(f"truncated data: {len(data) - unpacker.tell()} bytes after the last msgpack object")
    return objs


def check_value(serializer: Serializer, value: Any, state_name: str) -> None:
    """Validate ``value`` for writing into state ``state_name``; the error names the state and type."""
    try:
        if type(serializer) is MsgpackSerializer:
            serializer.check(value)
        else:
            serializer.dumps(value)
    except SerializationError as e:
        raise SerializationError(f"state '{state_name}': cannot serialize value of type {type(value).__name__}: {e}") from None
    except Exception as e:
        raise SerializationError(f"state '{state_name}': cannot serialize value of type {type(value).__name__}: {e}") from None
