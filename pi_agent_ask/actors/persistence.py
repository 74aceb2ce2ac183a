"""The persistence actor: the only writer of the session file.

Other actors hold a ``PersistenceHandle`` and ``await`` its methods; each call is one request
message carrying a one-shot reply channel. The actor handles requests in arrival order, so the
file order of entries is the order in which requests were received, and a reply is sent only
once the frame was written to the OS (``write`` returned; with ``SessionFile(fsync=True)`` also
flushed to the disk).

Appends are batched: the append requests already waiting behind the one received (taken with
``receive_nowait``, up to ``DRAIN_LIMIT``) are written with it as one frame
(``SessionFile.append_chains``), and each is answered after that write, in order. A request of
another kind, or an append under an explicit parent, ends the batch and is served after it.
A chain that cannot be stored fails alone; a frame whose write fails fails exactly the
requests in it and after it (nothing of them is on the file). The session is used by the
actor's task only (and by the worker threads it awaits).

Where the work runs: appends, leaf moves and short branches run inline in the actor task. A
frame is a few hundred bytes written to the page cache, which takes microseconds, less than
handing it to a thread would. Work that can take milliseconds or more runs in a worker thread
(``trio.to_thread.run_sync``) so the Trio loop stays responsive: writes of a session opened with
``fsync=True`` (each waits for the disk), decoding a long branch, fork and reload. The actor
awaits the thread before taking the next request, so the ``SessionFile`` is never used by two
threads at once, and those threads are never abandoned (a write always finishes or fails).

A caller cancelled after its request was received does not undo the write; it only misses the
reply. Teardown (the handle closed, or the actor cancelled) flushes and closes the file under a
shielded scope bounded by ``CLOSE_TIMEOUT``; flush and close share one worker thread, so the
descriptor is never closed under a running flush. When the bound is reached the thread is
abandoned and closes the file (releasing its write lock) as soon as its flush returns.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Final, Generic, TypeVar

import attrs
import trio

from pi_agent_ask.actors.owner import Owner
from pi_agent_ask.persistence.session_file import (
    COMPACTION_TYPE,
    CURRENT_LEAF,
    Entry,
    Header,
    LeafRef,
    OpenReport,
    SessionFile,
)

__all__ = [
    "CLOSE_TIMEOUT",
    "DRAIN_LIMIT",
    "INLINE_BRANCH_LIMIT",
    "Append",
    "AppendMany",
    "Branch",
    "Flush",
    "Fork",
    "Info",
    "MoveLeaf",
    "PersistenceClosedError",
    "PersistenceHandle",
    "Read",
    "Reload",
    "Reply",
    "Request",
    "SessionInfo",
    "WriteRefused",
    "open_persistence",
    "run_persistence",
    "serve_persistence",
]

T = TypeVar("T")

CLOSE_TIMEOUT: Final = 5.0
"""Seconds teardown may spend flushing the file to the disk before it closes it anyway."""

INLINE_BRANCH_LIMIT: Final = 2_000
"""Branches up to this many entries are decoded inline; longer ones in a worker thread."""


class PersistenceClosedError(Exception):
    """The persistence actor is gone (closed or cancelled): the request was not performed,
    or its reply was lost with the actor."""


class WriteRefused(Exception):
    """An append was refused before a byte was written: an entry cannot be stored (text that
    is not valid Unicode, nesting too deep to encode, a value CBOR cannot hold) or its frame
    is over ``MAX_FRAME_BYTES``. The session and the actor go on as if it was never asked.

    The defence behind ``form/untrusted.py``: whatever slips past the boundary comes back to
    the caller as this error, never as an exception through the actor or its nursery."""

    def __init__(self, entry_type: str, cause: Exception) -> None:
        super().__init__(f"{entry_type!r} entry not written: {type(cause).__name__}: {cause}")
        self.entry_type = entry_type
        self.cause = cause


@attrs.frozen(repr=False)
class Reply(Generic[T]):
    """The outcome of one request: a value, or the exception the session raised."""

    value: T | None = None
    error: BaseException | None = None

    def unwrap(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


@attrs.frozen(repr=False)
class SessionInfo:
    """A snapshot of the open session."""

    path: Path | None
    header: Header
    leaf_id: str | None
    entries: int
    report: OpenReport


# ---- the one-shot reply every request carries ------------------------------------------------

ReplyTo = trio.MemorySendChannel
"""Where the actor puts a request's ``Reply``: a memory channel with a buffer of one, so the
actor never blocks on it; closed unanswered when the actor ends first."""


# ---- requests: a closed set; every one carries its request id and one-shot reply slot ------


@attrs.frozen(eq=False, repr=False)
class Append:
    request_id: int
    type: str
    data: Mapping[Any, Any] | None
    parent_id: LeafRef
    reply: ReplyTo[Reply[Entry]]


@attrs.frozen(eq=False, repr=False)
class AppendMany:
    """A chain of entries written as one frame: all of them reach the file, or none."""

    request_id: int
    items: tuple[tuple[str, Mapping[Any, Any] | None], ...]
    parent_id: LeafRef
    reply: ReplyTo[Reply[tuple[Entry, ...]]]


@attrs.frozen(eq=False, repr=False)
class Branch:
    request_id: int
    leaf_id: LeafRef
    reply: ReplyTo[Reply[tuple[Entry, ...]]]


@attrs.frozen(eq=False, repr=False)
class MoveLeaf:
    request_id: int
    entry_id: str | None
    reply: ReplyTo[Reply[None]]


@attrs.frozen(eq=False, repr=False)
class Fork:
    """Write the active branch into a new file; the actor continues with the new file."""

    request_id: int
    path: Path | None
    reply: ReplyTo[Reply[OpenReport]]


@attrs.frozen(eq=False, repr=False)
class Reload:
    """Re-read the file from disk."""

    request_id: int
    reply: ReplyTo[Reply[OpenReport]]


@attrs.frozen(eq=False, repr=False)
class Flush:
    """Force everything written so far to the disk."""

    request_id: int
    reply: ReplyTo[Reply[None]]


@attrs.frozen(eq=False, repr=False)
class Info:
    request_id: int
    reply: ReplyTo[Reply[SessionInfo]]


@attrs.frozen(eq=False, repr=False)
class Read:
    """Run a reading function on the session where it lives (the journal's fold, the
    history index): ``read(session)`` returns a value that no longer needs the session."""

    request_id: int
    read: Callable[[SessionFile], Any]
    reply: ReplyTo[Reply[Any]]


Request = Append | AppendMany | Branch | MoveLeaf | Fork | Reload | Flush | Info | Read


# ---- the handle ----------------------------------------------------------------------------


@attrs.define(eq=False, repr=False)
class PersistenceHandle:
    """What other actors hold to use the session file. ``clone()`` one per owner.

    Every method raises ``PersistenceClosedError`` when the actor is gone, and re-raises in
    the caller what the session raised for this request (``KeyError`` for an unknown entry id,
    ``WriteRefused`` for an entry that cannot be stored, ``ValueError`` for other bad arguments,
    ``OSError`` when the disk failed); the actor keeps going.
    """

    _send: trio.MemorySendChannel[Request]
    _ids: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))

    async def append(
        self,
        type: str,
        data: Mapping[Any, Any] | None = None,
        *,
        parent_id: LeafRef = CURRENT_LEAF,
    ) -> Entry:
        """Append one entry (under the current leaf by default); it becomes the leaf."""
        entry: Entry = await self._call(Append, type, data, parent_id)
        return entry

    async def append_many(
        self,
        items: Iterable[tuple[str, Mapping[Any, Any] | None]],
        *,
        parent_id: LeafRef = CURRENT_LEAF,
    ) -> tuple[Entry, ...]:
        """Append a chain of entries atomically (one frame); acknowledged together."""
        batch = tuple((entry_type, data) for entry_type, data in items)
        entries: tuple[Entry, ...] = await self._call(AppendMany, batch, parent_id)
        return entries

    async def compact(self, summary: str, data: Mapping[str, Any] | None = None) -> Entry:
        """Append a ``compaction`` summary entry; nothing is removed."""
        return await self.append(COMPACTION_TYPE, {**(data or {}), "summary": summary})

    async def branch(self, leaf_id: LeafRef = CURRENT_LEAF) -> tuple[Entry, ...]:
        """The entries root → ``leaf_id`` (default: the current leaf)."""
        entries: tuple[Entry, ...] = await self._call(Branch, leaf_id)
        return entries

    async def read(self, read: Callable[[SessionFile], T]) -> T:
        """``read(session)``, run by the actor (in a worker thread for a file): for reading
        functions that take what they need from the session and keep nothing of it."""
        value: T = await self._call(Read, read)
        return value

    async def move_leaf(self, entry_id: str | None) -> None:
        """Move the leaf (tree navigation); durable once this returns."""
        await self._call(MoveLeaf, entry_id)

    async def fork(self, path: str | os.PathLike[str] | None) -> OpenReport:
        """Copy the active branch into a new session file (``None``: in memory) and switch
        the actor to it; the old file is flushed and closed. Returns the new file's report."""
        report: OpenReport = await self._call(Fork, Path(path) if path is not None else None)
        return report

    async def reload(self) -> OpenReport:
        """Re-read the session file from disk; returns what the re-read found."""
        report: OpenReport = await self._call(Reload)
        return report

    async def flush(self) -> None:
        """Force everything written so far to the disk."""
        await self._call(Flush)

    async def info(self) -> SessionInfo:
        """Path, header, leaf and size of the open session."""
        info: SessionInfo = await self._call(Info)
        return info

    def clone(self) -> PersistenceHandle:
        """Another handle on the same actor; the actor ends when every handle is closed."""
        return PersistenceHandle(self._send.clone(), self._ids)

    async def aclose(self) -> None:
        """Close this handle (idempotent)."""
        await self._send.aclose()

    async def __aenter__(self) -> PersistenceHandle:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(self, request: Callable[..., Request], *args: Any) -> Any:
        """Send ``request(request_id, *args, reply)`` and wait for its reply.

        The send never blocks (the request channel is unbounded: each caller has at most one
        request in it), so once this call began, its request is taken: a cancellation from
        then on only misses the reply, as it always could once the actor had the request."""
        reply_tx, reply_rx = trio.open_memory_channel[Reply[Any]](1)
        with reply_rx:
            try:
                self._send.send_nowait(request(next(self._ids), *args, reply_tx))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                await trio.sleep(0)  # noqa: ASYNC115 (a checkpoint, as every call of the handle is)
                raise PersistenceClosedError("the persistence actor is not running") from None
            try:
                reply = await reply_rx.receive()
            except trio.EndOfChannel:
                raise PersistenceClosedError(
                    "the persistence actor ended before replying"
                ) from None
        return reply.unwrap()


