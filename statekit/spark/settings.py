"""The durations among a job's ``spark.statekit.*`` settings, each read and checked by one function that
``run_keyed`` and the CLI's pre-flight (before Spark starts) share, so both refuse a value alike."""

from __future__ import annotations

from typing import Mapping

from ..config import SPARK_PREFIX
from ..durations import to_millis

DEFAULT_HOST_IDLE_TIMEOUT = "10m"
DEFAULT_MAX_AHEAD = "7d"
DEFAULT_LEASE_TIMEOUT = "60s"


def statekit_settings(conf: Mapping[str, str]) -> dict[str, str]:
    """The ``spark.statekit.*`` entries of Spark conf ``conf``, the prefix dropped."""
    return {k[len(SPARK_PREFIX):]: v for k, v in conf.items() if k.startswith(SPARK_PREFIX)}


def ahead_limit_ms(max_ahead: int | str | None, what: str) -> int | None:
    """``max_ahead`` (a duration; None or ``"none"``: no limit) in milliseconds; ``what`` names it in errors."""
    if max_ahead is None or str(max_ahead).strip().lower() == "none":
        return None
    limit = to_millis(max_ahead, what)
    if limit < 0:
        raise ValueError(f"{what} must be >= 0, got {max_ahead!r}")
    return limit


def host_idle_timeout_ms(settings: Mapping[str, str]) -> int:
    """``spark.statekit.host_idle_timeout`` (job ``settings``, prefix dropped) in milliseconds, refused unless > 0."""
    timeout = to_millis(settings.get("host_idle_timeout", DEFAULT_HOST_IDLE_TIMEOUT), "spark.statekit.host_idle_timeout")
    if timeout <= 0:
        raise ValueError(f"spark.statekit.host_idle_timeout={settings['host_idle_timeout']!r}: expected a duration > 0")
    return timeout


def lease_timeout_ms(settings: Mapping[str, str]) -> int:
    """``spark.statekit.lease_timeout`` (job ``settings``, prefix dropped) in milliseconds, refused unless > 0."""
    timeout = to_millis(settings.get("lease_timeout", DEFAULT_LEASE_TIMEOUT), "spark.statekit.lease_timeout")
    if timeout <= 0:
        raise ValueError(f"spark.statekit.lease_timeout={settings['lease_timeout']!r}: expected a duration > 0")
    return timeout


def check_duration_settings(conf: Mapping[str, str]) -> None:
    """The durations among Spark conf ``conf`` (``spark.statekit.max_ahead``, ``host_idle_timeout``,
    ``lease_timeout``), refused as ``run_keyed`` refuses them: for a check before Spark starts."""
    settings = statekit_settings(conf)
    if "max_ahead" in settings:
        ahead_limit_ms(settings["max_ahead"], "spark.statekit.max_ahead")
    host_idle_timeout_ms(settings)
    lease_timeout_ms(settings)
