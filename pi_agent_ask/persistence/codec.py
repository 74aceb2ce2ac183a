"""Frame payloads of session format version 2: compact entries, leaf moves and checkpoints.

Pure functions over bytes; ``session_file`` frames them and ``docs/session-file.md`` is the
specification. Every version 2 payload starts with one kind byte, which a version 1 payload
(always a CBOR map, first byte ``0xa0``-``0xbf``) can never start with, so a reader tells the
two apart by that byte alone:

* ``0x01`` entries: ``deflate(CBOR [entry, ...])``, each entry
  ``[id, parentId, type, timestamp, data]``; a one-element array is a single entry, a longer one
  a chain appended together (a batch);
* ``0x02`` leaf move: ``CBOR id`` (``null``: before the first root);
* ``0x03`` checkpoint: ``magic | deflate(CBOR map)`` (see ``session_file``).

``deflate`` is raw DEFLATE (RFC 1951, no zlib header or checksum: the frame has a CRC-32) with
the preset dictionary ``DICTIONARY``: the vocabulary every journal repeats (keys, entry types,
fixed texts), so a single small entry compresses as well as a long file would. An id of 16
lower-case hex digits (what ``SessionFile`` generates) is stored as its 8 bytes; any other id
as text.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Sequence
from typing import Any, Final

import cbor2

__all__ = [
    "DICTIONARY",
    "KIND_CHECKPOINT",
    "KIND_ENTRIES",
    "KIND_LEAF",
    "SMALL_FRAME",
    "VOCABULARY",
    "CodecError",
    "Encoded",
    "Packer",
    "Spliced",
    "decode_checkpoint",
    "decode_entries",
    "decode_id",
    "decode_leaf",
    "encode_checkpoint",
    "encode_checkpoint_sized",
    "encode_entries",
    "encode_id",
    "encode_leaf",
]

KIND_ENTRIES: Final = 0x01
KIND_LEAF: Final = 0x02
KIND_CHECKPOINT: Final = 0x03
_ENTRIES_BYTE: Final = bytes([KIND_ENTRIES])

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


def _deflate(plain: bytes) -> bytes:
    # memLevel 4: a 4 KiB hash table is set up (zeroed) per frame instead of 128 KiB; frames
    # are small, and their sizes do not change.
    packer = zlib.compressobj(6, zlib.DEFLATED, -15, 4, zlib.Z_DEFAULT_STRATEGY, DICTIONARY)
    return packer.compress(plain) + packer.flush()


SMALL_FRAME: Final = 2048
"""Plain CBOR up to this size deflates through a copy of a primed compressor (``Packer``)."""
_SMALL_WINDOW: Final = -12
# A 4 KiB window holds the dictionary and a small frame whole (DEFLATE reaches back at most
# the window less 262 bytes), so it finds every match the 32 KiB window would; copying it is
# cheap, where copying a 32 KiB compressor costs more than priming a new one.
assert len(DICTIONARY) + SMALL_FRAME + 262 <= 1 << -_SMALL_WINDOW


class Packer:
    """Deflates entries frames for one writer. A frame of at most ``SMALL_FRAME`` plain bytes
    goes through a copy of a compressor primed once with the dictionary (so the dictionary is
    not hashed again for every frame), at level 3, whose output is a few percent larger than
    level 6 for a fraction of the time; a larger frame gets a fresh 32 KiB-window compressor.
    The output is raw DEFLATE with the dictionary either way: a reader inflates it with a
    32 KiB window, as every frame (``_inflate``). Not thread-safe: one per session."""

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


GROUP_LEVEL: Final = 1
"""The compression level of a group of frames held in memory (``pack_group``)."""


def pack_group(plain: bytes) -> bytes:
    """Raw DEFLATE of ``plain`` (with ``DICTIONARY``, a 32 KiB window, level 1): how an
    in-memory session holds several frames' plain CBOR together (``inflate`` reads it)."""
    packer = zlib.compressobj(
        GROUP_LEVEL, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY, DICTIONARY
    )
    return packer.compress(plain) + packer.flush()


