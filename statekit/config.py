"""StateConfig: which backend and how it is tuned, from kwargs, a dict, the environment or Spark conf.

Common fields are attributes; backend options are dotted names (``rocksdb.block_cache_size``)
declared by each backend as ``OptionSpec``s, so an unknown option is an error listing valid ones.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from .errors import ConfigError
from .keygroups import DEFAULT_MAX_PARALLELISM, UPPER_BOUND_MAX_PARALLELISM
from .registry import available_backends, backend_class

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
ENV_PREFIX = "STATEKIT_"
SPARK_PREFIX = "spark.statekit."


def parse_size(value: Any) -> int:
    """Bytes from an int or a string such as ``"64m"``, ``"1g"``, ``"512KiB"``."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        return value
    m = _SIZE_RE.match(str(value))
    if not m:
        raise ValueError(f"not a size (use bytes or a suffix k/m/g): {value!r}")
    return int(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    s = str(value).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def parse_budget(value: Any, setting: str) -> int:
    """Bytes of a memory budget given as a size (``"1g"``, ``"512m"``, bytes); ConfigError naming ``setting`` if
    it is not a size or not above 0."""
    try:
        size = parse_size(value)
    except ValueError as e:
        raise ConfigError(f"{setting}={value!r}: {e}") from None
    if size < 1:
        raise ConfigError(f"{setting}={value!r}: expected a size above 0 (such as 512m or 2g)")
    return size


_PARSERS = {"int": int, "float": float, "str": str, "bool": _parse_bool, "size": parse_size}


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One tunable of a backend: dotted name, kind (int, float, str, bool, size), default, help."""

    name: str
    kind: str
    default: Any
    doc: str

    def parse(self, value: Any) -> Any:
        if value is None:
            return None
        try:
            return _PARSERS[self.kind](value)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"option '{self.name}' expects {self.kind}, got {value!r}: {e}") from None


_COMMON = ("backend", "max_parallelism", "local_dir", "memory_budget")


def _option_spec(name: str) -> OptionSpec:
    """The spec of a dotted option, declared by the backend its prefix names."""
    group = name.partition(".")[0]
    specs = {s.name: s for s in backend_class(group).OPTIONS} if group in available_backends() else {}
    spec = specs.get(name)
    if spec is None:
        valid = ", ".join(sorted(specs)) if specs else "<backend>.<option>, backends: " + ", ".join(available_backends())
        raise ConfigError(f"unknown option {name!r}; valid options: {valid}; common fields: {', '.join(_COMMON)}")
    return spec


DEFAULT_BACKEND = "heap"
"""The backend of a ``StateConfig`` that names none: state in this process (tests, embedded use)."""
DEFAULT_JOB_BACKEND = "rocksdb"
"""The backend of a job on Spark that names none (``run_keyed``, the CLI): its state may outgrow memory."""


@dataclass(frozen=True)
class StateConfig:
    """Backend choice and tuning; ``options`` holds backend options by dotted name. ``memory_budget``: the bytes
    statekit's state may hold in this process (``statekit.memory_budget``; None: its default rule)."""

    backend: str = DEFAULT_BACKEND
    max_parallelism: int = DEFAULT_MAX_PARALLELISM
    local_dir: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    memory_budget: int | None = None

    def __post_init__(self) -> None:
        names = available_backends()
        if self.backend not in names:
            raise ConfigError(f"unknown backend {self.backend!r}; valid backends: {', '.join(sorted(names))}")
        mp = self.max_parallelism
        if isinstance(mp, str):
            mp = OptionSpec("max_parallelism", "int", None, "").parse(mp)
        if not isinstance(mp, int) or not 1 <= mp <= UPPER_BOUND_MAX_PARALLELISM:
            raise ConfigError(f"max_parallelism must be an int in [1, {UPPER_BOUND_MAX_PARALLELISM}], got {self.max_parallelism!r}")
        object.__setattr__(self, "max_parallelism", mp)
        if self.memory_budget is not None:
            object.__setattr__(self, "memory_budget", parse_budget(self.memory_budget, "memory_budget"))
        parsed = {}
        for name, value in dict(self.options).items():
            parsed[name] = _option_spec(name).parse(value)
        object.__setattr__(self, "options", MappingProxyType(parsed))

    def get(self, name: str) -> Any:
        """An option's value, or its declared default."""
        if name in self.options:
            return self.options[name]
        return _option_spec(name).default

    def with_options(self, **changes: Any) -> "StateConfig":
        """A copy with common fields or (dotted, passed via ``options=``) backend options changed."""
        data = self.to_dict()
        extra = changes.pop("options", {}) or {}
        data.update(changes)
        data.update(extra)
        return StateConfig.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        """Flat dict form (common fields plus dotted options) that ``from_dict`` reads back."""
        d = {"backend": self.backend, "max_parallelism": self.max_parallelism}
        if self.local_dir is not None:
            d["local_dir"] = self.local_dir
        if self.memory_budget is not None:
            d["memory_budget"] = self.memory_budget
        d.update(self.options)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "StateConfig":
        """From a flat mapping: common fields and dotted backend options; ``options`` may be nested."""
        common = {k: data[k] for k in _COMMON if k in data}
        options = dict(data.get("options") or {})
        options.update({k: v for k, v in data.items() if k not in _COMMON and k != "options"})
        return cls(options=options, **common)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, base: Mapping[str, Any] | None = None) -> "StateConfig":
        """From ``STATEKIT_*`` variables: ``STATEKIT_BACKEND``, ``STATEKIT_ROCKSDB_BLOCK_CACHE_SIZE``, ..."""
        environ = os.environ if environ is None else environ
        data = dict(base or {})
        groups = available_backends()
        for var, value in environ.items():
            if not var.startswith(ENV_PREFIX):
                continue
            name = var[len(ENV_PREFIX):].lower()
            if name in _COMMON:
                data[name] = value
                continue
            group, _, rest = name.partition("_")
            if group not in groups or not rest:
                raise ConfigError(f"environment variable {var}: not a statekit setting; use STATEKIT_<FIELD> "
                                  f"({', '.join(f.upper() for f in _COMMON)}) or STATEKIT_<BACKEND>_<OPTION>")
            data[f"{group}.{rest}"] = value
        return cls.from_dict(data)

    @classmethod
    def from_spark_conf(cls, conf: Any, base: Mapping[str, Any] | None = None) -> "StateConfig":
        """From Spark conf keys ``spark.statekit.*`` (a SparkConf, a RuntimeConfig dict or a plain dict)."""
        if hasattr(conf, "getAll") and callable(conf.getAll):
            items = conf.getAll()
        elif isinstance(conf, Mapping):
            items = conf.items()
        else:
            items = conf
        data = dict(base or {})
        for k, v in items:
            if k.startswith(SPARK_PREFIX):
                data[k[len(SPARK_PREFIX):]] = v
        return cls.from_dict(data)
