"""The enqueue path without its round trips: a write made while the persistence actor is parked
is written by its caller (``persistence.Parked``, ``append_many_now``), and a queue message
whose transition needs no wait is handled in its sender's task (``QueueActor.ask_now``,
``tell_now``). Each falls back to the actor whenever that could be told apart from it."""

from __future__ import annotations

import datetime
import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_agent_ask import events as ev
from pi_agent_ask.actors import queue as q
from pi_agent_ask.actors import queue_state as qs
from pi_agent_ask.actors.ask import new_request_id
from pi_agent_ask.actors.core import Timestamps, iso_of, now_iso
from pi_agent_ask.actors.persistence import (
    PersistenceHandle,
    WriteRefused,
    open_persistence,
    serve_persistence,
)
from pi_agent_ask.actors.records import AskRequest
from pi_agent_ask.actors.session import SessionJournal
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence.session_file import SessionFile

from .runtime_support import EventLog, answer, payload, settings_file, settle, submit

GUARD = 20
_PARAMS = validate_ask_params(payload("a", background=True)).params
assert _PARAMS is not None


def test_request_ids_are_random_uuids_in_their_text_form() -> None:
    seen = set()
    for _ in range(2000):
        text = new_request_id()
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        seen.add(text)
    assert len(seen) == 2000


# ---- the persistence actor, parked --------------------------------------------------------


async def _served(session: SessionFile, nursery: trio.Nursery) -> PersistenceHandle:
    handle, requests = open_persistence()
    nursery.start_soon(serve_persistence, session, requests, handle.parked)
    await trio.testing.wait_all_tasks_blocked()
    return handle


async def test_an_append_to_a_parked_actor_is_written_by_its_caller_at_once() -> None:
    session = SessionFile.in_memory()
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            handle = await _served(session, nursery)
            assert handle.parked.session is session
            written = handle.append_many_now([("a", {"n": 1}), ("b", {"n": 2})])
            assert written is not None
            # Written before anything else ran: the session holds it already.
            assert [e.type for e in session.branch()] == ["a", "b"]
            entry = await handle.append("c", {"n": 3})
            assert session.leaf_id == entry.id
            assert await handle.branch() == session.branch()
            assert [e.data for e in session.branch()] == [{"n": 1}, {"n": 2}, {"n": 3}]
            await handle.aclose()


async def test_a_caller_never_writes_while_the_actor_works_on_a_request() -> None:
    session = SessionFile.in_memory()
    seen: list[Any] = []
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            handle = await _served(session, nursery)
            other = handle.clone()

            def read(served: SessionFile) -> int:
                # The actor serves a request: no caller may write beside it.
                seen.append(handle.parked.session)
                seen.append(handle.append_many_now([("a", {})]))
                return len(served)

            assert await other.read(read) == 0
            assert seen == [None, None]
            assert len(session) == 0
            await trio.testing.wait_all_tasks_blocked()
            assert handle.parked.session is session  # parked again
            await other.aclose()
            await handle.aclose()


async def test_a_refused_append_is_the_same_error_from_the_caller() -> None:
    session = SessionFile.in_memory()
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            handle = await _served(session, nursery)
            with pytest.raises(WriteRefused) as refused:
                handle.append_many_now([("a", {"text": "\ud800"})])
            assert refused.value.entry_type == "a"
            with pytest.raises(WriteRefused):
                await handle.append("a", {"text": "\ud800"})
            assert len(session) == 0
            assert handle.append_many_now([("b", {})]) is not None
            await handle.aclose()


async def test_writes_that_wait_for_the_disk_always_go_to_the_actor(tmp_path: Path) -> None:
    session = SessionFile.open(tmp_path / "s.pas", fsync=True)
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            handle = await _served(session, nursery)
            assert handle.append_many_now([("a", {})]) is None
            await handle.append("a", {})
            assert [e.type for e in session.branch()] == ["a"]
            await handle.aclose()


async def test_a_closed_journal_writes_nothing_from_its_callers() -> None:
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            journal = await SessionJournal.start(nursery, SessionFile.in_memory())
            await trio.testing.wait_all_tasks_blocked()
            assert journal.append_many_now([("a", {})]) is not None
            journal.close()
            assert journal.append_many_now([("b", {})]) is None


def test_a_transition_starts_from_a_copy_of_every_field() -> None:
    # ``_Step`` copies the state's ``__dict__`` (no ``__init__``): right only while no field
    # has a validator or converter, which a copy would skip.
    assert not any(f.validator or f.converter for f in attrs.fields(qs.QueueState))
    state = attrs.evolve(qs.initial_state(), epoch=3, next_seq=7, panel_visible=False)
    step = qs._Step(state)
    copy = step.s
    for field in attrs.fields(qs.QueueState):
        assert getattr(copy, field.name) is getattr(state, field.name), field.name
    # A table is shared until the transition writes it: then the copy has a layer of its own.
    step.items().set("r", None)  # type: ignore[arg-type]
    assert copy.items is not state.items and copy.by_seq is state.by_seq
    assert "r" not in state.items


