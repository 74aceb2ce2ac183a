"""Checkpoints: a session with the journal projection opens from its newest checkpoint.

What is checked on real files: the fold read from a checkpoint equals the fold of the whole
branch (queue, recovery, history); the open indexes and keeps only what follows the checkpoint
(counted, not timed); a kill during a checkpoint write (every prefix of the frame) loses no
entry and the open falls back to the previous checkpoint; a damaged or unusable checkpoint is
skipped, the previous one or a full scan serves, and the report says so; branches reaching back
before the checkpoint still work; an old-format (version 1) file opens, is appended to in its
own format and forks into the current one.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import attrs
import cbor2
import pytest
import trio

from pi_agent_ask import open_runtime
from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.actors.records import AskRequest, Outcome
from pi_agent_ask.form import text as texts
from pi_agent_ask.form.result import build_result
from pi_agent_ask.form.types import AskParams, Draft, Option, Question
from pi_agent_ask.persistence import history as h
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.projection import JOURNAL
from pi_agent_ask.persistence.session_file import Header, SessionFile, encode_frame
from tests.session_frames import decode_payload

EVERY = 20


def params(n: int) -> AskParams:
    options = (Option("a", "A", "First"), Option("b", "B"))
    return AskParams(
        title=f"Form {n}",
        background=True,
        questions=(
            Question("q", "Q", f"Pick for {n}?", "single", options),
            Question("r", "R", "Which ones?", "multi", options),
        ),
    )


def write_form(session: SessionFile, n: int, *, answered: bool, delivered: bool) -> str:
    """The entries the runtime writes for one background form; returns its request id."""
    form = params(n)
    call = f"call-{n}"
    request = AskRequest(str(uuid.uuid4()), form, True, "2026-12-01T00:00:00.000Z", call)
    session.append(jr.TOOL_CALL, {"toolCallId": call, "name": "ask_user", "arguments": {}})
    session.append_many(
        [
            (jr.PAYLOAD, jr.payload_entry(form, call, request.created_at)),
            (jr.HISTORY_REQUEST, jr.history_request_entry(request)),
            (jr.QUEUED, jr.queued_entry(request)),
        ]
    )
    receipt = texts.receipt_tool_result(request.request_id, ["q", "r"], 1)
    session.append(jr.TOOL_RESULT, {"toolCallId": call, "name": "ask_user", "result": receipt})
    if n % 3 == 0:
        session.append(jr.DRAFT, {"requestId": request.request_id, "form": {"tab": n % 2}})
    if answered:
        result = build_result(
            form, [Draft(selected=(0,), note=f"note {n}"), Draft()], request_id=request.request_id
        )
        outcome = Outcome(request.request_id, result=result)
        session.append_many(jr.completion_entries(outcome, background=True))
        if delivered:
            message = texts.background_answer_message(outcome, params=form)
            session.append(jr.BACKGROUND_ANSWER, message)
    return request.request_id


def fill(path: Path, forms: int, *, pending_from: int | None = None) -> list[str]:
    """A session of ``forms`` forms, settled except those from ``pending_from`` on (asked,
    answered but not delivered, or not answered, in turn)."""
    ids = []
    with SessionFile.open(path, projection=JOURNAL, checkpoint_every=EVERY) as session:
        for n in range(forms):
            open_ = pending_from is not None and n >= pending_from
            ids.append(
                write_form(session, n, answered=not open_ or n % 2 == 0, delivered=not open_)
            )
    return ids


def summary(session: SessionFile) -> Any:
    """The queue and recovery read from the session's fold, and from its whole branch."""
    rebuilt, call = jr.recover(session, revalidate=lambda _arguments: None)
    return (
        [
            (
                r.request.request_id,
                r.request.params,
                r.draft,
                None if r.outcome is None else r.outcome.to_json(),
                r.delivered,
            )
            for r in rebuilt.requests
        ],
        rebuilt.panel_visible,
        call,
    )


def full_summary(session: SessionFile) -> Any:
    branch = session.branch()
    rebuilt = jr.rebuild_queue(branch)
    call = jr.find_interrupted_call(branch, revalidate=lambda _arguments: None)
    return (
        [
            (
                r.request.request_id,
                r.request.params,
                r.draft,
                None if r.outcome is None else r.outcome.to_json(),
                r.delivered,
            )
            for r in rebuilt.requests
        ],
        rebuilt.panel_visible,
        call,
    )


