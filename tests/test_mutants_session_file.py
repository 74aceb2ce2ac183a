"""Session file behaviour the other session suites left unpinned, found by mutation testing
(``docs/mutation-persistence.md``, ``session_file.py``).

Sessions are real files in ``tmp_path``; damage is written as bytes. A recording projection
(``Recorder``) shows what a fold is fed: every entry, once, with the data as the writer passed
it. The size limit is lowered with ``monkeypatch`` (the module reads it at every call), so the
frame packing and the limit's edges are seen with small entries.
"""

from __future__ import annotations

import errno
import os
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cbor2
import pytest

from pi_agent_ask.persistence import codec, session_values
from pi_agent_ask.persistence import session_file as sf
from pi_agent_ask.persistence.session_file import (
    Entry,
    Header,
    Loc,
    SessionFile,
    encode_frame,
    freeze,
)

# ---- helpers --------------------------------------------------------------------------------


def frames(path: Path) -> list[tuple[int, bytes]]:
    """``(offset, payload)`` of every frame after the header, parsed independently."""
    data = path.read_bytes()
    out, pos = [], 8 + int.from_bytes(data[:4], "big")
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        out.append((pos, data[pos + 8 : pos + 8 + length]))
        pos += 8 + length
    return out


def v1_file(path: Path, entries: list[Entry]) -> None:
    content = [encode_frame(Header(1, 1.0e9, "old").to_cbor())]
    content += [encode_frame(entry.to_cbor()) for entry in entries]
    path.write_bytes(b"".join(content))


class RecorderFold:
    def __init__(self, owner: Recorder, live: int = 0) -> None:
        self.owner = owner
        self.log: list[Any] = []
        self.count = live

    def step(self, entry: Entry, loc: Loc) -> None:
        self.owner.steps += 1
        self.owner.seen.append(entry)
        self.count += 1
        self.log.append([entry.id, entry.parent_id, entry.type, entry.timestamp, list(loc)])

    def live(self) -> int:
        return self.count


class Recorder:
    """A projection recording what its folds are fed."""

    name = "recorder/1"

    def __init__(self) -> None:
        self.steps = 0
        self.seen: list[Entry] = []

    def empty(self) -> RecorderFold:
        return RecorderFold(self)

    def restore(self, live: Any) -> RecorderFold:
        if type(live) is not int:
            raise ValueError("not a count")
        return RecorderFold(self, live)


CLOCK = 1.5


def clock() -> float:
    return CLOCK


# ---- entries and their data -----------------------------------------------------------------


def test_entry_data_refuses_changes_with_its_text(tmp_path: Path) -> None:
    with SessionFile.open(tmp_path / "s.pias") as session:
        entry = session.append("t", {"a": {"b": 1}})
        for change in (
            lambda: entry.data.__setitem__("x", 1),
            lambda: entry.data["a"].pop("b"),
            lambda: entry.data.update({}),
        ):
            with pytest.raises(TypeError, match=r"^entry data is read-only$"):
                change()


def test_data_cbor_cannot_store_is_refused_in_a_version_1_file(tmp_path: Path) -> None:
    path = tmp_path / "old.pias"
    v1_file(path, [Entry("root", None, "t", 1.0, {})])
    size = path.stat().st_size
    with SessionFile.open(path) as session:
        with pytest.raises(TypeError, match=r"^entry data cannot be stored: "):
            session.append("t", {"x": object()})
        with pytest.raises(TypeError, match=r"^entry data cannot be stored: "):
            session.append_many([("t", {}), ("t", {"x": object()})])
    assert path.stat().st_size == size


def test_a_written_entry_is_unequal_to_what_is_not_an_entry(tmp_path: Path) -> None:
    with SessionFile.open(tmp_path / "s.pias") as session:
        [(written,)] = session.append_chains([[("t", {"a": 1})]])
        assert isinstance(written, Entry)
        assert (written != "t") is True
        assert (written != 5) is True
        assert (written == "t") is False
        assert (written != session.get(written.id)) is False


# ---- append_chains --------------------------------------------------------------------------


def test_an_entry_type_that_is_empty_or_not_text_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        results = session.append_chains([[("", {})], [(5, {})], [("ok", {})]])  # type: ignore[list-item]
        for refused in results[:2]:
            assert isinstance(refused, ValueError)
            assert str(refused) == "entry type must be a non-empty string"
        for bad in ("", 5):
            with pytest.raises(ValueError, match=r"^entry type must be a non-empty string$"):
                session.append_many([(bad, {})])  # type: ignore[list-item]
    with SessionFile.open(path, readonly=True) as again:
        assert again.report.ok
        assert [e.type for e in again.branch()] == ["ok"]


