"""What a session file holds and reports: entries (deep-frozen values), the header, the errors
and the open report, entry locations, and the protocol of a projection's fold.

``session_file`` is the session itself; ``docs/session-file.md`` the format.
"""

from __future__ import annotations

import enum
import secrets
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, Literal, Protocol

import attrs
import cbor2

from pi_agent_ask.persistence import codec

__all__ = [
    "COMPACTION_TYPE",
    "CURRENT_LEAF",
    "FORMAT_VERSION",
    "MAGIC",
    "MAX_FRAME_BYTES",
    "CurrentLeaf",
    "Damage",
    "DamageReason",
    "Entry",
    "Fold",
    "FrozenMap",
    "Header",
    "LeafRef",
    "Loc",
    "OpenReport",
    "Projection",
    "SessionFileError",
    "SessionFileErrorReason",
    "check_frame_size",
    "entry_fields",
    "frame_budget",
    "freeze",
    "header_from",
]

MAGIC: Final = "pi-agent-ask/session"
FORMAT_VERSION: Final = 2
COMPACTION_TYPE: Final = "compaction"
MAX_FRAME_BYTES: Final = 256 * 1024 * 1024
"""Largest payload a frame may declare; a larger length field is damage, not a huge entry."""


def check_frame_size(size: int) -> None:
    """``ValueError`` ("entry too large") for a frame, or the part of one made so far, of
    ``size`` bytes past ``MAX_FRAME_BYTES``: an append refuses it before writing anything."""
    if size > MAX_FRAME_BYTES:
        raise ValueError(f"entry too large: {size} bytes (at most {MAX_FRAME_BYTES})")


def frame_budget() -> int:
    """The plain CBOR an entries frame is filled with before the next frame begins: half the
    limit, which leaves room for DEFLATE's worst case on data that does not compress."""
    return MAX_FRAME_BYTES // 2


DamageReason = Literal["torn", "length", "checksum", "undecodable", "invalid"]
SessionFileErrorReason = Literal[
    "not-a-session-file",
    "damaged-header",
    "future-version",
    "locked",
    "unreadable",
    "not-a-regular-file",
]

_REASON_TEXT: Final[Mapping[str, str]] = {
    "torn": "incomplete frame at the end of the file (an interrupted write)",
    "length": "impossible frame length",
    "checksum": "checksum mismatch",
    "undecodable": "frame is not valid CBOR",
    "invalid": "frame does not fit the session",
}


class SessionFileError(Exception):
    """The file cannot be used as a session file; it was left untouched.

    ``reason`` is one of ``"not-a-session-file"`` (no session header), ``"damaged-header"``
    (the header frame is there but unreadable), ``"future-version"`` (written by a newer format
    version: ``version`` holds it), ``"locked"`` (another process has it open for writing),
    ``"unreadable"`` (the file changed under a reader in a way the index cannot follow) or
    ``"not-a-regular-file"`` (a FIFO, a device, a directory, a socket: never opened for writing
    and never read).
    """

    def __init__(
        self,
        path: Path | None,
        reason: SessionFileErrorReason,
        message: str,
        *,
        version: int | None = None,
    ) -> None:
        super().__init__(f"{path}: {message}" if path is not None else message)
        self.path = path
        self.reason = reason
        self.version = version


