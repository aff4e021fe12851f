"""The pages a session table (``operators.engines.session_table``) stores, one per key group: their bytes, written and read."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from statekit import KEY_SERIALIZER, PackedAggregate
from statekit.snapshot_header import declare_state_format

TABLE_STATE = "session-table"
PAGE_FORMAT = declare_state_format(TABLE_STATE, "page", 1)
MOVED_FORMAT = declare_state_format(TABLE_STATE, "moved", 1)
MOVED_PAGE = f"session table moved to cells, format {MOVED_FORMAT}".encode()
"""A key group's page once its table moved its sessions to a cell per key (``SessionTable``'s move): an operator
opened on it takes its table's sessions to cells too, whatever other groups it is given."""
_HEAD = 6
"""A page is bytes: six int64 words (PAGE_FORMAT, words per row, keys, rows, key bytes, list-form bytes),
the rows (int64), each row's key index (int32), each key's length (int32), the keys' bytes (serialized,
as key groups hash them) and the list-form sessions ``[[key index, [[start, end, accumulator], ...]], ...]``
(msgpack)."""


def encode_page(width: int, row_key: np.ndarray, rows: np.ndarray, kb_len: np.ndarray, blob: bytes,
                listed: list) -> bytes:
    """One key group's page (see ``_HEAD``)."""
    tail = KEY_SERIALIZER.dumps(listed) if listed else b""
    head = np.array([PAGE_FORMAT, width, len(kb_len), len(rows), len(blob), len(tail)], np.int64)
    return b"".join((head.tobytes(), rows.tobytes(), row_key.astype(np.int32).tobytes(),
                     kb_len.astype(np.int32).tobytes(), blob, tail))


def decode_page(page: bytes, width: int | None = None) -> tuple[int, np.ndarray, np.ndarray, list[bytes], list]:
    """``(width, row_key, rows, key bytes, listed)`` of a page; ValueError when it is not a page of
    PAGE_FORMAT with ``width`` words a row (any width when None)."""
    head = np.frombuffer(page, np.int64, _HEAD).tolist() if len(page) >= 8 * _HEAD else [None, None]
    if head[0] != PAGE_FORMAT or (width is not None and head[1] != width):
        raise ValueError(f"a page of format {head[0]} with {head[1]} words a row; this operator reads format "
                         f"{PAGE_FORMAT} with {width} (restore with the function that wrote it, or give it an "
                         f"accumulator migration)")
    _, w, n_keys, n_rows, n_blob, n_tail = head
    at = 8 * _HEAD
    rows = np.frombuffer(page, np.int64, n_rows * w, at).reshape(n_rows, w)
    at += 8 * n_rows * w
    row_key = np.frombuffer(page, np.int32, n_rows, at)
    at += 4 * n_rows
    kb_len = np.frombuffer(page, np.int32, n_keys, at).tolist()
    at += 4 * n_keys
    kbs = []
    for n in kb_len:
        kbs.append(page[at:at + n])
        at += n
    listed = KEY_SERIALIZER.loads(page[at:at + n_tail]) if n_tail else []
    return w, row_key, rows, kbs, listed


def page_sessions(page: bytes, function: PackedAggregate, version: int | None = None) -> list[list]:
    """A page as people read it: ``[[key, start, end, accumulator], ...]`` (accumulators written by
    ``function``'s accumulator ``version``); none in a moved group's page (its sessions are cells)."""
    if page == MOVED_PAGE:
        return []
    _, row_key, rows, kbs, listed = decode_page(page)
    keys = list(map(KEY_SERIALIZER.loads, kbs))
    accs = function.unpack(rows[:, 2:], version)
    out = [[keys[k], s, e, a] for k, (s, e), a in zip(row_key.tolist(), rows[:, :2].tolist(), accs)]
    return out + [[keys[k], s, e, a] for k, sessions in listed for s, e, a in sessions]


def page_migration(migrate: Callable[[int, Any], Any], packed: PackedAggregate) -> Callable[[int, bytes], bytes]:
    """A migration of pages from one of their accumulators' (``migrate(version, accumulator)``, each session's):
    rows written by accumulator ``version`` are unpacked with its layout, migrated and packed again (kept in the
    list form when they no longer pack); a moved group's page stays as it is."""
    def page(version: int, stored: bytes) -> bytes:
        if stored == MOVED_PAGE:
            return stored
        width = 2 + packed.packed_width()
        _, row_key, rows, kbs, listed = decode_page(stored)
        accs = [migrate(version, a) for a in packed.unpack(rows[:, 2:], version)]
        listed = [[i, [[s, e, migrate(version, a)] for s, e, a in sessions]] for i, sessions in listed]
        words = packed.pack(accs) if accs else np.zeros((0, width - 2), np.int64)
        if words is None:  # some accumulators no longer pack: the page's sessions all in the list form
            per_key: dict[int, list] = {}
            for k, (s, e), a in zip(row_key.tolist(), rows[:, :2].tolist(), accs):
                per_key.setdefault(k, []).append([s, e, a])
            listed += [[k, sessions] for k, sessions in per_key.items()]
            row_key, new_rows = np.zeros(0, np.int32), np.zeros((0, width), np.int64)
        else:
            new_rows = np.concatenate((rows[:, :2], np.asarray(words, np.int64)), axis=1)
        return encode_page(width, row_key, new_rows, np.fromiter(map(len, kbs), np.int32, len(kbs)),
                           b"".join(kbs), listed)
    return page
