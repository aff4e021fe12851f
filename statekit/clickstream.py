"""Sample data: a generated clickstream with bounded disorder, and a plain sort-and-scan sessionizer
used as the reference (and the baseline) for session windows."""

from __future__ import annotations

import random
from typing import Iterator, NamedTuple


class Click(NamedTuple):
    user_id: str
    ts_ms: int
    value: int


def generate_clickstream(n_events: int, n_keys: int, seed: int = 7, start_ms: int = 1_700_000_000_000,
                         mean_gap_ms: int = 20_000, session_break_ms: int = 120_000,
                         max_disorder_ms: int = 5_000) -> list[Click]:
    """``n_events`` clicks of ``n_keys`` users in arrival order: per-user bursts of activity separated by
    breaks, arriving with up to ``max_disorder_ms`` of disorder. Deterministic for a seed."""
    rng = random.Random(seed)
    clock = [start_ms + rng.randrange(0, session_break_ms) for _ in range(n_keys)]
    events: list[tuple[int, int, Click]] = []
    for i in range(n_events):
        k = rng.randrange(n_keys)
        gap = rng.randrange(session_break_ms, 3 * session_break_ms) if rng.random() < 0.1 else rng.randrange(mean_gap_ms)
        clock[k] += gap
        ts = clock[k]
        arrival = ts + rng.randrange(max_disorder_ms + 1)
        events.append((arrival, i, Click(f"user_{k}", ts, rng.randrange(1, 100))))
    events.sort()
    return [e[2] for e in events]


def sessionize_reference(clicks: list[Click], gap_ms: int) -> list[tuple[str, int, int, int, int]]:
    """Sessions as (user, start, end, sum, count), end exclusive = last click + gap; sorted. Touching
    sessions merge (a click exactly ``gap_ms`` after the previous one continues the session)."""
    by_user: dict[str, list[tuple[int, int]]] = {}
    for c in clicks:
        by_user.setdefault(c.user_id, []).append((c.ts_ms, c.value))
    out = []
    for user, evs in by_user.items():
        evs.sort()
        start, end, total, count = evs[0][0], evs[0][0] + gap_ms, 0, 0
        for ts, v in evs:
            if ts > end:
                out.append((user, start, end, total, count))
                start, total, count = ts, 0, 0
            end = max(end, ts + gap_ms)
            total += v
            count += 1
        out.append((user, start, end, total, count))
    out.sort()
    return out


def epochs(clicks: list[Click], size: int) -> Iterator[list[Click]]:
    """Split arrival-ordered clicks into micro-batches of ``size``."""
    for i in range(0, len(clicks), size):
        yield clicks[i:i + size]
