"""The session file: an append-only sequence of CBOR frames holding a tree of entries.

Synchronous and free of Trio; the persistence actor (``pi_agent_ask.actors.persistence``) is its
only writer at run time. ``docs/session-file.md`` is the user-facing description.

Format (versions 1 and 2; ``docs/session-file.md`` is the specification)::

    frame   = length:u32be | crc32:u32be | payload (``length`` bytes)
    file    = header-frame frame*

``crc32`` is ``zlib.crc32`` of the payload. The header is a CBOR map (``{"magic":
"pi-agent-ask/session", "version": 1 | 2, "created": float, "sessionId": str, "forkedFrom"?:
str}``). Version 1 payloads are CBOR maps told apart by their keys:

* entry: ``{"id": str, "parentId": str | null, "type": str, "timestamp": float, "data": map}``
* batch: ``{"batch": [entry, ...]}`` — entries appended together; a frame is whole or cut, so a
  batch is atomic
* leaf move: ``{"leaf": str | null}``

Version 2 payloads start with a kind byte (``codec``): compressed entries (one or a batch), a
leaf move, or a **checkpoint**. A reader reads both; a writer writes its file's version, so a
version 1 file stays readable by older releases (a fork writes the current version).

Checkpoints (sessions opened with a ``Projection``, version 2 files only): every
``checkpoint_every`` entries the writer appends a checkpoint frame holding the projection's
fold of the active branch at the leaf (its live part whole, its log since the previous
checkpoint, which it names). Open skims the file (lengths and checksums, nothing decoded), takes
the newest usable checkpoint, and decodes only the frames after it: the index then starts at the
checkpoint's leaf (a stub) and the older part is indexed the first time something needs it.
A checkpoint holds no entries: a damaged or unusable one is skipped (and reported), the previous
one (or a full scan) serves instead, so a checkpoint can never cost an entry.

Invariants the code keeps:

* An entry's parent appears earlier in the file, so file order is a topological order and every
  branch (root → leaf) is a strictly increasing sequence of file positions.
* The leaf is the effect of the last frame: an entry (or the last entry of a batch) becomes the
  leaf; a leaf move sets it.
* Only whole frames count. The first frame that is incomplete, fails its checksum, does not
  decode, or does not fit the tree (duplicate id, unknown parent or leaf) ends the readable
  prefix; everything from it on is the damaged tail. A writable open cuts that tail (after
  copying it to a sidecar file), a read-only open only reports it.
* A frame is written with one ``write`` loop to an ``O_APPEND`` descriptor; a failed write is
  rolled back with ``ftruncate`` so no later frame is ever written behind garbage.
* The in-memory index holds ids, parent links and frame positions only; entries are decoded from
  the file on demand. ``branch()`` walks integer parent links, O(branch length).
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import logging
import os
import secrets
import stat
import struct
import time
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple, Protocol, TypeVar

import attrs
import cbor2

from pi_agent_ask.persistence import codec

__all__ = [
    "CHECKPOINT_EVERY",
    "CHECKPOINT_RATIO",
    "COMPACTION_TYPE",
    "CURRENT_LEAF",
    "FORMAT_VERSION",
    "MAGIC",
    "MAX_FRAME_BYTES",
    "CurrentLeaf",
    "Damage",
    "DamageReason",
    "Entry",
    "FrozenMap",
    "Header",
    "LeafRef",
    "Loc",
    "OpenReport",
    "Projection",
    "SessionFile",
    "SessionFileError",
    "SessionFileErrorReason",
    "encode_frame",
    "freeze",
]

logger = logging.getLogger(__name__)

MAGIC: Final = "pi-agent-ask/session"
FORMAT_VERSION: Final = 2
CHECKPOINT_EVERY: Final = 512
"""Fewest entries between two checkpoints (sessions opened with a projection, version 2
files): a checkpoint follows once the fold took in this many entries since the last one *and*
their frames hold ``CHECKPOINT_RATIO`` times the bytes of that checkpoint's live part."""
CHECKPOINT_RATIO: Final = 4
"""Bytes of frames folded between two checkpoints per byte of the earlier one's live part
(its CBOR): checkpoint work stays a fixed share of what is appended however much is pending
(not one whole live state per 512 entries), and the frames after a checkpoint, which an open
reads, stay within this many times its live state (or 512 entries)."""
CHECKPOINT_MAGIC: Final = b"pi-agent-ask/checkpoint"
"""Follows a checkpoint's kind byte, so a damaged checkpoint is told from damaged entries."""
COMPACTION_TYPE: Final = "compaction"
MAX_FRAME_BYTES: Final = 256 * 1024 * 1024
"""Largest payload a frame may declare; a larger length field is damage, not a huge entry."""

_FRAME_HEAD = struct.Struct(">II")
_HEAD_SIZE: Final = _FRAME_HEAD.size
_READ_WINDOW: Final = 1 << 20
_NO_PARENT: Final = -1
_CHECKPOINT_TRIES: Final = 3
"""Checkpoints an open tries, newest first, before it reads the whole file instead."""
_BEFORE: Final = -3
"""Parent of the stub an index starts with when it starts at a checkpoint: indexed lazily."""

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


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------


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
    if kind is dict or kind is FrozenMap:  # the common cases first: ABC checks are slow
        return FrozenMap({k if type(k) is str else freeze(k): freeze(v) for k, v in value.items()})
    if kind is list or kind is tuple:
        return tuple([freeze(v) for v in value])
    if isinstance(value, Mapping):
        return FrozenMap({freeze(k): freeze(v) for k, v in value.items()})
    if isinstance(value, set | frozenset):
        return frozenset(freeze(v) for v in value)
    if isinstance(value, bytearray):
        return bytes(value)
    if kind is codec.Spliced:  # stored as its value (``codec.encode_stored``)
        return freeze(value.value)
    return value


_ATOMS: Final = frozenset({str, int, float, bool, bytes, type(None)})


def _frozen_data(value: Mapping[Any, Any] | None) -> FrozenMap:
    if value is None:
        return FrozenMap()
    if not isinstance(value, Mapping):
        raise TypeError(f"entry data must be a mapping, not {type(value).__name__}")
    frozen: FrozenMap = freeze(value)
    return frozen


@attrs.frozen
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
        return cls._from_map(value)

    @classmethod
    def _from_map(cls, value: Any) -> Entry:
        return cls(*_entry_fields(value))


_DATA: Final = Entry.__dict__["data"]
"""The slot holding an entry's data (a ``_Written`` entry fills it on first read)."""
_ID, _PARENT, _TYPE, _TIME = (
    Entry.__dict__[name] for name in ("id", "parent_id", "type", "timestamp")
)
"""The slots of an entry's other fields (a ``_Written`` entry of the one-encode path leaves
them unset)."""


class _Frame(NamedTuple):
    """What the entries of one frame of the one-encode path share (``_Written``)."""

    plain: bytes
    """The frame's plain CBOR."""
    ids: list[str]
    parent: str | None
    """The parent of the first entry (each other's is the one before it)."""
    types: list[str]
    now: float


