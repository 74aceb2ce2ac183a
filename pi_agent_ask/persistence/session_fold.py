"""The fold of a session's active branch and its checkpoints: the projection's fold kept as
entries are appended, a checkpoint appended when enough was folded since the last one, and an
open that starts from the newest usable checkpoint (indexing the older part of the file only
when something needs it).

The checkpoint rule (``docs/session-file.md``): a checkpoint follows once the fold took in at
least ``checkpoint_every`` entries since the last one *and* their frames hold
``checkpoint_ratio`` times the bytes of that checkpoint's live part, so checkpoint work stays a
fixed share of what is written however much is pending. A checkpoint is derived data: one that
cannot be written is logged and skipped, one that cannot be read is skipped on open.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from pi_agent_ask.persistence import codec
from pi_agent_ask.persistence.checkpoints import (
    CHECKPOINT_TRIES,
    Checkpoint,
    checkpoint_value,
    checkpoints_backwards,
    encode_checkpoint,
    read_checkpoint,
)
from pi_agent_ask.persistence.frames import HEAD_SIZE, BadFrame, Reader, reach
from pi_agent_ask.persistence.session_index import BEFORE, NO_PARENT, Index, NeedFullIndex
from pi_agent_ask.persistence.session_storage import SessionStorage
from pi_agent_ask.persistence.session_values import Damage, Entry, Fold, Loc, SessionFileError

__all__ = ["FoldedSession"]

logger = logging.getLogger(__name__)


class FoldedSession(SessionStorage):
    """A session's fold and checkpoints (see the module header); ``SessionFile`` is one."""

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
                value = self._checkpoint_value(prev)
                parts.append(value["log"])
                prev = value["prev"]
        except (ValueError, BadFrame, SessionFileError) as exc:
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
        ``live=False`` leaves out the ``live`` part: for readers of the log and the history
        index."""
        self._check_open()
        if self._projection is None:
            raise ValueError("session has no projection")
        if self._fd is None:
            raise ValueError("an in-memory session has no checkpoints")
        value = self._checkpoint_value(offset)
        if not live:
            value.pop("live", None)
        return value

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
                self._since_bytes += self._index.frame_len[first] + HEAD_SIZE
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
                total += lengths[i] + HEAD_SIZE
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
            while i != NO_PARENT and i != 0:
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
            or self._index.leaf == NO_PARENT
            or self._since_bytes < self._checkpoint_ratio * self._last_live_bytes()
        ):
            return
        # What the checkpoint is built of is garbage once it is written: no collection in it.
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
            value["live"] = fold.live()
            payload, live_bytes = encode_checkpoint(value)
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
            self._live_bytes = len(codec.dumps(self._live_unmeasured))
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

    def _checkpoint_value(self, offset: int) -> dict[str, Any]:
        """The checked map of the checkpoint frame at ``offset``; ``ValueError`` when it is
        not a usable checkpoint of this projection."""
        assert self._fd is not None and self._projection is not None
        return checkpoint_value(self._fd, self._size, offset, self._projection)

    def _read_checkpoint(self, offset: int, end: int) -> Checkpoint:
        """The checkpoint at ``offset``, checked against the entry it names as the leaf."""
        assert self._fd is not None and self._projection is not None

        def entry_id_at(payload: bytes, frame_off: int, slot: int) -> str:
            return self._decode_entry(payload, frame_off, slot).id

        return read_checkpoint(self._fd, self._size, offset, end, self._projection, entry_id_at)

    def _index_file(self, reader: Reader, size: int, notes: list[str]) -> Damage | None:
        """Index the file: from the newest usable checkpoint when the session has a
        projection, else every frame. Returns the damaged tail, if any."""
        start = reader.header_end
        self._header_end = start
        self._size = size  # checkpoints are read through it (the open sets it again)
        if self._projection is None or self._header.version < 2:
            return reach(self._index.scan(reader, start, size, notes, partial=False), size)
        tried = 0
        for offset, end, whole in checkpoints_backwards(reader.fd, start, size):
            if tried == CHECKPOINT_TRIES:
                break  # something is wrong with all of them: read everything
            tried += 1
            if not whole:
                notes.append(f"checkpoint at byte {offset} is damaged (checksum); skipped")
                continue
            try:
                checkpoint = self._read_checkpoint(offset, end)
            except (ValueError, BadFrame, SessionFileError) as exc:
                notes.append(f"checkpoint at byte {offset} is unusable ({exc}); skipped")
                continue
            self._index = Index()
            self._index.add(checkpoint.leaf_id, BEFORE, *checkpoint.leaf_at)
            self._index.leaf = 0
            self._start, self._base = checkpoint, checkpoint.entries - 1
            try:
                scanned = self._index.scan(reader, checkpoint.end, size, notes, partial=True)
                return reach(scanned, size)
            except NeedFullIndex:
                break  # the tail reaches back before the checkpoint: index everything
        if tried and self._start is None:
            notes.append("no usable checkpoint: the whole file was read")
        self._index, self._start, self._base = Index(), None, 0
        return reach(self._index.scan(reader, start, size, notes, partial=False), size)

    def _full(self) -> None:
        """Index the part of the file before the checkpoint the index starts at."""
        start = self._start
        if start is None:
            return
        assert self._fd is not None
        tail = self._index
        self._index, self._start, self._base = Index(), None, 0
        reader = Reader(self._fd, self._size)
        damage = self._index.scan(reader, self._header_end, start.offset, [], partial=False)
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
            return stub if i == 0 else (i if i == NO_PARENT else shift + i)

        for j in range(1, len(tail)):
            full.add(
                tail.ids[j],
                mapped(tail.parent[j]),
                tail.frame_off[j],
                tail.frame_len[j],
                tail.slot[j],
            )
        full.leaf = mapped(tail.leaf)