def test_the_reducer_builds_items_with_every_field_in_order() -> None:
    # ``_form_stopped`` and ``_deliver`` build an ``Item`` from the old one positionally (not
    # ``evolve``, which reads the class's fields for every call): right only while these are
    # its fields, in this order, none with a validator or converter.
    fields = attrs.fields(qs.Item)
    assert [f.name for f in fields] == [
        "request",
        "seq",
        "form",
        "outcome",
        "delivered",
        "member_of",
        "routed_to",
    ]
    assert not any(f.validator or f.converter for f in fields)


# ---- the queue, parked --------------------------------------------------------------------


@attrs.define(eq=False)
class Journal:
    """A writer that takes a write at once (``append_many_now``) unless ``busy``."""

    entries: list[Any] = attrs.field(factory=list)
    busy: bool = False
    now: int = 0
    hold: trio.Event | None = None
    """Makes ``append_many`` wait until it is set."""

    def append_many_now(self, entries: Any) -> Any:
        if self.busy:
            return None
        self.now += 1
        self.entries.extend(entries)
        return tuple(entries)

    async def append(self, type_: str, data: Any) -> None:
        await self.append_many([(type_, data)])

    async def append_many(self, entries: Any) -> None:
        await trio.lowlevel.checkpoint()
        if self.hold is not None:
            await self.hold.wait()
        self.entries.extend(entries)


async def _no_form(
    _request: Any, _form: Any, _epoch: int, scope: trio.CancelScope, *_channels: Any
) -> None:
    # A form that is never answered; as every form runner must, it runs inside ``scope``.
    with scope:
        await trio.sleep_forever()


def _enqueue(rid: str, journal: Journal) -> Any:
    assert _PARAMS is not None
    request = AskRequest(rid, _PARAMS, background=True, created_at="t")

    def make(reply: Any) -> q.QueueMessage:
        recording = q.Recording(
            (("ask:queued", {"requestId": rid}),),
            lambda pending: ("tool-result", {"pending": pending}),
            journal,
        )
        return q.Enqueue(request, fs.new_form(_PARAMS), reply, recording)

    return make


async def _ask(tx: trio.MemorySendChannel[q.QueueMessage], make: Any) -> Any:
    reply_tx, reply_rx = trio.open_memory_channel[Any](1)
    await tx.send(make(reply_tx))
    return await reply_rx.receive()


def _queue_actor(
    journal: Journal,
) -> tuple[
    q.QueueActor, trio.MemorySendChannel[q.QueueMessage], trio.MemoryReceiveChannel[q.QueueMessage]
]:
    """A queue actor over ``journal`` whose forms are never answered, and its inbox."""
    wake_tx, _wake_rx = trio.open_memory_channel[dict[str, Any]](float("inf"))
    queue_tx, queue_rx = trio.open_memory_channel[q.QueueMessage](0)
    actor = q.QueueActor(
        journal=journal, events=ev.EventBus(), wakeups=wake_tx, run_background_form=_no_form
    )
    return actor, queue_tx, queue_rx


@pytest.mark.parametrize("busy", [False, True])
async def test_an_enqueue_is_handled_by_its_sender_only_when_it_need_not_wait(busy: bool) -> None:
    journal = Journal(busy=busy)
    actor, queue_tx, queue_rx = _queue_actor(journal)
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run, queue_rx, queue_tx.clone())
            await trio.testing.wait_all_tasks_blocked()
            handled, pending = await actor.ask_now(_enqueue("r1", journal))
            if busy:
                # The write would wait: nothing happened, and the queue task does it all.
                assert (handled, pending) == (False, None)
                assert actor.stats().pending == ()
                assert journal.entries == []
                pending = await _ask(queue_tx, _enqueue("r1", journal))
            else:
                assert handled and journal.now == 1
            assert pending == 1
            assert actor.stats().pending == ("r1",)
            assert journal.entries == [
                ("ask:queued", {"requestId": "r1"}),
                ("tool-result", {"pending": 1}),
            ]
            # A question without a write, and the same answer as the queue task's.
            handled, stats = await actor.ask_now(q.Inspect)
            assert handled and stats == await _ask(queue_tx, q.Inspect)
            nursery.cancel_scope.cancel()


async def test_a_message_for_a_busy_queue_goes_to_the_queue_task() -> None:
    hold = trio.Event()
    journal = Journal(hold=hold)
    actor, queue_tx, queue_rx = _queue_actor(journal)
    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            await nursery.start(actor.run, queue_rx, queue_tx.clone())
            show_tx, show_rx = trio.open_memory_channel[None](1)
            actor.state = attrs.evolve(actor.state, panel_visible=False)
            await queue_tx.send(q.Show(show_tx))  # its panel write waits at the hold
            await trio.testing.wait_all_tasks_blocked()
            assert await actor.ask_now(q.Inspect) == (False, None)
            assert not await actor.tell_now(q.SurfaceReady())
            hold.set()
            assert await show_rx.receive() is None
            await trio.testing.wait_all_tasks_blocked()
            handled, stats = await actor.ask_now(q.Inspect)
            assert handled and stats.panel_visible
            nursery.cancel_scope.cancel()


