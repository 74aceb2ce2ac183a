"""Checkpoints and the session's small accessors: what the other session suites left unpinned,
found by mutation testing (``docs/mutation-persistence.md``, "checkpoints and accessors").

Sessions are real files in ``tmp_path``. Files no writer of this program produces (a version 1
map frame after a checkpoint, a checkpoint of odd content) are written as bytes with valid
checksums, so only the reader's checks can refuse them. A counting projection (``Counter``)
shows what a fold is fed and what it is restored from.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import cbor2
import pytest

from pi_agent_ask.persistence import checkpoints as cp
from pi_agent_ask.persistence import codec
from pi_agent_ask.persistence import frames as fr
from pi_agent_ask.persistence import session_file as sf
from pi_agent_ask.persistence.session_file import CHECKPOINT_MAGIC, SessionFile, encode_frame
from tests.test_mutants_session_file import frames

# ---- helpers --------------------------------------------------------------------------------


class CounterFold:
    def __init__(self, owner: Counter, live: int = 0) -> None:
        self.owner = owner
        self.count = live
        self.log: list[Any] = []

    def step(self, entry: sf.Entry, loc: sf.Loc) -> None:
        self.owner.fed.append(entry.id)
        self.count += 1
        self.log.append(entry.id)

    def live(self) -> int:
        return self.count


class Counter:
    """A projection whose live state is the number of entries folded; its log holds their ids.
    ``fed`` lists every entry a fold was given, ``restored`` every live state restored."""

    name = "counter/1"

    def __init__(self) -> None:
        self.fed: list[str] = []
        self.restored: list[Any] = []

    def empty(self) -> CounterFold:
        return CounterFold(self)

    def restore(self, live: Any) -> CounterFold:
        self.restored.append(live)
        if type(live) is not int:
            raise ValueError("not a count")
        return CounterFold(self, live)


def checkpoints(path: Path) -> list[int]:
    return [offset for offset, payload in frames(path) if payload[0] == codec.KIND_CHECKPOINT]


def append_frame(path: Path, payload: bytes) -> int:
    """Append a frame (its checksum holds) by hand; its offset."""
    offset = path.stat().st_size
    with path.open("ab") as file:
        file.write(encode_frame(payload))
    return offset


def checkpointed(path: Path, entries: int = 4, every: int = 3) -> list[str]:
    """A session of ``entries`` entries in a line, a checkpoint after each ``every``."""
    with SessionFile.open(path, projection=Counter(), checkpoint_every=every) as session:
        ids = [session.append("t", {"n": n}).id for n in range(entries)]
        session.fold()
    return ids


def v1_map(entry_id: str, parent_id: str | None) -> dict[str, Any]:
    return {"id": entry_id, "parentId": parent_id, "type": "old", "timestamp": 2.0, "data": {}}


# ---- version 1 frames after a checkpoint (only a hand-made writer produces them) -------------


def test_a_version_1_batch_after_a_checkpoint_naming_an_older_entry_indexes_the_whole_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.pias"
    ids = checkpointed(path)
    assert len(checkpoints(path)) == 1
    batch = {"batch": [v1_map("x", ids[0]), v1_map("y", "x")]}
    append_frame(path, cbor2.dumps(batch))
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        assert session.report.ok
        assert session.report.checkpoint is None  # the batch reaches back before it
        assert session.report.notes == ()  # the checkpoint was usable, the tail was not
        assert session.indexed == len(session) == 6
        assert session.leaf_id == "y"
        assert session.branch_ids() == (ids[0], "x", "y")


def test_a_version_1_leaf_move_after_a_checkpoint_to_an_older_entry_indexes_the_whole_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.pias"
    ids = checkpointed(path)
    append_frame(path, cbor2.dumps({"leaf": ids[1]}))
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        assert session.report.ok and session.report.checkpoint is None
        assert session.leaf_id == ids[1]
        assert session.branch_ids() == tuple(ids[:2])


# ---- the sidecar of a damaged tail -----------------------------------------------------------


def test_a_file_shrinking_while_its_tail_is_saved_keeps_what_was_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Someone truncates the file while the damaged tail is copied to its sidecar: the copy
    stops at the new end and still names the sidecar."""
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        session.append("t", {})
    good = path.stat().st_size
    torn = encode_frame(b"\x01" + b"z" * 40)[:-10]
    with path.open("ab") as file:
        file.write(torn)
    monkeypatch.setattr(fr, "READ_WINDOW", 16)  # the copy takes several reads
    real_write_all = fr.write_all
    shrunk: list[int] = []

    def write_all(fd: int, data: bytes) -> None:
        real_write_all(fd, data)
        if ".cut-" in str(Path(f"/proc/self/fd/{fd}").readlink()) and not shrunk:
            os.truncate(path, good + len(data))
            shrunk.append(len(data))

    monkeypatch.setattr(fr, "write_all", write_all)
    with SessionFile.open(path) as session:
        report = session.report
    assert shrunk == [16]
    assert report.cut
    assert report.saved_to == tmp_path / f"s.pias.cut-{good}"
    assert report.saved_to.read_bytes() == torn[:16]
    assert path.stat().st_size == good


