"""Contexts handed to triggers, evictors and window functions, and the operator's timer buffer."""

from __future__ import annotations

from typing import Any, Callable

from statekit import (InternalMergingState, InternalTimerService, KeyedStateBackend, State, StateDescriptor,
                      VOID_NAMESPACE)

from .triggers import OnMergeContext


class TimerBuffer:
    """Timer registrations of the current key, applied at once by ``flush`` while buffering.

    While an epoch's records of one key are processed no timer can fire, so the net effect of a
    register/delete sequence (the last operation per timer) is all that reaches the timer service.
    Outside ``buffering`` (timer callbacks) operations go straight through, as timers registered
    there may fire in the same watermark advance.

    ``known``, when set, holds every namespace that may have had timers before buffering began
    (the in-flight windows as loaded, with a trigger whose timers follow its windows): deleting
    a timer of any other namespace only cancels a buffered registration.

    ``firing`` is the (event?, namespace, timestamp) of the timer being handled: it has left the
    queue already, so deleting it is skipped, unless the callback registered it again (a continuous
    trigger's last fire at the window's end): then the delete removes that registration, so each
    registered timer fires at most once, as in Flink.
    """

    __slots__ = ("_svc", "_pending", "buffering", "known", "firing", "_refired")

    def __init__(self, service: InternalTimerService) -> None:
        self._svc = service
        self._pending: dict[tuple[bool, Any, int], bool] = {}
        self.buffering = False
        self.known: Any = None
        self.firing: tuple | None = None
        self._refired = False

    def start_firing(self, event: bool, namespace: Any, ts: int) -> None:
        """The timer (event?, namespace, ts) is being handled (it has left the queue)."""
        self.firing = (event, namespace, ts)
        self._refired = False

    def end_firing(self) -> None:
        self.firing = None
        self._refired = False

    def _registered(self, key: tuple[bool, Any, int]) -> None:
        if key == self.firing:
            self._refired = True

    def _must_delete(self, key: tuple[bool, Any, int]) -> bool:
        """Delete from the queue unless ``key`` is the firing timer and it was not registered again."""
        if key != self.firing:
            return True
        refired, self._refired = self._refired, False
        return refired

    def _delete(self, key: tuple[bool, Any, int]) -> None:
        known = self.known
        if known is not None and key[1] not in known:
            self._pending.pop(key, None)
        else:
            self._pending[key] = False

    def register_event(self, namespace: Any, ts: int) -> None:
        if self.buffering:
            self._pending[(True, namespace, ts)] = True
        else:
            self._svc.register_event_time_timer(namespace, ts)
            self._registered((True, namespace, ts))

    def delete_event(self, namespace: Any, ts: int) -> None:
        if self.buffering:
            self._delete((True, namespace, ts))
        elif self._must_delete((True, namespace, ts)):
            self._svc.delete_event_time_timer(namespace, ts)

    def register_processing(self, namespace: Any, ts: int) -> None:
        if self.buffering:
            self._pending[(False, namespace, ts)] = True
        else:
            self._svc.register_processing_time_timer(namespace, ts)
            self._registered((False, namespace, ts))

    def delete_processing(self, namespace: Any, ts: int) -> None:
        if self.buffering:
            self._delete((False, namespace, ts))
        elif self._must_delete((False, namespace, ts)):
            self._svc.delete_processing_time_timer(namespace, ts)

    def flush(self) -> None:
        """Apply the buffered operations under the current key."""
        pending = self._pending
        if not pending:
            return
        svc = self._svc
        for (event, ns, ts), add in pending.items():
            if event:
                if add:
                    svc.register_event_time_timer(ns, ts)
                else:
                    svc.delete_event_time_timer(ns, ts)
            elif add:
                svc.register_processing_time_timer(ns, ts)
            else:
                svc.delete_processing_time_timer(ns, ts)
        pending.clear()

    def discard(self) -> None:
        """Forget the buffered operations (processing the key failed)."""
        self._pending.clear()


