"""A team desk's web page: the web desk (``desk/web/app.py``) over the store's board.

The page renders a desk's :class:`~pi_agent_ask.desk.board.Board`; :class:`TeamPage` keeps one
(with no display of its own) showing every pending form of the store (``TeamBoard.snapshot``),
each with a small actor that reads the page's commands from the form's channel and carries
them to the store:

- a draft typed on the page claims the form for this desk (the other desks show who is on it)
  and is saved to the store with the claim, so a desk that dies hands the form back with it;
  on a form another desk holds the claim is refused and so is the draft
  (:meth:`TeamPage.save_drafts` answers the page with who holds it; the page keeps the text);
  a page that goes quiet (its person left, its tab closed) puts the form back for every desk,
  with its draft, a lease (``TeamBoard.lease``) after its last draft;
- Submit and Cancel are ``TeamBoard.answer`` under this desk's person (``--as``): the first
  submission wins, and a later one is refused with the store's sentence, which the page shows;
- "Later" puts the form back for every desk, with its draft.

The page and this desk's terminal (a desk may run both) each keep to the forms they claimed
(``TeamBoard.surface_of``): a form open on the terminal is shown as the terminal's, and the
page's drafts and Later leave it there, refused with a sentence; an answer from the page is
taken (one desk is one person), and the terminal says it was answered here.

A form claimed by another desk stays on the page, saying who is on it (:meth:`held_by`); a
draft saved elsewhere replaces the page's copy while this desk holds no claim on the form.
History is the store's (``store/history.py``), with who answered each question.
"""

from __future__ import annotations

import math
from typing import Final

import attrs
import trio

from pi_agent_ask.actors.form import (
    FormInput,
    NullSurface,
    RemoteResponse,
    UserCommand,
    answer_saved,
)
from pi_agent_ask.desk.board import Board, Shown
from pi_agent_ask.desk.web.app import DraftRefused, WebDesk
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.types import Draft
from pi_agent_ask.persistence.history_records import HistoryRecord
from pi_agent_ask.store.board import UNREACHABLE, TeamBoard, form_title
from pi_agent_ask.store.db import FormRow, Refused, Store, machine
from pi_agent_ask.store.history import team_records
from pi_agent_ask.store.terminal import draft_json, form_of
from pi_agent_ask.store.wakes import AsyncStore

__all__ = ["DRAFT_SAVED_LATER", "StoreHistories", "TeamPage", "team_web_desk"]

DRAFT_SAVED_LATER: Final = "your draft is saved once the store takes it."
"""How a page's draft refusal ends while the store is away or refuses writes (after the
cause, a clause): the page sends the draft again by itself until the store takes it."""


@attrs.frozen
class StoreHistories:
    """A team desk's histories, for the page: every agent of the store."""

    store: AsyncStore

    async def keys(self) -> list[str]:
        return await self.store.run(Store.agents, self.store.store)

    async def records(self, key: str) -> list[HistoryRecord] | None:
        rows = await self.store.run(Store.requests_of, self.store.store, key)
        return team_records(rows) if rows else None


def _page_state(row: FormRow) -> fs.FormState | None:
    """``row``'s form as the page shows it: with its draft, and waited on by its agent unless
    it is a background question (the terminal shows every form as one it may put back)."""
    state = form_of(row, None)
    return None if state is None else attrs.evolve(state, background=row.background)


@attrs.frozen
class _SaveDrafts:
    """The page's drafts for a form, answered with ``None`` (kept) or why not."""

    drafts: tuple[Draft, ...]
    reply: trio.MemorySendChannel[Refused | None]


@attrs.define(eq=False)
class _Form:
    row: FormRow
    send: trio.MemorySendChannel[FormInput | _SaveDrafts]


