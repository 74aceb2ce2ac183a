"""The in-memory index of a session file: ids, parent links and frame positions of every
entry in file order, built by scanning frames (lengths, checksums, ids and parents: entry data
is decoded only when it is read).

Invariants: an entry's parent is indexed before it (file order is a topological order, so
every branch is an increasing sequence of positions); the first frame that does not fit (torn,
wrong length or checksum, undecodable, a duplicate id or unknown parent) ends the readable
prefix, and ``scan`` reports everything from it on as the damaged tail.
"""

from __future__ import annotations

import zlib
from array import array
from collections.abc import Sequence
from typing import Final

from pi_agent_ask.persistence import codec
from pi_agent_ask.persistence.checkpoints import is_checkpoint
from pi_agent_ask.persistence.frames import FRAME_HEAD, HEAD_SIZE, BadFrame, Reader, decode
from pi_agent_ask.persistence.session_values import MAX_FRAME_BYTES, Damage, entry_fields

__all__ = ["BEFORE", "NO_PARENT", "Index", "NeedFullIndex"]

NO_PARENT: Final = -1
"""Parent of a root (and the leaf before the first root)."""
BEFORE: Final = -3
"""Parent of the stub an index starts with when it starts at a checkpoint: indexed lazily."""


class NeedFullIndex(Exception):
    """A frame after the checkpoint names an entry from before it: index the whole file."""


