"""The persistence actor: requests, acknowledgement after the write, errors, teardown."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

from pi_agent_ask.actors.persistence import (
    CLOSE_TIMEOUT,
    INLINE_BRANCH_LIMIT,
    PersistenceClosedError,
    PersistenceHandle,
    WriteRefused,
    run_persistence,
)
from pi_agent_ask.persistence.session_file import SessionFile

TIMEOUT = 20  # seconds: a hang fails the test instead of the whole run


@pytest.fixture(params=["file", "memory"])
def session(request: pytest.FixtureRequest, tmp_path: Path) -> SessionFile:
    if request.param == "file":
        return SessionFile.open(tmp_path / "session.pias")
    return SessionFile.in_memory()


@pytest.fixture
async def journal(session: SessionFile) -> AsyncIterator[PersistenceHandle]:
    async with trio.open_nursery() as nursery:
        handle: PersistenceHandle = await nursery.start(run_persistence, session)
        async with handle:
            yield handle
    assert session.closed


async def test_requests_round_trip(journal: PersistenceHandle) -> None:
    with trio.fail_after(TIMEOUT):
        first = await journal.append("message", {"text": "hi"})
        batch = await journal.append_many([("ask:queued", {"requestId": "r"}), ("ask:panel", None)])
        assert [e.parent_id for e in batch] == [first.id, batch[0].id]
        assert await journal.branch() == (first, *batch)
        await journal.move_leaf(first.id)
        assert await journal.branch() == (first,)
        assert await journal.branch(batch[1].id) == (first, *batch)
        summary = await journal.compact("so far", {"tokensBefore": 10})
        assert summary.data == {"tokensBefore": 10, "summary": "so far"}
        assert summary.parent_id == first.id
        info = await journal.info()
        assert (info.leaf_id, info.entries) == (summary.id, 4)


async def test_an_acknowledged_entry_is_already_in_the_file(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        path = tmp_path / "s.pias"
        async with trio.open_nursery() as nursery:
            journal = await nursery.start(run_persistence, SessionFile.open(path))
            async with journal:
                for n in range(5):
                    entry = await journal.append("message", {"n": n})
                    # Another reader of the file sees it as soon as the append returned.
                    with SessionFile.open(path, readonly=True) as reader:
                        assert reader.get(entry.id) == entry
                        assert reader.leaf_id == entry.id
                await journal.move_leaf(None)
                with SessionFile.open(path, readonly=True) as reader:
                    assert reader.leaf_id is None


async def test_errors_reach_the_caller_and_the_actor_carries_on(
    journal: PersistenceHandle,
) -> None:
    with trio.fail_after(TIMEOUT):
        with pytest.raises(KeyError):
            await journal.append("message", {}, parent_id="nobody")
        with pytest.raises(KeyError):
            await journal.move_leaf("nobody")
        with pytest.raises(KeyError):
            await journal.branch("nobody")
        # Entries that cannot be built or stored are refused writes (the cause is kept).
        with pytest.raises(WriteRefused) as refused:
            await journal.append("message", {"bad": object()})
        assert isinstance(refused.value.cause, TypeError)
        with pytest.raises(WriteRefused) as refused:
            await journal.append("", {})
        assert isinstance(refused.value.cause, ValueError)
        entry = await journal.append("message", {})
        assert await journal.branch() == (entry,)


async def test_concurrent_appends_form_one_chain(journal: PersistenceHandle) -> None:
    with trio.fail_after(TIMEOUT):
        acknowledged = []

        async def writer(n: int) -> None:
            acknowledged.append(await journal.append("message", {"n": n}))

        async with trio.open_nursery() as nursery:
            for n in range(30):
                nursery.start_soon(writer, n)
        branch = await journal.branch()
        assert sorted(e.id for e in branch) == sorted(e.id for e in acknowledged)
        # Each request was applied alone, in order: every entry hangs under the previous one.
        assert [e.parent_id for e in branch] == [None, *(e.id for e in branch[:-1])]


async def test_closing_every_handle_ends_the_actor_and_closes_the_file(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        path = tmp_path / "s.pias"
        session = SessionFile.open(path)
        async with trio.open_nursery() as nursery:
            journal: PersistenceHandle = await nursery.start(run_persistence, session)
            other = journal.clone()
            await journal.aclose()
            entry = await other.append("still", {})  # the clone keeps the actor alive
            await other.aclose()
        assert session.closed
        with pytest.raises(PersistenceClosedError):
            await other.append("late", {})
        with SessionFile.open(path) as again:  # the write lock was released
            assert again.branch() == (entry,)


async def test_cancelling_the_actor_closes_the_file(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        path = tmp_path / "s.pias"
        session = SessionFile.open(path)
        async with trio.open_nursery() as nursery:
            journal: PersistenceHandle = await nursery.start(run_persistence, session)
            entries = [await journal.append("m", {"n": n}) for n in range(3)]
            nursery.cancel_scope.cancel()
        assert session.closed
        with pytest.raises(PersistenceClosedError):
            await journal.append("after", {})
        with SessionFile.open(path) as again:
            assert again.branch() == tuple(entries)


async def test_a_cancelled_caller_does_not_undo_its_write(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        # With fsync the write runs in a worker thread, so the caller can be cancelled while the
        # actor is still working on its request.
        path = tmp_path / "s.pias"
        async with trio.open_nursery() as nursery:
            journal = await nursery.start(run_persistence, SessionFile.open(path, fsync=True))
            async with journal:
                first = await journal.append("first", {})
                with trio.CancelScope() as scope:
                    nursery.start_soon(_cancel_when_blocked, scope)
                    await journal.append("second", {})
                later = await journal.append("third", {})
                types = [e.type for e in await journal.branch()]
        assert types == ["first", "second", "third"]
        with SessionFile.open(path, readonly=True) as again:
            assert again.branch()[0] == first
            assert again.leaf_id == later.id


async def _cancel_when_blocked(scope: trio.CancelScope) -> None:
    await trio.testing.wait_all_tasks_blocked()
    scope.cancel()


async def test_fork_switches_the_actor_to_the_new_file(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        path = tmp_path / "s.pias"
        fork_path = tmp_path / "fork.pias"
        async with trio.open_nursery() as nursery:
            journal = await nursery.start(run_persistence, SessionFile.open(path))
            async with journal:
                root = await journal.append("a", {})
                await journal.append("b", {})
                await journal.move_leaf(root.id)
                report = await journal.fork(fork_path)
                assert report.path == fork_path
                assert report.entries == 1
                after = await journal.append("c", {})
                info = await journal.info()
                assert info.path == fork_path
                assert info.header.forked_from == str(path.resolve())
                with pytest.raises(FileExistsError):
                    await journal.fork(path)
                # The old file is closed (unlocked) and unchanged.
                with SessionFile.open(path) as old:
                    assert len(old) == 2
                    assert after.id not in old
        with SessionFile.open(fork_path, readonly=True) as forked:
            assert forked.branch() == (root, after)


async def test_reload_reports_what_the_file_holds(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        path = tmp_path / "s.pias"
        async with trio.open_nursery() as nursery:
            journal = await nursery.start(run_persistence, SessionFile.open(path))
            async with journal:
                entry = await journal.append("a", {})
                report = await journal.reload()
                assert report.entries == 1
                assert report.ok
                assert await journal.branch() == (entry,)
                await journal.flush()


async def test_long_branches_come_back_whole(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        path = tmp_path / "s.pias"
        async with trio.open_nursery() as nursery:
            journal = await nursery.start(run_persistence, SessionFile.open(path))
            async with journal:
                count = INLINE_BRANCH_LIMIT + 5
                batch = await journal.append_many([("m", {"n": n}) for n in range(count)])
                assert await journal.branch() == batch


async def test_teardown_is_bounded_when_the_disk_hangs(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = SessionFile.open(tmp_path / "s.pias")
    release = threading.Event()
    monkeypatch.setattr(session, "flush", release.wait)  # a flush that does not finish
    closed = threading.Event()
    real_close = session.close

    def close(*, flush: bool = True) -> None:
        real_close(flush=flush)
        closed.set()

    # The abandoned flush thread closes the file once its flush returns.
    monkeypatch.setattr(session, "close", close)
    # Should the teardown wait for the flush after all, this ends the wait in real time, and
    # the virtual clock (which jumps only to deadlines) shows that no bound was applied.
    backstop = threading.Timer(5.0, release.set)
    backstop.start()
    try:
        async with trio.open_nursery() as nursery:
            journal = await nursery.start(run_persistence, session)
            entry = await journal.append("m", {})
            start = trio.current_time()
            nursery.cancel_scope.cancel()
        assert trio.current_time() - start >= CLOSE_TIMEOUT
    finally:
        release.set()
        backstop.cancel()
    assert await trio.to_thread.run_sync(closed.wait, TIMEOUT)
    assert session.closed
    with SessionFile.open(tmp_path / "s.pias") as again:
        assert again.branch() == (entry,)
