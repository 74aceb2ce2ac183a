"""The session file: an append-only sequence of frames holding a tree of entries.

Synchronous and free of Trio; the persistence actor (``pi_agent_ask.actors.persistence``) is its
only writer at run time. ``docs/session-file.md`` is the user-facing description and the
format's specification. The parts live in their own modules: ``session_values`` (entries, the
header, reports), ``codec`` (payloads), ``frames`` (frames on disk), ``session_index`` (the
index and the scan of an open), ``checkpoints`` (checkpoint frames), ``session_storage`` (the
session's fields, its frames in and out) and ``session_fold`` (the fold of the active branch,
the checkpoints it writes and the open from one); this module is the session's interface:
opening, reading, appending, leaf moves, forks, reloads and closing.

Invariants the code keeps:

* An entry's parent appears earlier in the file, so file order is a topological order and every
  branch (root → leaf) is a strictly increasing sequence of file positions.
* The leaf is the effect of the last frame: an entry (or the last entry of a batch) becomes the
  leaf; a leaf move sets it; a checkpoint does not change it.
* Only whole frames count. The first frame that is incomplete, fails its checksum, does not
  decode, or does not fit the tree ends the readable prefix; everything from it on is the
  damaged tail. A writable open cuts that tail (after copying it to a sidecar file), a
  read-only open only reports it.
* A frame is written with one ``write`` loop to an ``O_APPEND`` descriptor; a failed write is
  rolled back with ``ftruncate`` so no later frame is ever written behind garbage.
* Every append goes through one path (``_chain``, ``_write_entries``): a chain of entries is
  one frame (several chains appended together share one), whole or cut after a crash.
* The in-memory index holds ids, parent links and frame positions only; entries are decoded from
  the file on demand. ``branch()`` walks integer parent links, O(branch length).
* With a projection, the session keeps the fold of the active branch and appends a checkpoint
  when enough was folded since the last one (``checkpoints``); an open starts from the newest
  usable checkpoint and indexes the older part only when something needs it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from pi_agent_ask.persistence import codec
from pi_agent_ask.persistence.checkpoints import (
    CHECKPOINT_EVERY,
    CHECKPOINT_MAGIC,
    CHECKPOINT_RATIO,
)
from pi_agent_ask.persistence.frames import (
    Reader,
    create_file,
    encode_frame,
    read_frame,
    read_header,
    refuse_odd_file,
    save_sidecar,
    write_all,
)
from pi_agent_ask.persistence.session_fold import FoldedSession
from pi_agent_ask.persistence.session_index import BEFORE, NO_PARENT, NeedFullIndex
from pi_agent_ask.persistence.session_values import (
    COMPACTION_TYPE,
    CURRENT_LEAF,
    FORMAT_VERSION,
    MAGIC,
    MAX_FRAME_BYTES,
    CurrentLeaf,
    Damage,
    DamageReason,
    Entry,
    Fold,
    FrozenMap,
    Header,
    LeafRef,
    Loc,
    OpenReport,
    Projection,
    SessionFileError,
    SessionFileErrorReason,
    check_frame_size,
    frame_budget,
    freeze,
)

__all__ = [
    "CHECKPOINT_EVERY",
    "CHECKPOINT_MAGIC",
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
    "Fold",
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

FORK_FRAME_ENTRIES = 256
"""Entries per frame when a branch is written anew (a fork)."""

Chain = Iterable[tuple[str, Mapping[Any, Any] | None]]
"""Entries to append as one chain: each ``(type, data)``."""


class SessionFile(FoldedSession):
    """A session: a tree of entries with a current leaf, in a file or in memory.

    Open with ``SessionFile.open(path)`` (created when missing), ``SessionFile.open(path,
    readonly=True)`` (never modifies the file) or ``SessionFile.in_memory()``. Not thread-safe:
    one owner at a time (at run time, the persistence actor).

    Durability: a write returns once the frame was handed to the OS (``write`` returned), so it
    survives the process being killed. With ``fsync=True`` every write is also flushed to the
    disk (``fdatasync``) before it returns, so it survives a power loss. Creation, fork, the
    repair of a damaged tail and ``close()`` always flush.
    """

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
        refuse_odd_file(file_path)  # before a byte is written: only a regular file or nothing
        if not readonly and create and not file_path.exists():
            created = create_file(file_path, Header.new(clock=clock).to_cbor(), ())
        flags = (os.O_RDONLY if readonly else os.O_RDWR | os.O_APPEND) | os.O_CLOEXEC
        # Non-blocking and checked through the descriptor: a FIFO swapped in after the check
        # above neither blocks the open nor gets written to.
        fd = os.open(file_path, flags | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
        try:
            refuse_odd_file(file_path, fd)
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
                write_all(fd, encode_frame(Header.new(clock=clock).to_cbor()))
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
        reader = Reader(fd, size)
        header = read_header(reader, path)
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

    def entry_at(self, loc: Loc) -> Entry:
        """The entry stored at ``loc`` (as a fold's ``step`` was given it), read on its own."""
        self._check_open()
        offset, slot = loc
        if self._memory is not None:
            return self._entry_in(self._memory_frame(self._memory, offset), offset, slot)
        if self._fd is None:
            raise ValueError("session file is closed")
        last = self._last_read
        if last is not None and last[0] == offset:
            return self._entry_in(last[1], offset, slot)
        payload = read_frame(self._fd, offset, self._size)
        if payload is None:
            raise SessionFileError(self._path, "unreadable", f"no frame at {offset}")
        frame = self._decode_frame(payload, offset)
        self._last_read = (offset, frame)
        return self._entry_in(frame, offset, slot)

    @property
    def leaf_id(self) -> str | None:
        """The current leaf: the end of the active branch (``None``: before the first root)."""
        leaf = self._index.leaf
        return None if leaf == NO_PARENT else self._index.ids[leaf]

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
        if self._index.parent[position] == BEFORE:
            self._full()
            position = self._index.pos[entry_id]
        parent = self._index.parent[position]
        return None if parent == NO_PARENT else self._index.ids[parent]

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

    def append_many(self, items: Chain, *, parent_id: LeafRef = CURRENT_LEAF) -> tuple[Entry, ...]:
        """Append a chain of entries atomically: one frame, whole or cut after a crash.

        The first entry's parent is ``parent_id`` (default: the current leaf), each next one's
        parent is the one before; the last becomes the leaf. An empty ``items`` writes nothing.
        """
        self._check_writable()
        parent = self.leaf_id if parent_id is CURRENT_LEAF else parent_id
        if parent is not None and self._position(parent) is None:
            raise KeyError(parent)
        under_leaf = parent == self.leaf_id
        entries, items_cbor = self._chain(items, parent, self._clock(), set())
        if entries:
            self._write_entries(entries, items_cbor, under_leaf=under_leaf)
        return tuple(entries)

    def append_chains(self, chains: Sequence[Chain]) -> list[tuple[Entry, ...] | Exception]:
        """Append several chains under the current leaf, one after the other, in as few
        frames as the size limit allows (almost always one write): what ``append_many`` does
        for each chain in turn.

        The result has one element per chain, in order: its entries, or the exception
        ``append_many`` would have raised for it. A chain that cannot be stored (``ValueError``,
        ``TypeError``, ``RecursionError``: raised before anything is written) is left out and
        the next one goes under the chain before it; the others are unaffected. A frame whose
        write fails (``OSError``) is rolled back, and that error is the result of every chain
        in it and after it: each chain is written whole or not at all, and none twice. A
        closed, read-only or broken session raises, as ``append_many`` does.
        """
        self._check_writable()
        results: list[tuple[Entry, ...] | Exception] = [()] * len(chains)
        now = self._clock()
        parent = self.leaf_id
        taken: set[str] = set()
        # Frames to write: the numbers of their chains, their entries, each entry encoded.
        frames: list[tuple[list[int], list[Entry], list[bytes]]] = []
        size = 0
        budget = frame_budget()
        for number, chain in enumerate(chains):
            try:
                entries, items_cbor = self._chain(chain, parent, now, taken)
            except (ValueError, TypeError, RecursionError) as exc:
                results[number] = exc
                continue
            if not entries:
                continue
            parent = entries[-1].id
            plain = sum(map(len, items_cbor))
            if not frames or size + plain > budget:
                frames.append(([], [], []))
                size = 0
            size += plain
            frames[-1][0].append(number)
            frames[-1][1].extend(entries)
            frames[-1][2].extend(items_cbor)
            results[number] = tuple(entries)
        failure: OSError | ValueError | None = None
        for numbers, entries, items_cbor in frames:
            if failure is None:
                try:
                    self._write_entries(entries, items_cbor, under_leaf=True)
                except (OSError, ValueError) as exc:
                    # Nothing of this frame was written, and the chains after it hang from it.
                    failure = exc
            if failure is not None:
                for number in numbers:
                    results[number] = failure
        return results

    def _chain(
        self, items: Chain, parent: str | None, now: float, taken: set[str]
    ) -> tuple[list[Entry], list[bytes]]:
        """One chain's entries under ``parent``, and each encoded as its frame will hold it
        (the file's version). Raises what ``append_many`` raises before writing: an entry
        that cannot be stored (``ValueError``, ``TypeError``, ``RecursionError``).

        Data is encoded as the writer gave it (a ``codec.Spliced`` value is written in
        place); data cbor2 cannot encode as it is (a mapping that is not a ``dict``) is
        encoded frozen, as the entry holds it: the same bytes either way."""
        entries: list[Entry] = []
        items_cbor: list[bytes] = []
        compact = self._header.version >= 2
        size = 9  # the frame's array head, at most 9 bytes: a chain fits a frame on its own
        items = list(items)
        for (entry_type, data), entry_id in zip(
            items, self._new_ids(len(items), taken), strict=True
        ):
            if not isinstance(entry_type, str) or not entry_type:
                raise ValueError("entry type must be a non-empty string")
            entry = Entry(entry_id, parent, entry_type, now, data)
            if not compact:
                item = entry.to_cbor()
            else:
                given = data if type(data) is dict else entry.data
                try:
                    item = codec.encode_entry((entry_id, parent, entry_type, now, given))
                except TypeError:
                    item = codec.encode_entry((entry_id, parent, entry_type, now, entry.data))
            size += len(item)
            check_frame_size(size)
            entries.append(entry)
            items_cbor.append(item)
            parent = entry_id
        return entries, items_cbor

    def _write_entries(
        self, entries: Sequence[Entry], items_cbor: Sequence[bytes], *, under_leaf: bool
    ) -> None:
        """Write one frame holding ``entries`` (a chain, each encoded by ``_chain``), index
        them, make the last the leaf and fold them. ``ValueError`` for a frame past the size
        limit, ``OSError`` for a failed write: nothing is written then."""
        links = [(e.id, e.parent_id) for e in entries]
        parents = self._index.check_links(links)
        single = False
        if self._header.version >= 2:
            offset, length = self._store_entries(codec.entries_plain(items_cbor))
        else:
            if len(items_cbor) == 1:
                payload, single = items_cbor[0], True
            else:
                batch = [codec.Spliced(None, item) for item in items_cbor]
                payload = codec.dumps({"batch": batch})
            check_frame_size(len(payload))
            offset, length = self._store(payload), len(payload)
        first = len(self._index)
        self._index.add_checked(links, parents, offset, length, single=single)
        self._follow(entries, first, under_leaf)
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
            self._write_frame(codec.dumps({"leaf": entry_id}))
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
        # The branch is one chain: it goes out in frames of consecutive entries.
        chains = [
            branch[n : n + FORK_FRAME_ENTRIES] for n in range(0, len(branch), FORK_FRAME_ENTRIES)
        ]
        payloads = (
            codec.encode_entries(
                [(e.id, e.parent_id, e.type, e.timestamp, e.data) for e in chain], self._packer
            )[0]
            for chain in chains
        )
        if path is None:
            forked = SessionFile.in_memory(
                clock=self._clock, forked_from=source, projection=self._projection
            )
            for chain, payload in zip(chains, payloads, strict=True):
                offset = forked._store(payload)
                links = [(e.id, e.parent_id) for e in chain]
                forked._index.add_frame(links, offset, len(payload))
            forked._report = attrs.evolve(forked._report, entries=len(branch))
            forked._fold = None
            return forked
        target = Path(path)
        header = Header.new(forked_from=source, clock=self._clock)
        if not create_file(target, header.to_cbor(), payloads):
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

    def _check_writable(self) -> None:
        self._check_open()
        if self._readonly:
            raise ValueError("session file is open read-only")
        if self._broken is not None:
            raise OSError("session file is unusable after a failed write") from self._broken

    def _new_ids(self, count: int, taken: set[str]) -> list[str]:
        """``count`` new entry ids, each 16 lower-case hex digits (8 random bytes), held by no
        entry and not in ``taken``; they are added to ``taken`` (a refused chain's ids stay
        taken: harmless). The system's randomness is asked once for the whole chain, and
        once more for each id that happens to be held already."""
        drawn = secrets.token_hex(8 * count)
        ids = []
        for start in range(0, 16 * count, 16):
            candidate = drawn[start : start + 16]
            while candidate in self._index.pos or candidate in taken:
                candidate = secrets.token_hex(8)
            taken.add(candidate)
            ids.append(candidate)
        return ids

    def _leaf_index(self, leaf_id: LeafRef) -> int:
        if leaf_id is CURRENT_LEAF:
            return self._index.leaf
        if leaf_id is None:
            return NO_PARENT
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
        except NeedFullIndex:
            target = self._index.ids[leaf]
            self._full()
            return self._index.path_to(self._index.pos[target])

    def _cut_tail(self, reader: Reader, damage: Damage) -> Path | None:
        """Copy the damaged tail to a sidecar file, then truncate the session to its prefix."""
        assert self._fd is not None and self._path is not None
        saved = save_sidecar(self._path, reader, damage)
        os.ftruncate(self._fd, damage.start)
        os.fsync(self._fd)
        return saved
