"""Checkpoints: frames of derived data, a projection's fold of the active branch at some leaf,
from which an open starts instead of reading the whole file.

A checkpoint holds no entries: a damaged or unusable one is skipped (and reported), the
previous one (or a full scan) serves instead, so a checkpoint can never cost an entry. The
map (``docs/session-file.md``, Checkpoints): ``projection`` (its name), ``leaf`` (the id),
``at`` (``[frame offset, payload length, slot]`` of the leaf's frame), ``entries`` (entries in
the file before it), ``log`` (the fold's log since ``prev``, the checkpoint before), and
``live`` (the fold's open state, whole), plus what the projection adds (``checkpoint_fields``).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Iterator
from typing import Any, Final

import attrs

from pi_agent_ask.persistence import codec, frames
from pi_agent_ask.persistence.frames import FRAME_HEAD, HEAD_SIZE, read_frame
from pi_agent_ask.persistence.session_values import MAX_FRAME_BYTES, Projection

__all__ = [
    "CHECKPOINT_EVERY",
    "CHECKPOINT_MAGIC",
    "CHECKPOINT_RATIO",
    "CHECKPOINT_TRIES",
    "Checkpoint",
    "checkpoint_value",
    "checkpoints_backwards",
    "encode_checkpoint",
    "is_checkpoint",
    "read_checkpoint",
]

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
CHECKPOINT_TRIES: Final = 3
"""Checkpoints an open tries, newest first, before it reads the whole file instead."""


@attrs.frozen(repr=False)
class Checkpoint:
    """A usable checkpoint an open starts from."""

    offset: int
    end: int
    leaf_id: str
    leaf_at: tuple[int, int, int]  # frame offset, payload length, slot
    entries: int
    live: Any
    prev: int | None


def encode_checkpoint(value: dict[str, Any]) -> tuple[bytes, int]:
    """The checkpoint frame's payload, and the size of the CBOR of its live part."""
    return codec.encode_checkpoint_sized(value, CHECKPOINT_MAGIC)


def is_checkpoint(payload: memoryview | bytes) -> bool:
    return bytes(payload[1 : 1 + len(CHECKPOINT_MAGIC)]) == CHECKPOINT_MAGIC and (
        payload[0] == codec.KIND_CHECKPOINT
    )


def checkpoints_backwards(fd: int, start: int, size: int) -> Iterator[tuple[int, int, bool]]:
    """The checkpoint frames of the file, newest first, found from the end of the file by
    their magic (nothing before the newest usable one is read): ``(offset, end, whole)``,
    ``whole`` false when the frame's checksum fails. A frame running past the end (a torn
    tail) is not one."""
    needle = bytes([codec.KIND_CHECKPOINT]) + CHECKPOINT_MAGIC
    hi = size  # search the bytes before ``hi``
    while hi - start >= HEAD_SIZE + len(needle):
        lo = max(start, hi - frames.READ_WINDOW)
        window = os.pread(fd, hi - lo, lo)
        at = window.rfind(needle)
        while at >= 0:
            offset = lo + at - HEAD_SIZE
            if offset >= start:
                length, crc = FRAME_HEAD.unpack(os.pread(fd, HEAD_SIZE, offset))
                end = offset + HEAD_SIZE + length
                if length <= MAX_FRAME_BYTES and end <= size:
                    payload = os.pread(fd, length, offset + HEAD_SIZE)
                    yield offset, end, zlib.crc32(payload) == crc
            at = window.rfind(needle, 0, at)
        if lo == start:
            return
        hi = lo + len(needle) - 1  # a needle across the window edge is found next time


def checkpoint_value(fd: int, size: int, offset: int, projection: Projection) -> dict[str, Any]:
    """The checked map of the checkpoint frame at ``offset``; ``ValueError`` when it is not a
    usable checkpoint of ``projection``."""
    payload = read_frame(fd, offset, size, check=True)
    if payload is None:
        raise ValueError("no whole frame there, or its checksum fails")
    value = codec.decode_checkpoint(payload, CHECKPOINT_MAGIC)
    at, entries, prev = value.get("at"), value.get("entries"), value.get("prev")
    if value.get("projection") != projection.name:
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


def read_checkpoint(
    fd: int,
    size: int,
    offset: int,
    end: int,
    projection: Projection,
    entry_id_at: Callable[[bytes, int, int], str],
) -> Checkpoint:
    """The checkpoint at ``offset``, checked against the entry it names as the leaf
    (``entry_id_at(payload, frame offset, slot)``: the id of the entry stored there) and
    against the projection (its live part restores)."""
    value = checkpoint_value(fd, size, offset, projection)
    leaf_id = codec.decode_id(value.get("leaf"))
    if leaf_id is None:
        raise ValueError("malformed checkpoint leaf")
    frame_off, frame_len, slot = value["at"]
    payload = read_frame(fd, frame_off, size)
    if (
        payload is None
        or len(payload) != frame_len
        or entry_id_at(payload, frame_off, slot) != leaf_id
    ):
        raise ValueError("the entry it names is not there")
    projection.restore(value.get("live"))  # fits, or ValueError
    return Checkpoint(
        offset,
        end,
        leaf_id,
        (frame_off, frame_len, slot),
        value["entries"],
        value.get("live"),
        value["prev"],
    )