# ---- the actor -----------------------------------------------------------------------------


def open_persistence() -> tuple[PersistenceHandle, trio.MemoryReceiveChannel[Request]]:
    """A handle and the request channel an actor (``serve_persistence``) will serve.

    For an owner that must hold the handle before the actor task exists, whatever happens to
    the task's start (see ``serve_persistence``)."""
    # Unbounded: a send never waits (each caller has one request in it at a time), and the
    # requests waiting when the actor turns to them are written together.
    send, receive = trio.open_memory_channel[Request](math.inf)
    return PersistenceHandle(send), receive


async def serve_persistence(
    session: SessionFile,
    requests: trio.MemoryReceiveChannel[Request],
    owner: Owner | None = None,
) -> None:
    """Own ``session`` and serve ``requests`` until every handle is closed or the task is
    cancelled. The session is closed when this returns or raises, in every case (also when
    the task is cancelled before it serves anything). ``owner``: checks, in checked mode,
    that the session is used in this task only."""
    current = session
    if owner is None:
        owner = Owner("persistence")
    owner.enter()
    try:
        with requests:
            try:
                while True:
                    current = await _serve_wake(current, requests, owner)
            except trio.EndOfChannel:
                pass  # every handle is closed
            finally:
                # Requests still waiting are not served: their callers hear the actor ended.
                while True:
                    try:
                        requests.receive_nowait().reply.close()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
    finally:
        await _teardown(current)