class FrozenMap(dict):  # type: ignore[type-arg]
    """A read-only ``dict``: entry data stays a value, and ``json.dumps`` still accepts it."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("entry data is read-only")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]
    __ior__ = _refuse  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenMap, (dict(self),))


def freeze(value: Any) -> Any:
    """Deep-freeze a CBOR-able value: maps become ``FrozenMap``, arrays become tuples.

    This is the one representation entry data has, whether it was just appended or read back
    from a file, so the two compare equal.
    """
    kind = type(value)
    if kind in _ATOMS:
        return value
    # Text, numbers and the like are their own frozen form: only containers recurse (an atom
    # inside one is taken as it is, without a call).
    if kind is list or kind is tuple:
        return tuple([v if type(v) in _ATOMS else freeze(v) for v in value])
    if kind is codec.Spliced:  # stored as its value
        return value.frozen(freeze)
    # A dict is checked before the Mapping ABC: most data is dicts, and an ABC's check is a
    # call into ``abc`` where a dict's is not.
    if isinstance(value, (dict, Mapping)):
        return FrozenMap(
            {
                k if type(k) in _ATOMS else freeze(k): v if type(v) in _ATOMS else freeze(v)
                for k, v in value.items()
            }
        )
    if isinstance(value, set | frozenset):
        return frozenset(freeze(v) for v in value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


_ATOMS: Final = frozenset({str, int, float, bool, bytes, type(None)})


def _frozen_data(value: Mapping[Any, Any] | None) -> FrozenMap:
    if value is None:
        return FrozenMap()
    if not isinstance(value, Mapping):
        raise TypeError(f"entry data must be a mapping, not {type(value).__name__}")
    frozen: FrozenMap = freeze(value)
    return frozen


@attrs.frozen(repr=False)
class Entry:
    """One node of the session tree.

    ``timestamp`` is seconds since the Unix epoch (UTC) as a float. ``data`` is deep-frozen:
    maps are ``FrozenMap`` (a read-only dict) and arrays are tuples, both when built here and
    when read back, so an entry read from a file equals the one that was appended.
    """

    id: str
    parent_id: str | None
    type: str
    timestamp: float
    data: Mapping[Any, Any] = attrs.field(converter=_frozen_data, factory=FrozenMap)

    def to_cbor(self) -> bytes:
        """The entry's CBOR payload as it is stored in a frame.

        ``TypeError`` when the data holds something CBOR cannot encode.
        """
        try:
            return cbor2.dumps(
                {
                    "id": self.id,
                    "parentId": self.parent_id,
                    "type": self.type,
                    "timestamp": self.timestamp,
                    "data": self.data,
                }
            )
        except cbor2.CBOREncodeError as exc:
            raise TypeError(f"entry data cannot be stored: {exc}") from exc

    @classmethod
    def from_cbor(cls, payload: bytes) -> Entry:
        """Decode an entry payload; ``ValueError`` when it is not a well-formed entry."""
        try:
            value = cbor2.loads(payload)
        except Exception as exc:  # cbor2 raises several unrelated types on bad input
            raise ValueError(f"undecodable entry: {exc}") from exc
        return cls.from_map(value)

    @classmethod
    def from_map(cls, value: Any) -> Entry:
        """An entry from a decoded version 1 entry map; ``ValueError`` when malformed."""
        return cls(*entry_fields(value))


def entry_fields(value: Any) -> tuple[str, str | None, str, float, dict[Any, Any]]:
    """The fields of a decoded entry map, checked; ``ValueError`` when malformed."""
    if not isinstance(value, dict):
        raise ValueError("entry is not a map")
    entry_id = value.get("id")
    parent_id = value.get("parentId")
    entry_type = value.get("type")
    timestamp = value.get("timestamp")
    data = value.get("data")
    if not isinstance(entry_id, str) or not entry_id:
        raise ValueError("entry id is not a non-empty string")
    if parent_id is not None and not isinstance(parent_id, str):
        raise ValueError("entry parentId is neither a string nor null")
    if not isinstance(entry_type, str):
        raise ValueError("entry type is not a string")
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float):
        raise ValueError("entry timestamp is not a number")
    if not isinstance(data, dict):
        raise ValueError("entry data is not a map")
    return entry_id, parent_id, entry_type, float(timestamp), data


@attrs.frozen(repr=False)
class Header:
    """The first frame of a session file."""

    version: int
    created: float
    session_id: str
    forked_from: str | None = None

    def to_cbor(self) -> bytes:
        out: dict[str, Any] = {
            "magic": MAGIC,
            "version": self.version,
            "created": self.created,
            "sessionId": self.session_id,
        }
        if self.forked_from is not None:
            out["forkedFrom"] = self.forked_from
        return cbor2.dumps(out)

    @classmethod
    def new(
        cls, *, forked_from: str | None = None, clock: Callable[[], float] = time.time
    ) -> Header:
        return cls(FORMAT_VERSION, clock(), secrets.token_hex(16), forked_from)


@attrs.frozen(repr=False)
class Damage:
    """The damaged tail found on open: bytes ``start`` to ``end`` (exclusive) of the file."""

    start: int
    end: int
    reason: DamageReason
    detail: str

    @property
    def bad_bytes(self) -> int:
        return self.end - self.start


@attrs.frozen(repr=False)
class OpenReport:
    """What opening a session file found and did.

    ``entries`` whole entries were kept. When ``damage`` is set, every byte from
    ``damage.start`` on was ignored; ``cut`` tells whether those bytes were removed from the
    file (writable opens only), and ``saved_to`` names the sidecar file holding a copy of them.
    """

    path: Path | None
    entries: int
    created: bool = False
    damage: Damage | None = None
    cut: bool = False
    saved_to: Path | None = None
    checkpoint: int | None = None
    """File offset of the checkpoint the open started from (``None``: a full scan)."""
    notes: tuple[str, ...] = ()
    """Checkpoints that could not be used, and what served instead; no entry is lost by them."""

    @property
    def ok(self) -> bool:
        return self.damage is None

    def describe(self) -> str:
        """One line for people: what was kept and what was cut, and why."""
        where = str(self.path) if self.path is not None else "in-memory session"
        notes = "".join(f"; {note}" for note in self.notes)
        if self.damage is None:
            state = "created" if self.created else "opened"
            return f"{where}: {state}, {self.entries} entries{notes}"
        d = self.damage
        action = "cut" if self.cut else "ignored (file not modified)"
        text = (
            f"{where}: kept {self.entries} entries; {d.bad_bytes} bad bytes "
            f"{d.start}..{d.end} {action}: {_REASON_TEXT[d.reason]} ({d.detail})"
        )
        if self.saved_to is not None:
            text += f"; a copy of the cut bytes is in {self.saved_to}"
        return text + notes


Loc = tuple[int, int]
"""Where an entry is stored: ``(frame offset, place in the frame)`` (``SessionFile.entry_at``)."""


class Fold(Protocol):
    """A projection's running state for one branch: fed every entry root → leaf, in order.

    ``live()`` is what is still open (bounded by what is pending, stored whole in every
    checkpoint); ``log`` is what the fold recorded since the last checkpoint (append-only, each
    checkpoint stores its part and names the previous one: ``SessionFile.log``).
    """

    log: list[Any]

    def step(self, entry: Entry, loc: Loc) -> None: ...

    def live(self) -> Any: ...


class Projection(Protocol):
    """What a session keeps folded for its active branch, and restores from checkpoints."""

    @property
    def name(self) -> str: ...

    def empty(self) -> Fold: ...

    def restore(self, live: Any) -> Fold:
        """The fold a checkpoint's live part describes; ``ValueError`` when it does not fit."""
        ...


