"""The enqueue path's parts: request ids, a reducer transition, fairness of tool calls, and
timestamps."""

from __future__ import annotations

import datetime
import uuid
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_agent_ask import events as ev
from pi_agent_ask.actors import queue_state as qs
from pi_agent_ask.actors.ask import new_request_id
from pi_agent_ask.actors.core import Timestamps, iso_of, now_iso
from pi_agent_ask.actors.queue_step import Step
from pi_agent_ask.form.validate import validate_ask_params

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


# ---- a transition --------------------------------------------------------------------------


def test_a_transition_shares_the_tables_it_does_not_write() -> None:
    state = attrs.evolve(qs.initial_state(), epoch=3, next_seq=7, panel_visible=False)
    step = Step(state)
    assert step.s is state
    # A table is shared until the transition writes it: then the new state has a layer of
    # its own, and the state it started from does not see the write.
    step.items().set("r", None)  # type: ignore[arg-type]
    assert step.s.items is not state.items and step.s.by_seq is state.by_seq
    assert "r" not in state.items
    assert (step.s.epoch, step.s.next_seq, step.s.panel_visible) == (3, 7, False)


# ---- fairness -----------------------------------------------------------------------------


async def test_every_tool_call_lets_other_tasks_run() -> None:
    # Every call is a schedule point (a call that passes the boundary writes through the
    # persistence actor; one refused at the boundary passes through the scheduler on its
    # own), so an agent calling in a tight loop does not starve the UI and the other actors
    # of a runtime sharing its loop.
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
            unknown = ticks - start
            start = ticks
            for i in range(calls):
                result = await rt.call_tool("bad\ud800name", {}, tool_call_id=f"r{i}")
                assert result["isError"] is True
            refused = ticks - start
            nursery.cancel_scope.cancel()
    # At least about one step of the ticker per call (Trio orders a batch's tasks at random,
    # so one more or less at the edges); without the schedule point it made none at all.
    assert min(queued, unknown, refused) >= calls // 2, (queued, unknown, refused)


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
