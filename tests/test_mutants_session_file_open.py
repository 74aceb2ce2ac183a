"""How a session file is opened and read, pinned where mutation testing found the other suites
silent (``docs/mutation-persistence.md``, "``session_file.py``: the open path").

Sessions are real files in ``tmp_path``; a damaged file is written as bytes: whole frames
(``encode_frame``) followed by the damage, so the reason and the detail an open reports are
seen exactly.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import cbor2
import pytest

from pi_agent_ask.persistence import codec, session_index
from pi_agent_ask.persistence import frames as fr
from pi_agent_ask.persistence import session_file as sf
from pi_agent_ask.persistence.session_file import (
    Damage,
    Entry,
    Header,
    SessionFile,
    SessionFileError,
    encode_frame,
)
from tests.test_mutants_session_file import Recorder, _checkpointed, _flip_last_byte_of, frames

# ---- helpers --------------------------------------------------------------------------------


def header_frame(version: int = 2) -> bytes:
    return encode_frame(Header(version, 1.0e9, "hand-made").to_cbor())


def v1_entry(entry_id: str, parent: str | None = None) -> bytes:
    return encode_frame(Entry(entry_id, parent, "t", 1.0, {}).to_cbor())


def damage_of(path: Path) -> Damage | None:
    """The damage a read-only open reports (the file is not changed)."""
    before = path.read_bytes()
    with SessionFile.open(path, readonly=True) as session:
        damage = session.report.damage
    assert path.read_bytes() == before
    return damage


# ---- a torn tail ----------------------------------------------------------------------------


@pytest.mark.parametrize("tail", [1, 3, 7])
def test_a_tail_shorter_than_a_frame_header_is_torn_with_the_bytes_present(
    tmp_path: Path, tail: int
) -> None:
    path = tmp_path / "s.pias"
    good = header_frame(1) + v1_entry("a")
    path.write_bytes(good + b"\x00" * tail)
    assert damage_of(path) == Damage(
        len(good), len(good) + tail, "torn", f"{tail} of 8 frame header bytes"
    )


@pytest.mark.parametrize(
    ("length", "reason", "detail"),
    [
        (0, "length", "frame declares 0 bytes"),
        (5, "torn", "frame declares 5 bytes, 0 present"),
    ],
)
def test_a_tail_of_exactly_a_frame_header_is_judged_by_its_length(
    tmp_path: Path, length: int, reason: str, detail: str
) -> None:
    path = tmp_path / "s.pias"
    good = header_frame(1) + v1_entry("a")
    path.write_bytes(good + length.to_bytes(4, "big") + b"\x00" * 4)
    assert damage_of(path) == Damage(len(good), len(good) + 8, reason, detail)  # type: ignore[arg-type]


@pytest.mark.parametrize("left", [3, 8 + 2])
def test_a_file_cut_before_the_checkpoint_while_it_is_indexed_ended_early(
    tmp_path: Path, left: int
) -> None:
    """The part before the checkpoint an open started at is read later; a file cut since
    then (to less than a frame header, or within the first frame) ended early."""
    path = tmp_path / "s.pias"
    at = _checkpointed(path)
    with SessionFile.open(path, projection=Recorder(), readonly=True) as session:
        assert session.report.checkpoint == at["checkpoint 2"]
        header_end = 8 + int.from_bytes(path.read_bytes()[:4], "big")
        os.truncate(path, header_end + left)
        with pytest.raises(SessionFileError) as caught:
            session.ids()
        assert caught.value.reason == "unreadable"
        assert str(caught.value) == (
            f"{path}: frames before byte {at['checkpoint 2']}: file ended early"
        )


def padded_v1_entry(entry_id: str, payload_length: int) -> bytes:
    """A version 1 entry frame whose payload is exactly ``payload_length`` bytes."""

    def payload(pad: int) -> bytes:
        return Entry(entry_id, None, "t", 1.0, {"pad": "x" * pad}).to_cbor()

    pad = payload_length - len(payload(0))
    pad += payload_length - len(payload(pad))  # the string's head grows with it
    data = payload(pad)
    assert len(data) == payload_length
    return encode_frame(data)


@pytest.mark.parametrize(
    ("length", "reason", "detail"),
    [
        (0, "length", "frame declares 0 bytes"),
        (5, "torn", "frame declares 5 bytes, 0 present"),
    ],
)
def test_a_last_frame_header_across_the_read_window_is_read_whole(
    tmp_path: Path, length: int, reason: str, detail: str
) -> None:
    """A scan reads the file a window (1 MiB) at a time. A frame header that starts 4 bytes
    before the window ends is read again from its start: all 8 bytes are there, so it is
    judged by the length it declares, not as a torn header."""
    path = tmp_path / "s.pias"
    head = header_frame(1)
    big = padded_v1_entry("a", fr.READ_WINDOW - 12)  # ends 4 bytes before the window does
    good = head + big
    path.write_bytes(good + length.to_bytes(4, "big") + b"\x00" * 4)
    assert damage_of(path) == Damage(len(good), len(good) + 8, reason, detail)  # type: ignore[arg-type]


@pytest.mark.parametrize("past", [1, 6, 200])
def test_a_frame_running_past_the_read_window_is_read_whole(tmp_path: Path, past: int) -> None:
    """A frame whose header lies inside the scan's window and whose payload runs ``past``
    bytes beyond it is read again from its start, not cut at the window's end."""
    path = tmp_path / "s.pias"
    small = v1_entry("b", "a")
    small_payload = len(small) - 8
    before = fr.READ_WINDOW - 8 - (small_payload - past)  # where the small frame starts
    path.write_bytes(header_frame(1) + padded_v1_entry("a", before - 8) + small)
    with SessionFile.open(path, readonly=True) as session:
        assert session.report.ok
        assert session.ids() == ("a", "b")
        assert session.get("b").parent_id == "a"