def inflate(packed: bytes | memoryview) -> bytes:
    """The plain bytes of raw DEFLATE with ``DICTIONARY``; ``CodecError`` when malformed."""
    return _inflate(packed)


def _inflate(packed: bytes | memoryview) -> bytes:
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


EntryFields = tuple[str, str | None, str, float, Any]
"""``(id, parent_id, type, timestamp, data)`` of one entry, data not yet frozen."""


def encode_entries(
    entries: Sequence[EntryFields], packer: Packer | None = None
) -> tuple[bytes, int]:
    """The payload of an entries frame, and the size of its plain CBOR (the size limit
    applies to that). ``TypeError`` when the data holds something CBOR cannot encode."""
    return entries_payload([encode_entry(fields) for fields in entries], packer)


def encode_entry(fields: EntryFields) -> bytes:
    """The CBOR of one entry's 5-element array, as it sits in an entries frame. ``TypeError``
    when the data holds something CBOR cannot encode, ``ValueError`` when a reader could not
    decode it (``check_readable``)."""
    entry_id, parent, kind, timestamp, data = fields
    return encode_stored(encode_id(entry_id), encode_id(parent), kind, timestamp, data)


def encode_stored(
    key: bytes | str | None, parent: bytes | str | None, kind: str, timestamp: float, data: Any
) -> bytes:
    """``encode_entry`` for ids already in their stored form (``encode_id``)."""
    try:
        item = cbor2.dumps([key, parent, kind, timestamp, data], default=_splice)
    except cbor2.CBOREncodeError as exc:
        raise TypeError(f"entry data cannot be stored: {exc}") from exc
    check_readable(item)
    return item


class Spliced:
    """A value of entry data encoded once, for data that several entries hold (a request's
    normalised parameters, in three of its entries): ``encode_stored`` writes ``cbor`` where
    the value sits instead of encoding it again. A CBOR item is the same bytes inside any
    other item (arrays and maps are their head followed by their items), so the entry's bytes
    are exactly those of the plain value in its place, and it reads back as that value.

    Not a mapping: the session's fold sees it as it is (``SessionFile`` freezes it to
    ``value`` wherever it freezes data), so a field a fold reads may be spliced only where
    the fold reads through it (the journal's fold: a completion's result, a history request's
    questions)."""

    __slots__ = ("_nesting", "cbor", "value")

    def __init__(self, value: Any) -> None:
        self.value = value
        try:
            self.cbor: bytes = cbor2.dumps(value, default=_splice)
        except cbor2.CBOREncodeError as exc:
            raise TypeError(f"entry data cannot be stored: {exc}") from exc
        self._nesting = -1

    @classmethod
    def of_cbor(cls, value: Any, cbor: bytes) -> Spliced:
        """The value with its encoding already made: ``cbor`` must be exactly what
        ``cbor2.dumps(value)`` gives (a checkpoint's live part, ``JournalFold.live_cbor``)."""
        spliced = cls.__new__(cls)
        spliced.value, spliced.cbor, spliced._nesting = value, cbor, -1
        return spliced

    def nesting(self) -> int:
        """At least how deep arrays and maps nest in the value (``container_heads`` of its
        encoding, counted the first time it is asked)."""
        if self._nesting < 0:
            self._nesting = container_heads(self.cbor)
        return self._nesting


class Encoded(dict):  # type: ignore[type-arg]
    """Entry data, a map, with its CBOR made by a writer that knows the data's shape (the
    journal's builders: constant keys written once, ``Spliced`` values in place): an entries
    frame holds ``cbor`` as the entry's data (``encode_frame_entries``) instead of having
    the map encoded again. ``cbor`` is exactly ``cbor2.dumps(dict(self), default=_splice)``
    (everything else encodes it as the map it is, to the same bytes); ``nesting`` is at least
    how deep arrays and maps nest in it, the map itself counted (``Spliced.nesting``).

    Read-only: its bytes would not follow a change. Pickles as a plain ``dict``."""

    __slots__ = ("cbor", "nesting")

    cbor: bytes
    nesting: int

    @classmethod
    def made(cls, data: dict[str, Any], cbor: bytes, nesting: int) -> Encoded:
        encoded = cls(data)
        encoded.cbor, encoded.nesting = cbor, nesting
        return encoded

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("encoded entry data is read-only")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]
    __ior__ = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