# ---- what a checkpoint must hold to be used (hand-made copies of a real one) -----------------


def newest_checkpoint(path: Path) -> tuple[int, dict[str, Any]]:
    offset, payload = [f for f in frames(path) if f[1][0] == codec.KIND_CHECKPOINT][-1]
    return offset, codec.decode_checkpoint(payload, CHECKPOINT_MAGIC)


def append_checkpoint(path: Path, value: dict[str, Any]) -> int:
    return append_frame(path, codec.encode_checkpoint(value, CHECKPOINT_MAGIC))


def changed(value: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = dict(value)
    for key, new in changes.items():
        if new is DROP:
            del out[key]
        else:
            out[key] = new
    return out


DROP = object()
HERE = object()  # the offset of the checkpoint being written
BEFORE = object()  # one byte before it


def resolved(value: Any, offset: int) -> Any:
    if value is HERE:
        return offset
    if value is BEFORE:
        return offset - 1
    if isinstance(value, list):
        return [resolved(v, offset) for v in value]
    return value


def crafted(path: Path, **changes: Any) -> int:
    """A copy of the newest checkpoint with ``changes``, appended; its offset."""
    _, value = newest_checkpoint(path)
    offset = path.stat().st_size
    value = changed(value, **{k: resolved(v, offset) for k, v in changes.items()})
    assert append_checkpoint(path, value) == offset
    return offset


MALFORMED = [
    {"at": 5},
    {"at": {"a": 1}},
    {"at": DROP},
    {"at": [1, 2]},
    {"at": [1, 2, 3, 4]},
    {"at": [1, 2.0, 0]},
    {"at": [1, 2, True]},
    {"at": [True, 2, 0]},
    {"at": [0, 2, 0]},
    {"at": [-1, 2, 0]},
    {"at": [HERE, 2, 0]},
    {"entries": 0},
    {"entries": -1},
    {"entries": 1.0},
    {"entries": True},
    {"entries": DROP},
    {"prev": 0},
    {"prev": -5},
    {"prev": HERE},
    {"prev": True},
    {"prev": 1.0},
    {"prev": "1"},
    {"log": DROP},
    {"log": {"a": 1}},
    {"log": None},
]


@pytest.mark.parametrize("changes", MALFORMED)
def test_a_checkpoint_with_a_malformed_field_is_refused(
    tmp_path: Path, changes: dict[str, Any]
) -> None:
    path = tmp_path / "s.pias"
    checkpointed(path)
    real, _ = newest_checkpoint(path)
    offset = crafted(path, **changes)
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        with pytest.raises(ValueError, match=r"^malformed checkpoint$"):
            session.checkpoint_at(offset)
        assert session.report.checkpoint == real
        assert session.report.notes == (
            f"checkpoint at byte {offset} is unusable (malformed checkpoint); skipped",
        )


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"at": [1, 2, 0]},
        {"at": [BEFORE, 2, 0]},
        {"at": [1, 0, -1]},
        {"entries": 1},
        {"prev": None},
        {"prev": 1},
        {"prev": BEFORE},
        {"log": []},
        {"extra": "kept"},
    ],
)
def test_a_checkpoint_at_the_edges_of_what_is_allowed_is_read(
    tmp_path: Path, changes: dict[str, Any]
) -> None:
    path = tmp_path / "s.pias"
    checkpointed(path)
    _, real = newest_checkpoint(path)
    offset = crafted(path, **changes)
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        expected = changed(real, **{k: resolved(v, offset) for k, v in changes.items()})
        assert session.checkpoint_at(offset) == expected


