"""A session's storage: the state every part of ``SessionFile`` shares, its frames written
(to the file, or held in memory) and read back as entries.

``SessionFile`` is built on it (``session_fold.FoldedSession`` adds the fold of the active
branch and its checkpoints); nothing else uses it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from pi_agent_ask.persistence import codec
from pi_agent_ask.persistence.checkpoints import CHECKPOINT_EVERY, CHECKPOINT_RATIO, Checkpoint
from pi_agent_ask.persistence.frames import BadFrame, Reader, decode, encode_frame, write_all
from pi_agent_ask.persistence.memory_frames import GROUPED_FRAME, MemoryFrames
from pi_agent_ask.persistence.session_index import Index
from pi_agent_ask.persistence.session_values import (
    Entry,
    Fold,
    Header,
    OpenReport,
    Projection,
    SessionFileError,
    check_frame_size,
)

__all__ = ["SessionStorage"]


class SessionStorage:
    """The fields of a session, and its frames in and out (see ``SessionFile``)."""

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
        self._index = Index()
        self._packer = codec.Packer()
        # In memory: every entries frame, compressed (an entry's ``frame_off`` is its frame's
        # place in it): a queued form costs its compressed bytes, not a tree of frozen maps.
        self._memory = MemoryFrames(self._packer) if path is None else None
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
        self._start: Checkpoint | None = None
        self._base = 0
        self._header_end = 0
        # The file frame ``entry_at`` decoded last, by offset: a history page reads a request
        # and its completions one entry at a time, mostly from one frame (a fork's frames hold
        # 256 entries each). A frame at an indexed offset never changes while the file is open.
        self._last_read: tuple[int, tuple[bool, Any]] | None = None

    def __len__(self) -> int:
        """Entries in the session (all branches)."""
        return self._base + len(self._index)

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("session file is closed")

    def _write_frame(self, payload: bytes) -> int:
        """Write one frame; return its offset. Rolls back a partial write."""
        offset = self._size
        if self._fd is None:
            return offset
        frame = encode_frame(payload)
        try:
            write_all(self._fd, frame)
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

    def _store(self, payload: bytes) -> int:
        """Keep one frame: written to the file, or held in memory. Its offset (in memory:
        its place)."""
        if self._memory is not None:
            return self._memory.add(payload)
        return self._write_frame(payload)

    def _store_entries(self, plain: bytes) -> tuple[int, int]:
        """Keep an entries frame (a version 2 session) given as its plain CBOR: deflated and
        written to the file, or held in memory, where a small frame waits to be deflated
        with its group (``MemoryFrames``). Its offset (in memory: its place) and its length.
        ``ValueError`` for a frame past the size limit, ``OSError`` for a failed write:
        nothing is kept then."""
        check_frame_size(len(plain))
        if self._memory is not None and len(plain) <= GROUPED_FRAME:
            return self._memory.add_to_group(plain), len(plain)
        payload = codec.entries_payload(plain, self._packer)
        check_frame_size(len(payload))
        return self._store(payload), len(payload)

    def _decode_entry(self, payload: memoryview | bytes, offset: int, slot: int) -> Entry:
        return self._entry_in(self._decode_frame(payload, offset), offset, slot)

    def _memory_frame(self, memory: MemoryFrames, offset: int) -> tuple[bool, Any]:
        """The frame at ``offset`` of an in-memory session, decoded (as ``_decode_frame``)."""
        grouped, held = memory.read(offset)
        if grouped:
            return True, codec.decode_plain_entries(held)
        return self._decode_frame(held, offset)

    def _decode_frame(self, payload: memoryview | bytes, offset: int) -> tuple[bool, Any]:
        """An indexed frame decoded: ``(True, entry tuples)`` for an entries frame, ``(False,
        map)`` for a version 1 entry or batch; ``SessionFileError`` when it no longer decodes."""
        try:
            if payload[0] == codec.KIND_ENTRIES:
                return True, codec.decode_entries(payload)
            return False, decode(payload)
        except (ValueError, BadFrame, LookupError, TypeError) as exc:
            raise self._changed_on_disk(offset) from exc

    def _entry_in(self, frame: tuple[bool, Any], offset: int, slot: int) -> Entry:
        """The entry at ``slot`` of a decoded frame (``-1``: the frame is one entry);
        ``SessionFileError`` when the frame no longer holds the entry the open indexed there."""
        compact, decoded = frame
        try:
            if compact:
                return Entry(*decoded[slot])
            return Entry.from_map(decoded if slot < 0 else decoded["batch"][slot])
        except (ValueError, LookupError, TypeError) as exc:
            raise self._changed_on_disk(offset) from exc

    def _changed_on_disk(self, offset: int) -> SessionFileError:
        return SessionFileError(self._path, "unreadable", f"frame at {offset} changed on disk")

    def _load_entries(self, indices: Iterable[int]) -> Iterator[Entry]:
        memory = self._memory
        if memory is None and self._fd is None:
            raise ValueError("session file is closed")
        reader = Reader(self._fd, self._size) if self._fd is not None else None
        index = self._index
        last_offset = -1
        frame: tuple[bool, Any] = (False, None)
        for i in indices:
            offset = index.frame_off[i]
            if offset != last_offset:  # entries of one frame come together: decode it once
                if memory is not None:
                    frame = self._memory_frame(memory, offset)
                else:
                    assert reader is not None
                    payload = reader.payload(offset, index.frame_len[i])
                    frame = self._decode_frame(payload, offset)
                last_offset = offset
            yield self._entry_in(frame, offset, index.slot[i])
