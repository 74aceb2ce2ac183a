"""The session file: format, branches, leaf moves, fork, compaction, damage reports."""

from __future__ import annotations

import errno
import json
import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import cbor2
import pytest

from pi_agent_ask.persistence import session_file as sf
from pi_agent_ask.persistence.session_file import (
    COMPACTION_TYPE,
    FORMAT_VERSION,
    MAGIC,
    Entry,
    FrozenMap,
    OpenReport,
    SessionFile,
    SessionFileError,
    encode_frame,
)
from tests.session_frames import decode_payload


def frames(path: Path) -> list[tuple[int, object]]:
    """(offset, decoded payload) of every whole frame, read independently of the module."""
    data = path.read_bytes()
    out: list[tuple[int, object]] = []
    pos = 0
    while pos + 8 <= len(data):
        length, crc = struct.unpack(">II", data[pos : pos + 8])
        payload = data[pos + 8 : pos + 8 + length]
        assert len(payload) == length
        assert zlib.crc32(payload) == crc
        out.append((pos, decode_payload(payload)))
        pos += 8 + length
    assert pos == len(data)
    return out


@pytest.fixture(params=["file", "memory"])
def session(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionFile]:
    """A fresh session, file-backed or in memory: both must behave the same."""
    if request.param == "file":
        opened = SessionFile.open(tmp_path / "session.pias")
    else:
        opened = SessionFile.in_memory()
    with opened:
        yield opened


# ---- the tree ------------------------------------------------------------------------------


def test_new_session_is_empty(session: SessionFile) -> None:
    assert session.leaf_id is None
    assert session.branch() == ()
    assert session.entries == ()
    assert len(session) == 0
    assert session.report.created
    assert session.report.ok
    assert session.header.version == FORMAT_VERSION


def test_append_moves_the_leaf_and_builds_the_branch(session: SessionFile) -> None:
    first = session.append("message", {"text": "hello"})
    second = session.append("ask:queued", {"requestId": "r1", "questions": [{"id": "q"}]})
    assert first.parent_id is None
    assert second.parent_id == first.id
    assert session.leaf_id == second.id
    assert session.branch() == (first, second)
    assert session.branch_ids() == (first.id, second.id)
    assert session.get(first.id) == first
    assert first.id in session
    assert "missing" not in session
    with pytest.raises(KeyError):
        session.get("missing")