def header_from(value: Any, path: Path | None) -> Header:
    if not isinstance(value, dict) or value.get("magic") != MAGIC:
        raise SessionFileError(path, "not-a-session-file", "not a pi-agent-ask session file")
    version = value.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise SessionFileError(path, "damaged-header", "session header has no valid version")
    if version > FORMAT_VERSION:
        raise SessionFileError(
            path,
            "future-version",
            f"session file format version {version} is newer than this program's "
            f"({FORMAT_VERSION}); upgrade pi-agent-ask to open it",
            version=version,
        )
    created = value.get("created")
    session_id = value.get("sessionId")
    forked_from = value.get("forkedFrom")
    if (
        isinstance(created, bool)
        or not isinstance(created, int | float)
        or not isinstance(session_id, str)
        or not (forked_from is None or isinstance(forked_from, str))
    ):
        raise SessionFileError(path, "damaged-header", "session header fields are malformed")
    return Header(version, float(created), session_id, forked_from)


class CurrentLeaf(enum.Enum):
    """Type of ``CURRENT_LEAF``."""

    CURRENT_LEAF = "current leaf"


CURRENT_LEAF: Final = CurrentLeaf.CURRENT_LEAF
"""Default for ``parent_id``/``leaf_id`` arguments: the leaf at the time of the call."""

LeafRef = str | None | CurrentLeaf
"""An entry id, ``None`` (before the first root), or ``CURRENT_LEAF``."""