TEXT_HEADS: Final = tuple(bytes((0x60 + n,)) for n in range(24)) + tuple(
    bytes((0x78, n)) for n in range(24, 256)
)
"""The CBOR head of text of ``n`` UTF-8 bytes, for ``n`` below 256."""
MAP_HEADS: Final = tuple(bytes((0xA0 + n,)) for n in range(24))
"""The CBOR head of a map of ``n`` pairs, for ``n`` below 24."""


def _splice(encoder: Any, value: Any) -> None:
    # cbor2 hands over only what it cannot encode itself: a ``Spliced``, or an error, raised
    # as cbor2 raises it without this hook.
    if type(value) is not Spliced:
        raise cbor2.CBOREncodeError(f"cannot encode type {type(value)}")
    encoder.write(value.cbor)


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
    O(1) per byte; the item is decoded only when it holds many container heads."""
    if len(item) <= MAX_NESTING or len(item.translate(None, _NOT_NESTING)) <= MAX_NESTING:
        return
    try:
        value = cbor2.loads(b"\x81" + item)  # as the smallest frame holds it
    except Exception as exc:  # cbor2 raises several unrelated types
        raise ValueError(f"entry data is nested too deeply to be read back: {exc}") from exc
    if _depth(value[0]) > MAX_NESTING:
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


def container_heads(item: bytes) -> int:
    """How many bytes of ``item`` are array, map or tag heads or could be: at least how deep
    they nest in it."""
    return len(item.translate(None, _NOT_NESTING))


def check_readable_frame(plain: bytes) -> None:
    """``check_readable`` for every entry of an entries frame's plain CBOR at once."""
    if len(plain) <= MAX_NESTING or len(plain.translate(None, _NOT_NESTING)) <= MAX_NESTING:
        return
    try:
        value = cbor2.loads(plain)
    except Exception as exc:  # cbor2 raises several unrelated types
        raise ValueError(f"entry data is nested too deeply to be read back: {exc}") from exc
    if _depth(value) > MAX_NESTING + 1:  # the frame's array is one more level
        raise ValueError(f"entry data is nested more than {MAX_NESTING} levels deep")


def encode_frame_entries(rows: list[list[Any]], *, encoded: bool = False) -> bytes:
    """The plain CBOR of an entries frame holding ``rows``, each an entry's 5-element array
    with its ids in their stored form (``encode_id``), encoded at once: the same bytes as
    ``array_head(len(rows))`` and each row through ``encode_stored``. ``TypeError`` and
    ``ValueError`` as ``encode_stored`` raises them (for some entry of the frame).
    ``encoded``: some row's data is ``Encoded`` (its bytes are written as they are)."""
    if encoded:
        return _encode_frame_rows(rows)
    if len(rows) > FRAME_GROUP:
        return _encode_frame_groups(rows)
    try:
        plain = cbor2.dumps(rows, default=_splice)
    except cbor2.CBOREncodeError as exc:
        raise TypeError(f"entry data cannot be stored: {exc}") from exc
    check_readable_frame(plain)
    return plain


_DOUBLE: Final = struct.Struct(">Bd").pack
_INFINITY: Final = float("inf")
_TYPE_CBOR: Final[dict[str, bytes]] = {word: cbor2.dumps(word) for word in VOCABULARY}
"""The CBOR of the vocabulary's words, of which the entry types the runtime writes."""


