"""Serializers for keys, namespaces and values.

The default is msgpack with exact types: a tuple comes back as a tuple (so tuple keys and
namespaces stay hashable), a list as a list, and classes registered with ``register_type``
(window classes, for instance) come back as themselves. msgpack is prefix-free, so an encoded
key followed by an encoded namespace can be split again and byte prefixes select one key.

An extension code decodes only as a type this process registered or an installed package declares
under the ``statekit.types`` entry points (named by code; its module is imported when the code is first
met). The types a snapshot recorded (``registered_types`` at commit time) never add to that: data is not
code. ``check_recorded_types`` refuses a snapshot that recorded another class for a code than this
process has, and keeps the recorded names to explain a code met later that nothing here knows.
"""

from __future__ import annotations

import threading
from functools import cache
from importlib.metadata import EntryPoint, entry_points
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
_recorded: dict[int, str] = {}
"""Code -> ``module:qualname`` that the snapshots read in this process recorded: only to explain and check."""
_checked: dict[int, Callable[[Any], Any]] = {}
"""Decoders of codes checked against ``_recorded`` since they were registered: the per-value fast path."""
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
    _checked.pop(code, None)


def registered_types() -> dict[int, str]:
    """Every registered extension code with the ``module:qualname`` of its class."""
    return dict(_names)


def check_recorded_types(types: Mapping[Any, str], where: str) -> None:
    """Check the types a snapshot recorded (code -> ``module:qualname``) against the classes this process
    registered, and keep them to explain a code decoding meets later; imports nothing. ``where`` names the
    snapshot in errors."""
    recorded = {int(code): name for code, name in types.items()}
    for code, name in recorded.items():
        if _names.get(code, name) != name:
            raise _mismatch(code, name, f"{where}: ")
    _recorded.update(recorded)


def unknown_types(types: Mapping[Any, str]) -> dict[int, str]:
    """The recorded codes (code -> ``module:qualname``) that this process neither registers nor has declared
    under a ``statekit.types`` entry point: their state cannot be decoded here."""
    return {int(code): name for code, name in types.items()
            if int(code) not in _decoders and str(code) not in _declared()}


@cache
def _declared() -> dict[str, EntryPoint]:
    """The ``statekit.types`` entry points of the installed packages, by name (the code)."""
    return {ep.name: ep for ep in entry_points(group=TYPES_ENTRY_POINT_GROUP)}


def _mismatch(code: int, recorded: str, where: str = "") -> SerializationError:
    """The error for a code recorded as another class than the one this process registers under it."""
    return SerializationError(f"{where}msgpack extension code {code} is recorded as {recorded}, but this process "
                              f"registers {_names[code]} under it: the snapshot was written with another type under "
                              f"this code; restore it with the job (and code) that wrote it")


def _decoder(code: int) -> Callable[[Any], Any]:
    """The decoder of ``code``: checked once against the name snapshots recorded for it, then cached."""
    dec = _checked.get(code)
    if dec is not None:
        return dec
    if code not in _decoders:
        _load_declared(code)
    dec = _decoders.get(code)
    recorded = _recorded.get(code)
    if dec is None:
        what = f", recorded as {recorded}" if recorded else " (the snapshot recorded no type for it)"
        raise SerializationError(
            f"unknown msgpack extension code {code}{what}: no type is registered under it in this process; "
            f"register it with statekit.register_type({code}, ...) in a module the job imports (its operator "
            f"factory's), or declare it under the {TYPES_ENTRY_POINT_GROUP} entry point of an installed package "
            f"(name {str(code)!r}, value 'module:Class'); a checkpoint's record is never imported")
    if recorded is not None and recorded != _names[code]:
        raise _mismatch(code, recorded)
    _checked[code] = dec
    return dec


def _load_declared(code: int) -> None:
    """Import the type an installed package declares for ``code`` (its module registers it), if any."""
    ep = _declared().get(str(code))
    if ep is None:
        return
    try:
        ep.load()
    except (ImportError, AttributeError) as e:
        raise SerializationError(f"msgpack extension code {code} is declared as {ep.value} (entry point {ep.name} of "
                                 f"{TYPES_ENTRY_POINT_GROUP}), which cannot be loaded: {e}") from None
    if code not in _decoders:
        raise SerializationError(f"msgpack extension code {code} is declared as {ep.value} (entry point {ep.name} of "
                                 f"{TYPES_ENTRY_POINT_GROUP}), but importing it did not register the code; call "
                                 f"statekit.register_type({code}, ...) in its module")


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