class Index:
    """Ids, parent links and storage positions of every entry, in file order."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self.parent = array("q")
        # Frame offset (in memory: the frame's place), payload length and place in the frame
        # (-1: a version 1 frame of one entry).
        self.frame_off = array("Q")
        self.frame_len = array("I")
        self.slot = array("i")
        self.leaf = NO_PARENT

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, entry_id: str, parent: int, frame_off: int, frame_len: int, slot: int) -> None:
        self.pos[entry_id] = len(self.ids)
        self.ids.append(entry_id)
        self.parent.append(parent)
        self.frame_off.append(frame_off)
        self.frame_len.append(frame_len)
        self.slot.append(slot)

    def add_frame(
        self,
        links: Sequence[tuple[str, str | None]],
        frame_off: int,
        frame_len: int,
        *,
        partial: bool = False,
        single: bool = False,
    ) -> None:
        """Index the entries ``(id, parent_id)`` of one frame, in order; the last becomes the
        leaf. ``single``: a version 1 frame of one entry. ``BadFrame`` (or ``NeedFullIndex``,
        ``partial``) when they do not fit, and then nothing is indexed."""
        parents = self.check_links(links, partial=partial)
        self.add_checked(links, parents, frame_off, frame_len, single=single)

    def add_checked(
        self,
        links: Sequence[tuple[str, str | None]],
        parents: Sequence[int],
        frame_off: int,
        frame_len: int,
        *,
        single: bool = False,
    ) -> None:
        """``add_frame`` for links ``check_links`` gave ``parents`` for, with nothing indexed
        since (a writer checks them before it writes the frame)."""
        for slot, ((entry_id, _), parent) in enumerate(zip(links, parents, strict=True)):
            self.add(entry_id, parent, frame_off, frame_len, -1 if single else slot)
        self.leaf = len(self.ids) - 1

    def check_links(
        self, links: Sequence[tuple[str, str | None]], *, partial: bool = False
    ) -> list[int]:
        """Parent indices for entries ``(id, parent_id)`` appended in order, or ``BadFrame``
        (``NeedFullIndex`` for an unknown parent when the index starts at a checkpoint)."""
        parents: list[int] = []
        batch: dict[str, int] = {}
        for n, (entry_id, parent_id) in enumerate(links):
            if entry_id in self.pos or entry_id in batch:
                raise BadFrame("invalid", f"duplicate entry id {entry_id!r}")
            if parent_id is None:
                parents.append(NO_PARENT)
            elif parent_id in self.pos:
                parents.append(self.pos[parent_id])
            elif parent_id in batch:
                parents.append(len(self.ids) + batch[parent_id])
            elif partial:
                raise NeedFullIndex
            else:
                raise BadFrame("invalid", f"entry {entry_id!r} has unknown parent")
            batch[entry_id] = n
        return parents

    def move_leaf(self, target: object, *, partial: bool = False) -> None:
        """Make the entry ``target`` the leaf (``None``: before the first root)."""
        if target is None:
            self.leaf = NO_PARENT
        elif isinstance(target, str) and target in self.pos:
            self.leaf = self.pos[target]
        elif partial and isinstance(target, str):
            raise NeedFullIndex
        else:
            raise BadFrame("invalid", "leaf move to an unknown entry")

    def path_to(self, leaf: int) -> list[int]:
        out: list[int] = []
        parent = self.parent
        while leaf != NO_PARENT:
            if leaf == BEFORE:
                raise NeedFullIndex
            out.append(leaf)
            leaf = parent[leaf]
        out.reverse()
        return out

    # ---- scanning ----------------------------------------------------------------------------

    def scan(
        self, reader: Reader, start: int, size: int, notes: list[str], *, partial: bool
    ) -> Damage | None:
        """Index every whole frame from ``start`` to ``size``; return the damaged tail (ending
        at ``size``), if any. A damaged checkpoint is skipped with a note: it holds no entry.
        ``partial`` (the index starts at a checkpoint): a frame naming an entry that is not
        indexed raises ``NeedFullIndex`` (it may lie before the checkpoint)."""
        pos = start
        while pos < size:
            if size - pos < HEAD_SIZE:
                return Damage(pos, size, "torn", f"{size - pos} of {HEAD_SIZE} frame header bytes")
            try:
                length, crc = FRAME_HEAD.unpack(reader.read(pos, HEAD_SIZE))
            except BadFrame:  # the file shrank since it was measured
                return Damage(pos, size, "torn", "file ended early")
            if length == 0 or length > MAX_FRAME_BYTES:
                return Damage(pos, size, "length", f"frame declares {length} bytes")
            end = pos + HEAD_SIZE + length
            if end > size:
                detail = f"frame declares {length} bytes, {size - pos - HEAD_SIZE} present"
                return Damage(pos, size, "torn", detail)
            try:
                payload = reader.read(pos + HEAD_SIZE, length)
            except BadFrame:
                return Damage(pos, size, "torn", "file ended early")
            if zlib.crc32(payload) != crc:
                if is_checkpoint(payload):
                    notes.append(f"checkpoint at byte {pos} is damaged (checksum); skipped")
                    pos = end
                    continue
                return Damage(pos, size, "checksum", f"frame at {pos}")
            try:
                self._index_payload(payload, pos, length, partial)
            except codec.CodecError as exc:
                return Damage(pos, size, "undecodable", str(exc))
            except BadFrame as bad:
                return Damage(pos, size, bad.reason, bad.detail)
            except ValueError as exc:
                return Damage(pos, size, "invalid", str(exc))
            pos = end
        return None

    def _index_payload(self, payload: memoryview, pos: int, length: int, partial: bool) -> None:
        kind = payload[0]
        if kind == codec.KIND_ENTRIES:
            links = [(f[0], f[1]) for f in codec.decode_entries(payload)]
            self.add_frame(links, pos, length, partial=partial)
        elif kind == codec.KIND_LEAF:
            self.move_leaf(codec.decode_leaf(payload), partial=partial)
        elif kind == codec.KIND_CHECKPOINT:
            pass  # derived data: nothing to index
        else:
            self._index_v1(decode(payload), pos, length, partial)

    def _index_v1(self, value: object, pos: int, length: int, partial: bool) -> None:
        """Index a version 1 frame (a map: an entry, a batch or a leaf move)."""
        if not isinstance(value, dict):
            raise BadFrame("invalid", "frame is not a map")
        if "id" in value:
            links = [entry_fields(value)[:2]]
            self.add_frame(links, pos, length, partial=partial, single=True)
        elif "batch" in value:
            items = value["batch"]
            if not isinstance(items, list) or not items:
                raise BadFrame("invalid", "batch is not a non-empty array")
            links = [entry_fields(item)[:2] for item in items]
            self.add_frame(links, pos, length, partial=partial)
        elif "leaf" in value:
            self.move_leaf(value["leaf"], partial=partial)
        else:
            raise BadFrame("invalid", "unknown frame kind")