@pytest.mark.parametrize(
    ("projection", "shown"), [("other/1", "'other/1'"), (DROP, "None"), (7, "7")]
)
def test_a_checkpoint_of_another_projection_names_it(
    tmp_path: Path, projection: Any, shown: str
) -> None:
    path = tmp_path / "s.pias"
    checkpointed(path)
    real, _ = newest_checkpoint(path)
    offset = crafted(path, projection=projection)
    reason = f"written for another projection ({shown})"
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        with pytest.raises(ValueError) as caught:
            session.checkpoint_at(offset)
        assert str(caught.value) == reason
        assert session.report.checkpoint == real
        assert session.report.notes == (
            f"checkpoint at byte {offset} is unusable ({reason}); skipped",
        )


def _unusable(path: Path, offset: int) -> str:
    """The reason the open gives for skipping the checkpoint at ``offset``."""
    real = checkpoints(path)[0]
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        assert session.report.checkpoint == real
        (note,) = session.report.notes
    head, tail = f"checkpoint at byte {offset} is unusable (", "); skipped"
    assert note.startswith(head) and note.endswith(tail)
    return note[len(head) : -len(tail)]


@pytest.mark.parametrize("leaf", [None, DROP])
def test_a_checkpoint_without_a_leaf_is_refused(tmp_path: Path, leaf: Any) -> None:
    path = tmp_path / "s.pias"
    checkpointed(path)
    offset = crafted(path, leaf=leaf)
    assert _unusable(path, offset) == "malformed checkpoint leaf"


def test_a_checkpoint_leaf_that_is_no_id_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    checkpointed(path)
    offset = crafted(path, leaf=5)
    assert _unusable(path, offset) == "an entry id is neither text, 8 bytes nor null"


@pytest.mark.parametrize("case", ["no frame there", "longer", "shorter", "another entry"])
def test_a_checkpoint_naming_its_leaf_elsewhere_is_refused(tmp_path: Path, case: str) -> None:
    """The leaf's place must hold a whole frame of the length named, holding that entry."""
    path = tmp_path / "s.pias"
    ids = checkpointed(path)
    _, real = newest_checkpoint(path)
    frame_off, frame_len, slot = real["at"]
    assert real["leaf"] == codec.encode_id(ids[2])
    changes = {
        "no frame there": {"at": [1, frame_len, slot]},  # inside the header
        "longer": {"at": [frame_off, frame_len + 1, slot]},
        "shorter": {"at": [frame_off, frame_len - 1, slot]},
        "another entry": {"leaf": codec.encode_id(ids[1])},
    }[case]
    offset = crafted(path, **changes)
    assert _unusable(path, offset) == "the entry it names is not there"


