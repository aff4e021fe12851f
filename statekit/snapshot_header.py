"""The snapshot header: one versioned record of every format a checkpoint's snapshot is written in.

As Flink's ``KeyedBackendSerializationProxy``: written into every manifest (inside what its checksum
and signature cover) and checked before any file of the snapshot is read. It records each format mark
by scope: ``statekit`` (the logical snapshot format, the payload codec, the manifest format), the
backend's (``backend:<name>``, its layout) and the states an operator stores in its own encoding
(``state:<name>``, e.g. the session table's pages). Backends and operators declare their marks here
(``declare_backend_format``, ``declare_state_format``), so the state layer imports neither.

A checkpoint written before the header has none: version 0, read by the readers of that time (each of
its files carries its own mark: a payload's magic, a logical snapshot's ``format``, a heap full
snapshot's ``layout``, a page's first word).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, TypeVar

from .errors import StateError

HEADER_VERSION = 1
"""The header version this code writes; it reads this one and 0 (no header)."""
CORE = "statekit"
"""The scope of the marks every snapshot has."""

Mark = TypeVar("Mark", int, str)


class SnapshotFormatError(StateError):
    """A snapshot header this code cannot read: an unknown version, or a format mark it does not know or
    no longer reads."""


@dataclass(frozen=True, slots=True)
class FormatMark:
    """A format mark as this code declares it: the value it writes and every value it reads."""

    value: int | str
    reads: frozenset[int | str]


_DECLARED: dict[str, dict[str, FormatMark]] = {}


def _declare(scope: str, mark: str, value: Mark, reads: Iterable[Mark]) -> Mark:
    declared = FormatMark(value, frozenset((value, *reads)))
    known = _DECLARED.setdefault(scope, {}).setdefault(mark, declared)
    if known != declared:
        raise SnapshotFormatError(f"format mark {mark!r} of {scope} is declared twice: writing {known.value!r} "
                                  f"and {value!r}")
    return value


def backend_scope(backend: str) -> str:
    """The header scope of a backend's marks."""
    return f"backend:{backend}"


def state_scope(state: str) -> str:
    """The header scope of the marks of a state stored in an operator's own encoding."""
    return f"state:{state}"


def declare_backend_format(backend: str, mark: str, value: Mark, *, reads: Iterable[Mark] = ()) -> Mark:
    """Declare a format mark of the backend named ``backend`` (its native snapshots): the ``value`` it
    writes and any older ``reads`` it still reads; returns ``value``."""
    return _declare(backend_scope(backend), mark, value, reads)


def declare_state_format(state: str, mark: str, value: Mark, *, reads: Iterable[Mark] = ()) -> Mark:
    """Declare a format mark of the values of state ``state`` (an operator's own encoding of them): the
    ``value`` written and any older ``reads`` still read; returns ``value``."""
    return _declare(state_scope(state), mark, value, reads)


SNAPSHOT_FORMAT = _declare(CORE, "snapshot", 1, ())
"""The logical snapshot format (``statekit.logical_snapshot``)."""
PAYLOAD_CODEC = _declare(CORE, "payload", "SKZ1", ())
"""The codec of snapshot files (``statekit.payload``), also their first bytes."""
MANIFEST_FORMAT = _declare(CORE, "manifest", 1, ())
"""The manifest's fields (``statekit.checkpoint.manifest``)."""


@dataclass(frozen=True, slots=True)
class SnapshotHeader:
    """The header of one snapshot: its version and its marks (scope -> mark -> value)."""

    version: int
    formats: dict[str, dict[str, int | str]]

    def mark(self, scope: str, mark: str) -> int | str | None:
        """The value recorded for ``mark`` of ``scope``, None when not recorded."""
        return self.formats.get(scope, {}).get(mark)

    def continues(self, base: "SnapshotHeader") -> bool:
        """Whether a snapshot with this header may reuse the files of ``base``'s: same version, and each
        scope both record at the same marks (so a file never changes format within one snapshot)."""
        return base.version == self.version and all(base.formats[s] == self.formats[s]
                                                    for s in base.formats.keys() & self.formats.keys())

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "formats": self.formats}


NO_HEADER = SnapshotHeader(0, {})
"""What a snapshot written before the header has (version 0)."""


def current_header(scopes: Iterable[str]) -> SnapshotHeader:
    """The header this code writes for a snapshot holding ``scopes``: the core marks, and the declared
    marks of each scope (a scope nothing declares is left out)."""
    chosen = dict.fromkeys((CORE, *scopes))
    return SnapshotHeader(HEADER_VERSION, {s: {m: f.value for m, f in _DECLARED[s].items()}
                                           for s in chosen if s in _DECLARED})