def test_a_chain_with_a_mapping_that_is_not_a_dict_inside_is_stored(tmp_path: Path) -> None:
    """A ``MappingProxyType`` deep inside is stored as a map, ids, parents, type and time
    included, and reads back frozen."""
    path = tmp_path / "s.pias"
    inner = types.MappingProxyType({"k": [1, 2]})
    with SessionFile.open(path, clock=clock) as session:
        root = session.append("root", {})
        [chain] = session.append_chains([[("a", {"m": inner}), ("b", {"n": {"m": inner}})]])
        assert isinstance(chain, tuple)
        first, second = chain
        assert (first.parent_id, second.parent_id) == (root.id, first.id)
        assert first.data == {"m": {"k": (1, 2)}}
    with SessionFile.open(path, readonly=True) as again:
        assert again.report.ok
        assert again.branch() == (root, first, second)
        assert [(e.type, e.timestamp) for e in again.branch()[1:]] == [("a", CLOCK), ("b", CLOCK)]


def test_data_cbor_cannot_store_is_refused_with_its_reason(tmp_path: Path) -> None:
    """The chain is refused with the encoder's reason, also after the data was frozen and
    tried again."""
    with SessionFile.open(tmp_path / "s.pias") as session:
        [refused, fine] = session.append_chains(
            [[("a", {}), ("b", {"odd": object()})], [("c", {})]]
        )
        assert isinstance(refused, TypeError)
        assert str(refused).startswith("entry data cannot be stored: ")
        assert "object" in str(refused)
        assert isinstance(fine, tuple)
        assert [e.type for e in session.branch()] == ["c"]