class Instant(int):
    """A timestamp that can also be called, so ``ctx.current_watermark`` and PyFlink's
    ``ctx.current_watermark()`` both work."""

    __slots__ = ()

    def __call__(self) -> int:
        return int(self)


class KeyedStateStore:
    """Keyed state of the current key in one namespace (a window, or the void namespace); ``taken`` is
    called before a state is handed out (its owner then makes the right key current)."""

    __slots__ = ("_backend", "namespace", "_unsupported", "_taken")

    def __init__(self, backend: KeyedStateBackend, namespace: Any = VOID_NAMESPACE, unsupported: str | None = None,
                 taken: Callable[[], None] | None = None) -> None:
        self._backend = backend
        self.namespace = namespace
        self._unsupported = unsupported
        self._taken = taken

    def get_state(self, descriptor: StateDescriptor) -> State:
        if self._unsupported is not None:
            raise RuntimeError(self._unsupported)
        if self._taken is not None:
            self._taken()
        st = self._backend.get_state(descriptor)
        st.set_current_namespace(self.namespace)
        return st

    get_list_state = get_map_state = get_reducing_state = get_aggregating_state = get_state

    def __call__(self) -> "KeyedStateStore":
        return self


class WindowTriggerContext(OnMergeContext):
    """The trigger (and evictor) context: key, window and, during ``on_merge``, the merged windows."""

    __slots__ = ("_backend", "_timers", "_svc", "window", "merged_windows")

    def __init__(self, backend: KeyedStateBackend, timers: TimerBuffer, service: InternalTimerService) -> None:
        self._backend = backend
        self._timers = timers
        self._svc = service
        self.window: Any = None
        self.merged_windows: list = []

    def get_current_processing_time(self) -> int:
        return self._svc.current_processing_time()

    def get_current_watermark(self) -> int:
        return self._svc.current_watermark()

    def register_processing_time_timer(self, time: int) -> None:
        self._timers.register_processing(self.window, time)

    def register_event_time_timer(self, time: int) -> None:
        self._timers.register_event(self.window, time)

    def delete_processing_time_timer(self, time: int) -> None:
        self._timers.delete_processing(self.window, time)

    def delete_event_time_timer(self, time: int) -> None:
        self._timers.delete_event(self.window, time)

    def get_partitioned_state(self, state_descriptor: StateDescriptor) -> State:
        st = self._backend.get_state(state_descriptor)
        st.set_current_namespace(self.window)
        return st

    def merge_partitioned_state(self, state_descriptor: StateDescriptor) -> None:
        if not self.merged_windows:
            return
        st = self._backend.get_state(state_descriptor)
        if not isinstance(st, InternalMergingState):
            raise TypeError(f"trigger state '{state_descriptor.name}' is {state_descriptor.kind} state, "
                            f"which cannot be merged (use list, reducing or aggregating state)")
        st.merge_namespaces(self.window, self.merged_windows)


class WindowProcessContext:
    """``ProcessWindowFunction``'s context: the window, time, and per-window and global keyed state
    (``taken``: see ``KeyedStateStore``)."""

    __slots__ = ("_svc", "_window", "_window_store", "global_state")

    def __init__(self, backend: KeyedStateBackend, service: InternalTimerService, merging: bool,
                 taken: Callable[[], None] | None = None) -> None:
        self._svc = service
        self._window: Any = None
        self._window_store = KeyedStateStore(
            backend, unsupported="per-window state is not supported with merging window assigners" if merging else None,
            taken=taken)
        self.global_state = KeyedStateStore(backend, taken=taken)

    def set_window(self, window: Any) -> None:
        self._window = window
        self._window_store.namespace = window

    @property
    def window(self) -> Any:
        return self._window

    @property
    def current_watermark(self) -> Instant:
        return Instant(self._svc.current_watermark())

    @property
    def current_processing_time(self) -> Instant:
        return Instant(self._svc.current_processing_time())

    @property
    def window_state(self) -> KeyedStateStore:
        return self._window_store
