"""Giving back delivered messages (``Runtime.give_back``): what a cut call took comes back.

A turn boundary marks its messages delivered before it hands them out. When the call that took
them cannot pass them on (an MCP client cancelled, a hook's connection broke), the host gives
them back: an ``ask:returned`` entry undoes the marks, the messages go out again first, each
marked again when it does, and all of it survives a restart, a checkpoint and an old
checkpoint without the field. Real runtimes on real session files; the disk failure goes
through the gated journal.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from pi_agent_ask import open_runtime
from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.actors.runtime import open_runtime as open_core
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.projection import JOURNAL, JournalFold
from pi_agent_ask.persistence.session_file import SessionFile
from tests.test_checkpoints import EVERY, write_form

from .runtime_support import (
    InjectedDiskError,
    WriteGate,
    answer,
    branch_types,
    payload,
    settings_file,
    submit,
)


async def answered_and_taken(rt: Any, call_id: str, value: str) -> dict[str, Any]:
    """Ask a background question, answer it, and take its message at a boundary."""
    rt.events.on(
        "pi-agent-ask:started",
        lambda p: (
            submit(rt.events, p["flowId"], answer({"a": [value]}))
            if p.get("toolCallId") == call_id
            else None
        ),
    )
    await rt.call_tool("ask_user", payload("a", background=True), tool_call_id=call_id)
    await rt.show_queue()
    await trio.testing.wait_all_tasks_blocked()
    [message] = await rt.turn_boundary()
    return message


async def test_a_given_back_message_goes_out_again_once(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    settings = settings_file(tmp_path)
    async with open_runtime(session=session, settings=settings, surface=NullSurface()) as rt:
        rt.agent_started()
        message = await answered_and_taken(rt, "c1", "a1")
        await rt.give_back([message])
        assert await rt.turn_boundary() == [message]
        assert await rt.turn_boundary() == []
    types = branch_types(session)
    assert types.count(jr.BACKGROUND_ANSWER) == 2
    assert types.index(jr.RETURNED) > types.index(jr.BACKGROUND_ANSWER)


async def test_a_given_back_message_survives_a_restart_and_is_delivered_once(
    tmp_path: Path,
) -> None:
    session = tmp_path / "s.pas"
    settings = settings_file(tmp_path)
    async with open_runtime(session=session, settings=settings, surface=NullSurface()) as rt:
        rt.agent_started()
        first = await answered_and_taken(rt, "c1", "a1")
        second = await answered_and_taken(rt, "c2", "a2")
        await rt.give_back([first, second])
    # A runtime starts with the agent idle: the first given-back message wakes it, the
    # other waits for the boundary; the next start has nothing left to deliver.
    async with open_runtime(session=session, settings=settings, surface=NullSurface()) as rt:
        await trio.testing.wait_all_tasks_blocked()
        assert rt.wakeups.receive_nowait() == first
        rt.agent_started()
        assert await rt.turn_boundary() == [second]
    async with open_runtime(session=session, settings=settings, surface=NullSurface()) as rt:
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(trio.WouldBlock):
            rt.wakeups.receive_nowait()
        rt.agent_started()
        assert await rt.turn_boundary() == []


async def test_given_back_messages_go_out_before_answers_that_came_later(tmp_path: Path) -> None:
    settings = settings_file(tmp_path)
    async with open_runtime(settings=settings, surface=NullSurface()) as rt:
        rt.agent_started()
        first = await answered_and_taken(rt, "c1", "a1")
        rt.events.on(
            "pi-agent-ask:started",
            lambda p: submit(rt.events, p["flowId"], answer({"a": ["a2"]})),
        )
        await rt.call_tool("ask_user", payload("a", background=True), tool_call_id="c2")
        await trio.testing.wait_all_tasks_blocked()
        await rt.give_back([first])
        messages = await rt.turn_boundary()
    assert len(messages) == 2
    assert messages[0] == first
    assert "Option a2" in messages[1]["content"]


async def test_an_idle_agent_is_woken_by_a_given_back_message(tmp_path: Path) -> None:
    settings = settings_file(tmp_path)
    async with open_runtime(settings=settings, surface=NullSurface()) as rt:
        rt.agent_started()
        message = await answered_and_taken(rt, "c1", "a1")
        rt.agent_settled()
        await rt.give_back([message])
        await trio.testing.wait_all_tasks_blocked()
        assert rt.wakeups.receive_nowait() == message
        assert await rt.turn_boundary() == []


async def test_a_give_back_right_after_agent_started_waits_for_the_boundary(
    tmp_path: Path,
) -> None:
    """The hook is a plain call that reaches the queue through a forwarding task; the give
    back, made right after it, reaches the queue first. The agent is busy all the same: the
    message goes out at the next boundary, never as a wake."""
    settings = settings_file(tmp_path)
    async with open_runtime(settings=settings, surface=NullSurface()) as rt:
        rt.agent_started()
        message = await answered_and_taken(rt, "c1", "a1")
        rt.agent_settled()
        await trio.testing.wait_all_tasks_blocked()
        rt.agent_started()
        await rt.give_back([message])
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(trio.WouldBlock):
            rt.wakeups.receive_nowait()
        assert await rt.turn_boundary() == [message]


@pytest.mark.parametrize(
    "bad",
    [
        "text",
        {"customType": "ask:other", "details": {"requestId": "r"}},
        {"customType": jr.BACKGROUND_ANSWER, "details": {}},
        {"customType": jr.BACKGROUND_ANSWER},
    ],
)
async def test_a_message_no_boundary_hands_out_is_refused_and_nothing_is_written(
    tmp_path: Path, bad: Any
) -> None:
    session = tmp_path / "s.pas"
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=NullSurface()
    ) as rt:
        rt.agent_started()
        message = await answered_and_taken(rt, "c1", "a1")
        with pytest.raises(ValueError, match="message 1 is not one a turn boundary hands out"):
            await rt.give_back([message, bad])
        assert await rt.turn_boundary() == []
    assert jr.RETURNED not in branch_types(session)


async def test_a_give_back_whose_write_fails_gives_nothing_back(tmp_path: Path) -> None:
    gate = WriteGate()
    async with gate.open_runtime(
        session=tmp_path / "s.pas", settings=settings_file(tmp_path), surface=NullSurface()
    ) as rt:
        rt.agent_started()
        message = await answered_and_taken(rt, "c1", "a1")
        gate.fail_next(jr.RETURNED, InjectedDiskError(errno.EIO, "disk"))
        with pytest.raises(InjectedDiskError):
            await rt.give_back([message])
        assert await rt.turn_boundary() == []
        await rt.give_back([message])  # the disk is back
        assert await rt.turn_boundary() == [message]


def _returned_of(session: SessionFile) -> Any:
    rebuilt, _call = jr.recover(session, revalidate=lambda _arguments: None)
    return rebuilt.returned


def test_the_give_back_is_read_from_a_checkpoint_as_from_the_whole_branch(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path, projection=JOURNAL, checkpoint_every=EVERY) as session:
        for n in range(3):
            write_form(session, n, answered=True, delivered=True)
        marked = next(e for e in session.branch() if e.type == jr.BACKGROUND_ANSWER)
        message = jr.thaw(marked.data)
        session.append(jr.RETURNED, {"version": 1, "messages": [message]})
        for n in range(3, 3 + 2 * EVERY):  # past a checkpoint or two
            write_form(session, n, answered=True, delivered=True)
    with SessionFile.open(path, projection=JOURNAL, checkpoint_every=EVERY) as session:
        assert session.report.checkpoint is not None
        assert session.indexed < len(session)  # the open read from the checkpoint on
        full = jr.rebuild_queue(session.branch()).returned
        assert full == ((jr.BACKGROUND_ANSWER, message),)
        assert _returned_of(session) == full
        session.append(jr.BACKGROUND_ANSWER, message)  # delivered again
        assert _returned_of(session) == ()
        assert jr.rebuild_queue(session.branch()).returned == ()


def test_a_checkpoint_from_before_give_backs_still_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.pias"
    live = JournalFold.live
    monkeypatch.setattr(
        JournalFold, "live", lambda fold: {k: v for k, v in live(fold).items() if k != "returned"}
    )
    with SessionFile.open(path, projection=JOURNAL, checkpoint_every=EVERY) as session:
        for n in range(2 * EVERY):
            write_form(session, n, answered=True, delivered=True)
        message = jr.thaw(next(e for e in session.branch() if e.type == jr.BACKGROUND_ANSWER).data)
    monkeypatch.undo()
    with SessionFile.open(path, projection=JOURNAL) as session:
        assert session.report.checkpoint is not None
        assert session.report.notes == ()
        assert _returned_of(session) == ()
        session.append(jr.RETURNED, {"version": 1, "messages": [message, "not a message"]})
        assert _returned_of(session) == ((jr.BACKGROUND_ANSWER, message),)


# -- the MCP tools: a cut call gives back what it took ---------------------------------------


async def test_an_mcp_take_cut_after_its_boundary_gives_the_answer_back_durably(
    tmp_path: Path,
) -> None:
    """The boundary's marks are written, then the taking call is cancelled before it can
    return them: the answer is given back, and a later take (also after a restart) gets it."""
    from pi_agent_ask.mcp_common.tools import AgentTools

    session = tmp_path / "s.pas"
    settings = settings_file(tmp_path)
    gate = WriteGate()
    async with gate.open_runtime(session=session, settings=settings, surface=NullSurface()) as rt:
        with AgentTools(rt) as tools:
            rt.events.on(
                "pi-agent-ask:started",
                lambda p: submit(rt.events, p["flowId"], answer({"a": ["a1"]})),
            )
            await rt.call_tool("ask_user", payload("a", background=True), tool_call_id="c1")
            await trio.testing.wait_all_tasks_blocked()
            gate.hold("after")  # the marks reach the file; the reply waits here
            taken: list[Any] = []
            async with trio.open_nursery() as nursery:
                scope = trio.CancelScope()

                async def take() -> None:
                    with scope:
                        taken.append(await tools.take_background_messages())

                nursery.start_soon(take)
                await trio.testing.wait_all_tasks_blocked()
                assert gate.held_types == [jr.BACKGROUND_ANSWER]
                scope.cancel()
                gate.release()
            assert taken == []  # cut: nothing returned to the agent
            assert tools._carry == []  # not kept in memory: journaled
    types = branch_types(session)
    assert types[-2:] == [jr.BACKGROUND_ANSWER, jr.RETURNED]
    # As the MCP server opens it: the agent busy from the start (nobody reads wakeups).
    async with open_core(
        session=session, settings=settings, surface=NullSurface(), agent_idle=False
    ) as rt:
        with AgentTools(rt) as tools:
            [message] = await tools.take_background_messages()
            assert await tools.take_background_messages() == []
    assert "Option a1" in message["content"]


async def test_an_mcp_give_back_whose_write_fails_is_kept_in_memory(tmp_path: Path) -> None:
    from pi_agent_ask.mcp_common.tools import AgentTools

    gate = WriteGate()
    async with gate.open_runtime(
        session=tmp_path / "s.pas", settings=settings_file(tmp_path), surface=NullSurface()
    ) as rt:
        with AgentTools(rt) as tools:
            message = await answered_and_taken(rt, "c1", "a1")
            gate.fail_next(jr.RETURNED, InjectedDiskError(errno.EIO, "disk"))
            await tools.give_back([message])
            assert tools._carry == [message]
            assert await tools.take_background_messages(text_only=True) == [message]
            assert await tools.take_background_messages() == []


async def test_a_give_back_cancelled_once_with_the_queue_still_takes_its_reply(
    tmp_path: Path,
) -> None:
    """Like ``turn_boundary``: once the request is with the queue, the caller hears how it
    went even if it is cancelled meanwhile (here: it returns, the give-back done)."""
    gate = WriteGate()
    async with gate.open_runtime(
        session=tmp_path / "s.pas", settings=settings_file(tmp_path), surface=NullSurface()
    ) as rt:
        rt.agent_started()
        message = await answered_and_taken(rt, "c1", "a1")
        gate.hold("before")
        returned: list[bool] = []
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def give() -> None:
                with scope:
                    await rt.give_back([message])
                    returned.append(True)

            nursery.start_soon(give)
            await trio.testing.wait_all_tasks_blocked()
            assert gate.held_types[-1:] == [jr.RETURNED]
            scope.cancel()
            gate.release()
        assert returned == [True]
        assert await rt.turn_boundary() == [message]


async def test_a_give_back_the_queue_drops_says_the_runtime_is_closing() -> None:
    """The queue closes a reply it cannot give (it is ending): the caller hears so, never a
    silent success."""
    from types import SimpleNamespace

    from pi_agent_ask.actors import hooks
    from pi_agent_ask.actors import queue as q
    from pi_agent_ask.actors.persistence import PersistenceClosedError

    send, receive = trio.open_memory_channel[Any](0)
    message = {"customType": jr.BACKGROUND_ANSWER, "content": "x", "details": {"requestId": "r"}}
    async with trio.open_nursery() as nursery:

        async def ending_queue() -> None:
            taken = await receive.receive()
            assert isinstance(taken, q.GiveBack)
            assert taken.follow_ups == (q.FollowUp(jr.BACKGROUND_ANSWER, message, wake=True),)
            taken.reply.close()

        nursery.start_soon(ending_queue)
        with pytest.raises(PersistenceClosedError, match=r"^the runtime is closing$"):
            await hooks.give_back(SimpleNamespace(_queue_tx=send), [message])  # type: ignore[arg-type]


async def test_a_refused_give_back_names_what_a_boundary_hands_out(tmp_path: Path) -> None:
    async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
        with pytest.raises(ValueError) as refused:
            await rt.give_back([{"customType": "x"}])
    assert str(refused.value) == (
        "give_back: message 0 is not one a turn boundary hands out (a mapping with customType "
        "ask:background-answer or ask:resume-answer and details.requestId)"
    )


# -- the entry and the fold, directly -----------------------------------------------------------


def _fold_of(*items: tuple[str, dict[str, Any]]) -> Any:
    from pi_agent_ask.persistence.session_file import Entry

    branch = [Entry(f"e{n}", None, kind, 1.0, data) for n, (kind, data) in enumerate(items)]
    return jr.fold_branch(branch)


def _answer_message(rid: str, kind: str = jr.BACKGROUND_ANSWER) -> dict[str, Any]:
    return {"customType": kind, "content": rid, "details": {"requestId": rid}}


def test_a_returned_entry_keeps_only_messages_that_name_a_mark() -> None:
    from pi_agent_ask.persistence import entries as je

    kept = [_answer_message("r1"), _answer_message("r2", jr.RESUME_ANSWER)]
    others = [
        {"customType": "ask:other", "details": {"requestId": "r3"}},
        {"customType": jr.BACKGROUND_ANSWER},  # no details
        {"customType": jr.BACKGROUND_ANSWER, "details": {"requestId": 4}},
    ]
    record = je.Returned.from_data({"version": 1, "messages": [*kept, *others, "text"]})
    assert record.marks() == ((0, jr.BACKGROUND_ANSWER, "r1"), (1, jr.RESUME_ANSWER, "r2"))
    assert je.Returned.from_data({"version": 1}).messages == ()
    assert je.Returned.from_data({"messages": "no"}).marks() == ()
    assert record.to_data() == {"version": 1, "messages": [*kept, *others]}
    assert je.Returned.from_cbor(record.to_cbor()) == record
    fold, load = _fold_of((jr.RETURNED, {"version": 1}), (jr.RETURNED, record.to_data()))
    assert [kind for kind, _ in jr.rebuilt_queue(fold, load).returned] == [
        jr.BACKGROUND_ANSWER,
        jr.RESUME_ANSWER,
    ]


def test_given_back_messages_come_back_in_the_order_they_were_given_back() -> None:
    later_first = [_answer_message("r9"), _answer_message("r1")]
    fold, load = _fold_of(
        (jr.RETURNED, {"version": 1, "messages": [later_first[0]]}),
        (jr.RETURNED, {"version": 1, "messages": [later_first[1]]}),
    )
    assert [m for _, m in jr.rebuilt_queue(fold, load).returned] == later_first


def test_a_given_back_resume_answer_is_settled_by_its_next_mark() -> None:
    message = _answer_message("r1", jr.RESUME_ANSWER)
    returned = (jr.RETURNED, {"version": 1, "messages": [message]})
    fold, _ = _fold_of(returned)
    assert fold.live()["returned"] == [[jr.RESUME_ANSWER, "r1", [0, -2], 0]]
    fold, _ = _fold_of(returned, (jr.RESUME_ANSWER, message))
    assert fold.live()["returned"] == []


@pytest.mark.parametrize("index", [-1, "0", 1.0, None])
def test_a_checkpoint_with_a_malformed_message_index_does_not_fit(index: Any) -> None:
    live = JOURNAL.empty().live()
    live["returned"] = [[jr.BACKGROUND_ANSWER, "r1", [10, 0], index]]
    with pytest.raises(ValueError) as refused:
        JOURNAL.restore(live)
    assert str(refused.value) == (
        "checkpoint state does not fit the journal: malformed message index"
    )
    live["returned"] = [[jr.BACKGROUND_ANSWER, "r1", [10, 0], 2]]
    assert JOURNAL.restore(live).returned == {(jr.BACKGROUND_ANSWER, "r1"): ((10, 0), 2)}