def test_ids_stay_unique_when_the_random_source_repeats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer never hands out an id twice: not within one call, not one already in the
    file, whatever the random source returns."""
    same, other, third, fourth = "00112233445566ff", "08090a0b0c0d0e0f", "a" * 16, "b" * 16
    # A chain's ids come from one draw (16 hex digits each); an id held already, one more.
    draws = iter([same + same, other, same + other, third, fourth])

    def token_hex(nbytes: int) -> str:
        drawn = next(draws)
        assert len(drawn) == 2 * nbytes
        return drawn

    with SessionFile.open(tmp_path / "s.pias") as session:
        monkeypatch.setattr(sf.secrets, "token_hex", token_hex)
        [chain] = session.append_chains([[("a", {}), ("b", {})]])
        assert isinstance(chain, tuple)
        assert [e.id for e in chain] == [same, other]
        # After a reload: the file holds two of the ids drawn already.
        session.reload()
        many = session.append_many([("c", {}), ("d", {})])
        assert [e.id for e in many] == [third, fourth]
        monkeypatch.undo()
        assert len(set(session.ids())) == 4


def test_the_fold_takes_each_appended_entry_once_as_it_was_handed_back(tmp_path: Path) -> None:
    recorder = Recorder()
    given = [{"n": n, "inner": {"list": [n]}} for n in range(3)]
    with SessionFile.open(tmp_path / "s.pias", projection=recorder, clock=clock) as session:
        fold = session.fold()
        [chain, single] = session.append_chains(
            [[("a", given[0]), ("b", given[1])], [("c", given[2])]]
        )
        assert isinstance(chain, tuple) and isinstance(single, tuple)
        written = [*chain, *single]
        assert recorder.steps == 3  # each entry once: nothing was read back
        assert session.fold() is fold
        assert recorder.seen == written
        assert [e.data for e in written] == [freeze(data) for data in given]
        assert [item[:4] for item in fold.log] == [
            [e.id, e.parent_id, e.type, e.timestamp] for e in session.branch()
        ]
        assert recorder.steps == 3


def _failing_second_write(monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    calls = 0

    def write(fd: int, data: bytes | memoryview) -> int:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(sf.os, "write", write)


def test_a_failed_write_fails_its_chain_and_every_later_one_in_a_version_1_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "old.pias"
    v1_file(path, [Entry("root", None, "t", 1.0, {})])
    with SessionFile.open(path) as session:
        _failing_second_write(monkeypatch)
        [first] = session.append_chains([[("a", {})]])
        results = session.append_chains(
            [[("bad", {"x": object()})], [("b", {})], [("c", {})], [("d", {})]]
        )
        monkeypatch.undo()
        assert len(results) == 4
        refused, failed, *after = results
        assert isinstance(first, tuple) and [e.type for e in first] == ["a"]
        assert isinstance(refused, TypeError)
        assert isinstance(failed, OSError) and failed.errno == errno.ENOSPC
        assert after == [failed, failed]
        assert session.leaf_id == first[0].id
    with SessionFile.open(path, readonly=True) as again:
        assert again.report.ok
        assert [e.type for e in again.branch()] == ["t", "a"]


# ---- the frame size limit and the packing of chains into frames ------------------------------

LIMIT = 1000


def _item_size(data: dict[str, Any]) -> int:
    """The CBOR size of one entry under an entry (both ids 8 bytes) at ``CLOCK``."""
    return len(cbor2.dumps([bytes(8), bytes(8), "t", CLOCK, data]))


def _data_of_chain_size(size: int) -> dict[str, Any]:
    """Data whose one-entry chain counts ``size`` plain bytes (``_chain``: items + 9)."""
    for k in range(size):
        data = {"s": "x" * k}
        if _item_size(data) + 9 == size:
            return data
    raise AssertionError(size)


@pytest.fixture
def small_limit(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(session_values, "MAX_FRAME_BYTES", LIMIT)
    yield


@pytest.mark.usefixtures("small_limit")
def test_a_chain_of_exactly_the_limit_is_stored_one_byte_more_is_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path, clock=clock) as session:
        session.append("root", {})
        at_limit, over = session.append_chains(
            [[("t", _data_of_chain_size(LIMIT))], [("t", _data_of_chain_size(LIMIT + 1))]]
        )
        assert isinstance(at_limit, tuple)
        assert isinstance(over, ValueError)
        assert str(over) == f"entry too large: {LIMIT + 1} bytes (at most {LIMIT})"
    with SessionFile.open(path, readonly=True) as again:
        assert [e.type for e in again.branch()] == ["root", "t"]


@pytest.mark.usefixtures("small_limit")
def test_chains_share_a_frame_up_to_half_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    half = LIMIT // 2
    with SessionFile.open(path, clock=clock) as session:
        session.append("root", {})
        before = len(frames(path))
        results = session.append_chains(
            [
                [("t", _data_of_chain_size(half - 100))],
                [("t", _data_of_chain_size(100))],  # exactly half the limit with the first
                [("t", _data_of_chain_size(60))],  # one byte more: the next frame
            ]
        )
        assert all(isinstance(r, tuple) for r in results)
    written = frames(path)[before:]
    assert [len(codec.decode_entries(payload)) for _, payload in written] == [2, 1]
    with SessionFile.open(path, readonly=True) as again:
        assert again.report.ok
        assert len(again.branch()) == 4


# ---- leaf moves, flushes --------------------------------------------------------------------


def test_a_version_2_leaf_move_is_a_kind_byte_frame(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        first = session.append("t", {})
        session.append("t", {})
        session.move_leaf(first.id)
    (_, payload) = frames(path)[-1]
    assert payload == bytes([codec.KIND_LEAF]) + cbor2.dumps(bytes.fromhex(first.id))


def test_flush_clears_what_needs_flushing(tmp_path: Path) -> None:
    with SessionFile.open(tmp_path / "s.pias") as session:
        assert session.needs_flush is False
        session.append("t", {})
        assert session.needs_flush is True
        session.flush()
        assert session.needs_flush is False
        session.flush()
        assert session.needs_flush is False


# ---- fork into memory -----------------------------------------------------------------------


def test_a_fork_into_memory_of_a_long_branch_keeps_every_entry(tmp_path: Path) -> None:
    with SessionFile.open(tmp_path / "s.pias", clock=clock) as session:
        for start in range(0, 300, 50):
            session.append_many([("t", {"n": n}) for n in range(start, start + 50)])
        branch = session.branch()
        forked = session.fork(None)
    with forked:
        assert len(forked) == 300
        assert forked.report.entries == 300
        assert forked.branch() == branch
        assert forked.leaf_id == branch[-1].id
        assert [forked.parent_id(e.id) for e in branch[250:260]] == [
            e.parent_id for e in branch[250:260]
        ]


# ---- version 1 leaf moves -------------------------------------------------------------------


def test_a_version_1_leaf_move_is_a_leaf_map_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "old.pias"
    v1_file(path, [Entry("root", None, "t", 1.0, {}), Entry("child", "root", "t", 2.0, {})])
    with SessionFile.open(path) as session:
        session.move_leaf("root")
    (_, payload) = frames(path)[-1]
    assert cbor2.loads(payload) == {"leaf": "root"}
    with SessionFile.open(path, readonly=True) as again:
        assert again.report.ok
        assert again.leaf_id == "root"


# ---- forks ----------------------------------------------------------------------------------


def test_a_fork_into_memory_keeps_the_clock_and_the_projection(tmp_path: Path) -> None:
    recorder = Recorder()
    with SessionFile.open(tmp_path / "s.pias", projection=recorder, clock=clock) as session:
        session.append_many([("t", {"n": n}) for n in range(3)])
        forked = session.fork(None)
    with forked:
        assert forked.projection is recorder
        assert forked.header.created == CLOCK
        assert [item[0] for item in forked.fold().log] == list(forked.branch_ids())
        assert forked.append("t", {}).timestamp == CLOCK


def test_a_fork_into_a_file_keeps_clock_fsync_and_every_entry(tmp_path: Path) -> None:
    with SessionFile.open(tmp_path / "s.pias", clock=clock, fsync=True) as session:
        for start in range(0, 300, 50):
            session.append_many([("t", {"n": n}) for n in range(start, start + 50)])
        branch = session.branch()
        forked = session.fork(tmp_path / "f.pias")
    with forked:
        assert forked.report.ok
        assert len(forked) == 300
        assert forked.branch() == branch
        assert forked.fsync is True
        assert forked.header.created == CLOCK
        assert forked.append("t", {}).timestamp == CLOCK
    with SessionFile.open(tmp_path / "f.pias", readonly=True) as again:
        assert again.report.ok
        assert again.branch()[:300] == branch


def test_a_fork_onto_an_existing_file_names_it(tmp_path: Path) -> None:
    target = tmp_path / "taken.pias"
    target.write_bytes(b"someone's")
    with SessionFile.open(tmp_path / "s.pias") as session:
        session.append("t", {})
        with pytest.raises(FileExistsError) as caught:
            session.fork(target)
    assert caught.value.args == (target,)
    assert target.read_bytes() == b"someone's"


def test_a_fork_of_more_than_a_read_window_is_whole(tmp_path: Path) -> None:
    """The new file's frames are buffered and written a window (1 MiB) at a time."""
    with SessionFile.open(tmp_path / "s.pias") as session:
        session.append_many([("t", {"b": os.urandom(5_000)}) for _ in range(300)])
        branch = session.branch()
        forked = session.fork(tmp_path / "f.pias")
    forked.close()
    assert (tmp_path / "f.pias").stat().st_size > 1 << 20
    with SessionFile.open(tmp_path / "f.pias", readonly=True) as again:
        assert again.report.ok
        assert again.branch() == branch