def test_entry_data_is_deep_frozen_and_json_compatible(session: SessionFile) -> None:
    entry = session.append("x", {"list": [1, [2, 3]], "map": {"k": ["v"]}})
    assert entry.data == {"list": (1, (2, 3)), "map": {"k": ("v",)}}
    assert isinstance(entry.data, FrozenMap)
    assert isinstance(entry.data["map"], FrozenMap)
    assert json.loads(json.dumps(entry.data)) == {"list": [1, [2, 3]], "map": {"k": ["v"]}}
    with pytest.raises(TypeError):
        entry.data["list"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        entry.data["map"].update({"x": 1})  # type: ignore[attr-defined]
    assert hash(entry) == hash(session.get(entry.id))


def test_sibling_branches_and_explicit_leaf(session: SessionFile) -> None:
    root = session.append("message", {"n": 0})
    left = session.append("message", {"n": 1})
    right = session.append("message", {"n": 2}, parent_id=root.id)
    assert right.parent_id == root.id
    assert session.leaf_id == right.id
    assert session.branch() == (root, right)
    assert session.branch(left.id) == (root, left)
    assert session.entries == (root, left, right)
    session.move_leaf(left.id)
    assert session.branch() == (root, left)
    after = session.append("message", {"n": 3})
    assert after.parent_id == left.id
    with pytest.raises(KeyError):
        session.move_leaf("nope")
    with pytest.raises(KeyError):
        session.append("message", {}, parent_id="nope")
    assert session.leaf_id == after.id


def test_move_leaf_to_none_starts_a_new_root(session: SessionFile) -> None:
    session.append("a", {})
    session.move_leaf(None)
    assert session.branch() == ()
    new_root = session.append("b", {})
    assert new_root.parent_id is None
    assert session.branch() == (new_root,)


def test_append_many_is_a_chain_in_one_frame(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        head = session.append("a", {})
        batch = session.append_many([("b", {"i": 1}), ("c", None), ("d", {"i": 3})])
        assert [e.parent_id for e in batch] == [head.id, batch[0].id, batch[1].id]
        assert session.leaf_id == batch[-1].id
        assert session.append_many([]) == ()
        assert session.get(batch[1].id) == batch[1]
    kinds = [sorted(payload) for _, payload in frames(path)]  # type: ignore[call-overload]
    assert kinds[2] == ["batch"]
    assert len(kinds) == 3  # header, "a", the batch
    with SessionFile.open(path) as again:
        assert again.branch() == (head, *batch)


def test_a_torn_batch_loses_the_whole_batch(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        head = session.append("a", {})
        session.append_many([("b", {}), ("c", {})])
    batch_offset = frames(path)[2][0]
    with path.open("r+b") as fh:
        fh.truncate(path.stat().st_size - 3)
    with SessionFile.open(path) as again:
        assert again.branch() == (head,)
        assert again.report.damage is not None
        assert again.report.damage.start == batch_offset
        assert again.report.damage.reason == "torn"


def test_compaction_adds_a_summary_and_removes_nothing(session: SessionFile) -> None:
    old = [session.append("message", {"n": n}) for n in range(3)]
    summary = session.compact("three messages", {"firstKeptEntryId": old[2].id})
    assert summary.type == COMPACTION_TYPE
    assert summary.data == {"firstKeptEntryId": old[2].id, "summary": "three messages"}
    assert session.branch() == (*old, summary)
    assert len(session) == 4


def test_reopening_gives_the_same_tree_and_leaf(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        root = session.append("a", {"x": 1.5, "b": b"\x00bytes"})
        child = session.append("b", {})
        session.move_leaf(root.id)
        header = session.header
    with SessionFile.open(path) as again:
        assert again.header == header
        assert again.leaf_id == root.id
        assert again.entries == (root, child)
        assert again.report == OpenReport(path, 2)
        again.move_leaf(None)
    with SessionFile.open(path, readonly=True) as third:
        assert third.leaf_id is None


def test_file_layout_is_length_crc_cbor(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        entry = session.append("note", {"text": "hi"})
        session.move_leaf(None)
    (_, header), (_, stored), (_, leaf) = frames(path)
    assert header["magic"] == MAGIC  # type: ignore[index]
    assert header["version"] == FORMAT_VERSION  # type: ignore[index]
    assert isinstance(header["created"], float)  # type: ignore[index]
    assert "forkedFrom" not in header  # type: ignore[operator]
    assert stored == {
        "id": entry.id,
        "parentId": None,
        "type": "note",
        "timestamp": entry.timestamp,
        "data": {"text": "hi"},
    }
    assert leaf == {"leaf": None}
    assert Entry.from_cbor(entry.to_cbor()) == entry


def test_entry_from_cbor_rejects_malformed_entries() -> None:
    good = {"id": "a", "parentId": None, "type": "t", "timestamp": 1.0, "data": {}}
    assert Entry.from_cbor(cbor2.dumps(good)) == Entry("a", None, "t", 1.0, {})
    for bad in (
        {**good, "id": ""},
        {**good, "parentId": 3},
        {**good, "type": None},
        {**good, "timestamp": True},
        {**good, "data": [1]},
        [good],
    ):
        with pytest.raises(ValueError):
            Entry.from_cbor(cbor2.dumps(bad))
    with pytest.raises(ValueError, match="undecodable"):
        Entry.from_cbor(b"\xff\xff")


def test_unencodable_data_writes_nothing(session: SessionFile) -> None:
    first = session.append("a", {})
    with pytest.raises(TypeError):
        session.append("b", {"bad": object()})
    with pytest.raises(ValueError):
        session.append("", {})
    assert session.leaf_id == first.id
    assert len(session) == 1


def test_large_entries_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    big = "x" * (3 * 1024 * 1024)
    with SessionFile.open(path) as session:
        small = session.append("a", {})
        large = session.append("image", {"data": big})
        last = session.append("b", {})
    with SessionFile.open(path) as again:
        assert again.branch() == (small, large, last)


def test_deep_branches_do_not_recurse(session: SessionFile) -> None:
    for n in range(5000):
        session.append("m", {"n": n})
    branch = session.branch()
    assert len(branch) == 5000
    assert [e.data["n"] for e in branch[:3]] == [0, 1, 2]


# ---- fork, reload, read-only, lock ---------------------------------------------------------


def test_fork_copies_the_active_branch_only(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        root = session.append("a", {})
        session.append("sibling", {})
        session.move_leaf(root.id)
        kept = session.append("b", {"k": [1]})
        before = path.read_bytes()
        with session.fork(tmp_path / "fork.pias") as forked:
            assert forked.header.forked_from == str(path.resolve())
            assert forked.header.session_id != session.header.session_id
            assert forked.entries == (root, kept)
            assert forked.leaf_id == kept.id
            own = forked.append("c", {})
            assert forked.branch() == (root, kept, own)
        assert path.read_bytes() == before
        assert own.id not in session
        with session.fork(None) as in_memory:
            assert in_memory.path is None
            assert in_memory.header.forked_from == str(path.resolve())
            assert in_memory.branch() == (root, kept)
    with SessionFile.open(tmp_path / "fork.pias", readonly=True) as reread:
        assert reread.branch() == (root, kept, own)


def test_fork_never_replaces_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.write_text("someone else's")
    with SessionFile.open(tmp_path / "s.pias") as session:
        session.append("a", {})
        with pytest.raises(FileExistsError):
            session.fork(target)
    assert target.read_text() == "someone else's"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_in_memory_fork_to_a_file(tmp_path: Path) -> None:
    with SessionFile.in_memory() as session:
        entry = session.append("a", {"x": 1})
        with session.fork(tmp_path / "f.pias") as forked:
            assert forked.header.forked_from is None
            assert forked.branch() == (entry,)


def test_readonly_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        entry = session.append("a", {})
    before = path.read_bytes()
    with SessionFile.open(path, readonly=True) as reader:
        assert reader.branch() == (entry,)
        with pytest.raises(ValueError, match="read-only"):
            reader.append("b", {})
        with pytest.raises(ValueError, match="read-only"):
            reader.move_leaf(None)
    assert path.read_bytes() == before
    with pytest.raises(FileNotFoundError):
        SessionFile.open(tmp_path / "missing", readonly=True)
    with pytest.raises(FileNotFoundError):
        SessionFile.open(tmp_path / "missing", create=False)


def test_a_second_writer_is_refused_but_readers_are_not(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as writer:
        writer.append("a", {})
        with pytest.raises(SessionFileError) as info:
            SessionFile.open(path)
        assert info.value.reason == "locked"
        with SessionFile.open(path, readonly=True) as reader:
            assert len(reader) == 1
    with SessionFile.open(path) as next_writer:
        assert len(next_writer) == 1


def test_reload_rereads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as writer, SessionFile.open(path, readonly=True) as reader:
        first = writer.append("a", {})
        assert len(reader) == 0
        report = reader.reload()
        assert report.entries == 1
        assert reader.branch() == (first,)
        assert writer.reload() == OpenReport(path, 1)
        second = writer.append("b", {})
        reader.reload()
        assert reader.branch() == (first, second)


def test_closed_session_refuses_use(tmp_path: Path) -> None:
    session = SessionFile.open(tmp_path / "s.pias")
    session.append("a", {})
    session.close()
    session.close()
    assert session.closed
    with pytest.raises(ValueError, match="closed"):
        session.append("b", {})
    with pytest.raises(ValueError, match="closed"):
        session.branch()


def test_a_failed_write_is_rolled_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.pias"
    real_write = os.write
    with SessionFile.open(path) as session:
        first = session.append("a", {})
        size = path.stat().st_size

        def half_then_full(fd: int, data: bytes | memoryview) -> int:
            real_write(fd, bytes(data)[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(sf.os, "write", half_then_full)
        with pytest.raises(OSError, match="No space"):
            session.append("b", {"text": "lost"})
        monkeypatch.setattr(sf.os, "write", real_write)
        assert path.stat().st_size == size
        assert session.leaf_id == first.id
        second = session.append("c", {})
    with SessionFile.open(path) as again:
        assert again.report.ok
        assert again.branch() == (first, second)


# ---- foreign files, versions, damage -------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b'{"type": "session", "version": 3}\n',
        b"\x89PNG\r\n\x1a\n" + bytes(range(64)),
        b"\x00\x00\x00",
        encode_frame(cbor2.dumps({"magic": "something-else", "version": 1})),
        encode_frame(cbor2.dumps([1, 2, 3])),
    ],
)
def test_foreign_files_are_refused_and_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "foreign"
    path.write_bytes(content)
    for readonly in (False, True):
        with pytest.raises(SessionFileError) as info:
            SessionFile.open(path, readonly=readonly)
        assert info.value.reason == "not-a-session-file"
        assert info.value.path == path
        assert "not a pi-agent-ask session file" in str(info.value)
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign"]


def test_future_versions_are_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "future.pias"
    header = {"magic": MAGIC, "version": FORMAT_VERSION + 1, "created": 0.0, "sessionId": "s"}
    content = encode_frame(cbor2.dumps(header)) + b"whatever the future holds"
    path.write_bytes(content)
    with pytest.raises(SessionFileError) as info:
        SessionFile.open(path)
    assert info.value.reason == "future-version"
    assert info.value.version == FORMAT_VERSION + 1
    assert "upgrade pi-agent-ask" in str(info.value)
    assert path.read_bytes() == content


def test_a_damaged_header_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        session.append("a", {})
    content = bytearray(path.read_bytes())
    content[5] ^= 0xFF  # inside the header's checksum
    path.write_bytes(bytes(content))
    with pytest.raises(SessionFileError) as info:
        SessionFile.open(path)
    assert info.value.reason == "damaged-header"
    assert path.read_bytes() == bytes(content)


def test_an_empty_file_becomes_a_session_when_opened_for_writing(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    path.touch()
    with pytest.raises(SessionFileError):
        SessionFile.open(path, readonly=True)
    assert path.read_bytes() == b""
    with SessionFile.open(path) as session:
        assert session.report.created
        session.append("a", {})
    with SessionFile.open(path, readonly=True) as again:
        assert len(again) == 1


def test_torn_tail_is_reported_then_cut_with_a_copy(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        kept = [session.append("a", {"n": n}) for n in range(3)]
    good_size = path.stat().st_size
    torn = encode_frame(cbor2.dumps({"id": "x", "parentId": None}))[:-4]
    with path.open("ab") as fh:
        fh.write(torn)
    full = path.read_bytes()

    with SessionFile.open(path, readonly=True) as reader:
        report = reader.report
        assert reader.branch() == tuple(kept)
    assert report.damage is not None
    assert (report.damage.start, report.damage.end) == (good_size, len(full))
    assert report.damage.bad_bytes == len(torn)
    assert report.damage.reason == "torn"
    assert not report.cut
    assert report.saved_to is None
    assert report.entries == 3
    assert "ignored (file not modified)" in report.describe()
    assert path.read_bytes() == full

    with SessionFile.open(path) as writer:
        report = writer.report
        assert writer.branch() == tuple(kept)
        assert writer.leaf_id == kept[-1].id
    assert report.cut
    assert report.saved_to == tmp_path / f"s.pias.cut-{good_size}"
    assert report.saved_to.read_bytes() == torn
    assert path.stat().st_size == good_size
    text = report.describe()
    assert f"kept 3 entries; {len(torn)} bad bytes {good_size}..{len(full)} cut" in text
    assert "interrupted write" in text
    with SessionFile.open(path) as clean:
        assert clean.report.ok


def test_a_flipped_byte_cuts_from_the_damaged_frame(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        entries = [session.append("a", {"n": n}) for n in range(5)]
    offsets = [offset for offset, _ in frames(path)]
    content = bytearray(path.read_bytes())
    content[offsets[3] + 12] ^= 0x01  # inside the payload of the third entry
    path.write_bytes(bytes(content))
    with SessionFile.open(path) as again:
        assert again.entries == tuple(entries[:2])
        assert again.leaf_id == entries[1].id
        damage = again.report.damage
        assert damage is not None
        assert damage.reason == "checksum"
        assert (damage.start, damage.end) == (offsets[3], len(content))
        assert again.report.saved_to is not None
        assert again.report.saved_to.read_bytes() == bytes(content[offsets[3] :])


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (struct.pack(">II", 0, 0), "length"),
        (struct.pack(">II", sf.MAX_FRAME_BYTES + 1, 0), "length"),
        (encode_frame(b"\xff\xfe"), "undecodable"),
        (encode_frame(cbor2.dumps({"leaf": "unknown"})), "invalid"),
        (encode_frame(cbor2.dumps({"what": 1})), "invalid"),
        (encode_frame(cbor2.dumps({"batch": []})), "invalid"),
        (
            encode_frame(
                cbor2.dumps(
                    {"id": "z", "parentId": "nobody", "type": "t", "timestamp": 1.0, "data": {}}
                )
            ),
            "invalid",
        ),
    ],
)
def test_damage_reasons(tmp_path: Path, frame: bytes, reason: str) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        entry = session.append("a", {})
    good_size = path.stat().st_size
    with path.open("ab") as fh:
        fh.write(frame + b"trailing bytes")
    with SessionFile.open(path) as again:
        assert again.branch() == (entry,)
        assert again.report.damage is not None
        assert again.report.damage.reason == reason
        assert again.report.damage.start == good_size
    assert path.stat().st_size == good_size


def test_duplicate_ids_are_damage(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        entry = session.append("a", {})
    with path.open("ab") as fh:
        fh.write(encode_frame(entry.to_cbor()))
    with SessionFile.open(path, readonly=True) as again:
        assert again.entries == (entry,)
        assert again.report.damage is not None
        assert "duplicate entry id" in again.report.damage.detail


def test_a_file_shrinking_while_it_is_read_is_a_torn_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reader measures the file, then a writer cuts a torn tail before the reader gets there.
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        entry = session.append("a", {})
    real_size = path.stat().st_size
    real_fstat = os.fstat

    class Stat:
        def __init__(self, fd: int) -> None:
            self.st_size = real_fstat(fd).st_size + 50
            self.st_mode = real_fstat(fd).st_mode

    monkeypatch.setattr(sf.os, "fstat", Stat)
    with SessionFile.open(path, readonly=True) as reader:
        assert reader.entries == (entry,)
        assert reader.report.damage is not None
        assert reader.report.damage.reason == "torn"
        assert reader.report.damage.start == real_size
    assert path.stat().st_size == real_size
