"""Frame payloads of session format version 2: compact entries, leaf moves and checkpoints.

Pure functions over bytes; ``frames`` frames them and ``docs/session-file.md`` is the
specification. Every version 2 payload starts with one kind byte, which a version 1 payload
(always a CBOR map, first byte ``0xa0``-``0xbf``) can never start with, so a reader tells the
two apart by that byte alone:

* ``0x01`` entries: ``deflate(CBOR [entry, ...])``, each entry
  ``[id, parentId, type, timestamp, data]``; a one-element array is a single entry, a longer one
  a chain appended together (a batch);
* ``0x02`` leaf move: ``CBOR id`` (``null``: before the first root);
* ``0x03`` checkpoint: ``magic | deflate(CBOR map)`` (``checkpoints``).

``deflate`` is raw DEFLATE (RFC 1951, no zlib header or checksum: the frame has a CRC-32) with
the preset dictionary ``DICTIONARY``: the vocabulary every journal repeats (keys, entry types,
fixed texts), so a single small entry compresses as well as a long file would. An id of 16
lower-case hex digits (what ``SessionFile`` generates) is stored as its 8 bytes; any other id
as text.

All CBOR goes through cbor2's ``dumps`` and ``loads``. A value encoded once and written into
several items (``Spliced``) goes through cbor2's ``default`` hook, which writes its bytes where
the value sits; an entries frame's array is its head (cbor2's ``encode_length``) and its
entries' bytes as ``encode_entry`` made them.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable, Sequence
from typing import Any, Final

import cbor2

__all__ = [
    "DICTIONARY",
    "KIND_CHECKPOINT",
    "KIND_ENTRIES",
    "KIND_LEAF",
    "MAX_NESTING",
    "VOCABULARY",
    "CodecError",
    "Packer",
    "Spliced",
    "decode_checkpoint",
    "decode_entries",
    "decode_id",
    "decode_leaf",
    "encode_checkpoint",
    "encode_checkpoint_sized",
    "encode_entries",
    "encode_entry",
    "encode_id",
    "encode_leaf",
    "inflate",
]

KIND_ENTRIES: Final = 0x01
KIND_LEAF: Final = 0x02
KIND_CHECKPOINT: Final = 0x03

MAX_PLAIN_BYTES: Final = 256 * 1024 * 1024
"""Largest decompressed payload a reader accepts (a bigger one is damage, not data)."""

# Fixed forever for format version 2: a reader needs exactly these bytes to inflate a frame.
# Least frequent first: DEFLATE reaches the end of the dictionary with the shortest distances.
VOCABULARY: Final[tuple[str, ...]] = (
    "mimeType",
    "optionNoteImages",
    "noteImages",
    "customImages",
    "images",
    "recommended",
    "editorsOpened",
    "reviewCursor",
    "optionValue",
    "cursors",
    "drafts",
    "editor",
    "serial",
    "tab",
    "kind",
    "types",
    "form",
    "visible",
    "ask:panel",
    "ask:draft",
    "ask:pending-dismissed",
    "ask:resume-answer",
    "user-message",
    "compaction",
    "summary",
    "issues",
    "skippedQuestionIds",
    "customText",
    "optionNotes",
    "wait_for_answers",
    "sourceEntryId",
    "presentSingleAsMulti",
    "parentToolCallId",
    "presentedType",
    "context",
    "This is not an answer. Continue independent work; call wait_for_answers when answers "
    "are needed.",
    " form(s) pending. ",
    "Queued ask_user [",
    "pendingRequests",
    "questionIds",
    "queued",
    "status",
    "structuredContent",
    "text",
    "Background answer [",
    "Questions:\n- [",
    "Response:\n",
    "] note: ",
    "details",
    "content",
    "customType",
    "ask:background-answer",
    "ask:queue-completed",
    "ask:history-completed",
    "note",
    "indices",
    "labels",
    "values",
    "answers",
    "cancelled",
    "result",
    "tool-result",
    "ask:queued",
    "ask:history-request",
    "ask:payload",
    "tool-call",
    "arguments",
    "ask_user",
    "name",
    "description",
    "options",
    "multi",
    "single",
    "type",
    "prompt",
    "label",
    "value",
    "id",
    "presentedTypes",
    "params",
    "questions",
    "createdAt",
    "background",
    "title",
    "toolCallId",
    "requestId",
    "source",
    "tool",
    "version",
    "timestamp",
)
DICTIONARY: Final = b"".join(cbor2.dumps(word) for word in VOCABULARY)


class CodecError(ValueError):
    """A payload that does not decode as what its kind byte says."""


def encode_id(entry_id: str | None) -> bytes | str | None:
    if entry_id is not None and len(entry_id) == 16 and entry_id == entry_id.lower():
        try:
            return bytes.fromhex(entry_id)
        except ValueError:
            pass
    return entry_id


def decode_id(value: Any) -> str | None:
    if value is None or type(value) is str:
        return value
    if type(value) is bytes and len(value) == 8:
        return value.hex()
    raise CodecError("an entry id is neither text, 8 bytes nor null")


SMALL_FRAME: Final = 2048
"""Plain CBOR up to this size deflates through a copy of a primed compressor (``Packer``)."""
_SMALL_WINDOW: Final = -12
# A 4 KiB window holds the dictionary and a small frame whole (DEFLATE reaches back at most
# the window less 262 bytes), so it finds every match the 32 KiB window would.
assert len(DICTIONARY) + SMALL_FRAME + 262 <= 1 << -_SMALL_WINDOW


class Packer:
    """Deflates entries frames for one writer. A frame of at most ``SMALL_FRAME`` plain bytes
    goes through a copy of a compressor primed once with the dictionary (the dictionary is
    not hashed again for every frame); a larger frame gets a fresh 32 KiB-window compressor
    (memLevel 4: a small hash table, set up for every frame).
    Level 3: a few percent larger than level 6 for a fraction of the time. The output is raw
    DEFLATE with the dictionary either way: a reader inflates it with a 32 KiB window
    (``inflate``). Not thread-safe: one per session."""

    __slots__ = ("_primed",)

    def __init__(self) -> None:
        self._primed = zlib.compressobj(
            3, zlib.DEFLATED, _SMALL_WINDOW, 4, zlib.Z_DEFAULT_STRATEGY, DICTIONARY
        )

    def deflate(self, plain: bytes) -> bytes:
        if len(plain) > SMALL_FRAME:
            packer = zlib.compressobj(3, zlib.DEFLATED, -15, 4, zlib.Z_DEFAULT_STRATEGY, DICTIONARY)
        else:
            packer = self._primed.copy()
        return packer.compress(plain) + packer.flush()


def inflate(packed: bytes | memoryview) -> bytes:
    """The plain bytes of raw DEFLATE with ``DICTIONARY``; ``CodecError`` when malformed."""
    unpacker = zlib.decompressobj(-15, DICTIONARY)
    try:
        plain = unpacker.decompress(packed, MAX_PLAIN_BYTES)
    except zlib.error as exc:
        raise CodecError(f"not deflate data: {exc}") from exc
    if unpacker.unconsumed_tail or not unpacker.eof:
        raise CodecError("deflate data is incomplete or too large")
    return plain


def _loads(plain: bytes) -> Any:
    try:
        return cbor2.loads(plain)
    except Exception as exc:  # cbor2 raises several unrelated types on bad input
        raise CodecError(f"not CBOR: {type(exc).__name__}") from exc


class Spliced:
    """A value of entry data encoded once, for data that several entries hold (a request's
    normalised parameters in three of its entries, a result in two): cbor2 writes ``cbor``
    where the value sits (its ``default`` hook, ``_splice``) instead of encoding the value
    again. A CBOR item is the same bytes inside any other item, so the entry reads back as
    the plain value in its place.

    Not a mapping: the session freezes it to ``value`` wherever it freezes data (``freeze``),
    so every reader of an entry sees the plain value."""

    __slots__ = ("_frozen", "cbor", "value")

    def __init__(self, value: Any, cbor: bytes | None = None) -> None:
        """``cbor``: the value's encoding when the caller already has it (exactly what
        ``cbor2.dumps(value)`` gives); encoded here otherwise."""
        self.value = value
        if cbor is None:
            try:
                cbor = cbor2.dumps(value, default=_splice)
            except cbor2.CBOREncodeError as exc:
                raise TypeError(f"entry data cannot be stored: {exc}") from exc
        self.cbor: bytes = cbor
        self._frozen: Any = None

    def frozen(self, freeze: Callable[[Any], Any]) -> Any:
        """``freeze(value)``, made once: every entry holding the value shares it (a frozen
        value is immutable)."""
        if self._frozen is None:
            self._frozen = freeze(self.value)
        return self._frozen


def _splice(encoder: cbor2.CBOREncoder, value: Any) -> None:
    # cbor2 hands over only what it cannot encode itself: a ``Spliced``, or an error, raised
    # as cbor2 raises it without this hook.
    if type(value) is not Spliced:
        raise cbor2.CBOREncodeError(f"cannot encode type {type(value)}")
    encoder.write(value.cbor)


def dumps(value: Any) -> bytes:
    """``cbor2.dumps`` with ``Spliced`` values written in place; ``TypeError`` for what CBOR
    cannot hold."""
    try:
        return cbor2.dumps(value, default=_splice)
    except cbor2.CBOREncodeError as exc:
        raise TypeError(f"entry data cannot be stored: {exc}") from exc


MAX_NESTING: Final = 390
"""How deep arrays and maps may nest in an entry (its 5-element array counts as one level):
inside the 400 levels a CBOR reader decodes (cbor2's limit) with the frame's array around it,
and shallow enough that reading it back can freeze it (``freeze`` recurses)."""
# The head bytes of arrays, maps and tags: an item holding fewer of these bytes than
# ``MAX_NESTING`` cannot nest that deep (text and byte strings may hold such bytes too, so
# more of them only means the item is decoded to be sure).
_NOT_NESTING: Final = bytes(b for b in range(256) if not 0x80 <= b <= 0xDB)


def check_readable(item: bytes) -> None:
    """``ValueError`` unless one entry's CBOR decodes as a reader decodes it: an entry nested
    deeper than a reader follows would make its frame, and every frame after it, unreadable.
    Linear in the item's size; the item is decoded only when it holds many container heads."""
    if len(item) <= MAX_NESTING or len(item.translate(None, _NOT_NESTING)) <= MAX_NESTING:
        return
    try:
        value = cbor2.loads(item)
    except Exception as exc:  # cbor2 raises several unrelated types
        raise ValueError(f"entry data is nested too deeply to be read back: {exc}") from exc
    if _depth(value) > MAX_NESTING:
        raise ValueError(f"entry data is nested more than {MAX_NESTING} levels deep")


def _depth(value: Any) -> int:
    """How deep arrays and maps nest in a decoded value (iterative: any depth)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if type(item) is list:
            children: Any = item
        elif type(item) is dict:
            children = [*item.keys(), *item.values()]
        else:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children)
    return deepest


EntryFields = tuple[str, str | None, str, float, Any]
"""``(id, parent_id, type, timestamp, data)`` of one entry, data not yet frozen."""


def encode_entry(fields: EntryFields) -> bytes:
    """The CBOR of one entry's 5-element array, as it sits in an entries frame. ``TypeError``
    when the data holds something CBOR cannot encode, ``ValueError`` when a reader could not
    decode it (``check_readable``)."""
    entry_id, parent, kind, timestamp, data = fields
    item = dumps([encode_id(entry_id), encode_id(parent), kind, timestamp, data])
    check_readable(item)
    return item


def entries_plain(items: Sequence[bytes]) -> bytes:
    """The plain CBOR of an entries frame: the array of the entries ``encode_entry`` gave,
    its head (cbor2's ``encode_length``) followed by the items' bytes as they are."""
    head = io.BytesIO()
    cbor2.CBOREncoder(head).encode_length(4, len(items))  # major type 4: an array
    return head.getvalue() + b"".join(items)


def entries_payload(plain: bytes, packer: Packer) -> bytes:
    """The payload of an entries frame whose plain CBOR is ``plain``."""
    return bytes([KIND_ENTRIES]) + packer.deflate(plain)


def encode_entries(
    entries: Sequence[EntryFields], packer: Packer | None = None
) -> tuple[bytes, int]:
    """The payload of an entries frame holding ``entries``, and the size of its plain CBOR
    (the size limit applies to that)."""
    plain = entries_plain([encode_entry(fields) for fields in entries])
    return entries_payload(plain, packer or Packer()), len(plain)


def decode_entries(payload: bytes | memoryview) -> list[EntryFields]:
    """The entries of an entries frame; ``CodecError`` when malformed."""
    return decode_plain_entries(inflate(payload[1:]))


def decode_plain_entries(plain: bytes) -> list[EntryFields]:
    """The entries of an entries frame's plain CBOR; ``CodecError`` when malformed."""
    items = _loads(plain)
    if type(items) is not list or not items:
        raise CodecError("an entries frame holds no entries")
    out: list[EntryFields] = []
    for item in items:
        if type(item) is not list or len(item) != 5:
            raise CodecError("an entry is not a five-element array")
        entry_id, parent, kind, timestamp, data = item
        if type(entry_id) is bytes and len(entry_id) == 8:
            entry_id = entry_id.hex()
        elif type(entry_id) is not str or not entry_id:
            raise CodecError("an entry has no id")
        if parent is not None:
            if type(parent) is bytes and len(parent) == 8:
                parent = parent.hex()
            elif type(parent) is not str:
                raise CodecError("an entry parent is neither text, 8 bytes nor null")
        if type(kind) is not str or not kind:
            raise CodecError("an entry type is not a non-empty string")
        if type(timestamp) is not float:
            if type(timestamp) is not int:
                raise CodecError("an entry timestamp is not a number")
            timestamp = float(timestamp)
        if type(data) is not dict:
            raise CodecError("entry data is not a map")
        out.append((entry_id, parent, kind, timestamp, data))
    return out


def encode_leaf(entry_id: str | None) -> bytes:
    return bytes([KIND_LEAF]) + cbor2.dumps(encode_id(entry_id))


def decode_leaf(payload: bytes | memoryview) -> str | None:
    return decode_id(_loads(bytes(payload[1:])))


CHECKPOINT_LEVEL: Final = 1
"""The compression level of checkpoints: their bulk is ids and locations, which level 6
compresses 2 % better for 8 times the time (measured on a checkpoint of 4,000 pending forms)."""


def encode_checkpoint(value: dict[str, Any], magic: bytes) -> bytes:
    """``kind | magic | deflate(CBOR value)``: the magic tells a damaged checkpoint (whose
    checksum fails) from damaged entries."""
    return encode_checkpoint_sized(value, magic)[0]


def encode_checkpoint_sized(value: dict[str, Any], magic: bytes) -> tuple[bytes, int]:
    """``encode_checkpoint``, and the size of the CBOR of ``value["live"]`` (0 without one),
    which the writer's checkpoint rule compares with what follows. ``live`` is written last
    in the map (where the keys are is no part of the format)."""
    rest = {key: item for key, item in value.items() if key != "live"}
    live = 0
    if "live" in value:
        live_cbor = dumps(value["live"])
        live = len(live_cbor)
        rest["live"] = Spliced(None, live_cbor)
    packer = zlib.compressobj(
        CHECKPOINT_LEVEL, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY, DICTIONARY
    )
    plain = dumps(rest)
    return bytes([KIND_CHECKPOINT]) + magic + packer.compress(plain) + packer.flush(), live


def decode_checkpoint(payload: bytes | memoryview, magic: bytes) -> dict[str, Any]:
    """The checkpoint's map; ``CodecError`` when it is not one."""
    if bytes(payload[1 : 1 + len(magic)]) != magic:
        raise CodecError("not a checkpoint")
    value = _loads(inflate(payload[1 + len(magic) :]))
    if not isinstance(value, dict):
        raise CodecError("a checkpoint is not a map")
    return value