def test_the_largest_frame_length_is_read_and_one_more_is_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.pias"
    first = v1_entry("a")
    limit = len(first) - 8
    monkeypatch.setattr(session_index, "MAX_FRAME_BYTES", limit)
    good = header_frame(1) + first
    path.write_bytes(good)
    with SessionFile.open(path, readonly=True) as session:
        assert session.report.ok and session.ids() == ("a",)
    path.write_bytes(good + (limit + 1).to_bytes(4, "big") + b"\x00" * 4 + b"\x00" * (limit + 1))
    assert damage_of(path) == Damage(
        len(good), len(good) + 8 + limit + 1, "length", f"frame declares {limit + 1} bytes"
    )


# ---- which checkpoint an open starts at -----------------------------------------------------


class Other(Recorder):
    name = "other/1"


def checkpoints_of(path: Path, entries: int) -> list[int]:
    """A session of ``entries`` entries with a checkpoint after each; their offsets."""
    with SessionFile.open(path, projection=Recorder(), checkpoint_every=1) as session:
        for n in range(entries):
            session.append("t", {"n": n})
    return [offset for offset, payload in frames(path) if payload[0] == codec.KIND_CHECKPOINT]


def test_an_open_tries_three_checkpoints_then_reads_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    offsets = checkpoints_of(path, 5)
    assert len(offsets) == 5
    with SessionFile.open(path, projection=Other(), readonly=True) as session:
        assert session.report.checkpoint is None
        assert session.report.notes == (
            *(
                f"checkpoint at byte {offset} is unusable (written for another projection "
                "('recorder/1')); skipped"
                for offset in reversed(offsets[-3:])
            ),
            "no usable checkpoint: the whole file was read",
        )
        assert len(session.ids()) == 5 and session.indexed == 5