def test_a_checkpoint_naming_a_slot_its_frame_lacks_names_the_frame(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    checkpointed(path)
    _, real = newest_checkpoint(path)
    frame_off, frame_len, _slot = real["at"]
    offset = crafted(path, at=[frame_off, frame_len, 3])
    assert _unusable(path, offset) == f"{path}: frame at {frame_off} changed on disk"


def test_a_checkpoint_whose_state_does_not_fit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    checkpointed(path)
    offset = crafted(path, live="three")
    assert _unusable(path, offset) == "not a count"


# ---- finding checkpoints from the end of the file --------------------------------------------


def test_a_checkpoint_as_the_first_frame_is_found_and_refused(tmp_path: Path) -> None:
    """Only a hand-made file has one there; it names an entry after it, so it is refused."""
    path = tmp_path / "s.pias"
    checkpointed(path)
    (at,) = checkpoints(path)
    data = path.read_bytes()
    first = frames(path)[0][0]
    whole = data[at : at + 8 + int.from_bytes(data[at : at + 4], "big")]
    path.write_bytes(data[:first] + whole + data[first:at] + data[at + len(whole) :])
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        assert session.report.ok and session.report.checkpoint is None
        assert session.report.notes == (
            f"checkpoint at byte {first} is unusable (malformed checkpoint); skipped",
            "no usable checkpoint: the whole file was read",
        )
        assert len(session) == 4


def test_a_bare_checkpoint_frame_filling_the_file_is_found(tmp_path: Path) -> None:
    """A frame of only the kind byte and the magic: the smallest the search looks at."""
    path = tmp_path / "s.pias"
    with SessionFile.open(path, projection=Counter()):
        pass
    first = path.stat().st_size
    append_frame(path, bytes([codec.KIND_CHECKPOINT]) + CHECKPOINT_MAGIC)
    assert path.stat().st_size - first == 8 + 1 + len(CHECKPOINT_MAGIC)
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        assert session.report.ok and len(session) == 0
        (unusable, whole_file) = session.report.notes
        assert unusable.startswith(f"checkpoint at byte {first} is unusable (")
        assert whole_file == "no usable checkpoint: the whole file was read"


def test_a_checkpoint_whose_magic_opens_the_read_window_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.pias"
    checkpointed(path, entries=3)
    offset, payload = frames(path)[-1]
    assert payload[0] == codec.KIND_CHECKPOINT
    monkeypatch.setattr(fr, "READ_WINDOW", len(payload))  # the window starts at its magic
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        assert session.report.checkpoint == offset
        assert session.report.notes == ()


def test_a_damaged_checkpoint_is_tried_once_when_the_search_reads_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.pias"
    checkpointed(path, entries=6)
    older, newest = checkpoints(path)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01  # the newest checkpoint, the last frame
    path.write_bytes(bytes(data))
    monkeypatch.setattr(fr, "READ_WINDOW", len(data) - newest - 8)  # one window: its payload
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        assert session.report.checkpoint == older
        assert session.report.notes == (
            f"checkpoint at byte {newest} is damaged (checksum); skipped",
        )


def test_a_torn_checkpoint_is_no_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    checkpointed(path, entries=6)
    older, newest = checkpoints(path)
    path.write_bytes(path.read_bytes()[:-1])
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        damage = session.report.damage
        assert damage is not None and (damage.start, damage.reason) == (newest, "torn")
        assert session.report.checkpoint == older
        assert session.report.notes == ()


def test_a_checkpoint_of_the_largest_frame_size_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.pias"
    checkpointed(path, entries=3)
    offset, payload = frames(path)[-1]
    assert max(len(p) for _, p in frames(path)) == len(payload)
    monkeypatch.setattr(cp, "MAX_FRAME_BYTES", len(payload))
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        assert session.report.checkpoint == offset


# ---- checkpoint_at: a clear error where there can be no checkpoint ---------------------------


def test_checkpoint_at_refuses_a_session_without_a_projection_or_a_file(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    checkpointed(path)
    (offset,) = checkpoints(path)
    with (
        SessionFile.open(path, readonly=True) as plain,
        pytest.raises(ValueError, match=r"^session has no projection$"),
    ):
        plain.checkpoint_at(offset)
    memory = SessionFile.in_memory(projection=Counter())
    memory.append("t", {})
    with pytest.raises(ValueError, match=r"^an in-memory session has no checkpoints$"):
        memory.checkpoint_at(offset)
    memory.close()
    with pytest.raises(ValueError, match=r"^session file is closed$"):
        memory.checkpoint_at(offset)


# ---- when a checkpoint is written, and what it holds ------------------------------------------


def test_a_read_only_session_folds_without_writing_a_checkpoint(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:  # no projection: no checkpoints
        ids = [session.append("t", {"n": n}).id for n in range(5)]
    before = path.read_bytes()
    counter = Counter()
    with SessionFile.open(path, projection=counter, readonly=True, checkpoint_every=2) as session:
        assert session.fold().log == ids
        assert session.log() == ids
        assert session.log_prev is None
    assert path.read_bytes() == before
    assert caplog.records == []


def test_an_in_memory_session_folds_without_checkpoints(caplog: pytest.LogCaptureFixture) -> None:
    session = SessionFile.in_memory(projection=Counter())
    ids = [session.append("t", {"n": n}).id for n in range(3)]
    assert session.fold().log == ids
    ids += [session.append("t", {"n": n}).id for n in range(3, 3 + sf.CHECKPOINT_EVERY)]
    assert session.fold().log == ids
    assert session.log() == ids
    assert session.log_prev is None
    assert caplog.records == []


class Picky(Counter):
    """Refuses each entry of type ``bad`` the first time it is fed one."""

    name = "picky/1"

    def empty(self) -> CounterFold:
        return PickyFold(self)


class PickyFold(CounterFold):
    def step(self, entry: sf.Entry, loc: sf.Loc) -> None:
        if entry.type == "bad" and entry.id not in self.owner.fed:
            self.owner.fed.append(entry.id)
            raise ValueError("refused")
        super().step(entry, loc)


class Unstorable(Picky):
    """Its live state cannot be stored: every checkpoint write fails."""

    name = "unstorable/1"

    def empty(self) -> CounterFold:
        return UnstorableFold(self)


class UnstorableFold(PickyFold):
    def live(self) -> Any:
        return object()


def test_an_unusable_session_writes_no_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.pias"
    real_write = os.write
    with SessionFile.open(path, projection=Picky(), checkpoint_every=3) as session:
        ids = [session.append(kind, {}).id for kind in ("bad", "t", "t")]  # the fold is dropped

        def half(fd: int, data: bytes | memoryview) -> int:
            real_write(fd, bytes(data)[:5])
            raise OSError(5, "I/O error")

        def refuse(fd: int, length: int) -> None:
            raise OSError(5, "I/O error")

        monkeypatch.setattr(sf.os, "write", half)
        monkeypatch.setattr(sf.os, "ftruncate", refuse)
        with pytest.raises(OSError, match="I/O error"):
            session.append("t", {"lost": True})
        monkeypatch.undo()
        size = path.stat().st_size
        assert session.fold().log == ids  # three entries folded: a checkpoint would be due
        assert path.stat().st_size == size


def test_a_checkpoint_that_cannot_be_written_is_logged_and_the_session_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path, projection=Unstorable(), checkpoint_every=2) as session:
        session.append("t", {})
        session.fold()
        caplog.clear()
        session.append("t", {})  # two folded since the last checkpoint: one is due
        (record,) = caplog.records
        assert record.getMessage() == f"{session!r}: a checkpoint could not be written"
        assert record.levelname == "ERROR" and record.exc_info is not None
        caplog.clear()
        bad = session.append("bad", {})  # refused: the fold is dropped, no checkpoint tried
        assert [r.getMessage() for r in caplog.records] == [
            f"{session!r}: the projection refused an entry"
        ]
        assert bad.id in session
    assert checkpoints(path) == []


class Extended(Counter):
    """A projection with derived checkpoint fields: records what it was given."""

    name = "extended/1"

    def __init__(self, fail: type[Exception] | None = None) -> None:
        super().__init__()
        self.fail = fail
        self.calls: list[tuple[list[Any], int | None]] = []

    def checkpoint_fields(self, log: list[Any], prev: int | None, at: Any) -> dict[str, Any]:
        self.calls.append((list(log), prev))
        if self.fail is not None:
            raise self.fail("cannot")
        return {"derived": len(log), "prevLog": None if prev is None else at(prev)["log"]}


def test_a_checkpoint_holds_the_projections_derived_fields(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    projection = Extended()
    with SessionFile.open(path, projection=projection, checkpoint_every=2) as session:
        ids = [session.append("t", {}).id]
        session.fold()
        ids += [session.append("t", {}).id for _ in range(4)]
    first, second = checkpoints(path)
    assert projection.fed == ids
    assert projection.calls == [(ids[:2], None), (ids[2:4], first)]
    with SessionFile.open(path, projection=Extended(), readonly=True) as again:
        assert again.checkpoint_at(first)["derived"] == 2
        assert again.checkpoint_at(first)["prevLog"] is None
        assert again.checkpoint_at(second)["derived"] == 2
        assert again.checkpoint_at(second)["prevLog"] == ids[:2]
        assert again.log() == ids


@pytest.mark.parametrize("fail", [ValueError, OSError])
def test_derived_fields_that_cannot_be_computed_are_left_out(
    tmp_path: Path, fail: type[Exception]
) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path, projection=Extended(fail), checkpoint_every=2) as session:
        for _ in range(3):
            session.append("t", {})
        session.fold()
    (offset,) = checkpoints(path)
    with SessionFile.open(path, projection=Extended(), readonly=True) as again:
        value = again.checkpoint_at(offset)
        assert "derived" not in value
        assert again.report.checkpoint == offset


# ---- the log of a chain of checkpoints ---------------------------------------------------------


def test_the_log_of_a_chain_of_checkpoints_is_the_whole_branch(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    ids = checkpointed(path, entries=10, every=3)
    assert len(checkpoints(path)) == 3
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        assert session.log_prev == checkpoints(path)[-1]
        assert session.fold().log == [ids[9]]
        assert session.log() == ids
        assert session.indexed == 2  # the chain is read, not the entries before it


def test_an_unreadable_checkpoint_of_the_chain_is_logged_and_the_branch_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.pias"
    ids = checkpointed(path, entries=10, every=3)
    _first, middle, _newest = checkpoints(path)
    data = bytearray(path.read_bytes())
    data[middle + 8 + 30] ^= 0x01  # inside the middle checkpoint: its checksum fails
    path.write_bytes(bytes(data))
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        assert session.indexed == 2
        assert session.log() == ids
        assert session.indexed == 10
        assert session.log() == ids
        assert session.log_prev is None
    (record,) = caplog.records
    assert record.levelname == "WARNING"
    assert record.getMessage() == (
        f"{session!r}: checkpoint log unreadable (no whole frame there, or its checksum "
        "fails); reading the branch"
    )


# ---- accessors of a session opened from a checkpoint -------------------------------------------


def test_the_parent_of_the_checkpoint_leaf_is_read_from_before_it(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    ids = checkpointed(path)
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        assert session.indexed == 2  # the checkpoint's leaf and what follows
        assert session.parent_id(ids[3]) == ids[2]
        assert session.indexed == 2
        assert session.parent_id(ids[2]) == ids[1]  # before the checkpoint: the whole file
        assert session.indexed == 4
        assert session.parent_id(ids[0]) is None
        with pytest.raises(KeyError) as caught:
            session.parent_id("nope")
        assert caught.value.args == ("nope",)


def test_an_unhashable_id_is_refused_as_a_dict_would(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    checkpointed(path)
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        with pytest.raises(TypeError, match="unhashable"):
            _ = [] in session
        assert 5 not in session and None not in session
        assert session.indexed == 2  # no id that is not text is looked for before it


# ---- what a damaged frame is taken for -------------------------------------------------------


def _bad_checksum_frame(payload: bytes) -> bytes:
    frame = bytearray(encode_frame(payload))
    frame[4] ^= 0xFF
    return bytes(frame)


@pytest.mark.parametrize(
    "payload",
    [
        bytes([codec.KIND_CHECKPOINT]) + b"x" * len(CHECKPOINT_MAGIC) + b"state",
        bytes([codec.KIND_ENTRIES]) + CHECKPOINT_MAGIC + b"state",
    ],
    ids=["checkpoint kind without the magic", "the magic under another kind"],
)
def test_a_damaged_frame_is_a_damaged_checkpoint_only_with_kind_and_magic(
    tmp_path: Path, payload: bytes
) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        session.append("t", {})
    offset = path.stat().st_size
    with path.open("ab") as file:
        file.write(_bad_checksum_frame(payload))
    with SessionFile.open(path, readonly=True) as session:
        damage = session.report.damage
        assert damage is not None
        assert (damage.start, damage.reason, damage.detail) == (
            offset,
            "checksum",
            f"frame at {offset}",
        )
        assert session.report.notes == ()


def test_a_damaged_checkpoint_in_the_middle_is_skipped_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        session.append("t", {})
    offset = path.stat().st_size
    with path.open("ab") as file:
        file.write(_bad_checksum_frame(bytes([codec.KIND_CHECKPOINT]) + CHECKPOINT_MAGIC + b"s"))
    with SessionFile.open(path) as session:
        session.append("t", {})
    with SessionFile.open(path, readonly=True) as session:
        assert session.report.ok and len(session) == 2
        assert session.report.notes == (
            f"checkpoint at byte {offset} is damaged (checksum); skipped",
        )


# ---- headers and frozen data --------------------------------------------------------------------


def test_a_new_session_id_is_32_hex_digits(tmp_path: Path) -> None:
    header = sf.Header.new(clock=lambda: 7.0)
    assert len(header.session_id) == 32 and int(header.session_id, 16) >= 0
    assert (header.version, header.created, header.forked_from) == (sf.FORMAT_VERSION, 7.0, None)
    assert sf.Header.new(forked_from="abc").forked_from == "abc"
    assert sf.Header.new().session_id != header.session_id


def test_a_map_used_as_a_key_reads_back_frozen(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    key = sf.FrozenMap({"a": 1})
    with SessionFile.open(path) as session:
        written = session.append("t", {key: "v", (1, 2): "w"})
    with SessionFile.open(path, readonly=True) as session:
        entry = session.get(written.id)
    assert entry == written
    keys = sorted(entry.data, key=repr)
    assert [type(k) for k in keys] == [tuple, sf.FrozenMap]
    assert entry.data[key] == "v"


@pytest.mark.parametrize("where", ["memory", "file"])
def test_sets_and_byte_arrays_freeze(tmp_path: Path, where: str) -> None:
    entry = sf.Entry("a", None, "t", 1.0, {"s": {1, 2}, "f": frozenset({3}), "b": bytearray(b"xy")})
    assert entry.data == {"s": frozenset({1, 2}), "f": frozenset({3}), "b": b"xy"}
    assert [type(entry.data[k]) for k in ("s", "f", "b")] == [frozenset, frozenset, bytes]
    session = (
        SessionFile.in_memory()
        if where == "memory"
        else SessionFile.open(tmp_path / "s.pias", readonly=False)
    )
    with session:
        written = session.append("t", {"s": {1, 2}, "t": ({4},)})
        assert written.data == {"s": frozenset({1, 2}), "t": (frozenset({4}),)}
        assert session.get(written.id).data == written.data
        assert type(session.get(written.id).data["s"]) is frozenset


# ---- the accessors' errors and texts ----------------------------------------------------------


def test_a_session_without_a_projection_has_no_fold(tmp_path: Path) -> None:
    with SessionFile.open(tmp_path / "s.pias") as session:
        with pytest.raises(ValueError, match=r"^session has no projection$"):
            session.fold()
        with pytest.raises(ValueError, match=r"^session has no projection$"):
            session.log()


def test_unknown_ids_are_named_in_the_key_error(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    checkpointed(path)
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        for call in (session.get, session.branch, session.branch_ids, session.parent_id):
            with pytest.raises(KeyError) as caught:
                call("nope")
            assert caught.value.args == ("nope",)


def test_a_session_shows_where_it_is_its_size_and_leaf(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        assert repr(session) == f"<SessionFile {path} entries=0 leaf=None>"
        leaf = session.append("t", {}).id
        assert repr(session) == f"<SessionFile {path} entries=1 leaf={leaf!r}>"
    memory = SessionFile.in_memory()
    leaf = memory.append("t", {}).id
    assert repr(memory) == f"<SessionFile memory entries=1 leaf={leaf!r}>"


def test_iter_entries_reads_the_whole_file_in_order(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    ids = checkpointed(path)
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        assert session.indexed == 2
        entries = session.iter_entries()
        assert [e.id for e in entries] == ids
        assert [e.data for e in session.iter_entries()] == [{"n": n} for n in range(4)]
    with pytest.raises(ValueError, match=r"^session file is closed$"):
        session.iter_entries()


def test_entry_data_must_be_a_mapping_or_none() -> None:
    assert sf.Entry("a", None, "t", 1.0, None).data == {}
    assert type(sf.Entry("a", None, "t", 1.0, None).data) is sf.FrozenMap
    assert type(sf.Entry("a", None, "t", 1.0).data) is sf.FrozenMap
    for data, kind in (([1], "list"), ("x", "str"), (5, "int")):
        with pytest.raises(TypeError) as caught:
            sf.Entry("a", None, "t", 1.0, data)
        assert str(caught.value) == f"entry data must be a mapping, not {kind}"


def test_a_checkpoint_magic_across_the_read_window_edge_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.pias"
    checkpointed(path, entries=3)
    offset, payload = frames(path)[-1]
    assert payload[0] == codec.KIND_CHECKPOINT
    # The first window starts one byte after the magic's first: the next one must reach it.
    monkeypatch.setattr(fr, "READ_WINDOW", len(payload) - 1)
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        assert session.report.checkpoint == offset
        assert session.report.notes == ()


def _flip_last_byte_of(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset + 8 + int.from_bytes(data[offset : offset + 4], "big") - 1] ^= 0x01
    path.write_bytes(bytes(data))


def test_an_older_checkpoint_at_the_start_of_the_read_window_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.pias"
    checkpointed(path, entries=9)
    _first, middle, newest = checkpoints(path)
    _flip_last_byte_of(path, newest)
    # One window from the middle checkpoint's magic to the end: both are in it.
    monkeypatch.setattr(fr, "READ_WINDOW", path.stat().st_size - middle - 8)
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        assert session.report.checkpoint == middle


def test_each_checkpoint_is_tried_once_across_read_windows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two damaged checkpoints, then a good one: within the three tries only if no checkpoint
    is tried twice."""
    path = tmp_path / "s.pias"
    checkpointed(path, entries=9)
    first, middle, newest = checkpoints(path)
    _flip_last_byte_of(path, newest)
    _flip_last_byte_of(path, middle)
    size = path.stat().st_size
    monkeypatch.setattr(fr, "READ_WINDOW", size - newest - 8)  # the newest one's payload
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        assert session.report.checkpoint == first
        assert session.report.notes == (
            f"checkpoint at byte {newest} is damaged (checksum); skipped",
            f"checkpoint at byte {middle} is damaged (checksum); skipped",
        )