# ---- creating files -------------------------------------------------------------------------


def test_a_new_file_is_created_in_its_own_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The temporary file lies next to the target, whatever the working directory (here one
    that was removed: nothing can be created in it)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        assert session.report.created
        session.append("t", {})
        forked = session.fork(tmp_path / "f.pias")
    forked.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.pias", "s.pias"]


def test_a_new_file_takes_mode_0644_under_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        SessionFile.open(tmp_path / "a.pias").close()
        os.umask(0o077)
        SessionFile.open(tmp_path / "b.pias").close()
    finally:
        os.umask(old)
    assert (tmp_path / "a.pias").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b.pias").stat().st_mode & 0o777 == 0o600


def test_a_long_file_name_is_created(tmp_path: Path) -> None:
    """The temporary name adds 18 characters (a dot, 12 hex digits, ``.`` and ``.tmp``): a
    name of 255 - 18 characters still fits the file system's limit."""
    name = "s" * (255 - 18)
    with SessionFile.open(tmp_path / name) as session:
        assert session.report.created
    assert [p.name for p in tmp_path.iterdir()] == [name]


# ---- append_many ----------------------------------------------------------------------------


def test_appending_under_an_unknown_parent_names_it(tmp_path: Path) -> None:
    with SessionFile.open(tmp_path / "s.pias") as session:
        with pytest.raises(KeyError) as caught:
            session.append("t", {}, parent_id="nope")
        assert caught.value.args == ("nope",)
        assert len(session) == 0