async def _serve_wake(
    session: SessionFile, requests: trio.MemoryReceiveChannel[Request], owner: Owner
) -> SessionFile:
    """Wait for the next request, serve it with the appends waiting behind it, and return
    the session to continue with. A function of its own so that nothing of the requests
    served (their entries' data) stays referenced while the actor waits for the next ones."""
    request = await requests.receive()
    owner.check()
    appends, other = _drain(request, requests)
    try:
        if appends:
            session = await _serve_appends(session, appends)
    finally:
        if other is not None:
            # Served after the batch (or, if the actor is ending, told so).
            with other.reply:
                session = await _serve(session, other)
    return session


DRAIN_LIMIT: Final = 256
"""At most this many append requests are written together."""

_Appending = Append | AppendMany


def _batchable(request: Request) -> bool:
    return isinstance(request, Append | AppendMany) and request.parent_id is CURRENT_LEAF


def _drain(
    first: Request, requests: trio.MemoryReceiveChannel[Request]
) -> tuple[list[_Appending], Request | None]:
    """``first`` and the append requests already waiting behind it (their senders are blocked
    in ``send`` now: nothing is awaited), up to the first request of another kind, which is
    served after them. Only appends under the current leaf are gathered; order is kept."""
    if not _batchable(first):
        return [], first
    assert isinstance(first, Append | AppendMany)
    appends: list[_Appending] = [first]
    while len(appends) < DRAIN_LIMIT:
        try:
            request = requests.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel):
            break
        if not _batchable(request):
            return appends, request
        assert isinstance(request, Append | AppendMany)
        appends.append(request)
    return appends, None


