"""The frames of a session without a file, held in memory and compressed in groups.

An in-memory session keeps what a file would hold, so a queued form costs its compressed
bytes rather than a tree of frozen maps (issue 12's bound per queued form). An entries frame
up to ``GROUPED_FRAME`` plain bytes arrives as its plain CBOR and waits in the open group;
once the group holds ``GROUP_BYTES``, its frames are deflated together. One DEFLATE call has
a fixed cost about that of compressing several small frames, and a frame compresses better
with the frames before it, so a group costs a fraction of deflating each frame on its own.
A larger frame, and a frame copied from another session, is kept as its payload
(``SessionStorage._store_entries`` decides).

Invariants: a frame's place (``add``'s result, an entry's ``frame_off``) never changes; a
frame reads back as exactly the plain CBOR it was given. Nothing here reaches a file: a fork
re-encodes its entries.
"""

from __future__ import annotations

from typing import Final

from pi_agent_ask.persistence import codec

__all__ = ["GROUPED_FRAME", "GROUP_BYTES", "MemoryFrames"]

GROUP_BYTES: Final = 32 * 1024
"""Plain bytes a group gathers before it is deflated (past this, a larger group compresses
no better and costs no less per frame)."""

GROUPED_FRAME: Final = 16 * 1024
"""The largest plain frame that joins a group; a larger one is deflated on its own."""


class MemoryFrames:
    """The frames of one in-memory session, by place. Not thread-safe (as its session)."""

    __slots__ = ("_frames", "_groups", "_last", "_open", "_open_bytes", "_packer")

    def __init__(self, packer: codec.Packer) -> None:
        # A frame is a payload (``bytes``: the bytes a file would hold), or the frame's place
        # in a group's plain bytes (``(group, start, end)``); a group is its deflated bytes,
        # or ``None`` while it is open (its frames then sit in ``_open``).
        self._frames: list[bytes | tuple[int, int, int]] = []
        self._groups: list[bytes | None] = []
        self._open: list[bytes] = []
        self._open_bytes = 0
        self._last: tuple[int, bytes] | None = None  # the group read last, inflated
        self._packer = packer

    def __len__(self) -> int:
        return len(self._frames)

    def add(self, payload: bytes) -> int:
        """Keep a frame's payload as a file would hold it; its place."""
        self._frames.append(payload)
        return len(self._frames) - 1

    def add_to_group(self, plain: bytes) -> int:
        """Keep an entries frame of at most ``GROUPED_FRAME`` bytes, given as its plain CBOR,
        in the open group; its place."""
        assert len(plain) <= GROUPED_FRAME
        if not self._groups or self._groups[-1] is not None:
            self._groups.append(None)
        group = len(self._groups) - 1
        self._frames.append((group, self._open_bytes, self._open_bytes + len(plain)))
        self._open.append(plain)
        self._open_bytes += len(plain)
        if self._open_bytes >= GROUP_BYTES:
            self._groups[group] = self._packer.deflate(b"".join(self._open))
            self._open = []
            self._open_bytes = 0
        return len(self._frames) - 1

    def read(self, place: int) -> tuple[bool, bytes]:
        """The frame at ``place``: ``(True, plain CBOR)`` for a frame of a group, ``(False,
        payload)`` for one kept as its payload."""
        frame = self._frames[place]
        if type(frame) is bytes:
            return False, frame
        assert type(frame) is tuple
        group, start, end = frame
        packed = self._groups[group]
        if packed is None:
            return True, b"".join(self._open)[start:end]
        if self._last is None or self._last[0] != group:
            # A branch is read in order: its next frames are most likely in this group too.
            self._last = (group, codec.inflate(packed))
        return True, self._last[1][start:end]
