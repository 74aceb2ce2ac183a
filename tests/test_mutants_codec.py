"""Session format version 2 payloads, pinned where mutation testing found them unpinned
(``docs/mutation-persistence.md``, ``codec.py``): text ids in leaf moves and checkpoints, the
error texts a damaged frame is reported with, an empty entries frame, data nested too deeply
behind a plain value, what the dictionary buys a small entry.

Every damaged frame is written into a real session file as bytes, with a checksum that holds:
only the decoding can refuse it, and the open reports what it refused.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import cbor2
import pytest

from pi_agent_ask.persistence import codec
from pi_agent_ask.persistence.projection import JOURNAL
from pi_agent_ask.persistence.session_file import (
    CHECKPOINT_MAGIC,
    Entry,
    Header,
    SessionFile,
    encode_frame,
)


def deflate(plain: bytes) -> bytes:
    """Raw DEFLATE with the format's dictionary, written independently of ``codec``."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, codec.DICTIONARY)
    return packer.compress(plain) + packer.flush()


def session_with(path: Path, payload: bytes) -> int:
    """A version 2 session of two entries, then one frame holding ``payload``; returns the
    frame's offset."""
    with SessionFile.open(path) as session:
        session.append("message", {"text": "one"})
        session.append("message", {"text": "two"})
    offset = path.stat().st_size
    with path.open("ab") as file:
        file.write(encode_frame(payload))
    return offset


def opened_damage(path: Path) -> tuple[str, str, int]:
    """What a read-only open reports about the tail: reason, detail, entries kept."""
    with SessionFile.open(path, readonly=True) as session:
        damage = session.report.damage
        assert damage is not None
        assert damage.end == path.stat().st_size
        return damage.reason, damage.detail, session.report.entries


def v1_file(path: Path, entries: list[Entry]) -> None:
    frames = [encode_frame(Header(1, 1.0e9, "old").to_cbor())]
    frames += [encode_frame(entry.to_cbor()) for entry in entries]
    path.write_bytes(b"".join(frames))


# ---- ids that are not 16 hex digits ---------------------------------------------------------


def test_a_leaf_move_to_a_text_id_reads_back(tmp_path: Path) -> None:
    """Ids written by another program (a version 1 file's) stay text in version 2 frames: a
    fork keeps them, and a leaf move to one reads back."""
    old = tmp_path / "old.pias"
    v1_file(
        old,
        [
            Entry("root", None, "message", 1.0, {"text": "a"}),
            Entry("child", "root", "message", 2.0, {"text": "b"}),
        ],
    )
    with SessionFile.open(old, readonly=True) as source:
        forked = source.fork(tmp_path / "new.pias")
    with forked:
        assert forked.header.version == 2
        forked.move_leaf("root")
        forked.move_leaf(None)
        forked.move_leaf("root")
    with SessionFile.open(tmp_path / "new.pias", readonly=True) as again:
        assert again.report.ok
        assert again.leaf_id == "root"
        assert again.branch_ids() == ("root",)


def test_a_checkpoint_naming_a_text_id_serves_the_open(tmp_path: Path) -> None:
    old = tmp_path / "old.pias"
    entries = [Entry("e0", None, "message", 1.0, {"text": "0"})]
    entries += [Entry(f"e{n}", f"e{n - 1}", "message", 1.0 + n, {"text": str(n)}) for n in (1, 2)]
    v1_file(old, entries)
    with SessionFile.open(old, readonly=True) as source:
        forked = source.fork(tmp_path / "new.pias")
    forked.close()
    with SessionFile.open(tmp_path / "new.pias", projection=JOURNAL, checkpoint_every=2):
        pass  # three entries folded at the open: it writes a checkpoint naming "e2"
    with SessionFile.open(tmp_path / "new.pias", projection=JOURNAL, readonly=True) as again:
        assert again.report.notes == ()
        assert again.report.checkpoint is not None
        assert again.indexed == 1  # the checkpoint's leaf only
        assert again.leaf_id == "e2"
        assert again.branch_ids() == ("e0", "e1", "e2")


