"""Mutual challenge-response on a Unix socket before anything a peer sends is trusted.

Both sides prove they know a shared secret with ``multiprocessing.connection``'s challenge-response
(``deliver_challenge``, ``answer_challenge``: length-prefixed bytes, never pickle), as a ``Listener``
and ``Client`` with an ``authkey`` do. The serving side gives a peer ``HANDSHAKE_SECONDS`` to complete
it: a silent or dribbling peer is cut off, so it cannot hold a single-threaded server.
"""

from __future__ import annotations

import os
import socket
import threading
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
from typing import Callable

HANDSHAKE_SECONDS = 5.0
"""How long the serving side waits for a peer to complete the handshake before dropping it."""


class HandshakeError(Exception):
    """The peer did not prove it knows the secret: it holds another one, or does not speak the protocol."""


def connect(path: str, secret: bytes) -> Connection:
    """A connection to the server at ``path`` once each side proved to the other that it knows ``secret``
    (what ``Client(path, family="AF_UNIX", authkey=secret)`` does, with its failures told apart).
    Raises what connecting raises (nothing listens), EOFError or ConnectionError (the server went away),
    HandshakeError (it is not who it claims)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    conn = Connection(sock.detach())
    try:
        _mutual(conn, secret, answer_challenge, deliver_challenge)
    except BaseException:
        conn.close()
        raise
    return conn


def accept(conn: Connection, secret: bytes, seconds: float = HANDSHAKE_SECONDS) -> None:
    """Challenge the peer on ``conn`` (just accepted), then answer its challenge; a peer that has not completed
    both within ``seconds`` finds the connection shut. Raises HandshakeError (a wrong or missing answer, or
    too slow), EOFError or ConnectionError (the peer went away); the caller drops the connection."""
    peer = socket.socket(fileno=os.dup(conn.fileno()))  # to shut from the watchdog while a read blocks
    cut = threading.Event()

    def expire() -> None:
        cut.set()
        peer.shutdown(socket.SHUT_RDWR)

    watchdog = threading.Timer(seconds, expire)
    watchdog.start()
    try:
        _mutual(conn, secret, deliver_challenge, answer_challenge)
    except (HandshakeError, EOFError, ConnectionError):
        if not cut.is_set():
            raise
    finally:
        watchdog.cancel()
        watchdog.join()  # no thread left behind (the spawner forks right after)
        peer.close()
    if cut.is_set():  # even if it completed as the watchdog fired: the connection is shut
        raise HandshakeError(f"the peer did not complete the handshake within {seconds:g} s")


def _mutual(conn: Connection, secret: bytes, first: Callable[[Connection, bytes], None],
            second: Callable[[Connection, bytes], None]) -> None:
    if not secret:
        raise HandshakeError("no secret to prove: an empty one would admit anyone")
    try:
        first(conn, secret)
        second(conn, secret)
    except AuthenticationError as e:
        raise HandshakeError(f"it failed the challenge-response ({e})") from None
    except AssertionError:  # answer_challenge's check that the first message is a challenge
        raise HandshakeError("its first message is not a challenge") from None
    except (EOFError, ConnectionError):
        raise
    except OSError as e:  # a message longer than a handshake's, or cut off mid-message
        raise HandshakeError(f"it broke the protocol ({e})") from None