def test_a_damaged_newest_checkpoint_leaves_the_one_before_it(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    offsets = checkpoints_of(path, 3)
    with SessionFile.open(path, readonly=True) as plain:
        ids = plain.ids()
    _flip_last_byte_of(path, offsets[-1])
    with SessionFile.open(path, projection=Recorder(), readonly=True) as session:
        assert session.report.ok
        assert session.report.checkpoint == offsets[-2]
        assert session.report.notes == (
            f"checkpoint at byte {offsets[-1]} is damaged (checksum); skipped",
        )
        assert session.ids() == ids


def test_a_damaged_checkpoint_is_noted_by_an_open_without_a_projection(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    offsets = checkpoints_of(path, 2)
    _flip_last_byte_of(path, offsets[0])
    with SessionFile.open(path, readonly=True) as session:
        assert session.report.ok and session.report.checkpoint is None
        assert session.report.notes == (
            f"checkpoint at byte {offsets[0]} is damaged (checksum); skipped",
        )
        assert len(session.ids()) == 2


def test_a_damaged_file_without_checkpoints_opened_with_a_projection(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    good = header_frame() + encode_frame(
        codec.encode_entries([("0011223344556677", None, "t", 1.0, {})])[0]
    )
    path.write_bytes(good + b"\x00\x00\x00")
    with SessionFile.open(path, projection=Recorder(), readonly=True) as session:
        assert session.report.damage == Damage(
            len(good), len(good) + 3, "torn", "3 of 8 frame header bytes"
        )
        assert session.report.notes == ()


def test_a_damaged_only_checkpoint_is_noted_once_and_the_file_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    [offset] = checkpoints_of(path, 1)
    _flip_last_byte_of(path, offset)
    with SessionFile.open(path, projection=Recorder(), readonly=True) as session:
        assert session.report.ok and session.report.checkpoint is None
        assert session.report.notes == (
            f"checkpoint at byte {offset} is damaged (checksum); skipped",
            "no usable checkpoint: the whole file was read",
        )
        assert len(session.ids()) == 1


# ---- the header -----------------------------------------------------------------------------


def refusal(path: Path, content: bytes) -> SessionFileError:
    """What a writable open says of a file holding ``content``; the file is left as it was."""
    path.write_bytes(content)
    with pytest.raises(SessionFileError) as caught:
        SessionFile.open(path)
    assert path.read_bytes() == content
    assert caught.value.path == path
    return caught.value


GOOD_HEADER = {"magic": sf.MAGIC, "version": 2, "created": 1.5, "sessionId": "s"}
NOT_OURS = ("not-a-session-file", "not a pi-agent-ask session file")
NO_VERSION = ("damaged-header", "session header has no valid version")
MALFORMED = ("damaged-header", "session header fields are malformed")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"magic": "pi-agent-ask/other"}, NOT_OURS),
        ({"magic": None}, NOT_OURS),
        ({"version": None}, NO_VERSION),
        ({"version": True}, NO_VERSION),
        ({"version": "2"}, NO_VERSION),
        ({"version": 0}, NO_VERSION),
        ({"version": 1.0}, NO_VERSION),
        ({"created": None}, MALFORMED),
        ({"created": True}, MALFORMED),
        ({"created": "1.5"}, MALFORMED),
        ({"sessionId": None}, MALFORMED),
        ({"sessionId": 5}, MALFORMED),
        ({"forkedFrom": 5}, MALFORMED),
    ],
)
def test_a_header_field_that_does_not_fit_is_refused_with_its_reason(
    tmp_path: Path, change: dict[str, object], expected: tuple[str, str]
) -> None:
    path = tmp_path / "s.pias"
    fields = {**GOOD_HEADER, **change}
    fields = {key: value for key, value in fields.items() if value is not None}
    error = refusal(path, encode_frame(cbor2.dumps(fields)))
    assert (error.reason, str(error), error.version) == (
        expected[0],
        f"{path}: {expected[1]}",
        None,
    )