async def _serve_appends(session: SessionFile, appends: list[_Appending]) -> SessionFile:
    """Write the chains of ``appends`` together (``SessionFile.append_chains``: one frame, one
    ``write``, one flush with ``fsync``), then reply to each, in order. Every reply comes after
    the write of its own entries; a request refused, or in a frame whose write failed, hears
    its own error and nothing of it is on the file."""
    try:
        chains = [((r.type, r.data),) if isinstance(r, Append) else r.items for r in appends]
        outcome = await _run(session, session.fsync, lambda: session.append_chains(chains))
        for request, result in zip(appends, _results(outcome, len(appends)), strict=True):
            _reply(request.reply, _append_reply(request, result))
    finally:
        for request in appends:
            request.reply.close()
    return session


def _results(
    outcome: Reply[list[tuple[Entry, ...] | Exception]], count: int
) -> list[tuple[Entry, ...] | Exception]:
    if outcome.error is not None:
        # The session refused the whole batch (closed, read-only, broken by a failed write).
        error = outcome.error
        assert isinstance(error, Exception)
        return [error] * count
    assert outcome.value is not None
    return outcome.value


def _append_reply(request: _Appending, result: tuple[Entry, ...] | Exception) -> Reply[Any]:
    if isinstance(result, Exception):
        first = request.type if isinstance(request, Append) else _first_type(request.items)
        return Reply(error=_refused(first, result))
    if isinstance(request, Append):
        return Reply(result[0])
    return Reply(result)


def _first_type(items: tuple[tuple[str, Mapping[Any, Any] | None], ...]) -> str:
    return items[0][0] if items else ""


def _refused(entry_type: str, error: Exception) -> Exception:
    """The failures of building and encoding entries are ``WriteRefused`` (see
    ``_refusing``); ``OSError`` and ``KeyError`` stay what they are."""
    if isinstance(error, ValueError | TypeError | RecursionError):
        refused = WriteRefused(str(entry_type), error)
        refused.__cause__ = error
        return refused
    return error