def test_a_version_2_append_is_a_compact_entries_frame(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path, clock=clock) as session:
        single = session.append("t", {"a": 1})
        chain = session.append_many([("u", {}), ("v", {})])
    payloads = [payload for _, payload in frames(path)]
    assert [p[0] for p in payloads] == [codec.KIND_ENTRIES, codec.KIND_ENTRIES]
    assert codec.decode_entries(payloads[0]) == [(single.id, None, "t", CLOCK, {"a": 1})]
    assert [f[0] for f in codec.decode_entries(payloads[1])] == [e.id for e in chain]


def test_a_version_1_single_entry_is_at_slot_minus_one(tmp_path: Path) -> None:
    """A fold is given each entry's place: ``(frame offset, -1)`` for a frame of one bare
    entry, ``(frame offset, n)`` for the n-th entry of a batch."""
    path = tmp_path / "old.pias"
    v1_file(path, [Entry("root", None, "t", 1.0, {})])
    recorder = Recorder()
    with SessionFile.open(path, projection=recorder) as session:
        fold = session.fold()
        single = session.append("t", {})
        session.append_many([("u", {}), ("v", {})])
        offsets = [offset for offset, _ in frames(path)]
        assert [item[4] for item in fold.log] == [
            [offsets[0], -1],
            [offsets[1], -1],
            [offsets[2], 0],
            [offsets[2], 1],
        ]
        assert session.entry_at((offsets[1], -1)) == single


# ---- writes that fail, short writes, close ---------------------------------------------------


def test_a_write_whose_rollback_fails_leaves_the_session_unusable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.pias"
    real_write = os.write
    with SessionFile.open(path) as session:
        session.append("t", {})

        def half(fd: int, data: bytes | memoryview) -> int:
            real_write(fd, bytes(data)[:5])
            raise OSError(errno.EIO, "I/O error")

        def refuse(fd: int, length: int) -> None:
            raise OSError(errno.EIO, "I/O error")

        monkeypatch.setattr(sf.os, "write", half)
        monkeypatch.setattr(sf.os, "ftruncate", refuse)
        with pytest.raises(OSError, match="I/O error"):
            session.append("t", {"lost": True})
        monkeypatch.undo()
        with pytest.raises(OSError, match=r"^session file is unusable after a failed write$"):
            session.append("t", {})
        with pytest.raises(OSError, match=r"^session file is unusable after a failed write$"):
            session.append_chains([[("t", {})]])
    with SessionFile.open(path, readonly=True) as again:
        assert again.report.damage is not None  # the garbage the rollback could not remove
        assert again.report.entries == 1


def test_short_writes_are_continued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.pias"
    real_write = os.write
    with SessionFile.open(path) as session:
        monkeypatch.setattr(sf.os, "write", lambda fd, data: real_write(fd, bytes(data)[:7]))
        entry = session.append("t", {"text": "a longer entry than seven bytes"})
        monkeypatch.undo()
    with SessionFile.open(path, readonly=True) as again:
        assert again.report.ok
        assert again.branch() == (entry,)