def _encode_frame_rows(rows: list[list[Any]]) -> bytes:
    """``encode_frame_entries`` for rows some of whose data is ``Encoded``: such a row is
    written here, its head and its data's bytes (the row nests one level more than its data:
    ``Encoded.nesting`` bounds it); the rows between them are encoded (and checked) as a
    frame of their own would be, without its head. A row whose type is not a word of the
    vocabulary, or whose ids or timestamp are not as the session writes them (8 bytes, a
    finite ``float``), is left to cbor2 too.

    Written out in one loop: a call costs as much as a row's head."""
    now = rows[0][3]
    if type(now) is not float or not -_INFINITY < now < _INFINITY:
        return encode_frame_entries(rows)
    time = _DOUBLE(0xFB, now)
    parts = [array_head(len(rows))]
    add = parts.append
    start = at = 0  # ``start``: the first row not written yet
    for key, parent, kind, _, data in rows:
        at += 1
        if type(data) is not Encoded or data.nesting >= MAX_NESTING:
            continue
        word = _TYPE_CBOR.get(kind)
        if word is None or type(key) is not bytes or len(key) != 8:
            continue
        if parent is None:
            above = b"\xf6"
        elif type(parent) is bytes and len(parent) == 8:
            above = b"\x48" + parent
        else:
            continue
        if start < at - 1:
            add(_rows_cbor(rows[start : at - 1]))
        add(b"".join((b"\x85\x48", key, above, word, time, data.cbor)))
        start = at
    if start < len(rows):
        add(_rows_cbor(rows[start:]))
    return b"".join(parts)


def _rows_cbor(rows: list[list[Any]]) -> bytes:
    """The rows' items of an entries frame holding ``rows`` (its head left out)."""
    plain = encode_frame_entries(rows)
    return plain[len(array_head(len(rows))) :]


FRAME_GROUP: Final = 8
"""Most rows ``encode_frame_entries`` encodes (and checks) at once: the nesting check's
bound (``check_readable_frame``) counts every container head of what it is given, so a
frame of many rows is checked a group of rows at a time, each as the frame of its rows."""


def _encode_frame_groups(rows: list[list[Any]]) -> bytes:
    """``encode_frame_entries`` for more than ``FRAME_GROUP`` rows: each group encoded as the
    array of its rows (one head byte: fewer than 24), its rows joined after the frame's
    head."""
    parts = [array_head(len(rows))]
    for start in range(0, len(rows), FRAME_GROUP):
        try:
            group = cbor2.dumps(rows[start : start + FRAME_GROUP], default=_splice)
        except cbor2.CBOREncodeError as exc:
            raise TypeError(f"entry data cannot be stored: {exc}") from exc
        check_readable_frame(group)
        parts.append(group[1:])
    return b"".join(parts)


def frame_payload(plain: bytes, packer: Packer) -> bytes:
    """The payload of an entries frame whose plain CBOR is ``plain``."""
    return _ENTRIES_BYTE + packer.deflate(plain)


def decode_frame_data(plain: bytes, at: int) -> Any:
    """The data of the ``at``-th entry of an entries frame's plain CBOR, not frozen."""
    return _loads(plain)[at][4]


def decode_entry_data(item: bytes) -> Any:
    """The data of one entry's CBOR (``encode_entry``, ``encode_stored``), not frozen."""
    return _loads(item)[4]


def entries_payload(encoded: Sequence[bytes], packer: Packer | None = None) -> tuple[bytes, int]:
    """The payload of an entries frame holding the entries ``encode_entry`` gave, in order,
    and the size of its plain CBOR. A CBOR array is its length header followed by its items,
    so entries encoded one by one (and checked one by one) make the same frame as a list
    encoded at once. A writer of many frames passes its ``Packer``."""
    plain = array_head(len(encoded)) + b"".join(encoded)
    packed = _deflate(plain) if packer is None else packer.deflate(plain)
    return _ENTRIES_BYTE + packed, len(plain)


