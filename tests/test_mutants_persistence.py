"""The persistence actor's errors say what happened: tests that mutation testing asked for.

Each test here kills surviving mutants of ``actors/persistence.py`` (``just mutate``); they
check behaviour through the actor's handle, not its layout.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from pi_agent_ask.actors.persistence import (
    PersistenceClosedError,
    PersistenceHandle,
    WriteRefused,
    open_persistence,
    run_persistence,
    serve_persistence,
)
from pi_agent_ask.persistence.session_file import SessionFile

TIMEOUT = 20


async def test_a_refused_entry_names_its_type_and_the_cause() -> None:
    session = SessionFile.in_memory()
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle: PersistenceHandle = await nursery.start(run_persistence, session)
            async with handle:
                with pytest.raises(WriteRefused) as caught:
                    await handle.append("ask:note", {"text": "\ud800"})  # a lone surrogate
                refused = caught.value
                assert refused.entry_type == "ask:note"
                assert isinstance(refused.cause, UnicodeEncodeError)
                assert str(refused).startswith("'ask:note' entry not written: UnicodeEncodeError: ")
                # The same through a batch: the type of the entry that could not be stored.
                with pytest.raises(WriteRefused) as caught:
                    await handle.append_many([("ask:a", {}), ("ask:b", {"x": "\udfff"})])
                assert caught.value.entry_type in ("ask:a", "ask:b")
                assert await handle.branch() == ()


async def test_fork_into_memory() -> None:
    session = SessionFile.in_memory()
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle: PersistenceHandle = await nursery.start(run_persistence, session)
            async with handle:
                first = await handle.append("message", {"text": "hi"})
                report = await handle.fork(None)
                assert report.path is None
                info = await handle.info()
                assert info.path is None
                assert await handle.branch() == (first,)


async def test_a_request_after_the_actor_ended_says_it_is_not_running(tmp_path: Path) -> None:
    session = SessionFile.open(tmp_path / "s.pias")
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle: PersistenceHandle = await nursery.start(run_persistence, session)
            other = handle.clone()
            await handle.aclose()
            await other.aclose()
        assert session.closed
        with pytest.raises(PersistenceClosedError, match=r"^the persistence actor is not running$"):
            await handle.append("message", {"text": "late"})


class _Crash(BaseException):
    """Not an ``Exception``: the actor does not answer it, it ends with it."""


def _crash(_session: SessionFile) -> None:
    raise _Crash


async def test_a_request_whose_actor_ends_before_replying_says_so() -> None:
    session = SessionFile.in_memory()
    handle, requests = open_persistence()

    async def actor() -> None:
        with contextlib.suppress(_Crash):
            await serve_persistence(session, requests)

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(actor)
            with pytest.raises(
                PersistenceClosedError, match=r"^the persistence actor ended before replying$"
            ):
                await handle.read(_crash)
    assert session.closed


async def test_an_fsync_session_serves_batches_leaf_moves_and_parents(tmp_path: Path) -> None:
    """With ``fsync`` the writes run in a worker thread; the results are the same."""
    session = SessionFile.open(tmp_path / "s.pias", fsync=True)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle: PersistenceHandle = await nursery.start(run_persistence, session)
            async with handle:
                root = await handle.append("message", {"text": "root"})
                later = await handle.append("message", {"text": "later"})
                assert await handle.append_many([]) == ()
                [side] = await handle.append_many(
                    [("message", {"text": "side"})], parent_id=root.id
                )
                assert side.parent_id == root.id
                assert await handle.branch() == (root, side)
                await handle.move_leaf(later.id)
                assert await handle.branch() == (root, later)
                assert await handle.branch(side.id) == (root, side)


async def test_a_failed_fork_leaves_the_actor_on_its_session(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    session = SessionFile.open(path)
    taken = tmp_path / "taken.pias"
    taken.write_bytes(b"not a session file")
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle: PersistenceHandle = await nursery.start(run_persistence, session)
            async with handle:
                first = await handle.append("message", {"text": "hi"})
                with pytest.raises(Exception):  # noqa: B017 - whatever the file system says
                    await handle.fork(tmp_path / "missing" / "dir" / "fork.pias")
                info = await handle.info()
                assert info.path == path
                assert info.report.ok and info.report.path == path
                assert await handle.branch() == (first,)
                second = await handle.append("message", {"text": "still here"})
                assert await handle.branch() == (first, second)


async def test_teardown_closes_the_file_when_the_last_flush_fails(tmp_path: Path) -> None:
    """The frames are in the OS already: a failing flush at teardown is not an error of the
    actor, and the file is closed (its write lock released) all the same."""
    session = SessionFile.open(tmp_path / "s.pias")

    def failing_flush() -> None:
        raise OSError(5, "the disk went away")

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle: PersistenceHandle = await nursery.start(run_persistence, session)
            async with handle:
                await handle.append("message", {"text": "hi"})
                assert session.needs_flush
                session.flush = failing_flush  # type: ignore[method-assign]
    assert session.closed


async def test_a_flush_thread_that_starts_after_the_deadline_leaves_the_file_alone(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a loaded machine the teardown's worker thread may start only after ``CLOSE_TIMEOUT``.
    By then teardown has closed the file itself; the late thread must see that and return
    at once (not flush a closed file, not wait for a claim nobody gives back)."""
    session = SessionFile.open(tmp_path / "s.pias")
    calls: list[str] = []
    real_flush, real_close = session.flush, session.close

    def flush() -> None:
        calls.append("flush")
        real_flush()

    def close(*, flush: bool = True) -> None:
        calls.append("close")
        real_close(flush=flush)

    monkeypatch.setattr(session, "flush", flush)
    monkeypatch.setattr(session, "close", close)
    real_run_sync = trio.to_thread.run_sync
    late: list[Callable[[], Any]] = []

    async def start_late(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        # The thread is not started before teardown stops waiting: it runs afterwards.
        late.append(functools.partial(fn, *args))
        await trio.sleep_forever()

    monkeypatch.setattr(trio.to_thread, "run_sync", start_late)
    syncs: list[int] = []
    async with trio.open_nursery() as nursery:
        handle: PersistenceHandle = await nursery.start(run_persistence, session)
        entry = await handle.append("message", {"text": "hi"})
        assert session.needs_flush
        # Counted from here: a disk sync on the event loop's thread could hang it.
        monkeypatch.setattr(os, "fdatasync", syncs.append)
        nursery.cancel_scope.cancel()
    # Teardown gave up at its bound and closed the file itself, without a flush or a sync.
    assert session.closed and calls == ["close"] and syncs == []
    [flush_and_close] = late
    returned = threading.Event()

    def run_the_late_thread() -> None:
        flush_and_close()
        returned.set()

    threading.Thread(target=run_the_late_thread, daemon=True).start()
    assert await real_run_sync(returned.wait, TIMEOUT)
    assert calls == ["close"] and syncs == []
    monkeypatch.undo()
    with SessionFile.open(tmp_path / "s.pias") as again:
        assert again.branch() == (entry,)