def test_a_header_that_is_not_a_map_is_not_a_session_file(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    error = refusal(path, encode_frame(cbor2.dumps([sf.MAGIC, 2])))
    assert (error.reason, str(error)) == ("not-a-session-file", f"{path}: {NOT_OURS[1]}")


def test_a_newer_version_is_refused_with_the_version(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    error = refusal(path, encode_frame(cbor2.dumps({**GOOD_HEADER, "version": 3})))
    assert (error.reason, error.version) == ("future-version", 3)
    assert str(error) == (
        f"{path}: session file format version 3 is newer than this program's (2); "
        "upgrade pi-agent-ask to open it"
    )


@pytest.mark.parametrize(
    ("fields", "header"),
    [
        ({**GOOD_HEADER, "version": 1, "created": 7}, Header(1, 7.0, "s")),
        ({**GOOD_HEADER, "forkedFrom": "parent"}, Header(2, 1.5, "s", "parent")),
        ({**GOOD_HEADER, "forkedFrom": None}, Header(2, 1.5, "s")),
    ],
)
def test_a_header_that_fits_is_read_as_it_is(
    tmp_path: Path, fields: dict[str, object], header: Header
) -> None:
    path = tmp_path / "s.pias"
    path.write_bytes(encode_frame(cbor2.dumps(fields)) + v1_entry("a"))
    with SessionFile.open(path, readonly=True) as session:
        assert session.header == header
        assert type(session.header.created) is float
        assert session.report.ok and session.ids() == ("a",)


# ---- frames after a checkpoint, and leaf moves ----------------------------------------------


def v2_entry(entry_id: str, parent: str | None = None) -> bytes:
    return encode_frame(codec.encode_entries([(entry_id, parent, "t", 1.0, {})])[0])


def test_a_leaf_move_to_an_unknown_entry_is_invalid(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    good = header_frame() + v2_entry("0011223344556677")
    moved = encode_frame(codec.encode_leaf("8899aabbccddeeff"))
    path.write_bytes(good + moved)
    assert damage_of(path) == Damage(
        len(good), len(good) + len(moved), "invalid", "leaf move to an unknown entry"
    )


def test_an_entry_after_the_checkpoint_under_an_older_one_indexes_the_whole_file(
    tmp_path: Path,
) -> None:
    """Its parent lies before the checkpoint's leaf: not damage, the open reads it all."""
    path = tmp_path / "s.pias"
    with SessionFile.open(path, projection=Recorder(), checkpoint_every=3) as session:
        a, b, c = (session.append("t", {"n": n}).id for n in range(3))
        side = session.append("t", {"n": "side"}, parent_id=a).id
    with SessionFile.open(path, projection=Recorder(), readonly=True) as session:
        assert session.report.ok and session.report.notes == ()
        assert session.report.checkpoint is None
        assert session.indexed == 4
        assert session.ids() == (a, b, c, side)
        assert session.branch_ids() == (a, side)


def test_a_file_shrinking_inside_its_last_frame_while_it_is_read_is_a_torn_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file was measured longer than it is when read: the last frame's header is there,
    its payload is not all there."""
    path = tmp_path / "s.pias"
    good = header_frame(1) + v1_entry("a")
    cut = v1_entry("b", "a")
    path.write_bytes(good + cut[:-5])
    real_fstat = os.fstat

    class Stat:
        def __init__(self, fd: int) -> None:
            self.st_size = real_fstat(fd).st_size + 5
            self.st_mode = real_fstat(fd).st_mode

    monkeypatch.setattr(sf.os, "fstat", Stat)
    with SessionFile.open(path, readonly=True) as session:
        assert session.report.damage == Damage(
            len(good), len(good) + len(cut), "torn", "file ended early"
        )
        assert session.ids() == ("a",)


def test_a_session_whose_damaged_tail_was_cut_appends_where_the_tail_was(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    good = header_frame(1) + v1_entry("a")
    path.write_bytes(good + b"\x00\x00\x00\x09garbage")
    with SessionFile.open(path) as session:
        assert session.report.cut and session.report.damage is not None
        assert path.stat().st_size == len(good)
        entry = session.append("t", {"after": "cut"})
        assert session.get(entry.id) == entry
        assert session.branch_ids() == ("a", entry.id)
    with SessionFile.open(path, readonly=True) as again:
        assert again.report.ok
        assert again.branch()[-1] == entry


# ---- what an open says ----------------------------------------------------------------------


def test_the_report_of_a_clean_open_says_created_or_opened(tmp_path: Path) -> None:
    assert SessionFile.in_memory().report.describe() == "in-memory session: created, 0 entries"
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        assert session.report.describe() == f"{path}: created, 0 entries"
        session.append("t", {})
    with SessionFile.open(path, readonly=True) as session:
        assert session.report.describe() == f"{path}: opened, 1 entries"


def test_the_report_names_every_note(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    offsets = checkpoints_of(path, 3)
    with SessionFile.open(path, projection=Other(), readonly=True) as session:
        notes = session.report.notes
        assert len(notes) == 4
        assert session.report.describe() == f"{path}: opened, 3 entries; " + "; ".join(notes)
        assert str(offsets[0]) in notes[2]


def test_the_report_of_a_damaged_file_says_what_was_done_with_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    good = header_frame(1) + v1_entry("a")
    path.write_bytes(good + b"\x00\x00\x00")
    end = len(good) + 3
    torn = "incomplete frame at the end of the file (an interrupted write)"
    with SessionFile.open(path, readonly=True) as session:
        assert session.report.describe() == (
            f"{path}: kept 1 entries; 3 bad bytes {len(good)}..{end} ignored (file not "
            f"modified): {torn} (3 of 8 frame header bytes)"
        )
    with SessionFile.open(path) as session:
        saved = tmp_path / f"s.pias.cut-{len(good)}"
        assert session.report.saved_to == saved
        assert session.report.describe() == (
            f"{path}: kept 1 entries; 3 bad bytes {len(good)}..{end} cut: {torn} "
            f"(3 of 8 frame header bytes); a copy of the cut bytes is in {saved}"
        )
    assert saved.read_bytes() == b"\x00\x00\x00"


# ---- entry_at -------------------------------------------------------------------------------


def test_an_in_memory_entry_is_read_at_the_place_its_fold_was_given(tmp_path: Path) -> None:
    recorder = Recorder()
    session = SessionFile.in_memory(projection=recorder)
    single = session.append("one", {"n": 1})
    batch = session.append_many([("two", {"n": 2}), ("three", {"n": 3})])
    places = [tuple(item[4]) for item in session.fold().log]
    assert [session.entry_at(place) for place in places] == [single, *batch]  # type: ignore[arg-type]
    assert places[1][0] == places[2][0] and places[1][1] != places[2][1]


def test_entry_at_a_place_holding_no_frame_is_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        session.append("t", {})
        end = path.stat().st_size
        with pytest.raises(SessionFileError) as caught:
            session.entry_at((end, 0))
        assert (caught.value.reason, caught.value.path) == ("unreadable", path)
        assert str(caught.value) == f"{path}: no frame at {end}"


# ---- version 1 frames that do not fit -------------------------------------------------------


def test_a_frame_that_is_not_cbor_names_the_decoder_error(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    good = header_frame(1) + v1_entry("a")
    broken = b"\xa1\x61"  # a map whose first key stops after its head
    try:
        cbor2.loads(broken)
    except Exception as exc:
        name = type(exc).__name__
    assert name != "NoneType"
    path.write_bytes(good + encode_frame(broken))
    assert damage_of(path) == Damage(len(good), len(good) + 8 + len(broken), "undecodable", name)


def test_a_version_1_entry_under_an_unknown_parent_is_invalid(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    good = header_frame(1) + v1_entry("a")
    orphan = v1_entry("b", "nobody")
    path.write_bytes(good + orphan)
    assert damage_of(path) == Damage(
        len(good), len(good) + len(orphan), "invalid", "entry 'b' has unknown parent"
    )


def test_a_version_1_batch_after_a_checkpoint_under_an_older_entry_reads_the_whole_file(
    tmp_path: Path,
) -> None:
    """Another writer's map frame after the checkpoint, naming an entry before its leaf: the
    open indexes the whole file instead of calling it damage."""
    path = tmp_path / "s.pias"
    with SessionFile.open(path, projection=Recorder(), checkpoint_every=3) as session:
        a, b, c = (session.append("t", {"n": n}).id for n in range(3))
    item = {"id": "x", "parentId": a, "type": "t", "timestamp": 1.0, "data": {}}
    with path.open("ab") as out:
        out.write(encode_frame(cbor2.dumps({"batch": [item]})))
    with SessionFile.open(path, projection=Recorder(), readonly=True) as session:
        assert session.report.ok and session.report.checkpoint is None
        assert session.ids() == (a, b, c, "x")
        assert session.branch_ids() == (a, "x")


# ---- how the file is opened -----------------------------------------------------------------


@pytest.mark.parametrize("readonly", [True, False])
def test_the_file_is_opened_without_blocking_or_a_controlling_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, readonly: bool
) -> None:
    """Read-only opens never ask for write access; writable ones append. Neither blocks on
    what was swapped in for the file, nor makes it a controlling terminal."""
    path = tmp_path / "s.pias"
    SessionFile.open(path).close()
    flags: list[int] = []
    real_open = os.open

    def recording_open(target: object, how: int, *rest: int) -> int:
        if target == path:
            flags.append(how)
        return real_open(target, how, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(sf.os, "open", recording_open)
    with SessionFile.open(path, readonly=readonly):
        pass
    [how] = flags
    assert how & os.O_ACCMODE == (os.O_RDONLY if readonly else os.O_RDWR)
    assert bool(how & os.O_APPEND) is not readonly
    for flag in (os.O_NONBLOCK, os.O_NOCTTY, os.O_CLOEXEC):
        assert how & flag == flag


@pytest.mark.parametrize(("junk", "reason"), [(236, "damaged-header"), (237, "not-a-session-file")])
def test_the_magic_in_the_first_256_bytes_tells_a_damaged_header(
    tmp_path: Path, junk: int, reason: str
) -> None:
    path = tmp_path / "s.pias"
    error = refusal(path, b"\x00" * junk + sf.MAGIC.encode())
    text = {
        "damaged-header": "session header frame is damaged",
        "not-a-session-file": "not a pi-agent-ask session file",
    }[reason]
    assert (error.reason, str(error)) == (reason, f"{path}: {text}")


@pytest.mark.parametrize(("size", "opens"), [(64 * 1024, True), (64 * 1024 + 1, False)])
def test_a_header_of_up_to_64_kib_is_read(tmp_path: Path, size: int, opens: bool) -> None:
    path = tmp_path / "s.pias"
    fields = {**GOOD_HEADER, "sessionId": ""}
    fields["sessionId"] = "s" * (size - len(cbor2.dumps(fields)) - 2)  # a 3-byte text head
    payload = cbor2.dumps(fields)
    assert len(payload) == size
    content = encode_frame(payload) + v1_entry("a")
    if opens:
        path.write_bytes(content)
        with SessionFile.open(path, readonly=True) as session:
            assert session.header.session_id == fields["sessionId"]
            assert session.ids() == ("a",)
    else:
        error = refusal(path, content)
        assert (error.reason, str(error)) == (
            "damaged-header",
            f"{path}: session header frame is damaged",
        )


def test_a_damaged_open_logs_its_report_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.pias"
    path.write_bytes(header_frame(1) + v1_entry("a") + b"\x00\x00\x00")
    logger = "pi_agent_ask.persistence.session_file"
    with (
        caplog.at_level("WARNING", logger=logger),
        SessionFile.open(path, readonly=True) as session,
    ):
        [record] = caplog.records
        assert record.getMessage() == session.report.describe()


# ---- frames that stopped decoding, files that are not regular -------------------------------


def test_a_header_frame_that_is_not_cbor_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    error = refusal(path, encode_frame(b"\xa1\x61") + v1_entry("a"))
    assert (error.reason, str(error)) == ("not-a-session-file", f"{path}: {NOT_OURS[1]}")


def rewrite_frame(path: Path, offset: int, payload: bytes) -> None:
    """Put ``payload`` in place of the frame's at ``offset`` (same length, checksum kept)."""
    data = bytearray(path.read_bytes())
    length = int.from_bytes(data[offset : offset + 4], "big")
    assert len(payload) <= length
    data[offset + 8 : offset + 8 + length] = payload.ljust(length, b"\x00")
    path.write_bytes(bytes(data))


def changed_on_disk(path: Path, offset: int) -> tuple[str, str]:
    return ("unreadable", f"{path}: frame at {offset} changed on disk")


def test_a_frame_that_stopped_being_cbor_changed_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    head = header_frame(1)
    path.write_bytes(head + v1_entry("a"))
    with SessionFile.open(path, readonly=True) as session:
        assert session.report.ok
        rewrite_frame(path, len(head), b"\xff")
        with pytest.raises(SessionFileError) as caught:
            session.branch()
        assert (caught.value.reason, str(caught.value)) == changed_on_disk(path, len(head))


def _one_v2_entry() -> bytes:
    return codec.encode_entries([("8899aabbccddeeff", None, "t", 1.0, {})])[0]


@pytest.mark.parametrize(
    ("version", "batch", "replacement"),
    [
        (1, False, cbor2.dumps({"id": 5})),  # a map, not an entry
        (1, True, cbor2.dumps({"batch": []})),  # a batch without the entry
        (1, True, cbor2.dumps({"leaf": None})),  # not a batch at all
        (2, True, _one_v2_entry()),  # an entries frame of one entry, not two
    ],
)
def test_a_frame_that_still_decodes_but_no_longer_holds_the_entry_changed_on_disk(
    tmp_path: Path, version: int, batch: bool, replacement: bytes
) -> None:
    """Reading through the index (``branch``, ``get``, ``entries``) says so as ``entry_at``
    does: a ``SessionFileError``, not the decoder's ``ValueError`` or ``KeyError``."""
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as writer:
        first = writer.append("t", {"pad": "x" * 40}).id
    if version == 1:
        items = [Entry(first, None, "t", 1.0, {"pad": "x" * 40}).to_cbor()]
        if batch:
            items.append(Entry("second", first, "t", 1.0, {}).to_cbor())
            body = cbor2.dumps({"batch": [cbor2.loads(item) for item in items]})
        else:
            body = items[0]
        path.write_bytes(header_frame(1) + encode_frame(body))
    elif batch:
        with SessionFile.open(path) as writer:
            writer.append_many([("t", {"pad": "x" * 40}), ("t", {})])
    [*_, (offset, _payload)] = frames(path)
    with SessionFile.open(path, readonly=True) as session:
        assert session.report.ok
        rewrite_frame(path, offset, replacement)
        for read in (
            session.branch,
            lambda: session.get(session.leaf_id or ""),
            lambda: session.entries,
        ):
            with pytest.raises(SessionFileError) as caught:
                read()
            assert (caught.value.reason, str(caught.value)) == changed_on_disk(path, offset)


def test_a_directory_is_refused_with_its_path(tmp_path: Path) -> None:
    with pytest.raises(SessionFileError) as caught:
        SessionFile.open(tmp_path, readonly=True)
    assert (caught.value.reason, caught.value.path) == ("not-a-regular-file", tmp_path)
    assert str(caught.value) == (f"{tmp_path}: not a regular file (a FIFO, device or directory)")


def test_what_was_opened_is_checked_not_what_the_name_holds_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A FIFO swapped in before the open and the session file put back right after: the
    descriptor is a FIFO, and that is refused."""
    path = tmp_path / "s.pias"
    SessionFile.open(path).close()
    aside = tmp_path / "aside.pias"
    real_open = os.open

    def swapping_open(target: object, how: int, *rest: int) -> int:
        if target != path:
            return real_open(target, how, *rest)  # type: ignore[arg-type]
        path.replace(aside)
        os.mkfifo(path)
        try:
            return real_open(path, how, *rest)
        finally:
            aside.replace(path)

    monkeypatch.setattr(sf.os, "open", swapping_open)
    with pytest.raises(SessionFileError) as caught:
        SessionFile.open(path, readonly=True)
    assert (caught.value.reason, caught.value.path) == ("not-a-regular-file", path)


def test_a_second_writer_is_refused_with_the_path(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path), pytest.raises(SessionFileError) as caught:
        SessionFile.open(path)
    assert (caught.value.reason, caught.value.path) == ("locked", path)
    assert str(caught.value) == f"{path}: session file is open for writing elsewhere"


def test_a_header_frame_running_past_the_file_is_damaged_even_if_its_checksum_fits(
    tmp_path: Path,
) -> None:
    """The checksum is of the bytes that are there; the length says more should be."""
    path = tmp_path / "s.pias"
    payload = cbor2.dumps(GOOD_HEADER)
    content = (len(payload) + 5).to_bytes(4, "big") + zlib.crc32(payload).to_bytes(4, "big")
    error = refusal(path, content + payload)
    assert (error.reason, str(error)) == (
        "damaged-header",
        f"{path}: session header frame is damaged",
    )


def test_a_one_byte_header_is_read_as_a_header(tmp_path: Path) -> None:
    """An empty map is a header without the magic: not a session file, whatever follows."""
    path = tmp_path / "s.pias"
    error = refusal(path, encode_frame(b"\xa0") + sf.MAGIC.encode())
    assert (error.reason, str(error)) == ("not-a-session-file", f"{path}: {NOT_OURS[1]}")


def test_entries_iterated_after_the_session_closed_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    session = SessionFile.open(path)
    session.append("t", {})
    entries = session.iter_entries()
    session.close()
    with pytest.raises(ValueError, match=r"^session file is closed$"):
        next(entries)


@pytest.mark.parametrize("again", ["0011223344556677", "8899aabbccddeeff"])
def test_an_entries_frame_repeating_an_id_is_invalid(tmp_path: Path, again: str) -> None:
    """An id already in the file, or twice in one frame."""
    path = tmp_path / "s.pias"
    good = header_frame() + v2_entry("0011223344556677")
    chain = [("8899aabbccddeeff", "0011223344556677", "t", 1.0, {}), (again, None, "t", 1.0, {})]
    frame = encode_frame(codec.encode_entries(chain)[0])
    path.write_bytes(good + frame)
    assert damage_of(path) == Damage(
        len(good), len(good) + len(frame), "invalid", f"duplicate entry id {again!r}"
    )


# ---- the last untested functions (session 7, lead) ---------------------------------------------


@pytest.mark.parametrize("kind", ["entries", "batch"])
def test_an_entry_under_an_unknown_parent_in_a_frame_of_entries_is_invalid(
    tmp_path: Path, kind: str
) -> None:
    """A version 2 entries frame, or a version 1 batch, whose second entry names a parent no
    entry has: the frame is damage, with the reason and the entry named (``_Index.check_links``)."""
    path = tmp_path / "s.pias"
    if kind == "entries":
        good = header_frame() + v2_entry("0011223344556677")
        fields = [
            ("1111111111111111", "0011223344556677", "t", 1.0, {}),
            ("2222222222222222", "8899aabbccddeeff", "t", 1.0, {}),
        ]
        bad = encode_frame(codec.encode_entries(fields)[0])
        named = "2222222222222222"
    else:
        good = header_frame(1) + v1_entry("a")
        batch = {
            "batch": [
                cbor2.loads(Entry("b", "a", "t", 1.0, {}).to_cbor()),
                cbor2.loads(Entry("c", "nobody", "t", 1.0, {}).to_cbor()),
            ]
        }
        bad = encode_frame(cbor2.dumps(batch))
        named = "c"
    path.write_bytes(good + bad)
    assert damage_of(path) == Damage(
        len(good), len(good) + len(bad), "invalid", f"entry {named!r} has unknown parent"
    )


def test_a_session_says_it_is_open_until_closed(tmp_path: Path) -> None:
    with SessionFile.open(tmp_path / "s.pias") as session:
        assert session.closed is False
    assert session.closed is True
    memory = SessionFile.in_memory()
    assert memory.closed is False
