"""Backend registry: backends are found by name through the ``statekit.backends`` entry points
(or ``register_backend`` at run time), so ``statekit`` never imports a concrete backend."""

from __future__ import annotations

import time
from importlib.metadata import entry_points

from .errors import ConfigError

ENTRY_POINT_GROUP = "statekit.backends"
_registered: dict[str, type] = {}
_entry_points: dict[str, object] | None = None


def _discover() -> dict[str, object]:
    global _entry_points
    if _entry_points is None:
        _entry_points = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return _entry_points


def register_backend(name: str, cls: type) -> None:
    """Make ``cls`` (a KeyedStateBackend subclass) available as ``StateConfig(backend=name)``."""
    _registered[name] = cls


def available_backends() -> list[str]:
    """Names of every backend that can be created."""
    return sorted(set(_registered) | set(_discover()))


def backend_class(name: str) -> type:
    """The class registered under ``name``; loads its entry point on first use."""
    cls = _registered.get(name)
    if cls is None:
        ep = _discover().get(name)
        if ep is None:
            raise ConfigError(f"unknown backend {name!r}; valid backends: {', '.join(available_backends())}")
        cls = ep.load()
        _registered[name] = cls
    return cls


def wall_clock_ms() -> int:
    """Processing time in epoch milliseconds (the default TTL clock)."""
    return time.time_ns() // 1_000_000
