"""``AWS_MAX_ATTEMPTS`` sets how often the S3 client of an ``s3://`` location tries each request inside every
attempt of the ``RetryPolicy``; a value that is not a whole number >= 1 is refused naming the variable
(``checkpoint.s3_retry``). Against a local HTTP server that answers every request with 503 and counts them."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from statekit.checkpoint import CheckpointError, CheckpointUnavailableError, RetryPolicy, Storage

_SLOW_DOWN = b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"


class _Busy(BaseHTTPRequestHandler):
    """Every request: 503 SlowDown (a retryable S3 answer), counted in the server's ``requests``."""

    def _busy(self) -> None:
        self.server.requests.append(f"{self.command} {self.path}")
        self.send_response(503)
        self.send_header("Content-Length", "0" if self.command == "HEAD" else str(len(_SLOW_DOWN)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(_SLOW_DOWN)

    do_HEAD = do_GET = do_PUT = do_POST = do_DELETE = _busy

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def busy_s3() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Busy)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    thread.join()


@pytest.fixture
def s3_vars(busy_s3, monkeypatch) -> ThreadingHTTPServer:
    """The standard AWS variables pointing at the busy server; its request log emptied."""
    for var, value in {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{busy_s3.server_port}", "AWS_ACCESS_KEY_ID": "test",
                       "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}.items():
        monkeypatch.setenv(var, value)
    busy_s3.requests.clear()
    return busy_s3


@pytest.mark.parametrize("aws_attempts, policy_attempts", [(1, 3), (2, 1)])
def test_each_attempt_of_the_retry_policy_makes_aws_max_attempts_requests(s3_vars, monkeypatch, aws_attempts,
                                                                           policy_attempts):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", str(aws_attempts))
    storage = Storage("s3://bucket/ckpt?region=eu-west-1",
                      RetryPolicy(attempts=policy_attempts, backoff_ms=0, sleep=lambda _: None))
    assert storage.fs.region == "eu-west-1"  # the URI's own options are kept
    with pytest.raises(CheckpointUnavailableError, match=f"read 'x' failed after {policy_attempts} attempts"):
        storage.read("x")
    assert s3_vars.requests == ["HEAD /bucket/ckpt/x"] * (aws_attempts * policy_attempts)


@pytest.mark.parametrize("value", ["0", "-1", "three", "2.5"])
def test_a_bad_aws_max_attempts_is_refused_naming_it(s3_vars, monkeypatch, value):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", value)
    with pytest.raises(CheckpointError, match=f"AWS_MAX_ATTEMPTS={value!r}: expected a whole number >= 1"):
        Storage("s3://bucket/ckpt")
    assert s3_vars.requests == []  # refused before any request