def checkpoint_offsets(path: Path) -> list[tuple[int, int]]:
    """``(start, end)`` of every checkpoint frame, read with the independent frame parser."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        end = pos + 8 + length
        value = decode_payload(data[pos + 8 : end]) if pos else {}
        if "checkpoint" in value:
            out.append((pos, end))
        pos = end
    return out


def entry_ids(data: bytes) -> tuple[str, ...]:
    """Ids of every entry in these frames (a file's bytes), in file order."""
    ids, pos = [], 0
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        value = decode_payload(data[pos + 8 : pos + 8 + length]) if pos else {}
        ids += [item["id"] for item in value.get("batch", [value]) if "id" in item]
        pos += 8 + length
    return tuple(ids)


def test_open_reads_only_what_follows_the_newest_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    ids = fill(path, 120, pending_from=114)
    with SessionFile.open(path, projection=JOURNAL, readonly=True) as session:
        assert session.report.checkpoint == checkpoint_offsets(path)[-1][0]
        assert session.report.notes == ()
        total = len(session)
        # Memory bounded by what is pending: the index holds the entries after the checkpoint
        # only, the fold the open requests only.
        assert session.indexed <= EVERY + 3
        fold = session.fold()
        assert list(fold.requests) == ids[114:]
        assert len(fold.log) <= EVERY
        folded = summary(session)
        # Reading the whole branch (which indexes the whole file) gives the same.
        assert folded == full_summary(session)
        assert session.indexed == total == len(session)
    assert [r[0] for r in folded[0]] == ids[114:]


def test_history_from_the_checkpoint_chain_equals_the_branch(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    ids = fill(path, 60, pending_from=55)
    with SessionFile.open(path, projection=JOURNAL, readonly=True) as session:
        source = h.source_of_session(session)
        assert session.indexed <= EVERY + 3  # the chain is read, the branch is not
        assert source.total == 120
        first_page = h.list_history(source, limit=20)
        assert session.indexed <= EVERY + 3  # a page reads its own entries only
        branch = session.branch()
        assert first_page == h.list_history(branch, limit=20)
        for offset, limit in ((37, 5), (110, 20), (119, 1), (120, 3)):
            assert h.list_history(source, offset=offset, limit=limit) == h.list_history(
                branch, offset=offset, limit=limit
            )
        for query in ("note 7", "pick for 5?"):
            assert h.list_history(source, query=query) == h.list_history(branch, query=query)
        assert h.list_history(source, answered_only=True) == h.list_history(
            branch, answered_only=True
        )
        for request_id in (ids[0], ids[31], ids[-1]):
            expected = h.read_history(branch, request_id, "r")
            assert h.read_history(source, request_id, "r") == expected
        with pytest.raises(h.HistoryError):
            h.read_history(source, "nope", "q")


@pytest.mark.parametrize("cut", [1, 8, 9, 30, -1])
def test_a_kill_during_a_checkpoint_write_loses_nothing(tmp_path: Path, cut: int) -> None:
    """A kill leaves a prefix of the frame being written (the file is append-only): every
    prefix of the newest checkpoint frame is a torn tail, cut on open; the previous
    checkpoint serves and every entry is there."""
    path = tmp_path / "s.pias"
    fill(path, 40, pending_from=36)
    *_, (previous, _), (start, end) = checkpoint_offsets(path)
    # Keep only the entries written before the newest checkpoint, then its torn frame.
    data = path.read_bytes()[:end]
    path.write_bytes(data[: start + (cut if cut > 0 else end - start + cut)])
    with SessionFile.open(path, projection=JOURNAL) as session:
        assert session.report.damage is not None and session.report.damage.reason == "torn"
        assert session.report.cut
        assert session.report.checkpoint == previous
        fold_summary = summary(session)
        assert fold_summary == full_summary(session)
        kept = session.ids()
    assert kept == entry_ids(data[:start])
    with SessionFile.open(path, projection=JOURNAL) as again:
        assert again.report.ok
        assert summary(again) == fold_summary


def test_a_damaged_checkpoint_is_skipped_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    ids = fill(path, 40, pending_from=35)
    with SessionFile.open(path, projection=JOURNAL, readonly=True) as session:
        expected = summary(session)
        entries = len(session)
    *_, (previous, _), (newest, newest_end) = checkpoint_offsets(path)
    data = bytearray(path.read_bytes())
    data[newest_end - 5] ^= 0x40  # inside the newest checkpoint's compressed state
    path.write_bytes(bytes(data))
    with SessionFile.open(path, projection=JOURNAL) as session:
        report = session.report
        assert report.damage is None  # a checkpoint holds no entries: nothing is cut
        assert report.checkpoint == previous
        assert report.notes == (f"checkpoint at byte {newest} is damaged (checksum); skipped",)
        assert "damaged (checksum); skipped" in report.describe()
        assert len(session) == entries
        assert summary(session) == expected
        assert list(session.fold().requests) == ids[35:]


def test_an_unusable_checkpoint_falls_back_to_a_full_scan(tmp_path: Path) -> None:
    """A checkpoint whose checksum holds but whose state does not fit (another writer's, a
    bug's) is skipped as well; with none usable the whole file is read, and the report says
    so."""
    path = tmp_path / "s.pias"
    fill(path, 30, pending_from=28)
    with SessionFile.open(path, projection=JOURNAL, readonly=True) as session:
        expected = summary(session)
    with SessionFile.open(
        path, projection=attrs_evolve_name("other-projection/1"), readonly=True
    ) as session:
        assert session.report.checkpoint is None
        assert session.report.notes[-1] == "no usable checkpoint: the whole file was read"
        assert "written for another projection" in session.report.notes[0]
        assert session.indexed == len(session)
        assert summary(session) == expected


def attrs_evolve_name(name: str) -> Any:
    return attrs.evolve(JOURNAL, name=name)


def test_branches_reaching_back_before_the_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    fill(path, 30)
    with SessionFile.open(path, projection=JOURNAL, readonly=True) as session:
        old = session.ids()[10]
    with SessionFile.open(path, projection=JOURNAL, checkpoint_every=EVERY) as session:
        assert session.indexed < len(session)
        session.move_leaf(old)  # an entry before the checkpoint: the whole file is indexed
        side = session.append("side", {"n": 1})
        assert session.branch_ids()[-2:] == (old, side.id)
        branch_summary = summary(session)
        assert branch_summary == full_summary(session)
    with SessionFile.open(path, projection=JOURNAL) as session:
        assert session.leaf_id == side.id
        assert summary(session) == branch_summary


def v1_file(path: Path, session: SessionFile) -> None:
    """The branch of ``session`` written as a version 1 file (one map per entry)."""
    frames = [encode_frame(Header(1, 1.0e9, "old").to_cbor())]
    frames += [encode_frame(entry.to_cbor()) for entry in session.branch()]
    path.write_bytes(b"".join(frames))


def test_an_old_format_file_opens_appends_in_its_format_and_forks_into_the_new(
    tmp_path: Path,
) -> None:
    source = SessionFile.in_memory()
    ids = []
    for n in range(30):
        ids.append(write_form(source, n, answered=n < 27, delivered=n < 26))
    old = tmp_path / "old.pias"
    v1_file(old, source)
    with SessionFile.open(old, projection=JOURNAL, checkpoint_every=EVERY) as session:
        assert session.header.version == 1
        assert session.report.checkpoint is None
        assert [r[0] for r in summary(session)[0]] == ids[26:]
        session.append(jr.PANEL, {"visible": False})
        forked = session.fork(tmp_path / "new.pias")
    frames = old.read_bytes()
    assert cbor2.loads(frames[8 : 8 + int.from_bytes(frames[:4], "big")])["version"] == 1
    # Version 1 frames only (maps), no checkpoint: an older release still reads the file.
    with SessionFile.open(old, readonly=True) as reread:
        assert reread.branch()[-1].type == jr.PANEL
    assert checkpoint_offsets(old) == []
    with forked:
        assert forked.header.version == 2
        assert summary(forked)[1] is False
    assert checkpoint_offsets(tmp_path / "new.pias")  # the fork wrote one
    with SessionFile.open(tmp_path / "new.pias", projection=JOURNAL) as reopened:
        assert reopened.report.checkpoint is not None
        assert [r[0] for r in summary(reopened)[0]] == ids[26:]


async def test_the_runtime_says_when_a_checkpoint_was_skipped(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    ids = fill(path, 40, pending_from=38)
    *_, (newest, newest_end) = checkpoint_offsets(path)
    data = bytearray(path.read_bytes())
    data[newest_end - 5] ^= 0x40
    path.write_bytes(bytes(data))
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"schemaVersion": 6}))
    async with open_runtime(session=path, settings=settings, surface=NullSurface()) as rt:
        stats = await rt.statistics(params_of=tuple(ids[38:]))
        notices = []
        while True:
            try:
                notices.append(rt.notices.receive_nowait())
            except trio.WouldBlock:
                break
    assert any(f"checkpoint at byte {newest} is damaged" in n for n in notices), notices
    assert set(ids[38:]) <= {rid for rid, _params in stats.params}  # the queue has them
