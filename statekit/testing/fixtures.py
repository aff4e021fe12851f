"""Pytest fixtures for backend tests: every registered backend, a manual TTL clock, a backend factory.

Backends are taken from ``statekit.available_backends()`` (or ``STATEKIT_TEST_BACKENDS``), so a
backend joins every parametrized suite as soon as it registers. A registered backend that fails to
import makes its tests fail (the ``backend_name`` fixture loads the class), it is never skipped.
Use it as a plugin: ``pytest_plugins = ["statekit.testing.fixtures"]``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from statekit import KeyedStateBackend, StateConfig, available_backends, backend_class, create_backend

BACKENDS = [b for b in os.environ.get("STATEKIT_TEST_BACKENDS", "").split(",") if b] or available_backends()
START_MS = 1_000_000


class ManualClock:
    """A processing-time clock that only moves when told to (TTL tests)."""

    def __init__(self, now_ms: int = START_MS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> int:
        self.now_ms += ms
        return self.now_ms


class BackendFactory:
    """Builds backends with per-backend local directories and closes them all at the end."""

    def __init__(self, backend: str, clock: ManualClock, root: Path) -> None:
        self.backend = backend
        self.clock = clock
        self.root = root
        self.made: list[KeyedStateBackend] = []

    def __call__(self, *, backend: str | None = None, key_groups: Any = None,
                 time_provider: Callable[[], int] | None = None, **config: Any) -> KeyedStateBackend:
        """A backend; ``config`` goes to ``StateConfig`` (``max_parallelism``, ``options``, ...)."""
        config.setdefault("local_dir", str(self.root / f"backend-{len(self.made)}"))
        cfg = StateConfig(backend=backend or self.backend, **config)
        b = create_backend(cfg, key_groups=key_groups, time_provider=time_provider or self.clock)
        self.made.append(b)
        return b

    def close_all(self) -> None:
        for b in self.made:
            if not b.closed:
                b.close()

    def __enter__(self) -> "BackendFactory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_all()


@pytest.fixture(params=BACKENDS)
def backend_name(request: pytest.FixtureRequest) -> str:
    """Each registered backend in turn; its class is loaded here so an import error fails the test."""
    backend_class(request.param)
    return request.param


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def make_backend(backend_name: str, clock: ManualClock, tmp_path: Path) -> Iterator[BackendFactory]:
    factory = BackendFactory(backend_name, clock, tmp_path)
    yield factory
    factory.close_all()


@pytest.fixture
def new_factory(tmp_path: Path) -> Iterator[Callable[..., BackendFactory]]:
    """Makes independent factories (one per hypothesis example), each in its own directory,
    on ``clock`` (default: a new ManualClock)."""
    factories: list[BackendFactory] = []

    def new(backend: str, clock: ManualClock | None = None) -> BackendFactory:
        factories.append(BackendFactory(backend, clock or ManualClock(), tmp_path / f"factory-{len(factories)}"))
        return factories[-1]

    yield new
    for f in factories:
        f.close_all()


@pytest.fixture
def backend(make_backend: BackendFactory) -> KeyedStateBackend:
    """A backend serving every key group of the default max parallelism, on the manual clock."""
    return make_backend()
