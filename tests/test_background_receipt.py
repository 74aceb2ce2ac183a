"""A background ``ask_user`` is recorded in one write: the call, the request's entries and the
call's result (the receipt, whose pending count only the queue knows) are one frame, written by
the queue in the transition that enqueues the request. No file ever holds the request without
its result, and a failed write enqueues nothing."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from pi_agent_ask import open_runtime
from pi_agent_ask.actors import queue_state as qs
from pi_agent_ask.actors.records import AskRequest
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.validate import validate_ask_params
from tests.runtime_support import Box, RecordingSurface, payload, settings_file
from tests.session_frames import decode_payload

REQUEST_CHAIN = ["tool-call", "ask:payload", "ask:history-request", "ask:queued", "tool-result"]


def entry_frames(path: Path) -> list[list[dict[str, Any]]]:
    """The entries frames of a file, each as its list of entries (checkpoints, leaf moves and
    the header left out)."""
    data = path.read_bytes()
    out: list[list[dict[str, Any]]] = []
    offset = 0
    while offset < len(data):
        length, _crc = struct.unpack_from(">II", data, offset)
        frame = decode_payload(data[offset + 8 : offset + 8 + length])
        offset += 8 + length
        if isinstance(frame, dict) and "batch" in frame:
            out.append(frame["batch"])
        elif isinstance(frame, dict) and "type" in frame:
            out.append([frame])
    return out


async def test_a_background_call_and_its_receipt_are_one_frame(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=RecordingSurface(), cwd=tmp_path
    ) as rt:
        before = len(entry_frames(session))
        first = await rt.call_tool("ask_user", payload("a", background=True), "b1")
        after_first = entry_frames(session)
        second = await rt.call_tool("ask_user", payload("a", background=True), "b2")
        after_second = entry_frames(session)
    # Each call added exactly one frame, holding its whole chain in order.
    assert len(after_first) == before + 1
    assert len(after_second) == before + 2
    for frame, call_id, result in (
        (after_first[-1], "b1", first),
        (after_second[-1], "b2", second),
    ):
        assert [entry["type"] for entry in frame] == REQUEST_CHAIN
        assert [e["parentId"] for e in frame[1:]] == [e["id"] for e in frame[:-1]]
        recorded = frame[-1]["data"]
        assert recorded == {"toolCallId": call_id, "name": "ask_user", "result": result}
    # The pending count in each receipt is the queue's at the moment it enqueued the request.
    assert "1 form(s) pending" in first["content"][0]["text"]
    assert "2 form(s) pending" in second["content"][0]["text"]


async def test_the_receipt_survives_a_restart_with_the_request_pending(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    settings = settings_file(tmp_path)
    async with open_runtime(
        session=session, settings=settings, surface=RecordingSurface(), cwd=tmp_path
    ) as rt:
        result = await rt.call_tool("ask_user", payload("a", background=True), "b1")
        request_id = result["structuredContent"]["requestId"]
    async with open_runtime(
        session=session, settings=settings, surface=RecordingSurface(), cwd=tmp_path
    ) as rt:
        stats = await rt.statistics()
        # Pending again, and not mistaken for an interrupted call (its result is recorded).
        assert stats.pending == (request_id,)


# -- the reducer -------------------------------------------------------------------------------


class Writer:
    async def append(self, type_: str, data: Any) -> object:
        raise AssertionError("the reducer never writes")

    async def append_many(self, entries: Any) -> object:
        raise AssertionError("the reducer never writes")


def _request(rid: str) -> tuple[AskRequest, fs.FormState]:
    params = validate_ask_params(payload("a", background=True)).params
    assert params is not None
    return AskRequest(rid, params, background=True, created_at="t"), fs.new_form(params)


def _recording(writer: Writer, rid: str) -> qs.Recording:
    return qs.Recording(
        (("ask:queued", {"requestId": rid}),),
        lambda pending: ("tool-result", {"pending": pending}),
        writer,
    )


def test_an_enqueue_with_a_recording_writes_first_through_the_callers_writer() -> None:
    writer = Writer()
    state = qs.initial_state(tui=True, surface_ready=False)
    for n, rid in enumerate(("r1", "r2"), start=1):
        request, form = _request(rid)
        box = Box()
        candidate, effects = qs.reduce(
            state, qs.Enqueue(request, form, box, _recording(writer, rid))
        )
        write = effects[0]
        assert isinstance(write, qs.Append)
        assert write.through is writer
        # The chain, then the result built for the count this transition ends with.
        assert write.entries == (
            ("ask:queued", {"requestId": rid}),
            ("tool-result", {"pending": n}),
        )
        assert qs.Reply(box, n) in effects
        state = candidate.commit()
    assert state.pending_count == 2


def test_an_enqueue_already_queued_counts_nothing_twice() -> None:
    writer = Writer()
    request, form = _request("r1")
    state, _ = qs.reduce(qs.initial_state(), qs.Enqueue(request, form, Box()))
    state = state.commit()
    _, effects = qs.reduce(state, qs.Enqueue(request, form, Box(), _recording(writer, "r1")))
    write = effects[0]
    assert isinstance(write, qs.Append)
    assert write.entries[-1] == ("tool-result", {"pending": 1})


def test_an_enqueue_whose_write_failed_tells_its_caller_the_error_and_queues_nothing() -> None:
    writer = Writer()
    request, form = _request("r1")
    box = Box()
    message = qs.Enqueue(request, form, box, _recording(writer, "r1"))
    state = qs.initial_state()
    error = OSError(5, "disk")
    after, effects = qs.reduce(state, qs.Unrecorded(message, error))
    assert effects == [qs.Reply(box, error), qs.CloseReply(box)]
    after = after.commit()
    assert after.pending_count == 0
    assert "r1" not in after.items