def _count_fdatasync(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(sf.os, "fdatasync", fdatasync)
    return calls


def test_close_flushes_what_was_written_unless_told_not_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count_fdatasync(monkeypatch)
    session = SessionFile.open(tmp_path / "a.pias")
    session.append("t", {})
    session.close()
    assert len(calls) == 1
    session = SessionFile.open(tmp_path / "b.pias")
    session.append("t", {})
    session.close(flush=False)
    assert len(calls) == 1
    session = SessionFile.open(tmp_path / "c.pias")
    session.close()  # nothing written since the open
    assert len(calls) == 1


@pytest.mark.usefixtures("small_limit")
def test_append_many_refuses_a_frame_over_the_limit_plain_or_packed(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path, clock=clock) as session:
        session.append("root", {})
        session.append_many([("t", _data_of_chain_size(LIMIT))])  # exactly the limit: stored
        with pytest.raises(ValueError) as caught:
            session.append_many([("t", _data_of_chain_size(LIMIT + 1))])
        assert str(caught.value) == f"entry too large: {LIMIT + 1} bytes (at most {LIMIT})"
        # Random bytes do not deflate: the packed frame is larger than its plain CBOR.
        noise = {"b": os.urandom(LIMIT - 40)}
        assert len(cbor2.dumps([[bytes(8), bytes(8), "t", CLOCK, noise]])) <= LIMIT
        with pytest.raises(
            ValueError, match=r"^entry too large: \d+ bytes \(at most 1000\)$"
        ) as big:
            session.append_many([("t", noise)])
        assert int(str(big.value).split()[3]) > LIMIT
    with SessionFile.open(path, readonly=True) as again:
        assert again.report.ok
        assert [e.type for e in again.branch()] == ["root", "t"]


# ---- version 1 frames a reader refuses, and what it reads -----------------------------------


def _v1_with(path: Path, value: Any) -> int:
    """A version 1 session of one entry, then a frame holding ``value``; its offset."""
    v1_file(path, [Entry("root", None, "t", 1.0, {})])
    offset = path.stat().st_size
    with path.open("ab") as file:
        file.write(encode_frame(cbor2.dumps(value)))
    return offset


ENTRY_MAP: dict[str, Any] = {"id": "x", "parentId": "root", "type": "t", "timestamp": 2.0}


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ({"batch": [5]}, "entry is not a map"),
        ({**ENTRY_MAP, "id": "", "data": {}}, "entry id is not a non-empty string"),
        ({**ENTRY_MAP, "parentId": 5, "data": {}}, "entry parentId is neither a string nor null"),
        ({**ENTRY_MAP, "type": 5, "data": {}}, "entry type is not a string"),
        ({**ENTRY_MAP, "timestamp": "2", "data": {}}, "entry timestamp is not a number"),
        ({**ENTRY_MAP, "timestamp": True, "data": {}}, "entry timestamp is not a number"),
        ({**ENTRY_MAP, "data": [1]}, "entry data is not a map"),
        ({"batch": [{**ENTRY_MAP, "data": [1]}]}, "entry data is not a map"),
        (5, "frame is not a map"),
        ({"batch": []}, "batch is not a non-empty array"),
        ({"batch": {"a": 1}}, "batch is not a non-empty array"),
        ({"leaf": "nope"}, "leaf move to an unknown entry"),
        ({"leaf": 5}, "leaf move to an unknown entry"),
        ({"other": 1}, "unknown frame kind"),
    ],
)
def test_a_version_1_frame_that_does_not_fit_is_invalid_with_its_reason(
    tmp_path: Path, value: Any, detail: str
) -> None:
    path = tmp_path / "old.pias"
    offset = _v1_with(path, value)
    with SessionFile.open(path, readonly=True) as session:
        damage = session.report.damage
        assert damage is not None
        assert (damage.start, damage.reason, damage.detail) == (offset, "invalid", detail)
        assert session.ids() == ("root",)


def test_version_1_batches_and_leaf_moves_read_back(tmp_path: Path) -> None:
    path = tmp_path / "old.pias"
    batch = {
        "batch": [
            {**ENTRY_MAP, "id": "a", "data": {"n": 1}},
            {**ENTRY_MAP, "id": "b", "parentId": "a", "data": {"n": 2}},
        ]
    }
    offset = _v1_with(path, batch)
    with path.open("ab") as file:
        file.write(encode_frame(cbor2.dumps({"leaf": None})))
    recorder = Recorder()
    with SessionFile.open(path, readonly=True, projection=recorder) as session:
        assert session.report.ok
        assert session.leaf_id is None
        assert session.ids() == ("root", "a", "b")
        assert session.branch_ids("b") == ("root", "a", "b")
        assert session.entry_at((offset, 0)).id == "a"
        assert session.entry_at((offset, 1)) == Entry("b", "a", "t", 2.0, {"n": 2})
        with pytest.raises(sf.SessionFileError) as caught:
            session.entry_at((offset, 2))
        assert caught.value.path == path
        assert caught.value.reason == "unreadable"
        assert str(caught.value) == f"{path}: frame at {offset} changed on disk"
    with SessionFile.open(path) as session:
        session.move_leaf("a")
        session.move_leaf(None)
    with SessionFile.open(path, readonly=True) as session:
        assert session.report.ok
        assert session.leaf_id is None


# ---- in-memory sessions and reloads ---------------------------------------------------------


def test_an_in_memory_session_is_what_it_says(tmp_path: Path) -> None:
    recorder = Recorder()
    session = SessionFile.in_memory(clock=clock, projection=recorder)
    assert session.fsync is False
    assert session.readonly is False
    assert session.projection is recorder
    assert session.header.created == CLOCK
    assert session.report.entries == 0
    assert session.report.created
    given = {"n": 1}
    [(entry,)] = session.append_chains([[("t", given)]])
    assert recorder.steps == 1 and recorder.seen == [entry] and entry.data == given
    assert entry.timestamp == CLOCK