class _Written(Entry):
    """An entry ``append_chains`` wrote, holding the CBOR it was stored as: its data is
    decoded from those bytes (and frozen) the first time it is read. It equals the entry read
    back from the file by construction, and the runtime, which never reads the data of what
    it wrote, pays for no frozen copy. Compares, hashes, prints and pickles as an ``Entry``.

    An entry of the one-encode path (``SessionFile._append_frame``) also reads its other
    fields from what its frame's entries share (``_Frame``): making it sets one slot."""

    __slots__ = ("_src",)
    _src: tuple[Any, int]
    """``(cbor, -1)``: the entry's own CBOR, its other fields in their slots; ``(frame, n)``:
    the ``_Frame`` it was written in, where the entry is the ``n``-th. One slot: every slot
    set costs a call, and entries are made for every append."""

    @classmethod
    def made(
        cls, entry_id: str, parent_id: str | None, entry_type: str, timestamp: float, cbor: bytes
    ) -> _Written:
        entry = _bare(cls, entry_id, parent_id, entry_type, timestamp)
        object.__setattr__(entry, "_src", (cbor, -1))
        return entry

    def _read_data(self) -> Mapping[Any, Any]:
        try:
            value: Mapping[Any, Any] = _DATA.__get__(self, Entry)
        except AttributeError:
            cbor, at = self._src
            if at < 0:
                value = freeze(codec.decode_entry_data(cbor))
            else:
                value = freeze(codec.decode_frame_data(cbor.plain, at))
            _DATA.__set__(self, value)
        return value

    def _write_data(self, value: Mapping[Any, Any]) -> None:
        # Reached only through ``object.__setattr__`` (attrs' ``__init__``, ``evolve``,
        # unpickling): the class stays frozen.
        _DATA.__set__(self, value)

    data = property(_read_data, _write_data)

    # The other fields: from the frame for an entry of the one-encode path, else from their
    # slots (set through these properties' setters, as ``data``'s).

    def _frame(self) -> tuple[_Frame, int] | None:
        try:
            src = self._src
        except AttributeError:  # made by attrs' ``__init__`` (``evolve``)
            return None
        return src if src[1] >= 0 else None

    def _read_id(self) -> str:
        found = self._frame()
        if found is None:
            value: str = _ID.__get__(self, Entry)
            return value
        return found[0].ids[found[1]]

    def _read_parent_id(self) -> str | None:
        found = self._frame()
        if found is None:
            value: str | None = _PARENT.__get__(self, Entry)
            return value
        frame, at = found
        return frame.ids[at - 1] if at else frame.parent

    def _read_type(self) -> str:
        found = self._frame()
        if found is None:
            value: str = _TYPE.__get__(self, Entry)
            return value
        return found[0].types[found[1]]

    def _read_timestamp(self) -> float:
        found = self._frame()
        if found is None:
            value: float = _TIME.__get__(self, Entry)
            return value
        return found[0].now

    id = property(_read_id, _ID.__set__)
    parent_id = property(_read_parent_id, _PARENT.__set__)
    type = property(_read_type, _TYPE.__set__)
    timestamp = property(_read_timestamp, _TIME.__set__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Entry):
            return NotImplemented
        return (self.id, self.parent_id, self.type, self.timestamp, self.data) == (
            other.id,
            other.parent_id,
            other.type,
            other.timestamp,
            other.data,
        )

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = Entry.__hash__

    def __repr__(self) -> str:
        return (
            f"Entry(id={self.id!r}, parent_id={self.parent_id!r}, type={self.type!r}, "
            f"timestamp={self.timestamp!r}, data={self.data!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (Entry, (self.id, self.parent_id, self.type, self.timestamp, self.data))


_NEW_FRAME: Final = tuple.__new__
"""``_Frame(*fields)`` without the Python-level ``__new__`` a named tuple has:
``_NEW_FRAME(_Frame, fields)``."""
_SET_SRC: Final = _Written.__dict__["_src"].__set__
"""The setter of a ``_Written`` entry's ``_src`` slot: a cheaper call than
``object.__setattr__`` (no attribute lookup by name)."""


def _entry_view(
    entry_id: str, parent_id: str | None, entry_type: str, timestamp: float, data: Any
) -> Entry:
    """An entry holding ``data`` as the writer passed it, not frozen: what a projection's fold
    steps over while the entry is appended (``Fold``). Never handed out."""
    entry = _bare(Entry, entry_id, parent_id, entry_type, timestamp)
    object.__setattr__(entry, "data", data)
    return entry


_E = TypeVar("_E", bound=Entry)


def _bare(
    cls: type[_E], entry_id: str, parent_id: str | None, entry_type: str, timestamp: float
) -> _E:
    """An entry of ``cls`` with its four plain fields set through its slots (no converter
    runs); the caller sets how it holds its data."""
    entry = cls.__new__(cls)
    put = object.__setattr__
    put(entry, "id", entry_id)
    put(entry, "parent_id", parent_id)
    put(entry, "type", entry_type)
    put(entry, "timestamp", timestamp)
    return entry


class _Ids:
    """Entry ids for one session: 16 lower-case hex digits, the value of 8 bytes of
    ``os.urandom`` (the source ``secrets`` uses), drawn 4 KiB at a time.

    Unique across processes as ``secrets.token_hex(8)`` ids were: every pool is drawn from
    the kernel's generator by the process that uses it, and ``fresh`` (called by every append
    before it takes an id) throws a pool away in a process other than the one that drew it,
    so a child forked from a writer never repeats its parent's ids; a session opened again
    (a resume, a reload, a fork into a new file) starts with no pool. Within a file, a writer
    also refuses an id it already holds (``SessionFile._new_id``).
    """

    __slots__ = ("_at", "_pid", "_pool")

    def __init__(self) -> None:
        self._pool = b""
        self._at = 0
        self._pid = -1

    def fresh(self) -> None:
        pid = os.getpid()
        if pid != self._pid:
            self._pool, self._at, self._pid = b"", 0, pid

    def take(self) -> bytes:
        at = self._at
        if at + 8 > len(self._pool):
            self._pool, at = os.urandom(_ID_POOL), 0
        self._at = at + 8
        return self._pool[at : at + 8]

    def take_many(self, count: int) -> tuple[bytes, ...]:
        """``take()`` ``count`` times: at most ``_ID_RUN`` at a time from one pool."""
        if count > _ID_RUN:
            keys: list[bytes] = []
            for start in range(0, count, _ID_RUN):
                keys += self.take_many(min(_ID_RUN, count - start))
            return tuple(keys)
        at, end = self._at, self._at + 8 * count
        if end > len(self._pool):
            self._pool, at, end = os.urandom(_ID_POOL), 0, 8 * count
        self._at = end
        ids: tuple[bytes, ...] = _ID_RUNS[count].unpack_from(self._pool, at)
        return ids


_ID_POOL: Final = 4096
_SLOTS: Final = tuple(array("i", range(n)).tobytes() for n in range(65))
"""The places of the entries of a frame of ``n`` entries, as ``_Index.slot`` holds them
(``_Index.add_chain``)."""
_FRAME_IDS: Final = 1024
"""Most entries ``SessionFile._append_frame`` takes in one frame: a delivery of up to that
many answers at once (one chain, an entry each) is one encode; a longer chain takes the
general path."""
_ID_RUN: Final = 64
"""Most ids ``_Ids.take_many`` reads from its pool in one call."""
_ID_RUNS: Final = tuple(struct.Struct("8s" * n) for n in range(_ID_RUN + 1))
"""``n`` ids of 8 bytes in a row, read in one call (``_Ids.take_many``)."""


def _entry_fields(value: Any) -> tuple[str, str | None, str, float, dict[Any, Any]]:
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


@attrs.frozen
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


@attrs.frozen
class Damage:
    """The damaged tail found on open: bytes ``start`` to ``end`` (exclusive) of the file."""

    start: int
    end: int
    reason: DamageReason
    detail: str

    @property
    def bad_bytes(self) -> int:
        return self.end - self.start


@attrs.frozen
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

    # A fold may also have ``step_chain(chain, offset)``: ``step`` for the entries of a chain
    # written in one frame at ``offset``, in order, each given as its ``(type, data)`` (data as
    # the writer passed it), which the write path of ``append_chains`` calls instead of
    # building an entry for each ``step``.
    # And ``live_cbor()``: the bytes ``cbor2.dumps(live())`` gives, which a checkpoint then
    # writes as they are (a fold may keep the encoding of what did not change).

    def live(self) -> Any: ...


class Projection(Protocol):
    """What a session keeps folded for its active branch, and restores from checkpoints."""

    @property
    def name(self) -> str: ...

    def empty(self) -> Fold: ...

    def restore(self, live: Any) -> Fold:
        """The fold a checkpoint's live part describes; ``ValueError`` when it does not fit."""
        ...


def _live_of(fold: Fold) -> Any:
    """The fold's live part for a checkpoint: as a ``codec.Spliced`` of the encoding the fold
    keeps (``live_cbor``, the same bytes a fresh encode gives) when it has one."""
    live_cbor = getattr(fold, "live_cbor", None)
    if live_cbor is None:
        return fold.live()
    return codec.Spliced.of_cbor(None, live_cbor())  # (the session never reads it back)


class _MemoryFrames:
    """The frames of an in-memory session, by their place (an entry's ``frame_off``).

    A frame comes as its payload (as a file holds it) or, from ``append_chains`` (the
    one-encode path, ``SessionFile._append_frame``, and the general one for frames up to half
    the size limit), as its plain CBOR: those are held plain until the next would take them
    past ``MEMORY_GROUP_BYTES``, and then deflated together
    (``codec.pack_group``), which costs a fraction of deflating each on its own (DEFLATE's
    cost per call is that of several small frames) and takes less room (each frame finds its
    words in those before it). A frame of a group is read by inflating the group (the last
    one is kept: a branch is read in order). Nothing of this reaches a file: a fork
    re-encodes the entries."""

    __slots__ = ("_items", "_last", "_pending", "_pending_bytes")

    def __init__(self) -> None:
        # A payload (``bytes``), a plain frame waiting for its group (``list``: [plain]), or
        # a frame of a group (``tuple``: (packed group, start, end) in the group's plain).
        self._items: list[Any] = []
        self._pending: list[int] = []
        self._pending_bytes = 0
        self._last: tuple[bytes, bytes] | None = None

    def __len__(self) -> int:
        return len(self._items)

    def append(self, payload: bytes) -> None:
        self._items.append(payload)

    def append_plain(self, plain: bytes) -> None:
        size = len(plain)
        if self._pending_bytes + size > MEMORY_GROUP_BYTES and self._pending:
            self._pack()
        self._pending.append(len(self._items))
        self._items.append([plain])
        self._pending_bytes += size

    def __getitem__(self, offset: int) -> bytes:
        """The payload at ``offset`` (``plain`` first: ``None`` there)."""
        item = self._items[offset]
        assert type(item) is bytes
        return item

    def plain(self, offset: int) -> bytes | None:
        """The plain CBOR of the entries frame at ``offset``; ``None`` for a payload."""
        item = self._items[offset]
        if type(item) is list:
            plain: bytes = item[0]
            return plain
        if type(item) is not tuple:
            return None
        packed, start, end = item
        last = self._last
        if last is None or last[0] is not packed:
            last = self._last = (packed, codec.inflate(packed))
        return last[1][start:end]

    def _pack(self) -> None:
        items, pending = self._items, self._pending
        plains = [items[n][0] for n in pending]
        packed = codec.pack_group(b"".join(plains))
        start = 0
        for n, plain in zip(pending, plains, strict=True):
            items[n] = (packed, start, start + len(plain))
            start += len(plain)
        pending.clear()
        self._pending_bytes = 0


MEMORY_GROUP_BYTES: Final = 60 * 1024
"""Most plain bytes an in-memory session deflates together (``_MemoryFrames``; a frame
larger on its own is a group of one). DEFLATE keeps twice its 32 KiB window in memory, the
preset dictionary at its start; input past that slides the window and rehashes it, which
costs more than starting a new group: up to this size, the larger the group the less each
byte costs."""


class _NeedFullIndex(Exception):
    """A frame after the checkpoint names an entry from before it: index the whole file."""


@attrs.frozen
class _Checkpoint:
    offset: int
    end: int
    leaf_id: str
    leaf_at: tuple[int, int, int]  # frame offset, payload length, slot
    entries: int
    live: Any
    prev: int | None


# --------------------------------------------------------------------------------------------
# Frames
# --------------------------------------------------------------------------------------------


def encode_frame(payload: bytes) -> bytes:
    """``length | crc32 | payload``."""
    return _FRAME_HEAD.pack(len(payload), zlib.crc32(payload)) + payload


def _batch_payload(entries: Sequence[Entry]) -> bytes:
    # CBOR concatenates: a one-key map, the key, an array head, then each entry's own payload,
    # so the entries are encoded only by Entry.to_cbor.
    out = bytearray(cbor2.dumps({"batch": []}))
    del out[-1]  # drop the empty array head
    out += codec.array_head(len(entries))
    for entry in entries:
        out += entry.to_cbor()
    return bytes(out)


class _BadFrame(Exception):
    def __init__(self, reason: DamageReason, detail: str) -> None:
        super().__init__(detail)
        self.reason: DamageReason = reason
        self.detail = detail


def _decode(payload: bytes | memoryview) -> Any:
    try:
        return cbor2.loads(payload)
    except Exception as exc:  # any decoder failure is damage, whatever its type
        raise _BadFrame("undecodable", type(exc).__name__) from exc


def _header_from(value: Any, path: Path | None) -> Header:
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


# --------------------------------------------------------------------------------------------
# The session
# --------------------------------------------------------------------------------------------


class CurrentLeaf(enum.Enum):
    """Type of ``CURRENT_LEAF``."""

    CURRENT_LEAF = "current leaf"


CURRENT_LEAF: Final = CurrentLeaf.CURRENT_LEAF
"""Default for ``parent_id``/``leaf_id`` arguments: the leaf at the time of the call."""

LeafRef = str | None | CurrentLeaf
"""An entry id, ``None`` (before the first root), or ``CURRENT_LEAF``."""


class _Index:
    """Ids, parent links and storage positions of every entry, in file order."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self.parent = array("q")
        # File-backed sessions: frame offset, payload length and place in a batch (-1: single).
        self.frame_off = array("Q")
        self.frame_len = array("I")
        self.slot = array("i")
        self.leaf = _NO_PARENT

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, entry_id: str, parent: int, frame_off: int, frame_len: int, slot: int) -> None:
        self.pos[entry_id] = len(self.ids)
        self.ids.append(entry_id)
        self.parent.append(parent)
        self.frame_off.append(frame_off)
        self.frame_len.append(frame_len)
        self.slot.append(slot)

    def add_chain(self, ids: list[str], frame_off: int, frame_len: int) -> None:
        """``add`` for the entries of one frame, in order, each the child of the one before
        it and the first the child of the leaf; the last becomes the leaf."""
        first, count = len(self.ids), len(ids)
        pos = self.pos
        n = first
        for entry_id in ids:
            pos[entry_id] = n
            n += 1
        self.ids += ids
        # ``fromlist``: no iterator per call, as ``extend`` takes from anything but an array.
        self.parent.fromlist([self.leaf, *range(first, n - 1)])
        self.frame_off.fromlist([frame_off] * count)
        self.frame_len.fromlist([frame_len] * count)
        if count < len(_SLOTS):
            self.slot.frombytes(_SLOTS[count])
        else:
            self.slot.extend(range(count))
        self.leaf = n - 1

    def check_links(
        self, links: Sequence[tuple[str, str | None]], *, partial: bool = False
    ) -> list[int]:
        """Parent indices for entries ``(id, parent_id)`` appended in order, or ``_BadFrame``
        (``_NeedFullIndex`` for an unknown parent when the index starts at a checkpoint)."""
        parents: list[int] = []
        batch: dict[str, int] = {}
        for n, (entry_id, parent_id) in enumerate(links):
            if entry_id in self.pos or entry_id in batch:
                raise _BadFrame("invalid", f"duplicate entry id {entry_id!r}")
            if parent_id is None:
                parents.append(_NO_PARENT)
            elif parent_id in self.pos:
                parents.append(self.pos[parent_id])
            elif parent_id in batch:
                parents.append(len(self.ids) + batch[parent_id])
            elif partial:
                raise _NeedFullIndex
            else:
                raise _BadFrame("invalid", f"entry {entry_id!r} has unknown parent")
            batch[entry_id] = n
        return parents

    def path_to(self, leaf: int) -> list[int]:
        out: list[int] = []
        parent = self.parent
        while leaf != _NO_PARENT:
            if leaf == _BEFORE:
                raise _NeedFullIndex
            out.append(leaf)
            leaf = parent[leaf]
        out.reverse()
        return out


class SessionFile:
    """A session: a tree of entries with a current leaf, in a file or in memory.

    Open with ``SessionFile.open(path)`` (created when missing), ``SessionFile.open(path,
    readonly=True)`` (never modifies the file) or ``SessionFile.in_memory()``. Not thread-safe:
    one owner at a time (at run time, the persistence actor).

    Durability: a write returns once the frame was handed to the OS (``write`` returned), so it
    survives the process being killed. With ``fsync=True`` every write is also flushed to the
    disk (``fdatasync``) before it returns, so it survives a power loss. Creation, fork, the
    repair of a damaged tail and ``close()`` always flush.
    """

    def __init__(
        self,
        *,
        path: Path | None,
        header: Header,
        readonly: bool,
        fsync: bool,
        clock: Callable[[], float],
        projection: Projection | None = None,
        checkpoint_every: int = CHECKPOINT_EVERY,
        checkpoint_ratio: float = CHECKPOINT_RATIO,
    ) -> None:
        # Use the constructors (open / in_memory / fork); this one only sets fields.
        self._path = path
        self._header = header
        self._readonly = readonly
        self._fsync = fsync
        self._clock = clock
        self._fd: int | None = None
        self._size = 0
        self._dirty = False
        self._closed = False
        self._broken: BaseException | None = None
        self._index = _Index()
        # In memory: every entries frame, encoded (an entry's ``frame_off`` is its frame's
        # place in it): a queued form costs its compressed bytes, not a tree of frozen maps.
        self._memory: _MemoryFrames | None = _MemoryFrames() if path is None else None
        self._packer = codec.Packer()
        self._ids = _Ids()
        # The id of the last entry ``_append_frame`` wrote and that id in its stored form
        # (``codec.encode_id``): the parent of the next frame's first entry, most often.
        self._leaf_key: tuple[str | None, bytes | str | None] = (None, None)
        self._report = OpenReport(path, 0)
        self._projection = projection
        self._checkpoint_every = checkpoint_every
        self._checkpoint_ratio = checkpoint_ratio
        # The projection's fold of the active branch (``None``: recomputed when next needed),
        # the checkpoint its log continues (``None``: its log holds the whole branch), the
        # entries it took in since then and the bytes of their frames, and the size of that
        # checkpoint's live part (0 without a checkpoint; ``None``: not measured yet, the
        # live part of the checkpoint the open started from is ``_live_unmeasured``).
        self._fold: Fold | None = None
        self._fold_prev: int | None = None
        self._since_checkpoint = 0
        self._since_bytes = 0
        self._live_bytes: int | None = 0
        self._live_unmeasured: Any = None
        # The checkpoint this session wrote last: its offset and its map without the live
        # part, which the next checkpoint reads (its history index) instead of the file.
        self._written: tuple[int, dict[str, Any]] | None = None
        # When the index starts at a checkpoint: that checkpoint, and how many entries of the
        # file come before its stub (``_base``). ``None``: the whole file is indexed.
        self._start: _Checkpoint | None = None
        self._base = 0
        self._header_end = 0

    # ---- constructors ------------------------------------------------------------------------

    @classmethod
    def in_memory(
        cls,
        *,
        clock: Callable[[], float] = time.time,
        forked_from: str | None = None,
        projection: Projection | None = None,
    ) -> SessionFile:
        """A session without a file; it behaves like a file-backed one and is lost on close."""
        session = cls(
            path=None,
            header=Header.new(forked_from=forked_from, clock=clock),
            readonly=False,
            fsync=False,
            clock=clock,
            projection=projection,
        )
        session._report = OpenReport(None, 0, created=True)
        if projection is not None:
            session._fold = projection.empty()
        return session

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        readonly: bool = False,
        create: bool = True,
        fsync: bool = False,
        clock: Callable[[], float] = time.time,
        projection: Projection | None = None,
        checkpoint_every: int = CHECKPOINT_EVERY,
        checkpoint_ratio: float = CHECKPOINT_RATIO,
    ) -> SessionFile:
        """Open (or create) the session file at ``path``.

        With a ``projection`` the session keeps its fold of the active branch (``fold()``),
        writes checkpoints (version 2 files, writable opens: after at least
        ``checkpoint_every`` entries whose frames hold ``checkpoint_ratio`` times the bytes of
        the last checkpoint's live part) and opens from the newest usable checkpoint: only the
        frames after it are decoded.

        A missing file is created when ``create`` and not ``readonly`` (an existing empty file
        is initialised too); otherwise ``FileNotFoundError``. A file that is not a session file,
        has a damaged header or a newer format version raises ``SessionFileError`` and is left
        untouched. A damaged tail is reported in ``report``; a writable open cuts it, a
        read-only open does not modify the file. A writable open takes an exclusive advisory
        lock (``flock``): a second writer gets ``SessionFileError(reason="locked")``.
        """
        file_path = Path(path)
        created = False
        _refuse_odd_file(file_path)  # before a byte is written: only a regular file or nothing
        if not readonly and create and not file_path.exists():
            created = _create_file(file_path, Header.new(clock=clock).to_cbor(), ())
        flags = (os.O_RDONLY if readonly else os.O_RDWR | os.O_APPEND) | os.O_CLOEXEC
        # Non-blocking and checked through the descriptor: a FIFO swapped in after the check
        # above neither blocks the open nor gets written to.
        fd = os.open(file_path, flags | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
        try:
            _refuse_odd_file(file_path, fd)
            os.set_blocking(fd, True)
            if not readonly:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise SessionFileError(
                        file_path, "locked", "session file is open for writing elsewhere"
                    ) from None
            if os.fstat(fd).st_size == 0 and not readonly:
                # An empty file holds nobody's data (`touch`, `mktemp`): make it a session.
                _write_all(fd, encode_frame(Header.new(clock=clock).to_cbor()))
                os.fsync(fd)
                created = True
            session = cls._load(
                fd,
                file_path,
                readonly=readonly,
                fsync=fsync,
                clock=clock,
                projection=projection,
                checkpoint_every=checkpoint_every,
                checkpoint_ratio=checkpoint_ratio,
            )
        except BaseException:
            os.close(fd)
            raise
        if created:
            session._report = attrs.evolve(session._report, created=True)
        session._maybe_checkpoint()
        return session

    @classmethod
    def _load(
        cls,
        fd: int,
        path: Path,
        *,
        readonly: bool,
        fsync: bool,
        clock: Callable[[], float],
        projection: Projection | None,
        checkpoint_every: int,
        checkpoint_ratio: float,
    ) -> SessionFile:
        size = os.fstat(fd).st_size
        reader = _Reader(fd, size)
        header = _read_header(reader, path)
        session = cls(
            path=path,
            header=header,
            readonly=readonly,
            fsync=fsync,
            clock=clock,
            projection=projection,
            checkpoint_every=checkpoint_every,
            checkpoint_ratio=checkpoint_ratio,
        )
        session._fd = fd
        notes: list[str] = []
        damage = session._index_file(reader, size, notes)
        session._size = damage.start if damage is not None else size
        report = OpenReport(
            path,
            len(session),
            damage=damage,
            checkpoint=session._start.offset if session._start is not None else None,
            notes=tuple(dict.fromkeys(notes)),  # the skim and the scan may both see one
        )
        if projection is not None:
            session._refold()
        if damage is not None or notes:
            if not readonly and damage is not None:
                saved = session._cut_tail(reader, damage)
                report = attrs.evolve(report, cut=True, saved_to=saved)
            logger.warning("%s", report.describe())
        session._report = report
        return session

    # ---- reading -----------------------------------------------------------------------------

    @property
    def path(self) -> Path | None:
        return self._path

    @property
    def header(self) -> Header:
        return self._header

    @property
    def report(self) -> OpenReport:
        """What the last open (or ``reload``) found and did."""
        return self._report

    @property
    def readonly(self) -> bool:
        return self._readonly

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def projection(self) -> Projection | None:
        return self._projection

    def fold(self) -> Fold:
        """The projection's fold of the active branch (decodes only what the newest
        checkpoint does not cover). ``ValueError`` for a session without a projection."""
        self._check_open()
        if self._projection is None:
            raise ValueError("session has no projection")
        if self._fold is None:
            self._refold()
            self._maybe_checkpoint()
        assert self._fold is not None
        return self._fold

    def log(self) -> list[Any]:
        """Every log item the fold of the active branch recorded, oldest first: the logs of
        the chain of checkpoints it continues, then its own."""
        fold = self.fold()
        parts = [fold.log]
        prev = self._fold_prev
        try:
            while prev is not None:
                value = self._checkpoint_value(prev, live=False)
                parts.append(value["log"])
                prev = value["prev"]
        except (ValueError, _BadFrame, SessionFileError) as exc:
            # A checkpoint of the chain became unreadable: fold the whole branch instead.
            logger.warning("%s: checkpoint log unreadable (%s); reading the branch", self, exc)
            self._full()
            self._refold()  # from the root: the index now starts there
            assert self._fold is not None
            return list(self._fold.log)
        return [item for part in reversed(parts) for item in part]

    @property
    def log_prev(self) -> int | None:
        """The checkpoint the fold of the active branch continues (``None``: its log holds
        the whole branch)."""
        self.fold()
        return self._fold_prev

    def checkpoint_at(self, offset: int, *, live: bool = True) -> dict[str, Any]:
        """The checked map of the checkpoint at ``offset``; ``ValueError`` when unusable.
        ``live=False`` may leave out the ``live`` part (not decoded when it is stored last, as
        this release writes it): for readers of the log and the history index."""
        self._check_open()
        if self._projection is None:
            raise ValueError("session has no projection")
        if self._fd is None:
            raise ValueError("an in-memory session has no checkpoints")
        try:
            return self._checkpoint_value(offset, live=live)
        except _BadFrame as exc:
            raise ValueError(str(exc)) from exc

    def entry_at(self, loc: Loc) -> Entry:
        """The entry stored at ``loc`` (as a fold's ``step`` was given it), read on its own."""
        self._check_open()
        offset, slot = loc
        if self._memory is not None:
            return self._entry_in(self._memory_frame(offset), offset, slot)
        if self._fd is None:
            raise ValueError("session file is closed")
        payload = _read_frame(self._fd, offset, self._size)
        if payload is None:
            raise SessionFileError(self._path, "unreadable", f"no frame at {offset}")
        return self._decode_entry(payload, offset, slot)

    @property
    def leaf_id(self) -> str | None:
        """The current leaf: the end of the active branch (``None``: before the first root)."""
        leaf = self._index.leaf
        return None if leaf == _NO_PARENT else self._index.ids[leaf]

    @property
    def entries(self) -> tuple[Entry, ...]:
        """Every entry in file order (decodes the whole file: prefer ``branch()``)."""
        self._check_open()
        self._full()
        return tuple(self._load_entries(range(len(self._index))))

    def iter_entries(self) -> Iterator[Entry]:
        """Every entry in file order, decoded as it is consumed."""
        self._check_open()
        self._full()
        return self._load_entries(range(len(self._index)))

    def ids(self) -> tuple[str, ...]:
        """Every entry id in file order, without decoding anything."""
        self._full()
        return tuple(self._index.ids)

    def __len__(self) -> int:
        return self._base + len(self._index)

    @property
    def indexed(self) -> int:
        """Entries the in-memory index holds: after an open from a checkpoint only those after
        it, until something needs an older one (then the whole file)."""
        return len(self._index)

    def __contains__(self, entry_id: object) -> bool:
        return self._position(entry_id) is not None

    def get(self, entry_id: str) -> Entry:
        """The entry with this id; ``KeyError`` when there is none."""
        self._check_open()
        position = self._position(entry_id)
        if position is None:
            raise KeyError(entry_id)
        return next(self._load_entries([position]))

    def parent_id(self, entry_id: str) -> str | None:
        """The parent of an entry without decoding it; ``KeyError`` when unknown."""
        position = self._position(entry_id)
        if position is None:
            raise KeyError(entry_id)
        if self._index.parent[position] == _BEFORE:
            self._full()
            position = self._index.pos[entry_id]
        parent = self._index.parent[position]
        return None if parent == _NO_PARENT else self._index.ids[parent]

    def branch_ids(self, leaf_id: LeafRef = CURRENT_LEAF) -> tuple[str, ...]:
        """Ids of the path root → ``leaf_id`` (default: the current leaf), without decoding."""
        path = self._path_to(leaf_id)
        ids = self._index.ids
        return tuple(ids[i] for i in path)

    def branch(self, leaf_id: LeafRef = CURRENT_LEAF) -> tuple[Entry, ...]:
        """The entries on the path root → ``leaf_id`` (default: the current leaf).

        Decodes the whole branch: a session with a projection reads ``fold()`` instead."""
        self._check_open()
        path = self._path_to(leaf_id)
        return tuple(self._load_entries(path))

    # ---- writing -----------------------------------------------------------------------------

    def append(
        self, type: str, data: Mapping[Any, Any] | None = None, *, parent_id: LeafRef = CURRENT_LEAF
    ) -> Entry:
        """Append an entry under ``parent_id`` (default: the current leaf); it becomes the leaf."""
        return self.append_many([(type, data)], parent_id=parent_id)[0]

    def append_many(
        self,
        items: Iterable[tuple[str, Mapping[Any, Any] | None]],
        *,
        parent_id: LeafRef = CURRENT_LEAF,
    ) -> tuple[Entry, ...]:
        """Append a chain of entries atomically: one frame, whole or cut after a crash.

        The first entry's parent is ``parent_id`` (default: the current leaf), each next one's
        parent is the one before; the last becomes the leaf. An empty ``items`` writes nothing.
        """
        self._check_writable()
        self._ids.fresh()
        parent = self.leaf_id if parent_id is CURRENT_LEAF else parent_id
        if parent is not None and self._position(parent) is None:
            raise KeyError(parent)
        under_leaf = parent == self.leaf_id
        now = self._clock()
        entries: list[Entry] = []
        taken: set[str] = set()
        for entry_type, data in items:
            if not isinstance(entry_type, str) or not entry_type:
                raise ValueError("entry type must be a non-empty string")
            entry_id = self._new_id(taken)
            taken.add(entry_id)
            entries.append(Entry(entry_id, parent, entry_type, now, data))
            parent = entry_id
        if not entries:
            return ()
        if self._header.version >= 2:
            payload, plain = codec.encode_entries(
                [(e.id, e.parent_id, e.type, e.timestamp, e.data) for e in entries], self._packer
            )
            slots: Sequence[int] = range(len(entries))
        else:
            payload = entries[0].to_cbor() if len(entries) == 1 else _batch_payload(entries)
            plain = len(payload)
            slots = [-1] if len(entries) == 1 else range(len(entries))
        self._store_frame(entries, payload, plain, slots, under_leaf=under_leaf)
        return tuple(entries)

    def append_chains(
        self, chains: Sequence[Iterable[tuple[str, Mapping[Any, Any] | None]]]
    ) -> list[tuple[Entry, ...] | Exception]:
        """Append several chains under the current leaf, one after the other, in as few
        frames as the size limit allows (almost always one write): what ``append_many`` does
        for each chain in turn, at the cost of one.

        The result has one element per chain, in order: its entries, or the exception
        ``append_many`` would have raised for it. A chain that cannot be stored (``ValueError``,
        ``TypeError``, ``RecursionError``: raised before anything is written) is left out and
        the next one goes under the chain before it; the others are unaffected. A frame whose
        write fails (``OSError``) is rolled back, and that error is the result of every chain
        in it and after it: each chain is written whole or not at all, and none twice. A
        closed, read-only or broken session raises, as ``append_many`` does.
        """
        if self._closed or self._readonly or self._broken is not None:
            self._check_writable()  # raises
        if len(chains) == 1 and self._header.version >= 2:
            written = self._append_frame(chains[0])
            if written is not None:
                return written
        if self._header.version < 2:
            # Version 1 frames: one per chain, as ``append_many`` writes them.
            out: list[tuple[Entry, ...] | Exception] = []
            failed: OSError | None = None
            for chain in chains:
                if failed is not None:
                    out.append(failed)
                    continue
                try:
                    out.append(self.append_many(chain))
                except (ValueError, TypeError, RecursionError) as exc:
                    out.append(exc)
                except OSError as exc:
                    failed = exc
                    out.append(exc)
            return out
        self._ids.fresh()
        results: list[tuple[Entry, ...] | Exception | None] = [None] * len(chains)
        now = self._clock()
        parent = self.leaf_id
        taken: set[str] = set()
        # Frames being built: (chain numbers, their entries, each entry's (type, data) as the
        # fold steps over it, their encoded items, plain size).
        frames: list[tuple[list[int], list[Entry], list[Any], list[bytes], int]] = []
        budget = MAX_FRAME_BYTES // 2  # room for DEFLATE's worst case on incompressible data
        for number, chain in enumerate(chains):
            try:
                entries, pairs, encoded, plain = self._chain(chain, parent, now, taken)
            except (ValueError, TypeError, RecursionError) as exc:
                results[number] = exc
                continue
            if not entries:
                results[number] = ()
                continue
            parent = entries[-1].id
            if not frames or frames[-1][4] + plain > budget:
                frames.append(([], [], [], [], 0))
            numbers, frame_entries, frame_pairs, frame_items, size = frames[-1]
            numbers.append(number)
            frame_entries.extend(entries)
            frame_pairs.extend(pairs)
            frame_items.extend(encoded)
            frames[-1] = (numbers, frame_entries, frame_pairs, frame_items, size + plain)
            results[number] = tuple(entries)
        failure: OSError | ValueError | None = None
        for numbers, frame_entries, frame_pairs, frame_items, _size in frames:
            if failure is None:
                try:
                    self._write_entries(frame_entries, frame_pairs, frame_items)
                except (OSError, ValueError) as exc:
                    # Nothing of this frame was written, and the chains after it hang from it.
                    failure = exc
            if failure is not None:
                for number in numbers:
                    results[number] = failure
        return [r if r is not None else () for r in results]

    def _append_frame(self, chain: Any) -> list[tuple[Entry, ...] | Exception] | None:
        """``append_chains([chain])`` for the chains the runtime writes, at the cost of one
        CBOR encode for the whole frame (not one per entry) and no per-entry objects but the
        entries handed back: a list or tuple of ``(type, data)`` pairs, each data a ``dict``
        CBOR encodes as it is or a ``codec.Encoded`` (its bytes written as they are).
        ``None`` (nothing drawn from the session but ids, nothing written)
        for any other chain, which takes the general path, the one that finds out which
        entry is refused and why: an entry that cannot be encoded, data nested deeper than a
        reader follows, a frame past the size limit, an id the session holds.

        The frame is the same bytes: a CBOR array is its head followed by its items, so the
        array of entries encoded at once is the array head and the entries encoded one by
        one (``codec.entries_payload``)."""
        if type(chain) is not list and type(chain) is not tuple:
            return None
        count = len(chain)
        if not 0 < count <= _FRAME_IDS:
            return None
        self._ids.fresh()
        keys = self._ids.take_many(count)
        index = self._index
        known = index.pos
        leaf = index.leaf
        parent = None if leaf == _NO_PARENT else index.ids[leaf]
        keyed, parent_key = self._leaf_key
        if keyed != parent:
            parent_key = codec.encode_id(parent)
        now = self._clock()
        rows: list[list[Any]] = []
        ids: list[str] = []
        types: list[str] = []
        encoded = False  # some data is ``codec.Encoded``
        for item, key in zip(chain, keys, strict=True):
            if type(item) is not tuple or len(item) != 2:
                return None
            entry_type, data = item
            if type(entry_type) is not str or not entry_type:
                return None
            if type(data) is not dict:
                if type(data) is not codec.Encoded:
                    return None
                encoded = True
            entry_id = key.hex()
            if entry_id in known:
                return None
            ids.append(entry_id)
            types.append(entry_type)
            rows.append([key, parent_key, entry_type, now, data])
            parent_key = key
        if len(set(ids)) != count:
            return None
        try:
            plain = codec.encode_frame_entries(rows, encoded=encoded)
        except Exception:  # whatever it is, the general path finds the entry and says why
            return None
        if len(plain) > MAX_FRAME_BYTES // 2:
            return None
        if self._memory is not None:
            offset, size = len(self._memory), len(plain)
            self._memory.append_plain(plain)
        else:
            payload = codec.frame_payload(plain, self._packer)
            try:
                offset, size = self._write_frame(payload), len(payload)
            except OSError as exc:
                return [exc]
        index.add_chain(ids, offset, size)
        self._leaf_key = (ids[-1], parent_key)
        fold = self._fold
        if fold is not None:
            self._fold_frame(fold, chain, ids, parent, now, offset, size)
        if self._fd is not None:  # (in memory no checkpoint is written)
            self._maybe_checkpoint()
        frame = _NEW_FRAME(_Frame, (plain, ids, parent, types, now))
        new, set_src = object.__new__, _SET_SRC
        entries: list[Entry] = []
        add = entries.append
        for at in range(count):
            entry = new(_Written)
            set_src(entry, (frame, at))
            add(entry)
        return [tuple(entries)]

    def _fold_frame(
        self,
        fold: Fold,
        chain: Sequence[tuple[str, Any]],
        ids: list[str],
        parent: str | None,
        now: float,
        offset: int,
        size: int,
    ) -> None:
        """Step the fold over the entries of ``chain`` (each ``(type, data)``, data as the
        writer passed it) written at ``offset`` (their ids ``ids``, the first under
        ``parent``), a frame of ``size`` bytes."""
        try:
            step_chain = getattr(fold, "step_chain", None)
            if step_chain is not None:
                step_chain(chain, offset)
            else:
                for slot, (entry_id, (entry_type, data)) in enumerate(zip(ids, chain, strict=True)):
                    fold.step(_entry_view(entry_id, parent, entry_type, now, data), (offset, slot))
                    parent = entry_id
        except Exception:
            logger.exception("%s: the projection refused an entry", self)
            self._fold = None
        else:  # ``_count_frame``, inline (this runs for every frame)
            self._since_checkpoint += len(ids)
            if self._fd is not None:
                self._since_bytes += size + _HEAD_SIZE

    def _count_frame(self, entries: int, size: int) -> None:
        """Count one folded frame of ``entries`` entries and ``size`` payload bytes toward
        the checkpoint rule (``_maybe_checkpoint``): its entries, and in a file its bytes
        (in memory no checkpoint is written). ``_follow`` counts several frames its way."""
        self._since_checkpoint += entries
        if self._fd is not None:
            self._since_bytes += size + _HEAD_SIZE

    def _chain(
        self,
        items: Iterable[tuple[str, Mapping[Any, Any] | None]],
        parent: str | None,
        now: float,
        taken: set[str],
    ) -> tuple[list[Entry], list[tuple[str, Any]], list[bytes], int]:
        """One chain's entries under ``parent``, each one's ``(type, data)`` as the fold steps
        over it (data as the writer passed it), each entry encoded; its plain CBOR size.
        Raises what ``append_many`` raises before writing (an entry that cannot be stored).

        The data is encoded as given; only data CBOR cannot encode as it is (a mapping that
        is not a ``dict``, deep inside) is frozen first, as ``append_many`` freezes all data,
        so both accept the same data and store the same bytes. The entries handed back decode
        their data from those bytes when it is first read (``_Written``)."""
        entries: list[Entry] = []
        pairs: list[tuple[str, Any]] = []
        encoded: list[bytes] = []
        parent_key = codec.encode_id(parent)
        new = object.__new__
        set_id, set_parent, set_type, set_time = (
            _ID.__set__,
            _PARENT.__set__,
            _TYPE.__set__,
            _TIME.__set__,
        )
        set_src = _SET_SRC
        encode = codec.encode_stored
        take, known = self._ids.take, self._index.pos
        plain = 9
        for entry_type, data in items:
            if not isinstance(entry_type, str) or not entry_type:
                raise ValueError("entry type must be a non-empty string")
            if type(data) is not dict:
                data = _frozen_data(data)  # None, or any other mapping; TypeError otherwise
            # ``_new_key``, its first draw inline (a repeat of a held id is all but impossible).
            key = take()
            entry_id = key.hex()
            if entry_id in known or entry_id in taken:
                entry_id, key = self._new_key(taken)
            taken.add(entry_id)  # a refused chain's ids stay taken: harmless
            try:
                item = encode(key, parent_key, entry_type, now, data)
            except TypeError:
                data = freeze(data)
                item = encode(key, parent_key, entry_type, now, data)
            # ``_Written.made`` without its call (this runs per entry; a written entry's slots
            # set through their own setters, as its properties' setters would).
            entry = new(_Written)
            set_id(entry, entry_id)
            set_parent(entry, parent)
            set_type(entry, entry_type)
            set_time(entry, now)
            set_src(entry, (item, -1))
            entries.append(entry)
            pairs.append((entry_type, data))
            encoded.append(item)
            plain += len(item)
            parent, parent_key = entry_id, key
        if plain > MAX_FRAME_BYTES:
            raise ValueError(f"entry too large: {plain} bytes (at most {MAX_FRAME_BYTES})")
        return entries, pairs, encoded, plain

    def _write_entries(
        self, entries: list[Entry], pairs: list[tuple[str, Any]], encoded: list[bytes]
    ) -> None:
        """Write one entries frame (a chain under the current leaf) and index it: what
        ``_store_frame`` does, for a chain ``_chain`` made. Its links need no check: every
        entry hangs from the one before it and the first from the leaf, and no entry holds
        its id (``_new_key``)."""
        memory = self._memory
        if memory is not None and sum(map(len, encoded)) <= MAX_FRAME_BYTES // 2:
            # Held plain and deflated with others, as the one-encode path's frames (half the
            # limit: no deflated frame of that size can pass it).
            frame = codec.array_head(len(encoded)) + b"".join(encoded)
            offset, length = len(memory), len(frame)
            memory.append_plain(frame)
        else:
            payload, plain = codec.entries_payload(encoded, self._packer)
            size = max(plain, len(payload))
            if size > MAX_FRAME_BYTES:
                raise ValueError(f"entry too large: {size} bytes (at most {MAX_FRAME_BYTES})")
            if memory is not None:
                offset = len(memory)
                memory.append(payload)
            else:
                offset = self._write_frame(payload)
            length = len(payload)
        ids = [_ID.__get__(entry, Entry) for entry in entries]  # (set in their slots)
        self._index.add_chain(ids, offset, length)
        fold = self._fold
        if fold is not None:
            # ``_fold_frame``, for the entries of a frame the general path wrote.
            self._fold_frame(
                fold, pairs, ids, entries[0].parent_id, entries[0].timestamp, offset, length
            )
        self._maybe_checkpoint()

    def _store_frame(
        self,
        entries: Sequence[Entry],
        payload: bytes,
        plain: int,
        slots: Sequence[int],
        *,
        under_leaf: bool,
        views: Sequence[Entry] | None = None,
    ) -> None:
        """Write one frame holding ``entries`` (``slots``: each entry's place in it, -1 for a
        frame of one bare entry), index them and make the last the leaf. The fold steps over
        ``views`` when given (the same entries, their data as the writer passed it)."""
        if max(plain, len(payload)) > MAX_FRAME_BYTES:
            size = max(plain, len(payload))
            raise ValueError(f"entry too large: {size} bytes (at most {MAX_FRAME_BYTES})")
        parents = self._index.check_links([(e.id, e.parent_id) for e in entries])
        if self._memory is not None:
            offset = len(self._memory)
            self._memory.append(payload)
        else:
            offset = self._write_frame(payload)
        index = self._index
        first = len(index)
        add, length = index.add, len(payload)
        for entry, parent_index, slot in zip(entries, parents, slots, strict=True):
            add(entry.id, parent_index, offset, length, slot)
        index.leaf = len(index) - 1
        self._follow(entries if views is None else views, first, under_leaf)
        self._maybe_checkpoint()

    def move_leaf(self, entry_id: str | None) -> None:
        """Make ``entry_id`` the leaf (``None``: the next append starts a new root). Durable."""
        self._check_writable()
        target = self._leaf_index(entry_id)
        if target == self._index.leaf:
            return
        if self._header.version >= 2:
            self._write_frame(codec.encode_leaf(entry_id))
        else:
            self._write_frame(cbor2.dumps({"leaf": entry_id}))
        self._index.leaf = target
        if self._projection is not None:
            # Another branch: fold it now, so checkpoints (and bounded opens) go on.
            self._fold = None
            self._refold()
            self._maybe_checkpoint()

    def compact(self, summary: str, data: Mapping[str, Any] | None = None) -> Entry:
        """Append a ``compaction`` entry ``{"summary": summary, **data}``; nothing is removed."""
        return self.append(COMPACTION_TYPE, {**(data or {}), "summary": summary})

    def fork(self, path: str | os.PathLike[str] | None) -> SessionFile:
        """Write the active branch into a new session and open it for writing.

        ``path`` must not exist; ``None`` forks into a new in-memory session. The new session
        keeps entry ids, parents, timestamps and data, and its header names this file in
        ``forkedFrom``. This session is unchanged.
        """
        self._check_open()
        branch = self.branch()
        source = str(self._path.resolve()) if self._path is not None else None
        if path is None:
            forked = SessionFile.in_memory(
                clock=self._clock, forked_from=source, projection=self._projection
            )
            forked._adopt(branch)
            return forked
        target = Path(path)
        header = Header.new(forked_from=source, clock=self._clock)
        # The branch is one chain: it goes out in batches of consecutive entries.
        payloads = (
            codec.encode_entries(
                [(e.id, e.parent_id, e.type, e.timestamp, e.data) for e in branch[n : n + 256]]
            )[0]
            for n in range(0, len(branch), 256)
        )
        if not _create_file(target, header.to_cbor(), payloads):
            raise FileExistsError(target)
        return SessionFile.open(
            target,
            create=False,
            fsync=self._fsync,
            clock=self._clock,
            projection=self._projection,
            checkpoint_every=self._checkpoint_every,
            checkpoint_ratio=self._checkpoint_ratio,
        )

    def reload(self) -> OpenReport:
        """Re-read the file from disk (as a new open would) and return the new report."""
        self._check_open()
        if self._path is None:
            return self._report
        path, readonly = self._path, self._readonly
        self.close()
        fresh = SessionFile.open(
            path,
            readonly=readonly,
            create=False,
            fsync=self._fsync,
            clock=self._clock,
            projection=self._projection,
            checkpoint_every=self._checkpoint_every,
            checkpoint_ratio=self._checkpoint_ratio,
        )
        # Take over the fresh object's state; the fresh object is dropped without closing.
        self.__dict__.update(fresh.__dict__)
        return self._report

    @property
    def fsync(self) -> bool:
        """Whether every write is flushed to the disk before it returns."""
        return self._fsync

    @property
    def needs_flush(self) -> bool:
        """Frames were written since the last flush (never for in-memory sessions)."""
        return self._fd is not None and self._dirty

    def flush(self) -> None:
        """Force written frames to the disk (``fdatasync``)."""
        self._check_open()
        fd = self._fd
        if fd is not None and self._dirty:
            os.fdatasync(fd)
            self._dirty = False

    def close(self, *, flush: bool = True) -> None:
        """Flush (unless ``flush=False``) and close. Idempotent; releases the write lock."""
        if self._closed:
            return
        self._closed = True
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if flush and self._dirty and self._broken is None:
                os.fdatasync(fd)
        finally:
            os.close(fd)

    def __enter__(self) -> SessionFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = str(self._path) if self._path is not None else "memory"
        return f"<SessionFile {where} entries={len(self._index)} leaf={self.leaf_id!r}>"

    # ---- internals ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("session file is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self._readonly:
            raise ValueError("session file is open read-only")
        if self._broken is not None:
            raise OSError("session file is unusable after a failed write") from self._broken

    def _new_id(self, taken: set[str]) -> str:
        return self._new_key(taken)[0]

    def _new_key(self, taken: set[str]) -> tuple[str, bytes]:
        """A new entry id, and the 8 bytes it is stored as (``codec.encode_id``)."""
        while True:
            key = self._ids.take()
            candidate = key.hex()
            if candidate not in self._index.pos and candidate not in taken:
                return candidate, key

    def _leaf_index(self, leaf_id: LeafRef) -> int:
        if leaf_id is CURRENT_LEAF:
            return self._index.leaf
        if leaf_id is None:
            return _NO_PARENT
        position = self._position(leaf_id)
        if position is None:
            raise KeyError(leaf_id)
        return position

    def _position(self, entry_id: object) -> int | None:
        """The index position of an entry; indexes the whole file when the id may lie before
        the checkpoint the index starts at."""
        if not isinstance(entry_id, str):
            hash(entry_id)  # an unhashable id raises TypeError, as the dict lookup would
            return None
        position = self._index.pos.get(entry_id)
        if position is None and self._start is not None:
            self._full()
            position = self._index.pos.get(entry_id)
        return position

    def _path_to(self, leaf_id: LeafRef) -> list[int]:
        leaf = self._leaf_index(leaf_id)
        try:
            return self._index.path_to(leaf)
        except _NeedFullIndex:
            target = self._index.ids[leaf]
            self._full()
            return self._index.path_to(self._index.pos[target])

    def _write_frame(self, payload: bytes) -> int:
        """Write one frame; return its offset. Rolls back a partial write."""
        offset = self._size
        if self._fd is None:
            return offset
        frame = encode_frame(payload)
        try:
            _write_all(self._fd, frame)
            if self._fsync:
                os.fdatasync(self._fd)
        except BaseException as exc:
            # Remove whatever part of the frame reached the file, so the next frame does not
            # land behind garbage (which a later open would cut together with it).
            try:
                os.ftruncate(self._fd, offset)
            except OSError:
                self._broken = exc
            raise
        self._size = offset + len(frame)
        self._dirty = not self._fsync
        return offset

    def _adopt(self, entries: Sequence[Entry]) -> None:
        """Fill an empty in-memory session with ``entries`` (already in tree order)."""
        assert self._memory is not None and not self._memory
        parents = self._index.check_links([(e.id, e.parent_id) for e in entries])
        # Frames of up to 256 consecutive entries, as a fork into a file writes them.
        for start in range(0, len(entries), 256):
            chunk = entries[start : start + 256]
            payload = codec.encode_entries(
                [(e.id, e.parent_id, e.type, e.timestamp, e.data) for e in chunk]
            )[0]
            frame = len(self._memory)
            self._memory.append(payload)
            for slot, entry in enumerate(chunk):
                self._index.add(entry.id, parents[start + slot], frame, len(payload), slot)
        self._index.leaf = len(entries) - 1
        self._report = attrs.evolve(self._report, entries=len(entries))
        self._fold = None

    # ---- checkpoints and the fold ------------------------------------------------------------

    def _loc(self, i: int) -> Loc:
        return (self._index.frame_off[i], self._index.slot[i])

    def _follow(self, entries: Sequence[Entry], first: int, under_leaf: bool) -> None:
        """Feed appended entries to the fold when they continue its branch."""
        if self._fold is None:
            return
        if not under_leaf:
            self._fold = None
            return
        step, offsets, slots = self._fold.step, self._index.frame_off, self._index.slot
        try:
            for n, entry in enumerate(entries, first):
                step(entry, (offsets[n], slots[n]))  # ``_loc(n)``
        except Exception:
            # The entries are written; a fold that cannot take them is rebuilt when needed.
            logger.exception("%s: the projection refused an entry", self)
            self._fold = None
            return
        self._since_checkpoint += len(entries)
        if self._fd is not None:  # (in memory: no checkpoints)
            last = first + len(entries) - 1
            if entries and offsets[first] == offsets[last]:  # one frame: the usual case
                self._since_bytes += self._index.frame_len[first] + _HEAD_SIZE
            else:
                self._since_bytes += self._frame_bytes(range(first, last + 1))

    def _frame_bytes(self, indices: Iterable[int]) -> int:
        """Bytes of the frames (heads included) holding the entries at ``indices`` (in file
        order: the entries of one frame come together), each frame counted once."""
        offsets, lengths = self._index.frame_off, self._index.frame_len
        total, last = 0, -1
        for i in indices:
            if offsets[i] != last:
                last = offsets[i]
                total += lengths[i] + _HEAD_SIZE
        return total

    def _refold(self) -> None:
        """Fold the active branch: from the checkpoint the index starts at when the leaf
        descends from it, else from the root."""
        projection = self._projection
        assert projection is not None
        index = self._index
        leaf = index.leaf
        path: list[int] = []
        fold: Fold | None = None
        prev: int | None = None
        if self._start is not None:
            parent = index.parent
            i = leaf
            while i != _NO_PARENT and i != 0:
                path.append(i)
                i = parent[i]
            path.reverse()
            if i == 0:
                fold, prev = projection.restore(self._start.live), self._start.offset
            else:
                fold = projection.empty()
        else:
            path = index.path_to(leaf)
            fold = projection.empty()
        for i, entry in zip(path, self._load_entries(path), strict=True):
            fold.step(entry, self._loc(i))
        self._fold, self._fold_prev, self._since_checkpoint = fold, prev, len(path)
        self._written = None
        self._since_bytes = self._frame_bytes(path)
        if prev is None:
            self._live_bytes, self._live_unmeasured = 0, None
        else:  # the start checkpoint's live part, measured when the rule first needs it
            assert self._start is not None
            self._live_bytes, self._live_unmeasured = None, self._start.live

    def _maybe_checkpoint(self) -> None:
        """Append a checkpoint when enough was folded since the last one: at least
        ``checkpoint_every`` entries, whose frames hold at least ``checkpoint_ratio`` times
        the bytes of the last checkpoint's live part (``docs/session-file.md``, Writing)."""
        fold = self._fold
        if (
            fold is None
            or self._projection is None
            or self._readonly
            or self._closed
            or self._fd is None
            or self._broken is not None
            or self._header.version < 2
            or self._since_checkpoint < self._checkpoint_every
            or self._index.leaf == _NO_PARENT
            or self._since_bytes < self._checkpoint_ratio * self._last_live_bytes()
        ):
            return
        self._checkpoint(fold)

    def _checkpoint(self, fold: Fold) -> None:
        """Append a checkpoint of ``fold`` (the fold of the active branch)."""
        assert self._projection is not None
        index, leaf = self._index, self._index.leaf
        value = {
            "projection": self._projection.name,
            "leaf": codec.encode_id(index.ids[leaf]),
            "at": [index.frame_off[leaf], index.frame_len[leaf], index.slot[leaf]],
            "entries": len(self),
            "log": fold.log,
            "prev": self._fold_prev,
        }
        extend = getattr(self._projection, "checkpoint_fields", None)
        if extend is not None:  # derived data too: left out when it cannot be computed
            with contextlib.suppress(ValueError, OSError):
                value.update(extend(fold.log, self._fold_prev, self._logs_at))
        try:
            value["live"] = _live_of(fold)
            payload, live_bytes = codec.encode_checkpoint_sized(value, CHECKPOINT_MAGIC)
            offset = self._write_frame(payload)
        except Exception:
            # Derived data only: the entries are all written, the next checkpoint will do.
            logger.exception("%s: a checkpoint could not be written", self)
            return
        fold.log = []  # (a new list: the written one is kept as it is, below)
        self._written = (offset, {key: item for key, item in value.items() if key != "live"})
        self._fold_prev, self._since_checkpoint = offset, 0
        self._since_bytes, self._live_bytes, self._live_unmeasured = 0, live_bytes, None

    def _last_live_bytes(self) -> int:
        """The size of the CBOR of the live part of the checkpoint the fold continues."""
        if self._live_bytes is None:  # a fold from the checkpoint the open started at
            self._live_bytes = len(cbor2.dumps(self._live_unmeasured))
            self._live_unmeasured = None
        return self._live_bytes

    def _logs_at(self, offset: int) -> dict[str, Any]:
        """``checkpoint_at`` without the live part: what a new checkpoint reads of older ones
        (the one this session wrote last from memory: the map it encoded, which is what
        decoding its frame gives; readers do not change it)."""
        written = self._written
        if written is not None and written[0] == offset:
            return written[1]
        return self.checkpoint_at(offset, live=False)

    def _checkpoint_value(self, offset: int, *, live: bool = True) -> dict[str, Any]:
        """The checked map of the checkpoint frame at ``offset``; ``ValueError`` (or
        ``_BadFrame``) when it is not a usable checkpoint of this projection. ``live=False``
        may leave its live part out."""
        assert self._fd is not None and self._projection is not None
        payload = _read_frame(self._fd, offset, self._size, check=True)
        if payload is None:
            raise ValueError("no whole frame there, or its checksum fails")
        value = codec.decode_checkpoint(payload, CHECKPOINT_MAGIC, live=live)
        at, entries, prev = value.get("at"), value.get("entries"), value.get("prev")
        if value.get("projection") != self._projection.name:
            raise ValueError(f"written for another projection ({value.get('projection')!r})")
        if not (
            isinstance(at, list)
            and len(at) == 3
            and all(type(n) is int for n in at)
            and 0 < at[0] < offset
            and type(entries) is int
            and entries > 0
            and (prev is None or (type(prev) is int and 0 < prev < offset))
            and isinstance(value.get("log"), list)
        ):
            raise ValueError("malformed checkpoint")
        return value

    def _read_checkpoint(self, offset: int, end: int) -> _Checkpoint:
        """The checkpoint at ``offset``, checked against the entry it names as the leaf."""
        assert self._projection is not None
        value = self._checkpoint_value(offset)
        leaf_id = codec.decode_id(value.get("leaf"))
        if leaf_id is None:
            raise ValueError("malformed checkpoint leaf")
        frame_off, frame_len, slot = value["at"]
        payload = _read_frame(self._fd, frame_off, self._size)  # type: ignore[arg-type]
        if (
            payload is None
            or len(payload) != frame_len
            or self._decode_entry(payload, frame_off, slot).id != leaf_id
        ):
            raise ValueError("the entry it names is not there")
        self._projection.restore(value.get("live"))  # fits, or ValueError
        return _Checkpoint(
            offset,
            end,
            leaf_id,
            (frame_off, frame_len, slot),
            value["entries"],
            value.get("live"),
            value["prev"],
        )

    def _index_file(self, reader: _Reader, size: int, notes: list[str]) -> Damage | None:
        """Index the file: from the newest usable checkpoint when the session has a
        projection, else every frame. Returns the damaged tail, if any."""
        start = reader.header_end
        self._header_end = start
        self._size = size  # checkpoints are read through it (the open sets it again)
        if self._projection is None or self._header.version < 2:
            return _reach(self._scan(reader, start, size, notes), size)
        tried = 0
        for offset, end, whole in _checkpoints_backwards(reader, start, size):
            if tried == _CHECKPOINT_TRIES:
                break  # something is wrong with all of them: read everything
            tried += 1
            if not whole:
                notes.append(f"checkpoint at byte {offset} is damaged (checksum); skipped")
                continue
            try:
                checkpoint = self._read_checkpoint(offset, end)
            except (ValueError, _BadFrame, SessionFileError) as exc:
                notes.append(f"checkpoint at byte {offset} is unusable ({exc}); skipped")
                continue
            self._index = _Index()
            self._index.add(checkpoint.leaf_id, _BEFORE, *checkpoint.leaf_at)
            self._index.leaf = 0
            self._start, self._base = checkpoint, checkpoint.entries - 1
            try:
                return _reach(self._scan(reader, checkpoint.end, size, notes), size)
            except _NeedFullIndex:
                break  # the tail reaches back before the checkpoint: index everything
        if tried and self._start is None:
            notes.append("no usable checkpoint: the whole file was read")
        self._index, self._start, self._base = _Index(), None, 0
        return _reach(self._scan(reader, start, size, notes), size)

    def _full(self) -> None:
        """Index the part of the file before the checkpoint the index starts at."""
        start = self._start
        if start is None:
            return
        assert self._fd is not None
        tail = self._index
        self._index, self._start, self._base = _Index(), None, 0
        reader = _Reader(self._fd, self._size)
        damage = self._scan(reader, self._header_end, start.offset, [])
        full = self._index
        stub = full.pos.get(start.leaf_id)
        if damage is not None or stub is None:
            self._index, self._start, self._base = tail, start, start.entries - 1
            detail = damage.detail if damage is not None else "checkpoint leaf not found"
            raise SessionFileError(
                self._path, "unreadable", f"frames before byte {start.offset}: {detail}"
            )
        shift = len(full) - 1

        def mapped(i: int) -> int:
            return stub if i == 0 else (i if i == _NO_PARENT else shift + i)

        for j in range(1, len(tail)):
            full.add(
                tail.ids[j],
                mapped(tail.parent[j]),
                tail.frame_off[j],
                tail.frame_len[j],
                tail.slot[j],
            )
        full.leaf = mapped(tail.leaf)

    def _decode_entry(self, payload: memoryview | bytes, offset: int, slot: int) -> Entry:
        return self._entry_in(self._decode_frame(payload, offset), offset, slot)

    def _decode_frame(self, payload: memoryview | bytes, offset: int) -> tuple[bool, Any]:
        """An indexed frame decoded: ``(True, entry tuples)`` for an entries frame, ``(False,
        map)`` for a version 1 entry or batch; ``SessionFileError`` when it no longer decodes."""
        try:
            if payload[0] == codec.KIND_ENTRIES:
                return True, codec.decode_entries(payload)
            return False, _decode(payload)
        except (ValueError, _BadFrame, LookupError, TypeError) as exc:
            raise self._changed_on_disk(offset) from exc

    def _entry_in(self, frame: tuple[bool, Any], offset: int, slot: int) -> Entry:
        """The entry at ``slot`` of a decoded frame (``-1``: the frame is one entry);
        ``SessionFileError`` when the frame no longer holds the entry the open indexed there."""
        compact, decoded = frame
        try:
            if compact:
                return Entry(*decoded[slot])
            return Entry._from_map(decoded if slot < 0 else decoded["batch"][slot])
        except (ValueError, LookupError, TypeError) as exc:
            raise self._changed_on_disk(offset) from exc

    def _memory_frame(self, offset: int) -> tuple[bool, Any]:
        """``_decode_frame`` of the in-memory frame at ``offset``."""
        assert self._memory is not None
        plain = self._memory.plain(offset)
        if plain is None:
            return self._decode_frame(self._memory[offset], offset)
        try:
            return True, codec.decode_plain_entries(plain)
        except ValueError as exc:
            raise self._changed_on_disk(offset) from exc

    def _changed_on_disk(self, offset: int) -> SessionFileError:
        return SessionFileError(self._path, "unreadable", f"frame at {offset} changed on disk")

    def _load_entries(self, indices: Iterable[int]) -> Iterator[Entry]:
        memory = self._memory
        if memory is None and self._fd is None:
            raise ValueError("session file is closed")
        reader = _Reader(self._fd, self._size) if self._fd is not None else None
        index = self._index
        last_offset = -1
        frame: tuple[bool, Any] = (False, None)
        for i in indices:
            offset = index.frame_off[i]
            if offset != last_offset:  # entries of one frame come together: decode it once
                if memory is not None:
                    frame = self._memory_frame(offset)
                else:
                    assert reader is not None
                    payload = reader.payload(offset, index.frame_len[i])
                    frame = self._decode_frame(payload, offset)
                last_offset = offset
            yield self._entry_in(frame, offset, index.slot[i])

    def _scan(self, reader: _Reader, start: int, size: int, notes: list[str]) -> Damage | None:
        """Index every whole frame from ``start`` to ``size``; return the damaged tail (ending
        at ``size``), if any.

        This loop runs once per frame of the file, so it keeps to local names and a fast path
        for the common frames (compact entries, one version 1 entry); ``_index_frame`` takes
        every other kind. When the index starts at a checkpoint, a frame naming an entry that
        is not indexed raises ``_NeedFullIndex`` (it may lie before the checkpoint).
        """
        index = self._index
        partial = self._start is not None
        unpack_from = _FRAME_HEAD.unpack_from
        crc32 = zlib.crc32
        loads = cbor2.loads
        decode_entries = codec.decode_entries
        pos_of = index.pos
        fd = reader.fd
        buf = b""
        view = memoryview(buf)
        base = 0  # buf holds the bytes from ``base`` on
        pos = start
        while pos < size:
            rel = pos - base
            if rel + _HEAD_SIZE > len(buf):
                if size - pos < _HEAD_SIZE:
                    detail = f"{size - pos} of {_HEAD_SIZE} frame header bytes"
                    return Damage(pos, size, "torn", detail)
                buf = os.pread(fd, min(_READ_WINDOW, size - pos), pos)
                view, base, rel = memoryview(buf), pos, 0
                if len(buf) < _HEAD_SIZE:  # the file shrank since it was measured
                    return Damage(pos, size, "torn", "file ended early")
            length, crc = unpack_from(buf, rel)
            if length == 0 or length > MAX_FRAME_BYTES:
                return Damage(pos, size, "length", f"frame declares {length} bytes")
            end = pos + _HEAD_SIZE + length
            if end > size:
                detail = f"frame declares {length} bytes, {size - pos - _HEAD_SIZE} present"
                return Damage(pos, size, "torn", detail)
            if rel + _HEAD_SIZE + length > len(buf):
                buf = os.pread(fd, min(max(_READ_WINDOW, _HEAD_SIZE + length), size - pos), pos)
                view, base, rel = memoryview(buf), pos, 0
                if len(buf) < _HEAD_SIZE + length:
                    return Damage(pos, size, "torn", "file ended early")
            payload = view[rel + _HEAD_SIZE : rel + _HEAD_SIZE + length]
            kind = payload[0]
            if crc32(payload) != crc:
                if _is_checkpoint(payload):
                    notes.append(f"checkpoint at byte {pos} is damaged (checksum); skipped")
                    pos = end
                    continue
                return Damage(pos, size, "checksum", f"frame at {pos}")
            try:
                if kind == codec.KIND_ENTRIES:
                    fields = decode_entries(payload)
                    links = [(f[0], f[1]) for f in fields]
                    parents = index.check_links(links, partial=partial)
                    for slot, ((entry_id, _), parent) in enumerate(
                        zip(links, parents, strict=True)
                    ):
                        index.add(entry_id, parent, pos, length, slot)
                    index.leaf = len(index.ids) - 1
                elif kind == codec.KIND_CHECKPOINT:
                    pass  # derived data: nothing to index
                elif kind == codec.KIND_LEAF:
                    target = codec.decode_leaf(payload)
                    if target is None:
                        index.leaf = _NO_PARENT
                    elif target in pos_of:
                        index.leaf = pos_of[target]
                    elif partial:
                        raise _NeedFullIndex
                    else:
                        raise _BadFrame("invalid", "leaf move to an unknown entry")
                else:
                    try:
                        value = loads(payload)
                    except Exception as exc:  # any decoder failure is damage, whatever its type
                        return Damage(pos, size, "undecodable", type(exc).__name__)
                    if type(value) is dict and "id" in value:
                        entry_id, parent_id, *_ = _entry_fields(value)
                        if entry_id in pos_of:
                            raise _BadFrame("invalid", f"duplicate entry id {entry_id!r}")
                        if parent_id is None:
                            parent = _NO_PARENT
                        elif (parent := pos_of.get(parent_id, -2)) == -2:
                            if partial:
                                raise _NeedFullIndex
                            raise _BadFrame("invalid", f"entry {entry_id!r} has unknown parent")
                        index.add(entry_id, parent, pos, length, -1)
                        index.leaf = len(index.ids) - 1
                    else:
                        self._index_frame(value, pos, length, partial)
            except codec.CodecError as exc:
                return Damage(pos, size, "undecodable", str(exc))
            except ValueError as exc:
                return Damage(pos, size, "invalid", str(exc))
            except _BadFrame as bad:
                return Damage(pos, size, bad.reason, bad.detail)
            pos = end
        return None

    def _index_frame(self, value: Any, pos: int, length: int, partial: bool) -> None:
        """Index a version 1 batch or leaf frame; ``_BadFrame`` or ``ValueError`` when it does
        not fit."""
        index = self._index
        if not isinstance(value, dict):
            raise _BadFrame("invalid", "frame is not a map")
        if "batch" in value:
            items = value["batch"]
            if not isinstance(items, list) or not items:
                raise _BadFrame("invalid", "batch is not a non-empty array")
            links = [_entry_fields(item)[:2] for item in items]
            parents = index.check_links(links, partial=partial)
            for slot, ((entry_id, _), parent) in enumerate(zip(links, parents, strict=True)):
                index.add(entry_id, parent, pos, length, slot)
            index.leaf = len(index) - 1
        elif "leaf" in value:
            target = value["leaf"]
            if target is None:
                index.leaf = _NO_PARENT
            elif isinstance(target, str) and target in index.pos:
                index.leaf = index.pos[target]
            elif partial and isinstance(target, str):
                raise _NeedFullIndex
            else:
                raise _BadFrame("invalid", "leaf move to an unknown entry")
        else:
            raise _BadFrame("invalid", "unknown frame kind")

    def _cut_tail(self, reader: _Reader, damage: Damage) -> Path | None:
        """Copy the damaged tail to a sidecar file, then truncate the session to its prefix."""
        assert self._fd is not None and self._path is not None
        saved = _save_sidecar(self._path, reader, damage)
        os.ftruncate(self._fd, damage.start)
        os.fsync(self._fd)
        return saved


def _read_frame(fd: int, offset: int, size: int, *, check: bool = False) -> bytes | None:
    """The payload of the frame at ``offset`` read on its own (two exact reads), or ``None``
    when no whole frame (with ``check``: no frame whose checksum holds) is there."""
    head = os.pread(fd, _HEAD_SIZE, offset)
    if len(head) < _HEAD_SIZE:
        return None
    length, crc = _FRAME_HEAD.unpack(head)
    if not 0 < length <= MAX_FRAME_BYTES or offset + _HEAD_SIZE + length > size:
        return None
    payload = os.pread(fd, length, offset + _HEAD_SIZE)
    if len(payload) < length or (check and zlib.crc32(payload) != crc):
        return None
    return payload


def _reach(damage: Damage | None, size: int) -> Damage | None:
    """A damaged tail found before ``size`` runs to ``size`` (the end of the file)."""
    return damage if damage is None or damage.end == size else attrs.evolve(damage, end=size)


def _is_checkpoint(payload: memoryview | bytes) -> bool:
    return bytes(payload[1 : 1 + len(CHECKPOINT_MAGIC)]) == CHECKPOINT_MAGIC and (
        payload[0] == codec.KIND_CHECKPOINT
    )


def _checkpoints_backwards(
    reader: _Reader, start: int, size: int
) -> Iterator[tuple[int, int, bool]]:
    """The checkpoint frames of the file, newest first, found from the end of the file by
    their magic (nothing before the newest usable one is read): ``(offset, end, whole)``,
    ``whole`` false when the frame's checksum fails. A frame running past the end (a torn
    tail) is not one."""
    needle = bytes([codec.KIND_CHECKPOINT]) + CHECKPOINT_MAGIC
    fd = reader.fd
    hi = size  # search the bytes before ``hi``
    while hi - start >= _HEAD_SIZE + len(needle):
        lo = max(start, hi - _READ_WINDOW)
        window = os.pread(fd, hi - lo, lo)
        at = window.rfind(needle)
        while at >= 0:
            offset = lo + at - _HEAD_SIZE
            if offset >= start:
                length, crc = _FRAME_HEAD.unpack(os.pread(fd, _HEAD_SIZE, offset))
                end = offset + _HEAD_SIZE + length
                if length <= MAX_FRAME_BYTES and end <= size:
                    payload = os.pread(fd, length, offset + _HEAD_SIZE)
                    yield offset, end, zlib.crc32(payload) == crc
            at = window.rfind(needle, 0, at)
        if lo == start:
            return
        hi = lo + len(needle) - 1  # a needle across the window edge is found next time


class _Reader:
    """Positional reads through a window, so a sequential scan makes few system calls."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = size
        self.header_end = 0
        self._start = 0
        self._buf = b""

    def read(self, offset: int, length: int) -> memoryview:
        end = offset + length
        if offset < self._start or end > self._start + len(self._buf):
            want = max(_READ_WINDOW, length)
            self._buf = os.pread(self.fd, min(want, max(self.size - offset, length)), offset)
            self._start = offset
            if len(self._buf) < length:
                raise _BadFrame("torn", "file ended early")
        rel = offset - self._start
        return memoryview(self._buf)[rel : rel + length]

    def payload(self, offset: int, length: int) -> memoryview:
        try:
            return self.read(offset + _HEAD_SIZE, length)
        except _BadFrame as exc:
            raise SessionFileError(None, "unreadable", "session file shrank under us") from exc


def _read_header(reader: _Reader, path: Path) -> Header:
    """Read and check the header frame; ``SessionFileError`` when there is no usable one."""
    head = os.pread(reader.fd, min(reader.size, 64 * 1024 + _HEAD_SIZE), 0)
    # The magic text inside the first bytes tells a damaged header from a foreign file.
    if MAGIC.encode() in head[:256]:
        refused = SessionFileError(path, "damaged-header", "session header frame is damaged")
    else:
        refused = SessionFileError(path, "not-a-session-file", "not a pi-agent-ask session file")
    if len(head) < _HEAD_SIZE:
        raise refused
    length, crc = _FRAME_HEAD.unpack_from(head)
    payload = head[_HEAD_SIZE : _HEAD_SIZE + length]
    if length == 0 or len(payload) < length or zlib.crc32(payload) != crc:
        raise refused
    try:
        value = _decode(payload)
    except _BadFrame:
        raise refused from None
    reader.header_end = _HEAD_SIZE + length
    return _header_from(value, path)


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)
    if written == len(data):  # the usual case: one call, no view of the bytes
        return
    view = memoryview(data)[written:]
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _refuse_odd_file(path: Path, fd: int | None = None) -> None:
    """``SessionFileError("not-a-regular-file")`` unless ``path`` (or the open ``fd``) is a
    regular file; a missing path passes (it may be created)."""
    try:
        mode = os.fstat(fd).st_mode if fd is not None else path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    if not stat.S_ISREG(mode):
        raise SessionFileError(
            path, "not-a-regular-file", "not a regular file (a FIFO, device or directory)"
        )


def _create_file(path: Path, header: bytes, payloads: Iterable[bytes]) -> bool:
    """Create ``path`` atomically with these frames; ``False`` if it already exists.

    The frames go to a temporary file that is flushed and then hard-linked to ``path``: the
    name appears complete or not at all, and an existing file is never replaced.
    """
    directory = path.parent if str(path.parent) else Path()
    tmp = directory / f".{path.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        try:
            buffer = bytearray(encode_frame(header))
            for payload in payloads:
                buffer += encode_frame(payload)
                if len(buffer) >= _READ_WINDOW:
                    _write_all(fd, bytes(buffer))
                    buffer.clear()
            _write_all(fd, bytes(buffer))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        _fsync_dir(directory)
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _save_sidecar(path: Path, reader: _Reader, damage: Damage) -> Path | None:
    """Copy the damaged bytes next to the session (``<name>.cut-<offset>[-n]``)."""
    for n in range(100):
        suffix = f".cut-{damage.start}" + (f"-{n}" if n else "")
        target = path.with_name(path.name + suffix)
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            continue
        try:
            pos = damage.start
            while pos < damage.end:
                chunk = os.pread(reader.fd, min(_READ_WINDOW, damage.end - pos), pos)
                if not chunk:
                    break
                _write_all(fd, chunk)
                pos += len(chunk)
            os.fsync(fd)
        finally:
            os.close(fd)
        return target
    return None
