"""The S3 client's own retries, set by the standard AWS variable ``AWS_MAX_ATTEMPTS``.

pyarrow's S3 filesystem opened from a URI ignores that variable and retries a refused connection for
seconds inside every call, under each attempt of statekit's ``RetryPolicy``; boto3 (the lease's
conditional put) reads it itself. With ``AWS_MAX_ATTEMPTS=1`` every S3 request is tried once and the
``RetryPolicy`` alone decides how long a failing location is retried.
"""

from __future__ import annotations

import os

import pyarrow.fs as pafs

from .errors import CheckpointError

ATTEMPTS_ENV = "AWS_MAX_ATTEMPTS"
"""How many times the S3 client tries each request (the first try included), as every AWS SDK reads it."""


def s3_attempts() -> int | None:
    """The attempts ``AWS_MAX_ATTEMPTS`` asks for; None when it is unset or empty (pyarrow's own retries)."""
    value = os.environ.get(ATTEMPTS_ENV, "")
    if not value.strip():
        return None
    try:
        attempts = int(value)
    except ValueError:
        attempts = 0
    if attempts < 1:
        raise CheckpointError(f"environment variable {ATTEMPTS_ENV}={value!r}: expected a whole number >= 1 (tries "
                              f"of each S3 request; 1 leaves the retries to statekit's RetryPolicy), or unset it")
    return attempts


def with_s3_attempts(fs: pafs.FileSystem) -> pafs.FileSystem:
    """``fs`` itself, or when it is an S3 filesystem and ``AWS_MAX_ATTEMPTS`` is set, the same filesystem
    (its options as pyarrow pickles them) with AWS's standard retry strategy of that many attempts."""
    if not isinstance(fs, pafs.S3FileSystem):
        return fs
    attempts = s3_attempts()
    if attempts is None:
        return fs
    _, (options,) = fs.__reduce__()  # every option but the retry strategy, which pyarrow does not pickle
    return pafs.S3FileSystem(**options, retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=attempts))