@attrs.define(eq=False)
class TeamPage:
    team: TeamBoard
    board: Board = attrs.field(factory=lambda: Board(display=NullSurface()))
    _forms: dict[str, _Form] = attrs.field(factory=dict)
    _nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Mirror the team board on :attr:`board` until cancelled."""
        previous = self.team.on_change

        def changed() -> None:
            previous()
            self._sync()

        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.team.on_change = changed
            self.board.waited_on = self._waited_on
            try:
                self._sync()
                task_status.started()
                await trio.sleep_forever()
            finally:
                self.team.on_change = previous

    def _waited_on(self, shown: Shown) -> bool:
        """A ``wait_for_answers`` of ``shown``'s agent is in progress (on any desk): the page
        says the agent is blocked on its background form, which still has Later."""
        form = self._forms.get(shown.flow_id)
        return form is not None and form.row.agent_waits

    def held_by(self, shown: Shown) -> str | None:
        """Who is on ``shown`` at another desk or on this desk's terminal, in words (``None``:
        no one, or this page)."""
        form = self._forms.get(shown.flow_id)
        if form is None:
            return None
        surface = self.team.surface_of(shown.flow_id)
        if surface == "terminal":
            return f"{self.team.person} is answering this on this desk's terminal."
        if surface == "page" or not form.row.claim_live:
            return None
        stopped = self.team.stopped(form.row)
        if stopped is not None:
            return f"{stopped}."
        return f"{form.row.claimed_by} is answering this on {machine(form.row.claim_desk)}."

    def _sync(self) -> None:
        assert self._nursery is not None
        rows = {row.request_id: row for row in self.team.snapshot()}
        for request_id in [r for r in self._forms if r not in rows]:
            gone = self._forms.pop(request_id)
            gone.send.close()  # its actor ends; the page hears what became of the form
            left = self.team.ended(request_id)
            self.board.hide(
                gone.row.agent_key,
                request_id,
                None if left is None else left.ended,
                self.team.ending_text(request_id, title=form_title(gone.row)),
            )
        pending: dict[str, int] = {}
        for request_id, row in rows.items():
            pending[row.agent_key] = pending.get(row.agent_key, 0) + 1
            form = self._forms.get(request_id)
            if form is None:
                state = _page_state(row)
                if state is None:
                    continue  # its stored questions are not valid: nothing a page can show
                send, receive = trio.open_memory_channel[FormInput | _SaveDrafts](16)
                self._forms[request_id] = _Form(row, send)
                self.board.show(row.agent_key, request_id, state, send)
                self._nursery.start_soon(self._serve, row.agent_key, request_id, receive)
                continue
            form.row = row
            shown = self._shown(request_id)
            if shown is None:
                continue
            if self.team.surface_of(request_id) != "page":
                # Not the page's: the store's draft is the one typed elsewhere (another desk,
                # or this desk's terminal), shown as it is typed.
                state = _page_state(row)
                if state is not None and (
                    state.drafts != shown.state.drafts or state.background != shown.state.background
                ):
                    self.board.update(row.agent_key, request_id, state)
            elif shown.state.background != row.background:  # a cut call left a background form
                state = attrs.evolve(shown.state, background=row.background)
                self.board.update(row.agent_key, request_id, state)
        # The board counts an agent's shown foreground form itself (as a desk of files shows
        # one at a time, the rest queued): the pending count here is the rest.
        last = {shown.key: shown for shown in self.board.shown_forms()}
        for key in {agent.key for agent in self.board.agents()} | pending.keys():
            itself = 1 if key in last and not last[key].state.background else 0
            self.board.set_pending(key, max(0, pending.get(key, 0) - itself))
        self.board.touch()  # claims changed: the page's "who is on it"

    def _shown(self, request_id: str) -> Shown | None:
        return next((s for s in self.board.shown_forms() if s.flow_id == request_id), None)

    async def save_drafts(self, shown: Shown, drafts: tuple[Draft, ...]) -> DraftRefused | None:
        """The page's drafts for ``shown`` (the web desk's ``drafter``): kept in the store
        under this desk's claim, or refused with who holds the form."""
        form = self._forms.get(shown.flow_id)
        if form is None:
            raise trio.ClosedResourceError  # gone: the page hears what became of it
        reply_tx, reply_rx = trio.open_memory_channel[Refused | None](1)
        await form.send.send(_SaveDrafts(drafts, reply_tx))
        refused = await reply_rx.receive()
        if refused is None:
            return None
        until = None if refused.until is None else refused.until.isoformat()
        code = {
            "claimed": "held",
            "lease_lost": "held",
            "invalid": "refused",
            # The store away or refusing writes: nothing in the text is to change, and the
            # page sends it again by itself until the store takes it (as "refused" the text
            # waited for the person's next change, however long the store was back).
            "unavailable": "unwritten",
        }.get(refused.reason, "answered")
        if refused.reason == "claimed" and refused.desk == self.team.desk:
            code = "here"  # this desk's terminal holds it: the page says so as a note
        said = refused.message
        if code == "unwritten" and refused.cause:
            # The page sends it again by itself and adds that the text stays on it: "try
            # again in a moment" was not the person's to do, nor "kept here" twice.
            said = f"{refused.cause[:1].upper()}{refused.cause[1:]}: {DRAFT_SAVED_LATER}"
        return DraftRefused(code, said, refused.holder, refused.desk, until)

    async def _serve(
        self, key: str, request_id: str, receive: trio.MemoryReceiveChannel[FormInput | _SaveDrafts]
    ) -> None:
        """One form's actor: the page's commands to the store, one at a time; a claim the page
        took ends a lease after the page's last draft."""
        async with receive:
            while True:
                quiet = self.team.lease if self.team.surface_of(request_id) == "page" else math.inf
                message: FormInput | _SaveDrafts | None = None
                with trio.move_on_after(quiet):
                    try:
                        message = await receive.receive()
                    except trio.EndOfChannel:
                        return
                if message is None:
                    await self._put_back(request_id)
                elif isinstance(message, _SaveDrafts):
                    with message.reply as reply:
                        reply.send_nowait(await self._save(key, request_id, message.drafts))
                elif isinstance(message, RemoteResponse):
                    # A refusal that kept the page's claim (text the store cannot hold, the
                    # store away) leaves it to the quiet timer, like a draft.
                    done = await self.team.answer(request_id, message.response)
                    with message.reply as reply:
                        reply.send_nowait(
                            (done.reason, done.message) if isinstance(done, Refused) else None
                        )
                elif isinstance(message, UserCommand):
                    # Later's sender waits for its ``saved``: answered once the store has it,
                    # or with why it does not.
                    try:
                        answer_saved(
                            message.saved, await self._command(key, request_id, message.command)
                        )
                    finally:
                        if message.saved is not None:
                            message.saved.close()

    async def _save(self, key: str, request_id: str, drafts: tuple[Draft, ...]) -> Refused | None:
        """Claim the form unless this desk holds it, then keep the drafts under the claim.
        Refused: the page's board keeps the store's drafts, the page keeps the person's."""
        shown = self._shown(request_id)
        if shown is None:
            return await self.team.refusal(request_id)
        if self.team.wakes.away:
            # The listener lost the server: said beside the form at once, not after a store
            # call's minute of retries with the page silent (the desk's notice is at the top,
            # off a phone's screen). The page sends the draft again by itself, and the
            # listener is back within half a second of the server.
            return UNREACHABLE
        state = attrs.evolve(shown.state, drafts=drafts)
        for _attempt in range(2):  # a claim that ran out meanwhile is claimed again, once
            if self.team.claimed_here(request_id) is None:
                claim = await self.team.open(request_id, surface="page")
                if isinstance(claim, Refused):
                    return claim
            saved = await self.team.save_draft(request_id, draft_json(state), surface="page")
            if isinstance(saved, Refused):
                # This desk's terminal holds the form, or the store cannot hold the text: the
                # claim stays as it was, nothing changed.
                return saved
            if saved:
                self.board.update(key, request_id, state)
                return None
            await self.team.close(request_id, surface="page")  # the claim was lost: forget it
        return await self.team.refusal(request_id)

    async def _put_back(self, request_id: str) -> None:
        """The page went quiet on a form it claimed: back for every desk, with its draft."""
        shown = self._shown(request_id)
        await self.team.close(
            request_id, None if shown is None else draft_json(shown.state), surface="page"
        )

    async def _command(self, key: str, request_id: str, command: fs.Command) -> str | None:
        """Carry a page's command to the store: ``None`` once done, or why not (Later: not
        saved for later, the form stays as it is)."""
        shown = self._shown(request_id)
        if shown is None or not isinstance(command, fs.Cancel):
            return None
        # Later: first the store. Only a claim the page took goes back (one of this desk's
        # terminal stays with it: the web desk refused this Later already, saying so, unless
        # the terminal claimed the form just now); a store away or refusing the write leaves
        # the form and its claim as they were, and the page says so (it said "Saved for
        # later" before the store had it, and while the store was away).
        refused = await self.team.put_back(request_id, draft_json(shown.state), surface="page")
        if refused is not None:
            # A clause the page finishes with what to do (``NOT_PUT_BACK``): said once.
            return f"Not saved for later: {refused.cause or refused.message.rstrip('.')}"
        # The form goes behind every other form on the page, as on the terminal (it stayed
        # where it was, so the page showed the same form after "Saved for later"): it leaves
        # the page's board now, put back for later, and the next read of the team's board
        # shows it again, last. Its actor (this one) ends with it.
        form = self._forms.pop(request_id, None)
        if form is not None:
            form.send.close()
        self.board.hide(key, request_id, "deferred")
        await self.team.refresh()
        return None


def team_web_desk(page: TeamPage, store: AsyncStore, *, token: str, secure: bool) -> WebDesk:
    """The web desk of a team desk; ``token`` opens its ``/login-code`` (``desk login-url``
    reads it from the desk's sign-in file), never its ``/mcp``."""
    return WebDesk(
        board=page.board,
        histories=StoreHistories(store),
        token=token,
        secure=secure,
        holder=page.held_by,
        drafter=page.save_drafts,
    )
