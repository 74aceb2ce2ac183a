"""The persistence actor writes the appends waiting behind the first one together: one frame,
each caller answered after that frame's write, in order, failing only its own requests."""

from __future__ import annotations

import errno
import os
import struct
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from pi_agent_ask.actors.persistence import (
    PersistenceHandle,
    WriteRefused,
    open_persistence,
    serve_persistence,
)
from pi_agent_ask.persistence import session_file as sf
from pi_agent_ask.persistence import session_values
from pi_agent_ask.persistence.frames import create_file
from pi_agent_ask.persistence.session_file import Entry, SessionFile
from tests.session_frames import decode_payload

TIMEOUT = 20  # seconds: a hang fails the test instead of the whole run


def frames(path: Path) -> list[Any]:
    """Every frame after the header, decoded (an entries frame of several: ``{"batch"}``)."""
    data = path.read_bytes()
    out = []
    offset = 0
    while offset < len(data):
        length, _crc = struct.unpack_from(">II", data, offset)
        out.append(decode_payload(data[offset + 8 : offset + 8 + length]))
        offset += 8 + length
    return out[1:]


def chain_types(frame: Any) -> list[str]:
    items = frame.get("batch", [frame])
    return [item["type"] for item in items]


async def gathered(
    session: SessionFile,
    calls: list[Callable[[PersistenceHandle], Awaitable[Any]]],
    *,
    then: Callable[[PersistenceHandle], Awaitable[None]] | None = None,
) -> list[Any]:
    """Start ``calls`` (in this order) while no actor serves the channel, so every one of
    them is blocked in ``send`` when the actor starts: its first receive takes the first and
    the drain takes the others. Returns each call's result or exception."""
    handle, requests = open_persistence()
    results: list[Any] = [None] * len(calls)

    async def run(n: int, call: Callable[[PersistenceHandle], Awaitable[Any]]) -> None:
        try:
            results[n] = await call(handle)
        except Exception as exc:
            results[n] = exc

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            for n, call in enumerate(calls):
                nursery.start_soon(run, n, call)
                # One at a time: the channel's waiting senders keep this order.
                await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(serve_persistence, session, requests)
            await trio.testing.wait_all_tasks_blocked()
            if then is not None:
                await then(handle)
            await handle.aclose()
    return results


def append(entry_type: str, data: Any) -> Callable[[PersistenceHandle], Awaitable[Any]]:
    return lambda handle: handle.append(entry_type, data)


def append_many(items: list[tuple[str, Any]]) -> Callable[[PersistenceHandle], Awaitable[Any]]:
    return lambda handle: handle.append_many(items)


