"""The runtime's journal: the persistence actor of the current session, and session switches.

``SessionJournal`` forwards ``append``/``append_many``/``branch`` to the persistence actor of
the session the runtime is on. ``switch`` performs the file side of a session change:

- ``tree``: move the leaf to the entry id given;
- ``fork``: copy the active branch into the given file (``None``: in memory) and continue there;
- ``reload``: re-read the file;
- ``startup``, ``resume``, ``new``: continue with another session file (``None``: a fresh
  in-memory session), closing the old one.

Opening a damaged file keeps every whole entry and reports what was cut; those reports are
kept in ``reports`` so the host can show them.

The persistence actor runs shielded (cancelled calls must still be able to record their
outcomes; the runtime closes the journal last), so its start must never depend on the
caller's cancellation: the handle is made by the caller and the actor is started with
``start_soon``, with no checkpoint between a file being opened and its actor being owned. A
cancellation at any moment of a start or a switch therefore leaves either a running actor
the journal owns (``close`` ends it: flush and close) or no actor and the file closed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs
import trio

from pi_agent_ask.actors.owner import Owner
from pi_agent_ask.actors.persistence import (
    PersistenceHandle,
    open_persistence,
    serve_persistence,
)
from pi_agent_ask.persistence.projection import JOURNAL
from pi_agent_ask.persistence.session_file import Entry, OpenReport, SessionFile

T = TypeVar("T")


class SessionOpenError(OSError):
    """The operating system refused to open or create the session file (a directory that does
    not exist, no permission): ``filename`` is the session's path, ``strerror`` the reason,
    whichever file of the open (the file itself, its temporary sibling) was refused."""


def open_session_file(path: str | os.PathLike[str] | None) -> SessionFile:
    """Open (or create) the session file at ``path``; ``None``: a fresh in-memory session.

    Raises ``SessionFileError`` for a file that is not a session file (left untouched) and
    ``SessionOpenError`` when the operating system refuses the open. The session keeps the
    journal's fold (``persistence.projection``) and its checkpoints."""
    if path is None:
        return SessionFile.in_memory(projection=JOURNAL)
    try:
        return SessionFile.open(path, projection=JOURNAL)
    except SessionOpenError:
        raise
    except OSError as error:
        raise SessionOpenError(error.errno, error.strerror, os.fspath(path)) from error


@attrs.define(eq=False, repr=False)
class SessionJournal:
    """The journal of whichever session the runtime is on now."""

    _nursery: trio.Nursery
    _handle: PersistenceHandle
    _scope: trio.CancelScope
    reports: list[OpenReport] = attrs.field(factory=list)
    checked: bool = False
    """Each persistence actor checks that its session is used in its own task (``Owner``)."""

    @classmethod
    async def start(
        cls, nursery: trio.Nursery, session: SessionFile, *, checked: bool = False
    ) -> SessionJournal:
        """Serve an opened session file (``open_session_file``) from a persistence actor.

        Never a checkpoint: the journal is returned even when the caller is already cancelled,
        and the caller must ``close`` it (which also closes the file)."""
        handle, scope = _start_actor(nursery, session, checked=checked)
        journal = cls(nursery, handle, scope, checked=checked)
        if session.report is not None and (not session.report.ok or session.report.notes):
            journal.reports.append(session.report)
        return journal

    async def append(self, type_: str, data: Mapping[str, Any]) -> Entry:
        return await self._handle.append(type_, data)

    async def append_many(
        self, items: Iterable[tuple[str, Mapping[str, Any]]]
    ) -> tuple[Entry, ...]:
        return await self._handle.append_many(items)

    async def branch(self) -> tuple[Entry, ...]:
        return await self._handle.branch()

    async def read(self, read: Callable[[SessionFile], T]) -> T:
        return await self._handle.read(read)

    async def info(self) -> Any:
        return await self._handle.info()

    async def compact(self, summary: str) -> Entry:
        return await self._handle.compact(summary)

    async def switch(self, reason: str, session: Any) -> None:
        match reason:
            case "tree":
                await self._handle.move_leaf(session)
            case "fork":
                report = await self._handle.fork(session)
                self._keep(report)
            case "reload":
                self._keep(await self._handle.reload())
            case _ if session is not None and await self._is_current(session):
                # Resuming the file we already have open is re-reading it.
                self._keep(await self._handle.reload())
            case _:
                # A cancellation during the open does not abandon the thread: the file comes
                # back and is handed to its actor with no checkpoint in between, so it is
                # either served (and closed with the journal) or was never opened.
                fresh = await trio.to_thread.run_sync(open_session_file, session)
                handle, scope = _start_actor(self._nursery, fresh, checked=self.checked)
                old, old_scope = self._handle, self._scope
                self._handle, self._scope = handle, scope
                self._keep(fresh.report)
                try:
                    with trio.CancelScope(shield=True):
                        await old.flush()
                        await old.aclose()
                finally:
                    old_scope.cancel()

    async def _is_current(self, path: str | os.PathLike[str]) -> bool:
        current = (await self._handle.info()).path
        if current is None:
            return False
        return await trio.Path(current).resolve() == await trio.Path(path).resolve()

    def close(self) -> None:
        """Stop the persistence actor (it flushes and closes the file on its way out)."""
        self._scope.cancel()

    def _keep(self, report: OpenReport | None) -> None:
        if report is not None and (not report.ok or report.notes):
            self.reports.append(report)


def _start_actor(
    nursery: trio.Nursery, session: SessionFile, *, checked: bool = False
) -> tuple[PersistenceHandle, trio.CancelScope]:
    """Start a persistence actor for ``session``; the caller owns the handle and the scope.

    Invariant: once this returns, the caller holds the handle and the actor's scope, whatever
    cancellation is pending (``close`` then ends the actor, which flushes and closes the
    file); if it raises, no actor exists and ``session`` is closed. Hence no checkpoint here,
    and no ``nursery.start``: Trio ignores ``started()`` when the starter is already cancelled,
    and the shielded actor would then wait for requests nobody can send, holding ``start``
    (and the runtime) forever.
    """
    # Shielded: an outer cancellation of the runtime must not stop the journal before the
    # cancelled calls have recorded their outcomes; the runtime closes it last (``close``).
    # A scope cancelled before the task enters it is cancelled on entry: closing the journal
    # before the actor ran still ends it, through its teardown.
    scope = trio.CancelScope(shield=True)
    handle, requests = open_persistence()

    async def actor() -> None:
        # The first statement, before any checkpoint: nothing can cancel the task outside the
        # shield, so the teardown in ``serve_persistence`` always runs.
        with scope:
            await serve_persistence(session, requests, Owner("persistence", checked=checked))

    try:
        nursery.start_soon(actor, name=f"persistence {session.path}")
    except BaseException:
        # The nursery no longer takes tasks: no actor will own the file, release it here.
        requests.close()
        session.close(flush=False)
        raise
    return handle, scope
