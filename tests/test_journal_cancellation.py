"""The journal under cancellation: starting a persistence actor never loses it.

A cancellation that lands while a session file is being opened (its worker thread cannot be
abandoned, so the file comes back into an already cancelled scope) must end with the actor
running and owned by the journal, or with no actor and the file closed; never with a
shielded actor nobody can reach, which would hold the runtime open forever. The file's write
lock tells which: after the runtime is gone, the file can be opened for writing again.

A hang of that kind cannot be broken by cancellation (the actor is shielded), so each
scenario runs in a Trio loop of its own worker thread, and the test waits for it with a
deadline: a regression fails here instead of stalling the whole run.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import attrs
import pytest
import trio
import trio.lowlevel
import trio.testing

from pi_agent_ask import open_runtime
from pi_agent_ask.actors import session as session_mod
from pi_agent_ask.actors.persistence import CLOSE_TIMEOUT, run_persistence
from pi_agent_ask.actors.session import SessionJournal
from pi_agent_ask.persistence.session_file import SessionFile

from .runtime_support import RecordingSurface, payload, settings_file

T = TypeVar("T")

TIMEOUT = 20  # seconds: a hang fails the test instead of the whole run


async def in_own_loop(scenario: Callable[[], Awaitable[T]]) -> T:
    """Run ``scenario`` in a fresh Trio loop in a worker thread; fail after ``TIMEOUT``.

    On a hang the thread is abandoned (its loop stays blocked; worker threads are daemons)."""
    with trio.fail_after(TIMEOUT):
        result: T = await trio.to_thread.run_sync(trio.run, scenario, abandon_on_cancel=True)
    return result


@attrs.define(eq=False)
class GatedOpen:
    """``open_session_file`` that, while armed, waits in its worker thread until released."""

    real: Callable[[Any], SessionFile]
    armed: bool = True
    entered: threading.Event = attrs.field(factory=threading.Event)
    release: threading.Event = attrs.field(factory=threading.Event)

    def __call__(self, path: Any) -> SessionFile:
        if self.armed:
            self.entered.set()
            # A sync worker thread: blocking here is what a slow disk does. Bounded, so a
            # failing test never leaves this thread behind for good.
            self.release.wait(TIMEOUT)
        return self.real(path)

    async def cancel_during_open(self, scope: trio.CancelScope) -> None:
        """Cancel ``scope`` once the open is in its thread, then let the open finish."""
        await trio.to_thread.run_sync(self.entered.wait, abandon_on_cancel=True)
        scope.cancel()
        self.release.set()


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[GatedOpen]:
    gated = GatedOpen(session_mod.open_session_file)
    monkeypatch.setattr(session_mod, "open_session_file", gated)
    yield gated
    gated.release.set()


def project_tasks() -> list[str]:
    """Names of the tasks of this project still alive in the current Trio loop."""
    found: list[str] = []

    def walk(task: trio.lowlevel.Task) -> None:
        code = getattr(task.coro, "cr_code", None)
        if code is not None and "pi_agent_ask" in code.co_filename:
            found.append(task.name)
        for nursery in task.child_nurseries:
            for child in nursery.child_tasks:
                walk(child)

    walk(trio.lowlevel.current_root_task())
    return found


def assert_writable(path: Path) -> None:
    """The write lock is free: nothing holds the file open for writing any more."""
    with SessionFile.open(path) as again:
        assert again.path == path


async def test_open_runtime_cancelled_while_the_session_file_opens(
    tmp_path: Path, gate: GatedOpen
) -> None:
    path = tmp_path / "s.pas"
    settings = settings_file(tmp_path)
    bodies: list[object] = []

    async def scenario() -> tuple[bool, list[str]]:
        scope = trio.CancelScope()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(gate.cancel_during_open, scope)
            with scope:
                async with open_runtime(
                    session=path, settings=settings, surface=RecordingSurface()
                ) as rt:
                    bodies.append(rt)
                    await trio.sleep_forever()
        return scope.cancelled_caught, project_tasks()

    cancelled, left = await in_own_loop(scenario)
    assert gate.entered.is_set()
    assert cancelled
    assert left == []
    assert_writable(path)


async def test_change_session_cancelled_while_the_new_file_opens(
    tmp_path: Path, gate: GatedOpen
) -> None:
    gate.armed = False
    first, second = tmp_path / "a.pas", tmp_path / "b.pas"
    settings = settings_file(tmp_path)

    async def scenario() -> tuple[dict[str, Any], list[str]]:
        async with open_runtime(session=first, settings=settings, surface=RecordingSurface()) as rt:
            gate.armed = True
            scope = trio.CancelScope()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(gate.cancel_during_open, scope)
                with scope:
                    await rt.change_session("new", second)
            gate.armed = False
            # The open came back after the cancellation: the switch finished (the file is
            # served, not leaked) and the runtime follows it, writing into the new file.
            receipt = await rt.call_tool("ask_user", payload("a", background=True), "b1")
        return receipt, project_tasks()

    receipt, left = await in_own_loop(scenario)
    assert gate.entered.is_set()
    assert receipt.get("isError") is not True, receipt
    assert left == []
    assert_writable(first)
    assert_writable(second)
    with SessionFile.open(second, readonly=True) as after:
        assert "ask:queued" in [entry.type for entry in after.branch()]


async def test_journal_started_in_a_cancelled_scope_is_owned_and_closes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.pas"

    async def scenario() -> tuple[bool, bool, list[str]]:
        session = SessionFile.open(path)
        async with trio.open_nursery() as nursery:
            journals: list[SessionJournal] = []
            with trio.CancelScope() as scope:
                scope.cancel()
                journals.append(await SessionJournal.start(nursery, session))
                await trio.lowlevel.checkpoint()
            # Shielded: the caller's cancellation did not stop it; it serves requests.
            (journal,) = journals
            entry = await journal.append("m", {"n": 1})
            assert await journal.branch() == (entry,)
            journal.close()
        return scope.cancelled_caught, session.closed, project_tasks()

    cancelled, closed, left = await in_own_loop(scenario)
    assert cancelled
    assert closed
    assert left == []
    with SessionFile.open(path) as again:
        assert [entry.data for entry in again.branch()] == [{"n": 1}]


async def test_journal_closed_before_its_actor_ran_still_closes_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.pas"
    session = SessionFile.open(path)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            journal = await SessionJournal.start(nursery, session)
            journal.close()
    assert session.closed
    assert_writable(path)


async def test_teardown_never_closes_the_file_under_a_running_flush(
    tmp_path: Path, mock_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.pas"
    session = SessionFile.open(path)
    flushing, release, closed = threading.Event(), threading.Event(), threading.Event()
    closed_under_flush: list[bool] = []
    real_flush, real_close = session.flush, session.close

    def stuck_flush() -> None:
        # A disk that does not answer until the test says so.
        flushing.set()
        release.wait(TIMEOUT)
        closed_under_flush.append(session.closed)
        real_flush()

    def close(*, flush: bool = True) -> None:
        real_close(flush=flush)
        closed.set()

    async def expire_while_flushing() -> None:
        # The teardown's bound runs out while its flush is certainly under way.
        assert await trio.to_thread.run_sync(flushing.wait, TIMEOUT)
        mock_clock.jump(CLOSE_TIMEOUT)

    monkeypatch.setattr(session, "flush", stuck_flush)
    monkeypatch.setattr(session, "close", close)
    async with trio.open_nursery() as outer:
        async with trio.open_nursery() as nursery:
            journal = await nursery.start(run_persistence, session)
            entry = await journal.append("m", {})
            outer.start_soon(expire_while_flushing)
            nursery.cancel_scope.cancel()
        # Teardown returned at its bound with the flush still running: the file stays open
        # until the flush is done, and the flush's thread closes it then.
        assert not closed.is_set()
        release.set()
    assert await trio.to_thread.run_sync(closed.wait, TIMEOUT)
    assert closed_under_flush == [False]
    assert session.closed
    with SessionFile.open(path) as again:
        assert again.branch() == (entry,)