async def test_waiting_appends_are_one_frame_in_request_order(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    calls = [append(f"t{n}", {"n": n}) for n in range(5)]
    calls.insert(2, append_many([("m1", {}), ("m2", {})]))
    results = await gathered(SessionFile.open(path), calls)
    # One frame holds all of them, in the order the requests were sent.
    assert [chain_types(f) for f in frames(path)] == [["t0", "t1", "m1", "m2", "t2", "t3", "t4"]]
    with SessionFile.open(path) as again:
        branch = again.branch()
    # Each caller got its own entries, and they are the file's, in the same chain.
    flat: list[Entry] = []
    for result in results:
        flat.extend(result if isinstance(result, tuple) else (result,))
    assert branch == tuple(flat)
    assert [e.parent_id for e in branch[1:]] == [e.id for e in branch[:-1]]


async def test_a_refused_chain_in_a_batch_fails_alone(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    calls = [
        append("before", {"n": 1}),
        append_many([("bad-1", {}), ("bad-2", {"text": "\ud800"})]),  # a lone surrogate
        append("after", {"n": 2}),
    ]
    before, refused, after = await gathered(SessionFile.open(path), calls)
    assert isinstance(refused, WriteRefused) and refused.entry_type == "bad-1"
    assert after.parent_id == before.id  # the refused chain left no gap and no trace
    assert [chain_types(f) for f in frames(path)] == [["before", "after"]]
    with SessionFile.open(path) as again:
        assert again.branch() == (before, after)


async def test_a_failed_frame_write_fails_its_requests_and_records_nothing_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.pias"
    real_write = os.write
    writes = 0

    def second_write_fails(fd: int, data: bytes | memoryview) -> int:
        nonlocal writes
        writes += 1
        if writes == 2:
            real_write(fd, bytes(data)[: len(data) // 2])  # torn, then rolled back
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    session = SessionFile.open(path)
    # Small frames: the batch below needs two, and the second one's write fails.
    monkeypatch.setattr(session_values, "MAX_FRAME_BYTES", 6_000)
    monkeypatch.setattr(sf.os, "write", second_write_fails)
    text = "x" * 1_000  # each chain about 1 KB of CBOR: three fit in one frame's budget
    calls = [append(f"t{n}", {"text": text + str(n)}) for n in range(6)]

    async def retry(handle: PersistenceHandle) -> None:
        monkeypatch.setattr(sf.os, "write", real_write)
        retried.append(await handle.append("retry", {}))

    retried: list[Entry] = []
    results = await gathered(session, calls, then=retry)
    written = [r for r in results if isinstance(r, Entry)]
    failed = [r for r in results if isinstance(r, OSError)]
    assert written and failed and len(written) + len(failed) == 6
    # The first frame's requests succeeded, all of the failed frame's (and later) failed.
    assert results[: len(written)] == written
    assert [e.type for e in written] == [f"t{n}" for n in range(len(written))]
    with SessionFile.open(path) as again:
        assert again.report.ok  # the torn frame was rolled back
        assert again.branch() == (*written, *retried)
    assert retried[0].parent_id == written[-1].id


async def test_cancelled_callers_of_a_batch_in_flight_leave_it_written_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``fsync`` the batch is written in a worker thread. Callers cancelled while it is
    in flight miss their replies, but the write finishes, whole and once, and the actor goes
    on serving."""
    path = tmp_path / "s.pias"
    session = SessionFile.open(path, fsync=True)
    in_flight = threading.Event()
    release = threading.Event()
    real_sync = os.fdatasync

    def slow_sync(fd: int) -> None:
        in_flight.set()
        release.wait(TIMEOUT)
        real_sync(fd)

    monkeypatch.setattr(sf.os, "fdatasync", slow_sync)
    handle, requests = open_persistence()
    cancelled: list[int] = []

    async def caller(n: int, scope: trio.CancelScope) -> None:
        with scope:
            await handle.append(f"t{n}", {"n": n})
            return
        cancelled.append(n)

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            scopes = [trio.CancelScope() for _ in range(3)]
            for n, scope in enumerate(scopes):
                nursery.start_soon(caller, n, scope)
                await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(serve_persistence, session, requests)
            await trio.to_thread.run_sync(in_flight.wait, TIMEOUT)
            for scope in scopes:
                scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert sorted(cancelled) == [0, 1, 2]  # nobody waits for the thread
            release.set()
            monkeypatch.setattr(sf.os, "fdatasync", real_sync)
            later = await handle.append("later", {})
            await handle.aclose()
    assert [chain_types(f) for f in frames(path)] == [["t0", "t1", "t2"], ["later"]]
    with SessionFile.open(path) as again:
        assert [e.type for e in again.branch()] == ["t0", "t1", "t2", "later"]
        assert again.branch()[-1] == later


async def test_a_read_behind_a_batch_sees_it_and_other_requests_keep_their_place(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.pias"
    session = SessionFile.open(path)
    root = session.append("root", {})

    async def branch(handle: PersistenceHandle) -> Any:
        return tuple(e.type for e in await handle.branch())

    async def under_root(handle: PersistenceHandle) -> Any:
        return await handle.append("side", {}, parent_id=root.id)  # not batched: a parent

    calls = [append("a", {}), branch, under_root, append("b", {}), branch]
    _a, first_read, side, b, second_read = await gathered(session, calls)
    assert first_read == ("root", "a")
    assert side.parent_id == root.id
    assert b.parent_id == side.id and second_read == ("root", "side", "b")
    assert [chain_types(f) for f in frames(path)] == [["root"], ["a"], ["side"], ["b"]]


@pytest.mark.parametrize("version", [1, 2])
def test_append_chains_matches_append_many_one_by_one(tmp_path: Path, version: int) -> None:
    """``append_chains`` is ``append_many`` per chain: same branch, same refusals."""
    path = tmp_path / "s.pias"
    if version == 1:
        header = sf.Header(1, 0.0, "0" * 32, None)
        create_file(path, header.to_cbor(), ())
    with SessionFile.open(path) as session:
        results = session.append_chains(
            [[("a", {"n": 1})], [], [("b", {"s": "\udfff"})], [("c", {}), ("d", None)]]
        )
        assert isinstance(results[2], ValueError)
        assert results[1] == ()
        a, c, d = results[0][0], *results[3]  # type: ignore[index,misc]
        assert (c.parent_id, d.parent_id) == (a.id, c.id)
        assert session.branch() == (a, c, d)
    with SessionFile.open(path) as again:
        assert again.branch() == (a, c, d)
        assert again.header.version == version