def test_a_reload_keeps_how_the_session_was_opened(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    recorder = Recorder()
    with SessionFile.open(
        path, fsync=True, clock=clock, projection=recorder, checkpoint_every=3
    ) as session:
        session.append("t", {})
        session.reload()
        assert session.fsync is True
        assert session.projection is recorder
        before = len(frames(path))
        session.append_many([("t", {}), ("t", {})])
        assert session.append("t", {}).timestamp == CLOCK
        kinds = [payload[0] for _, payload in frames(path)[before:]]
        assert kinds == [codec.KIND_ENTRIES, codec.KIND_CHECKPOINT, codec.KIND_ENTRIES]
        path.unlink()
        with pytest.raises(FileNotFoundError):
            session.reload()
    assert not path.exists()


# ---- sidecars of cut tails ------------------------------------------------------------------


def _torn(path: Path) -> tuple[int, bytes]:
    with SessionFile.open(path) as session:
        session.append("t", {})
    good = path.stat().st_size
    torn = encode_frame(b"\x01" + b"z" * 40)[:-10]
    with path.open("ab") as file:
        file.write(torn)
    return good, torn


def test_a_sidecar_never_replaces_another_and_is_private(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    good, torn = _torn(path)
    first = tmp_path / f"s.pias.cut-{good}"
    first.write_bytes(b"earlier")
    old = os.umask(0o022)
    try:
        with SessionFile.open(path) as session:
            report = session.report
    finally:
        os.umask(old)
    assert report.cut
    assert report.saved_to == tmp_path / f"s.pias.cut-{good}-1"
    assert report.saved_to.read_bytes() == torn
    assert report.saved_to.stat().st_mode & 0o777 == 0o600
    assert first.read_bytes() == b"earlier"


def test_after_a_hundred_sidecars_the_tail_is_cut_without_a_copy(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    good, _ = _torn(path)
    for n in range(100):
        (tmp_path / (f"s.pias.cut-{good}" + (f"-{n}" if n else ""))).write_bytes(b"")
    with SessionFile.open(path) as session:
        assert session.report.cut
        assert session.report.saved_to is None
    assert path.stat().st_size == good
    assert not (tmp_path / f"s.pias.cut-{good}-100").exists()


# ---- the part of the file before the checkpoint an open starts at ----------------------------


def _checkpointed(path: Path) -> dict[str, int]:
    """Frames: a, b, c, checkpoint 1, d, leaf move to c, checkpoint 2 (leaf c). Offsets by
    name."""
    with SessionFile.open(path, projection=Recorder(), checkpoint_every=3) as session:
        ids = [session.append("t", {"n": n}).id for n in range(4)]
        session.move_leaf(ids[2])
    kinds = [(offset, payload[0]) for offset, payload in frames(path)]
    assert [kind for _, kind in kinds] == [1, 1, 1, 3, 1, 2, 3]
    names = ["a", "b", "c", "checkpoint 1", "d", "leaf move", "checkpoint 2"]
    return dict(zip(names, [offset for offset, _ in kinds], strict=True))


def _flip_last_byte_of(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    end = offset + 8 + int.from_bytes(data[offset : offset + 4], "big")
    data[end - 1] ^= 0x01
    path.write_bytes(bytes(data))


def test_damage_before_the_checkpoint_is_reported_when_it_is_needed(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    at = _checkpointed(path)
    _flip_last_byte_of(path, at["d"])  # between the checkpoint's leaf (c) and the checkpoint
    with SessionFile.open(path, projection=Recorder(), readonly=True) as session:
        assert session.report.ok and session.report.checkpoint == at["checkpoint 2"]
        leaf = session.leaf_id
        assert (len(session), session.indexed) == (4, 1)
        with pytest.raises(sf.SessionFileError) as caught:
            session.ids()
        assert (caught.value.reason, caught.value.path) == ("unreadable", path)
        assert str(caught.value) == (
            f"{path}: frames before byte {at['checkpoint 2']}: frame at {at['d']}"
        )
        # The session goes on from its checkpoint.
        assert (len(session), session.indexed, session.leaf_id) == (4, 1, leaf)
        assert [item[2] for item in session.fold().log] == []


def test_a_damaged_older_checkpoint_does_not_stop_the_whole_index(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    at = _checkpointed(path)
    with SessionFile.open(path, readonly=True) as plain:
        ids = plain.ids()
    _flip_last_byte_of(path, at["checkpoint 1"])
    with SessionFile.open(path, projection=Recorder(), readonly=True) as session:
        assert session.report.checkpoint == at["checkpoint 2"]
        assert session.report.notes == ()
        assert session.ids() == ids
        assert session.indexed == 4
        with pytest.raises(ValueError, match=r"^no whole frame there, or its checksum fails$"):
            session.checkpoint_at(at["checkpoint 1"])


def test_entries_after_the_checkpoint_keep_their_parents_in_the_whole_index(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.pias"
    _checkpointed(path)
    with SessionFile.open(path, projection=Recorder()) as session:
        assert session.indexed == 1
        c = session.leaf_id
        e = session.append("t", {"n": "e"}).id
        session.move_leaf(None)
        r = session.append("t", {"n": "r"}).id
        s = session.append("t", {"n": "s"}).id
    with SessionFile.open(path, projection=Recorder(), readonly=True) as session:
        assert session.indexed == 4  # the stub and what follows the checkpoint
        ids = session.ids()  # the whole index
        assert ids[-3:] == (e, r, s)
        assert len(ids) == 7
        assert session.branch_ids(e)[-2:] == (c, e)
        assert session.branch_ids(s) == (r, s)
        assert session.parent_id(r) is None


class Refusing(Recorder):
    """Refuses the first entry of type ``bad`` it is fed, takes it the next time."""

    name = "refusing/1"

    def __init__(self) -> None:
        super().__init__()
        self.refused = False

    def empty(self) -> RecorderFold:
        owner = self

        class Fold(RecorderFold):
            def step(self, entry: Entry, loc: Loc) -> None:
                if entry.type == "bad" and not owner.refused:
                    owner.refused = True
                    raise RuntimeError("refused")
                super().step(entry, loc)

        return Fold(self)


def test_a_fold_that_refuses_an_entry_is_rebuilt_and_the_refusal_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    projection = Refusing()
    with SessionFile.open(tmp_path / "s.pias", projection=projection) as session:
        session.append("t", {})
        with caplog.at_level("ERROR", logger="pi_agent_ask.persistence.session_file"):
            session.append("bad", {})
        [record] = caplog.records
        assert record.getMessage() == f"{session}: the projection refused an entry"
        assert record.exc_info is not None
        session.append("t", {})
        assert [item[2] for item in session.fold().log] == ["t", "bad", "t"]


def test_the_fold_follows_a_branch_written_under_an_older_entry(tmp_path: Path) -> None:
    recorder = Recorder()
    with SessionFile.open(tmp_path / "s.pias", projection=recorder) as session:
        first = session.append("t", {}).id
        session.append("t", {})
        side = session.append("side", {}, parent_id=first)
        after = session.append("t", {})
        assert [item[0] for item in session.fold().log] == [first, side.id, after.id]


def test_a_read_only_session_refuses_writes_with_its_text(tmp_path: Path) -> None:
    SessionFile.open(tmp_path / "s.pias").close()
    with SessionFile.open(tmp_path / "s.pias", readonly=True) as session:
        for write in (
            lambda: session.append("t", {}),
            lambda: session.append_chains([[("t", {})]]),
            lambda: session.move_leaf(None),
        ):
            with pytest.raises(ValueError, match=r"^session file is open read-only$"):
                write()


def test_a_file_that_shrinks_under_a_reader_is_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        session.append_many([("t", {"n": n}) for n in range(5)])
    with SessionFile.open(path, readonly=True) as session:
        os.truncate(path, path.stat().st_size - 3)
        with pytest.raises(sf.SessionFileError) as caught:
            session.branch()
        assert caught.value.reason == "unreadable"
        assert str(caught.value) == "session file shrank under us"


def test_an_entry_whose_frame_changed_on_disk_says_so(tmp_path: Path) -> None:
    """``entry_at`` reads a frame the open checked without checking it again: a frame
    changed since is reported as changed, not as missing."""
    path = tmp_path / "s.pias"
    recorder = Recorder()
    with SessionFile.open(path) as session:
        session.append("t", {"text": "a" * 50})
        session.append("t", {"text": "b" * 50})
    with SessionFile.open(path, readonly=True, projection=recorder) as session:
        [_, (offset, slot)] = [tuple(item[4]) for item in session.fold().log]
        data = bytearray(path.read_bytes())
        data[offset + 8] = 0x00  # the kind byte: no longer an entries frame
        path.write_bytes(bytes(data))
        with pytest.raises(sf.SessionFileError) as caught:
            session.entry_at((offset, slot))
        assert str(caught.value) == f"{path}: frame at {offset} changed on disk"