def job_formats() -> dict[str, Any]:
    """What a job description records as its state formats: the header version, the core marks and the
    marks of every state format declared (a backend's are not: a job may change its backend)."""
    scopes = [s for s in _DECLARED if _is_state(s)]
    return current_header(scopes).to_dict()


def check_job_formats(recorded: Any, where: str) -> None:
    """Refuse the state formats a job recorded (``job_formats`` of the run that recorded them) when this code
    cannot read them, as ``check_header`` refuses a snapshot's; ``{"snapshot": 1}``, what jobs recorded before
    the header, and no record at all are version 0."""
    if recorded != {"snapshot": SNAPSHOT_FORMAT}:
        check_header(read_header(recorded, where), where, required=[CORE])


def read_header(raw: Any, where: str) -> SnapshotHeader:
    """The header recorded as ``raw`` (None: a snapshot from before the header, version 0), its shape
    and version checked and its core marks too (``check_header``); ``where`` names the file in errors."""
    if raw is None:
        return NO_HEADER
    if not (isinstance(raw, dict) and set(raw) == {"version", "formats"}):
        raise SnapshotFormatError(f"{where}: the snapshot header must hold exactly 'version' and 'formats', got "
                                  f"{_shown(raw)}")
    version, formats = raw["version"], raw["formats"]
    if type(version) is not int or not 1 <= version <= HEADER_VERSION:
        raise SnapshotFormatError(f"{where}: snapshot header version {_shown(version)}; this statekit reads versions "
                                  f"up to {HEADER_VERSION} (written by a newer statekit: restore it with that one)")
    if not (isinstance(formats, dict) and all(isinstance(s, str) and isinstance(m, dict) for s, m in formats.items())
            and all(isinstance(k, str) and type(v) in (int, str) for m in formats.values() for k, v in m.items())):
        raise SnapshotFormatError(f"{where}: the snapshot header's formats must map scopes to marks to int or str "
                                  f"values, got {_shown(formats)}")
    header = SnapshotHeader(version, formats)
    check_header(header, where, required=[CORE], only=[CORE])
    return header


def check_header(header: SnapshotHeader, where: str, *, required: Iterable[str],
                 only: Iterable[str] | None = None, unread_states: bool = False) -> None:
    """Refuse what this code cannot read, naming the mark, the value found, the values read and the file
    (``where``): a recorded mark not declared here or of a value not read here; a declared mark of a
    ``required`` scope that is not recorded; a recorded scope that is neither required nor a state's.
    ``only``: check these scopes alone. ``unread_states``: a state scope no code here declares passes (its
    values will be carried, not read). A snapshot without header (version 0) passes: each of its files
    carries its own mark."""
    if header.version == 0:
        return
    required = list(required)
    scopes = list(header.formats) if only is None else [s for s in only if s in header.formats]
    for scope in scopes:
        declared = _DECLARED.get(scope)
        recorded = f"{where}: the snapshot header records formats of {scope} ({_shown(header.formats[scope])})"
        if not (_is_state(scope) or scope in required):
            raise SnapshotFormatError(f"{recorded}, which a snapshot of this kind and backend does not have: it "
                                      f"was not written by statekit (or was edited)")
        if declared is None and not unread_states:
            raise SnapshotFormatError(f"{recorded}, which no code loaded here declares: {_way_out(scope)}")
        if declared is None:  # a state's values carried unread
            continue
        for mark, value in header.formats[scope].items():
            known = declared.get(mark)
            if known is None:
                raise SnapshotFormatError(f"{where}: unknown format mark {mark!r} of {scope} (value {value!r}) in "
                                          f"the snapshot header: written by a newer statekit or another version of "
                                          f"its code; restore it with that one")
            if value not in known.reads:
                raise SnapshotFormatError(f"{where}: format mark {mark!r} of {scope} is {value!r}; this code reads "
                                          f"{' or '.join(map(repr, sorted(known.reads, key=repr)))}: restore it with "
                                          f"the statekit (and operator) version that wrote it")
    for scope in required:
        missing = sorted(set(_DECLARED.get(scope, {})) - set(header.formats.get(scope, {})))
        if missing:
            raise SnapshotFormatError(f"{where}: the snapshot header lacks format mark(s) {', '.join(missing)} of "
                                      f"{scope}: it was not written by statekit (or was edited)")


def _is_state(scope: str) -> bool:
    return scope.startswith(state_scope(""))


def _way_out(scope: str) -> str:
    if _is_state(scope):
        return ("make the operator that stores that state before restoring (importing its module declares its "
                "formats), or restore with the statekit version that wrote it")
    return "restore it with the statekit version (and backend) that wrote it"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."
