"""SessionRules: how event-time sessions with a gap take records one at a time (Flink's
``EventTimeSessionWindows`` through its ``MergingWindowSet``), shared by the engines that store sessions
a cell per key (``operators.engines.session_engine``) and as one table (``operators.engines.session_table``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from statekit import key_identity

from ..columns import out_of_order_keys
from ..gc_pause import gc_paused
from ..windows import TimeWindow, touch
from .window_engine import WindowEngine, window_start


class SessionRules(WindowEngine):
    """Sessions with gap ``gap``: which keys take records one at a time, and how one record merges."""

    def __init__(self, gap: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gap = gap

    def _slow_codes(self, codes: np.ndarray, timestamps: np.ndarray, wm: int) -> np.ndarray:
        """Keys with a record whose own session is not after the watermark, or out of time order."""
        return np.concatenate((codes[timestamps + (self.gap - 1) <= wm], out_of_order_keys(codes, timestamps)))

    def _record(self, key: Any, sessions: list, t: int, value: Any, wm: int) -> None:
        """One record, as one-by-one processing sees it: merge, add, and fire at once or drop when late."""
        gap = self.gap
        hits = [s for s in sessions if touch(s[0], s[1], t, t + gap)]
        if not hits:
            if self._cleanup(t + gap) <= wm:
                self._sink.late_record(value, t)
                return
            target = [t, t + gap, self._add(value, None)]
            sessions.append(target)
            sessions.sort(key=window_start)
        else:
            target = self._merge_hits(sessions, hits, t, t + gap)
            target[2] = self._add(value, target[2])
        if target[1] - 1 <= wm:
            self._sink.fire_window(key, TimeWindow(target[0], target[1]), target[2])

    def restore_sessions(self, keys: Sequence[Any], starts: Sequence[int], ends: Sequence[int],
                         accumulators: Sequence[Any]) -> int:
        """Put open sessions in as they are (a job bootstrapped from a table of them): session i is
        ``[starts[i], ends[i])`` of ``keys[i]`` with ``accumulators[i]``, its end its last record's time plus the
        gap; they fire and merge as the engine's own. Returns how many keys got sessions. ValueError naming the
        session when one is shorter than the gap or touches another of its key (the rules would have merged
        them); StateError when a key holds sessions already."""
        gap = self.gap
        by_key: dict[Any, tuple[Any, list]] = {}
        for key, start, end, acc in zip(keys, starts, ends, accumulators):
            if end - start < gap:
                raise ValueError(f"session [{start}, {end}) of key {key!r} is shorter than the gap {gap} ms (its end "
                                 f"is its last record's time plus the gap)")
            by_key.setdefault(key_identity(key), (key, []))[1].append([start, end, acc])
        for key, sessions in by_key.values():
            sessions.sort(key=window_start)
            for a, b in zip(sessions, sessions[1:]):
                if touch(a[0], a[1], b[0], b[1]):
                    raise ValueError(f"sessions [{a[0]}, {a[1]}) and [{b[0]}, {b[1]}) of key {key!r} touch: the "
                                     f"session rules would have merged them into one")
        if by_key:
            with gc_paused():
                self._restore([k for k, _ in by_key.values()], [s for _, s in by_key.values()])
        return len(by_key)

    def _merge_hits(self, sessions: list, hits: list, lo: int, hi: int) -> list:
        """Merge the sessions ``hits`` (in time order) and the window [lo, hi) into the first hit, as
        Flink's MergingWindowSet does: the others' contents merged in order, then into the first."""
        target = hits[0]
        if len(hits) > 1:
            merged = hits[1][2]
            for h in hits[2:]:
                merged = self._merge(merged, h[2])
            target[2] = self._merge(target[2], merged)
            for h in hits[1:]:
                sessions.remove(h)
        target[0] = min(lo, target[0])
        target[1] = max(hi, hits[-1][1])
        return target