async def run_persistence(
    session: SessionFile,
    *,
    task_status: trio.TaskStatus[PersistenceHandle] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Own ``session`` and serve requests until every handle is closed or the task is cancelled.

    Start with ``handle = await nursery.start(run_persistence, session)``. The session is
    closed when the actor ends, in every case. Do not run this inside a shielded scope: Trio
    ignores ``started()`` when the starter is already cancelled, and a shielded actor would
    then never end, so ``start`` would never return; use ``open_persistence`` and
    ``serve_persistence`` with ``start_soon`` instead.
    """
    handle, requests = open_persistence()
    try:
        task_status.started(handle)
    except BaseException:
        requests.close()
        await _teardown(session)
        raise
    await serve_persistence(session, requests)


async def _serve(session: SessionFile, request: Request) -> SessionFile:
    """Perform one request and reply; return the session to continue with."""
    reply: Reply[Any]
    with request.reply:
        match request:
            case Append(type=entry_type, data=data, parent_id=parent_id):
                reply = await _run(
                    session,
                    session.fsync,
                    _refusing(
                        entry_type, lambda: session.append(entry_type, data, parent_id=parent_id)
                    ),
                )
            case AppendMany(items=items, parent_id=parent_id):
                first = items[0][0] if items else ""
                reply = await _run(
                    session,
                    session.fsync,
                    _refusing(first, lambda: session.append_many(items, parent_id=parent_id)),
                )
            case Branch(leaf_id=leaf_id):
                long_branch = _branch_length(session, leaf_id) > INLINE_BRANCH_LIMIT
                reply = await _run(session, long_branch, lambda: session.branch(leaf_id))
            case MoveLeaf(entry_id=entry_id):
                reply = await _run(session, session.fsync, lambda: session.move_leaf(entry_id))
            case Fork(path=path):
                forked = await _run(session, True, lambda: session.fork(path))
                if forked.error is None and forked.value is not None:
                    # The old file is done with: flush and close it, continue with the fork.
                    await _run(session, True, session.close)
                    _reply(request.reply, Reply(forked.value.report))
                    return forked.value
                reply = forked
            case Reload():
                reply = await _run(session, True, session.reload)
            case Flush():
                reply = await _run(session, True, session.flush)
            case Read(read=read):
                reply = await _run(session, True, lambda: read(session))
            case Info():
                reply = Reply(
                    SessionInfo(
                        session.path, session.header, session.leaf_id, len(session), session.report
                    )
                )
        _reply(request.reply, reply)
    return session


def _refusing(entry_type: str, append: Callable[[], T]) -> Callable[[], T]:
    """``append`` with the failures of building and encoding entries turned into
    ``WriteRefused``. The session raises them before it writes anything: ``ValueError`` (a
    frame over the limit; ``UnicodeEncodeError`` for a lone surrogate), ``TypeError`` (a value
    CBOR cannot hold), ``RecursionError`` (nesting too deep). ``OSError`` (the disk) and
    ``KeyError`` (an unknown parent) stay what they are."""

    def run() -> T:
        try:
            return append()
        except (ValueError, TypeError, RecursionError) as error:
            raise WriteRefused(str(entry_type), error) from error

    return run


def _branch_length(session: SessionFile, leaf_id: LeafRef) -> int:
    try:
        return len(session.branch_ids(leaf_id))
    except KeyError:
        return 0


def _threaded(session: SessionFile, slow: bool) -> bool:
    """Whether ``_run`` runs work on ``session`` in a worker thread: ``slow`` work (an
    append is slow in an ``fsync`` session) on a file; in memory nothing blocks."""
    return slow and session.path is not None


async def _run(session: SessionFile, slow: bool, work: Callable[[], T]) -> Reply[T]:
    """Run ``work`` inline, or in a worker thread when it may block for long.

    Only exceptions are captured (they go back to the caller); ``Cancelled`` and other
    ``BaseException``s propagate. A thread is never abandoned: cancellation waits for it.
    """
    try:
        if _threaded(session, slow):
            return Reply(await trio.to_thread.run_sync(work))
        return Reply(work())
    except Exception as exc:
        return Reply(error=exc)


def _reply(channel: ReplyTo[Reply[T]], reply: Reply[T]) -> None:
    # The caller may have been cancelled and closed its end: the work is done, the reply moot.
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        channel.send_nowait(reply)


async def _teardown(session: SessionFile) -> None:
    """Flush then close, shielded from cancellation and bounded by ``CLOSE_TIMEOUT``.

    Flush and close run in one worker thread, one after the other, so the file descriptor is
    never closed while a flush may still use it. At the deadline teardown stops waiting (a
    stuck disk must not hold the runtime's exit) and abandons the thread, which closes the file
    (releasing the write lock) once its flush returns; the frames already reached the OS, so
    only the wait for the disk is given up. Without frames to flush the close is immediate.
    """
    with trio.CancelScope(shield=True):
        if not session.needs_flush:
            session.close(flush=False)
            return
        # Exactly one closer: the thread, or this task if the deadline came before the thread
        # ran at all (then nobody else will ever close the file).
        claim = threading.Lock()

        def flush_and_close() -> None:
            if not claim.acquire(blocking=False):
                return
            try:
                # An OSError must not skip the close; the frames are in the OS already.
                with contextlib.suppress(OSError):
                    session.flush()
            finally:
                session.close(flush=False)

        with trio.move_on_after(CLOSE_TIMEOUT):
            await trio.to_thread.run_sync(flush_and_close, abandon_on_cancel=True)
        if claim.acquire(blocking=False):
            session.close(flush=False)
