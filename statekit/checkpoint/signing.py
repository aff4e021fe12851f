"""The optional keyed MAC of manifests: a checkpoint's key, where it comes from, and the signature it makes.

A plain checksum catches damage, not an edit (anyone can recompute it); with a key, each manifest also
carries an HMAC-SHA256 over its canonical body, which only a holder of the key can make.
"""

from __future__ import annotations

import hashlib
import hmac
import os

KEY_ENV = "STATEKIT_CHECKPOINT_KEY"
"""The environment variable ``statekit inspect`` (and any offline reader) takes the key from."""
KEY_SPARK_CONF = "spark.statekit.checkpoint_key"
"""The Spark conf a ``run_keyed`` job takes the key from."""
KEY_SOURCES = f"the Spark conf {KEY_SPARK_CONF} for a run, the environment variable {KEY_ENV} for statekit inspect"


def key_from_env() -> bytes | None:
    """The key in ``STATEKIT_CHECKPOINT_KEY`` (its UTF-8 bytes); None when it is unset or empty."""
    return os.environ.get(KEY_ENV, "").encode() or None


def check_key(key: bytes | None) -> bytes | None:
    """``key`` as given, refused when it is not bytes or is empty (an empty key signs nothing worth checking)."""
    if key is not None and (not isinstance(key, bytes) or not key):
        got = "empty bytes" if key == b"" else type(key).__name__
        raise ValueError(f"a checkpoint key must be non-empty bytes, got {got}")
    return key


def sign(canonical: bytes, key: bytes) -> str:
    """The hex HMAC-SHA256 of ``canonical`` under ``key``."""
    return hmac.new(key, canonical, hashlib.sha256).hexdigest()


def signed_by(canonical: bytes, signature: object, key: bytes) -> bool:
    """Whether ``signature`` (read from a file: any JSON value) is ``canonical``'s under ``key``, compared
    in constant time."""
    return isinstance(signature, str) and hmac.compare_digest(signature.encode(), sign(canonical, key).encode())