def array_head(count: int) -> bytes:
    """The CBOR head of a definite-length array of ``count`` items (major type 4)."""
    if count < 24:
        return bytes([0x80 | count])
    if count < 0x100:
        return bytes([0x98, count])
    if count < 0x10000:
        return b"\x99" + count.to_bytes(2, "big")
    if count < 0x100000000:
        return b"\x9a" + count.to_bytes(4, "big")
    return b"\x9b" + count.to_bytes(8, "big")


def decode_entries(payload: bytes | memoryview) -> list[EntryFields]:
    """The entries of an entries frame; ``CodecError`` when malformed."""
    return decode_plain_entries(_inflate(payload[1:]))


def decode_plain_entries(plain: bytes) -> list[EntryFields]:
    """``decode_entries`` for an entries frame's plain (inflated) CBOR."""
    items = _loads(plain)
    if type(items) is not list or not items:
        raise CodecError("an entries frame holds no entries")
    out: list[EntryFields] = []
    for item in items:
        if type(item) is not list or len(item) != 5:
            raise CodecError("an entry is not a five-element array")
        entry_id, parent, kind, timestamp, data = item
        # Inlined id decoding: this loop runs for every entry read.
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
    """``encode_checkpoint``, and the size of the CBOR encoding of ``value["live"]`` (0
    without one), which the writer's checkpoint rule compares with what follows. ``live`` is
    written last in the map (where the keys are is no part of the format). ``live`` may be
    a ``Spliced`` (``Spliced.of_cbor``: a fold that keeps its live part's encoding)."""
    if "live" not in value or len(value) > 23:
        plain = cbor2.dumps(value, default=_splice)
        live = len(cbor2.dumps(value["live"], default=_splice)) if "live" in value else 0
    else:
        rest = {key: item for key, item in value.items() if key != "live"}
        given = value["live"]
        live_cbor = given.cbor if type(given) is Spliced else cbor2.dumps(given)
        # A map of fewer than 24 pairs: one head byte, then each key and its value.
        plain = b"".join((bytes([0xA0 + len(value)]), cbor2.dumps(rest)[1:], _LIVE_KEY, live_cbor))
        live = len(live_cbor)
    # memLevel 8 (zlib's default): with a smaller hash table, a large checkpoint takes twice
    # as long; level 1 with it deflates a 200 KB checkpoint in about 2.5 ms.
    packer = zlib.compressobj(
        CHECKPOINT_LEVEL, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY, DICTIONARY
    )
    return bytes([KIND_CHECKPOINT]) + magic + packer.compress(plain) + packer.flush(), live


_LIVE_KEY: Final = cbor2.dumps("live")


def decode_checkpoint(
    payload: bytes | memoryview, magic: bytes, *, live: bool = True
) -> dict[str, Any]:
    """The checkpoint's map. ``live=False`` may leave out its ``live`` part: when ``live`` is
    the map's last key (as ``encode_checkpoint`` writes it), decoding stops before it, which
    is most of a checkpoint of many pending forms."""
    if bytes(payload[1 : 1 + len(magic)]) != magic:
        raise CodecError("not a checkpoint")
    plain = _inflate(payload[1 + len(magic) :])
    if live or not plain or not 0xA0 <= plain[0] <= 0xB7:
        value = _loads(plain)
    else:
        value = _loads_before_live(plain)
    if not isinstance(value, dict):
        raise CodecError("a checkpoint is not a map")
    return value


def _loads_before_live(plain: bytes) -> dict[Any, Any]:
    """A CBOR map of fewer than 24 pairs (``plain[0]`` is its head), decoded pair by pair up
    to a last key ``live``, whose value is not decoded."""
    count = plain[0] - 0xA0
    decoder = cbor2.CBORDecoder(io.BytesIO(plain))
    decoder.fp.read(1)
    value: dict[Any, Any] = {}
    try:
        for n in range(count):
            key = decoder.decode()
            if n == count - 1 and key == "live":
                break
            value[key] = decoder.decode()
    except Exception as exc:  # as ``_loads``: cbor2 raises several unrelated types
        raise CodecError(f"not CBOR: {type(exc).__name__}") from exc
    return value