# ---- fairness -----------------------------------------------------------------------------


async def test_every_tool_call_lets_other_tasks_run_though_nothing_in_it_waits() -> None:
    # A background ask (and a refused call) finishes in its caller's task without waiting
    # for anything; each call still ends at a schedule point, so an agent calling in a tight
    # loop does not starve the UI and the other actors of a runtime sharing its loop.
    from pi_agent_ask.actors.form import NullSurface
    from pi_agent_ask.actors.runtime import open_runtime

    calls = 40
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.lowlevel.checkpoint()

    with trio.fail_after(GUARD):
        async with open_runtime(surface=NullSurface()) as rt, trio.open_nursery() as nursery:
            rt.agent_started()
            nursery.start_soon(ticker)  # (never blocked: no ``wait_all_tasks_blocked`` after it)
            await trio.lowlevel.checkpoint()
            start = ticks
            for i in range(calls):
                await rt.call_tool("ask_user", payload("a", background=True), tool_call_id=f"c{i}")
            queued = ticks - start
            start = ticks
            for i in range(calls):
                await rt.call_tool("no_such_tool", {}, tool_call_id=f"x{i}")
            refused = ticks - start
            nursery.cancel_scope.cancel()
    # About one step of the ticker per call (Trio orders a batch's tasks at random, so one
    # more or less at the edges); without the schedule point it made none at all.
    assert queued >= calls // 2 and refused >= calls // 2, (queued, refused)


# ---- timestamps -----------------------------------------------------------------------------

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@settings(max_examples=2000)
@given(ns=st.integers(min_value=0, max_value=253_402_300_799_999_999_999))  # to year 9999
def test_timestamps_read_as_datetime_writes_them(ns: int) -> None:
    written = (_EPOCH + datetime.timedelta(microseconds=ns // 1000)).isoformat(
        timespec="milliseconds"
    )
    assert iso_of(ns) == written.replace("+00:00", "Z")


def test_now_is_the_time_now() -> None:
    before = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
    now = now_iso()
    after = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
    assert before.replace("+00:00", "Z") <= now <= after.replace("+00:00", "Z")


@settings(max_examples=500)
@given(
    times=st.lists(
        st.integers(min_value=0, max_value=253_402_300_799_999_999_999)
        | st.integers(min_value=1_700_000_000_000_000_000, max_value=1_700_000_002_000_000_000),
        max_size=20,
    )
)
def test_a_runtimes_timestamps_are_iso_of_its_clock(times: list[int]) -> None:
    # Within one second, across seconds, and with a clock that goes back.
    clock = iter(times)
    stamps = Timestamps(clock=lambda: next(clock))
    assert [stamps.now() for _ in times] == [iso_of(ns) for ns in times]


def test_timestamps_within_one_second_format_its_date_and_time_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    calls = 0
    gmtime = time.gmtime

    def counted(seconds: float | None = None) -> time.struct_time:
        nonlocal calls
        calls += 1
        return gmtime(seconds)

    monkeypatch.setattr(time, "gmtime", counted)
    second = 1_700_000_000 * 10**9
    clock = iter([second, second + 5_000_000, second + 999_999_999, second + 10**9])
    stamps = Timestamps(clock=lambda: next(clock))
    assert [stamps.now() for _ in range(4)] == [
        "2023-11-14T22:13:20.000Z",
        "2023-11-14T22:13:20.005Z",
        "2023-11-14T22:13:20.999Z",
        "2023-11-14T22:13:21.000Z",
    ]
    assert calls == 2


async def test_a_background_forms_times_come_from_its_runtimes_clock(tmp_path: Path) -> None:
    from pi_agent_ask.actors.form import NullSurface
    from pi_agent_ask.actors.runtime import open_runtime

    asked, answered = 1_700_000_000_123_456_789, 1_700_000_000_987_000_000
    clock = iter([asked, answered])
    with trio.fail_after(GUARD):
        async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
            rt._timestamps = Timestamps(clock=lambda: next(clock))
            log = EventLog()
            log.attach(rt.events)
            await rt.call_tool("ask_user", payload("a", background=True), "c1")
            await rt.show_queue()
            await settle()
            submit(rt.events, "tool:c1", answer({"a": ["a1"]}))
            await settle()
    [started] = log.of(ev.STARTED)
    [completed] = log.of(ev.COMPLETED)
    assert started["createdAt"] == "2023-11-14T22:13:20.123Z"
    assert completed["completedAt"] == "2023-11-14T22:13:20.987Z"
