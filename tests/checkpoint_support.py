"""Helpers for checkpoint tests: run code in a fresh interpreter, edit a committed manifest as an attacker would."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any, Callable


USER_TYPES = """
from dataclasses import dataclass
from statekit import register_type


@dataclass(frozen=True)
class Point:
    x: int
    y: int


register_type(42, Point, lambda p: [p.x, p.y], lambda v: Point(*v))
"""
"""A user type's module: it registers ``Point`` under extension code 42 when imported."""

def python_process(code: str, cwd: Path, *path: Path | str, env: dict[str, str] | None = None) -> CompletedProcess:
    """Run ``code`` in a fresh interpreter with only ``path`` on its PYTHONPATH (and ``env``)."""
    full_env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(map(str, path)), **(env or {})}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=120)


def run_python(code: str, cwd: Path, *path: Path | str, env: dict[str, str] | None = None) -> str:
    """``python_process`` that must succeed; its stdout."""
    r = python_process(code, cwd, *path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def edit_manifest(manifest: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Apply ``change`` to a committed manifest's body and recompute its plain checksum, as anyone with write
    access can (a signature, if any, is kept as it was: only the key could remake it)."""
    body = json.loads(manifest.read_text())
    body.pop("checksum")
    signature = body.pop("signature", None)
    change(body)
    body["checksum"] = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    if signature is not None:
        body["signature"] = signature
    manifest.write_text(json.dumps(body, indent=1, sort_keys=True))