def test_a_leaf_move_to_an_id_of_four_bytes_is_undecodable(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    offset = session_with(path, bytes([codec.KIND_LEAF]) + cbor2.dumps(b"\x01\x02\x03\x04"))
    reason, detail, kept = opened_damage(path)
    assert (reason, detail, kept) == (
        "undecodable",
        "an entry id is neither text, 8 bytes nor null",
        2,
    )
    with SessionFile.open(path, readonly=True) as session:
        assert session.report.damage is not None and session.report.damage.start == offset


# ---- what a damaged entries frame is reported as --------------------------------------------


def test_an_entries_frame_holding_no_entries_is_damage(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    session_with(path, bytes([codec.KIND_ENTRIES]) + deflate(cbor2.dumps([])))
    assert opened_damage(path) == ("undecodable", "an entries frame holds no entries", 2)
    with SessionFile.open(path) as session:  # the writer cuts it and goes on from the leaf
        assert session.report.cut
        assert [e.data["text"] for e in session.branch()] == ["one", "two"]


def test_an_entries_frame_that_is_not_cbor_names_the_decoder_error(tmp_path: Path) -> None:
    plain = b"\x9f\x01"  # an indefinite array that never ends
    try:
        cbor2.loads(plain)
    except Exception as exc:
        name = type(exc).__name__
    else:  # pragma: no cover - the bytes are not CBOR
        raise AssertionError("decoded")
    path = tmp_path / "s.pias"
    session_with(path, bytes([codec.KIND_ENTRIES]) + deflate(plain))
    assert opened_damage(path) == ("undecodable", f"not CBOR: {name}", 2)


# ---- checkpoints ----------------------------------------------------------------------------


def _journal_session(path: Path) -> int:
    """A session with the journal projection; returns the offset of its last entries frame."""
    with SessionFile.open(path, projection=JOURNAL) as session:
        session.append("message", {"text": "one"})
        offset = path.stat().st_size
        session.append("message", {"text": "two"})
    return offset


def test_a_frame_that_is_not_a_checkpoint_says_so(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    offset = _journal_session(path)
    with (
        SessionFile.open(path, projection=JOURNAL, readonly=True) as session,
        pytest.raises(ValueError, match=r"^not a checkpoint$"),
    ):
        session.checkpoint_at(offset)


def test_a_checkpoint_that_is_not_a_map_is_skipped_with_its_reason(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    _journal_session(path)
    offset = path.stat().st_size
    payload = bytes([codec.KIND_CHECKPOINT]) + CHECKPOINT_MAGIC + deflate(cbor2.dumps([1, 2]))
    with path.open("ab") as file:
        file.write(encode_frame(payload))
    with SessionFile.open(path, projection=JOURNAL, readonly=True) as session:
        assert session.report.ok  # a checkpoint holds no entries: nothing is damaged
        assert session.report.notes == (
            f"checkpoint at byte {offset} is unusable (a checkpoint is not a map); skipped",
            "no usable checkpoint: the whole file was read",
        )
        assert [e.data["text"] for e in session.branch()] == ["one", "two"]
        with pytest.raises(ValueError, match=r"^a checkpoint is not a map$"):
            session.checkpoint_at(offset)


# ---- data too deep to read back -------------------------------------------------------------


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("append", ["chains", "many"])
def test_data_too_deep_is_refused_behind_a_plain_value(tmp_path: Path, append: str) -> None:
    """The depth check walks the whole entry: a plain value met before the deep part does
    not end it."""
    deep = {"deep": _nested(codec.MAX_NESTING - 1), "after": 0}
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        if append == "chains":
            [refused] = session.append_chains([[("d", deep)]])
            assert isinstance(refused, ValueError)
            assert str(refused) == f"entry data is nested more than {codec.MAX_NESTING} levels deep"
        else:
            with pytest.raises(ValueError, match="nested more than"):
                session.append_many([("d", deep)])
        assert len(session) == 0
    with SessionFile.open(path, readonly=True) as again:
        assert again.report.ok
        assert len(again) == 0


# ---- the dictionary -------------------------------------------------------------------------


def test_a_small_entry_of_the_vocabulary_compresses_through_the_dictionary(
    tmp_path: Path,
) -> None:
    """What the preset dictionary is for: one small entry made of the journal's words is
    stored in far fewer bytes than its CBOR, in a fork's frames as in appended ones."""
    data = {
        "toolCallId": "call",
        "name": "ask_user",
        "arguments": {"questions": [{"id": "q", "type": "single", "prompt": "p"}]},
        "details": {"status": "queued", "pendingRequests": [], "questionIds": []},
    }
    plain = len(cbor2.dumps(["0123456789abcdef", None, "tool-call", 1.5, data]))
    source = tmp_path / "s.pias"
    with SessionFile.open(source) as session:
        session.append("tool-call", data)
        forked = session.fork(tmp_path / "f.pias")
    forked.close()
    for path in (source, tmp_path / "f.pias"):
        content = path.read_bytes()
        header = 8 + int.from_bytes(content[:4], "big")
        frame = content[header:]
        assert int.from_bytes(frame[:4], "big") + 8 == len(frame)  # one entries frame
        assert int.from_bytes(frame[:4], "big") < plain // 2, (path, len(frame), plain)


KEY = bytes.fromhex("00112233445566ff")
ENTRY: list[Any] = [KEY, None, "message", 1.5, {"text": "x"}]


def _with(place: int, value: Any) -> list[Any]:
    item = list(ENTRY)
    item[place] = value
    return item


@pytest.mark.parametrize(
    ("item", "detail"),
    [
        (ENTRY[:4], "an entry is not a five-element array"),
        ([*ENTRY, None], "an entry is not a five-element array"),
        ("abcde", "an entry is not a five-element array"),
        (_with(0, b"\x00\x01\x02\x03"), "an entry has no id"),
        (_with(0, ""), "an entry has no id"),
        (_with(0, 7), "an entry has no id"),
        (_with(1, b"\x00\x01\x02\x03"), "an entry parent is neither text, 8 bytes nor null"),
        (_with(1, 7), "an entry parent is neither text, 8 bytes nor null"),
        (_with(2, ""), "an entry type is not a non-empty string"),
        (_with(2, b"message"), "an entry type is not a non-empty string"),
        (_with(3, "1.5"), "an entry timestamp is not a number"),
        (_with(3, True), "an entry timestamp is not a number"),
        (_with(4, ["text"]), "entry data is not a map"),
    ],
)
def test_a_malformed_entry_is_undecodable_with_its_reason(
    tmp_path: Path, item: Any, detail: str
) -> None:
    path = tmp_path / "s.pias"
    session_with(path, bytes([codec.KIND_ENTRIES]) + deflate(cbor2.dumps([item])))
    assert opened_damage(path) == ("undecodable", detail, 2)


def test_entries_of_other_writers_read_back(tmp_path: Path) -> None:
    """What a reader accepts beyond what this writer writes: text ids and parents, an
    integer timestamp (read as a float), a batch whose entries hang from each other."""
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        root = session.append("message", {"text": "root"})
    items = [
        ["text-id", root.id, "message", 7, {"n": 1}],
        [KEY, "text-id", "message", 8.25, {"n": 2}],
    ]
    with path.open("ab") as file:
        file.write(encode_frame(bytes([codec.KIND_ENTRIES]) + deflate(cbor2.dumps(items))))
    with SessionFile.open(path, readonly=True) as again:
        assert again.report.ok
        branch = again.branch()
        assert [(e.id, e.parent_id, e.timestamp) for e in branch] == [
            (root.id, None, root.timestamp),
            ("text-id", root.id, 7.0),
            (KEY.hex(), "text-id", 8.25),
        ]
        assert type(branch[1].timestamp) is float
        assert again.leaf_id == KEY.hex()


# ---- deflate data that is not ---------------------------------------------------------------


def test_an_entries_frame_that_is_not_deflate_data_names_the_inflate_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.pias"
    session_with(path, bytes([codec.KIND_ENTRIES]) + b"\xff\xff\xff\xff")
    reason, detail, kept = opened_damage(path)
    assert (reason, kept) == ("undecodable", 2)
    assert detail.startswith("not deflate data: Error -3 while decompressing data: ")


def test_an_entries_frame_inflating_past_the_limit_is_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader inflates at most ``MAX_PLAIN_BYTES`` (here lowered): more is damage, and
    a frame within the limit still reads."""
    monkeypatch.setattr(codec, "MAX_PLAIN_BYTES", 2_000)
    path = tmp_path / "s.pias"
    within = cbor2.dumps([[KEY, None, "message", 1.5, {"text": "y" * 1_500}]])
    assert len(within) < 2_000
    with path.open("wb") as file:
        file.write(encode_frame(Header(2, 1.0, "s").to_cbor()))
        file.write(encode_frame(bytes([codec.KIND_ENTRIES]) + deflate(within)))
    over = [[bytes(range(8, 16)), KEY.hex(), "message", 1.5, {"text": "z" * 2_000}]]
    with path.open("ab") as file:
        file.write(encode_frame(bytes([codec.KIND_ENTRIES]) + deflate(cbor2.dumps(over))))
    assert opened_damage(path) == ("undecodable", "deflate data is incomplete or too large", 1)


# ---- how ids are stored ---------------------------------------------------------------------


def _stored_ids(path: Path) -> list[Any]:
    """The id of every entry of a version 2 file as stored (bytes or text)."""
    data = path.read_bytes()
    pos, out = 8 + int.from_bytes(data[:4], "big"), []
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        payload = data[pos + 8 : pos + 8 + length]
        if payload[0] == codec.KIND_ENTRIES:
            unpacker = zlib.decompressobj(-15, codec.DICTIONARY)
            out += [item[0] for item in cbor2.loads(unpacker.decompress(payload[1:]))]
        pos += 8 + length
    return out


def test_only_ids_of_16_lower_case_hex_digits_are_stored_as_bytes(tmp_path: Path) -> None:
    ids = ["0123456789abcdef", "0123456789ABCDEF", "abcd", "0123456789abcdef0", "root"]
    old = tmp_path / "old.pias"
    entries, parent = [], None
    for n, entry_id in enumerate(ids):
        entries.append(Entry(entry_id, parent, "message", float(n), {"n": n}))
        parent = entry_id
    v1_file(old, entries)
    with SessionFile.open(old, readonly=True) as source:
        forked = source.fork(tmp_path / "new.pias")
    with forked:
        generated = forked.append("message", {}).id
    assert _stored_ids(tmp_path / "new.pias") == [
        bytes.fromhex(ids[0]),
        *ids[1:],
        bytes.fromhex(generated),
    ]
    with SessionFile.open(tmp_path / "new.pias", readonly=True) as again:
        assert again.report.ok
        assert again.branch_ids() == (*ids, generated)


# ---- the dictionary in large frames, refused data -------------------------------------------


def test_a_large_frame_is_deflated_with_the_dictionary_too(tmp_path: Path) -> None:
    """A frame over ``SMALL_FRAME`` plain bytes takes its own compressor, primed with the
    dictionary as well: every word of the vocabulary once costs almost nothing."""
    data = {"words": list(codec.VOCABULARY), "pad": "q" * 1_000}
    plain = len(cbor2.dumps([[bytes(8), None, "message", 1.5, data]]))
    assert plain > codec.SMALL_FRAME
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        session.append("message", data)
    content = path.read_bytes()
    header = 8 + int.from_bytes(content[:4], "big")
    length = int.from_bytes(content[header : header + 4], "big")
    assert header + 8 + length == len(content)
    assert length < plain // 8, (length, plain)


def test_refused_data_says_why(tmp_path: Path) -> None:
    def nested(depth: int) -> Any:
        value: Any = "leaf"
        for _ in range(depth):
            value = [value]
        return value

    with SessionFile.open(tmp_path / "s.pias") as session:
        with pytest.raises(ValueError, match=r"^entry data is nested more than 390 levels deep"):
            session.append_many([("t", {"x": nested(392)})])
        with pytest.raises(ValueError, match=r"^entry data is nested too deeply to be read back: "):
            session.append_many([("t", {"x": nested(399)})])
        with pytest.raises(TypeError, match=r"^entry data cannot be stored: "):
            session.append_many([("t", {"x": object()})])
        assert len(session) == 0


def test_an_entries_frame_whose_deflate_stream_stops_early_is_damage(tmp_path: Path) -> None:
    plain = cbor2.dumps([[KEY, None, "message", 1.5, {"text": "abc" * 200}]])
    path = tmp_path / "s.pias"
    session_with(path, bytes([codec.KIND_ENTRIES]) + deflate(plain)[:-4])
    assert opened_damage(path) == ("undecodable", "deflate data is incomplete or too large", 2)


# ---- long chains ----------------------------------------------------------------------------


@pytest.mark.parametrize("count", [23, 24, 255, 256, 257])
def test_a_chain_of_many_entries_reads_back(tmp_path: Path, count: int) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        [chain] = session.append_chains([[("t", {"n": n}) for n in range(count)]])
        assert isinstance(chain, tuple)
        many = session.append_many([("u", {"n": n}) for n in range(count)])
    with SessionFile.open(path, readonly=True) as again:
        assert again.report.ok
        assert again.branch() == (*chain, *many)
