"""A team desk's side of the store: the board every desk shows, claims, drafts, answers.

:class:`TeamBoard` is what a person's desk (terminal, web page, or a script in tests) works
through. Its :meth:`snapshot` is every pending form of every agent, in the order they were
asked, each with its claim (who is on it, on which desk, until when) and its last draft, so
every view can show who is answering what. Opening a form claims it (a lease of ``lease``
seconds, extended every ``heartbeat`` seconds while it stays open); answering it records the
one outcome under the person's name (``--as``); a form of a desk that died comes back when
its lease runs out, with its draft. The snapshot is refreshed when the store says the board
changed (``LISTEN``), and once more when the earliest lease it shows runs out (a timer at that
instant, since nothing notifies an expiry). That instant is the time left that the database
reports with the board (``FormRow.lease_left``), counted on this process's monotonic clock: the
desk's wall clock may be ahead of the database's or behind it.

A desk may have two surfaces, its terminal and its web page (:data:`Surface`). Each claim
remembers the one that took it, and the other surface's claim, draft or release of that form
is refused with a sentence: Later on the page must not take a form from under the terminal,
nor its drafts replace what the terminal shows. An answer from either surface is taken: one
desk is one person (``--as``), and answering is their own explicit act (from the page while
away from the terminal, say).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final, Literal, TypeVar

import attrs
import psycopg
import trio

from pi_agent_ask.desk.board import ENDINGS_KEPT, form_name
from pi_agent_ask.form.result import answers_from_remote, build_result
from pi_agent_ask.form.validate import params_from_saved
from pi_agent_ask.store.db import (
    Claim,
    FormRow,
    Left,
    Refused,
    Store,
    Submitted,
    desk_name,
    local_time,
    machine,
)
from pi_agent_ask.store.wakes import AsyncStore, Wakes

__all__ = [
    "HEARTBEAT",
    "LEASE",
    "NOT_STORABLE",
    "STOPPED",
    "UNREACHABLE",
    "WRITES_AGAIN",
    "Surface",
    "TeamBoard",
    "desk_name",
    "form_title",
    "result_of_response",
    "store_refused",
]

LEASE: Final = 30.0
"""Seconds a claim lives without a heartbeat (a dead desk's forms come back after this)."""
HEARTBEAT: Final = 10.0
"""Seconds between a live desk's lease extensions."""


NOT_STORABLE: Final = Refused(
    "invalid",
    "The team's store cannot keep this text. The usual cause is a NUL character (U+0000), as "
    "in text pasted from a binary file, which PostgreSQL does not store: remove it and try "
    "again.",
)
"""A draft or an answer whose text PostgreSQL refused (a ``psycopg.DataError``; the
transaction wrote nothing). Text may hold any character but NUL, which PostgreSQL's text and
JSON cannot store (a desk of files keeps it); the person's text stays with them."""


def _unavailable(cause: str, then: str) -> Refused:
    """The store did not take a call (``cause``, a clause): said as its own sentence, then
    what the person does (``then``); the clause alone for a sentence of its own (Later)."""
    return Refused("unavailable", f"{cause[:1].upper()}{cause[1:]}. {then}", cause=cause)


UNREACHABLE: Final = _unavailable(
    "the team's store cannot be reached (PostgreSQL is away or restarting)",
    "What you typed is kept here: try again in a moment.",
)
"""A claim, a draft or an answer the store could not take because it stayed unreachable for
longer than a store call retries (``AsyncStore.retry_for``). The desk carries on: its person
keeps what they typed, and every desk re-reads the board when its listener is back."""

STOPPED: Final = Refused(
    "unavailable", "This desk is stopping: the form stays free for the other desks."
)
"""A claim that came back from the store after the board stopped (:meth:`TeamBoard.open`):
given back at once."""


def store_refused(error: psycopg.Error) -> Refused:
    """A call the store refused for a reason of its own, neither away nor the text (a database
    made read-only, as a standby during a failover; a grant taken away): nothing was written.
    Said with PostgreSQL's reason; the desk carries on, and its person keeps what they typed."""
    reason = " ".join(str(error).split()) or type(error).__name__
    return _unavailable(
        f"the team's store refused this desk's write ({reason})",
        "What you typed is kept here: try again once the store takes writes again.",
    )


WRITES_AGAIN: Final = "The team's store takes this desk's writes again."
"""The desk's notice once a write goes through after the store refused one."""

_V = TypeVar("_V")

Surface = Literal["terminal", "page"]
"""Where on one desk a person works on a form: its terminal or its web page. One desk process
may run both; each surface keeps to the forms it claimed (:meth:`TeamBoard.surface_of`)."""

_SURFACE_NAMES: Final[dict[Surface, str]] = {"terminal": "terminal", "page": "web page"}


WITHDRAWN_TEXT: Final = (
    "This form was withdrawn without an answer: it is not in the team's store any more (it "
    "was removed there), and its agent gets no answer to it."
)


@attrs.frozen
class _Held:
    """A live claim of this desk, and the surface that took it."""

    claim: Claim
    surface: Surface


def form_title(row: FormRow) -> str:
    """What a team desk's surfaces call ``row``'s form (:func:`form_name`; stored questions no
    longer valid: "The form")."""
    params = params_from_saved(row.params)
    return "The form" if params is None else form_name(params)


def result_of_response(row: FormRow, response: Mapping[str, Any]) -> dict[str, Any] | str:
    """The result (``AskResult.to_details()``) a remote response makes of ``row``'s form:
    ``{"kind": "answer", "answers": {...}}`` or ``{"kind": "cancel"}``; a message when it is
    not a valid answer (the same rules as ``pi-agent-ask:submit``)."""
    params = params_from_saved(row.params)
    if params is None:
        return "The form's stored questions are not valid any more."
    kind = response.get("kind")
    if kind == "cancel":
        return build_result(params, (), cancelled=True, request_id=row.request_id).to_details()
    if kind != "answer":
        return 'A response\'s kind must be "answer" or "cancel".'
    drafts = answers_from_remote(
        params, None, response.get("answers"), mode=response.get("mode", "submit")
    )
    if isinstance(drafts, str):
        return drafts
    return build_result(params, drafts, request_id=row.request_id).to_details()


@attrs.define(eq=False)
class TeamBoard:
    store: AsyncStore
    wakes: Wakes
    person: str
    desk: str = attrs.field(factory=desk_name)
    lease: float = LEASE
    heartbeat: float = HEARTBEAT
    on_change: Callable[[], None] = lambda: None
    notice: Callable[[str], None] = lambda _text: None
    """The desk's notices (its terminal's status line and its page): a call the store refused
    (:func:`store_refused`), said once until one of this desk's writes goes through again."""
    _forms: list[FormRow] = attrs.field(factory=list)
    _claims: dict[str, _Held] = attrs.field(factory=dict)
    """This desk's live claims by request id, each with the surface that took it."""
    _ends: dict[str, Left] = attrs.field(factory=dict)
    """Why the forms that left the board lately left, by request id (oldest first)."""
    _answered_from: dict[str, Surface] = attrs.field(factory=dict)
    """The surface of this desk that sent each of its latest answers (oldest first)."""
    _changed: trio.Event = attrs.field(factory=trio.Event)
    _read_at: float = 0.0
    """When (``trio.current_time``) the snapshot was read: its ``lease_left`` count from then."""
    _read_clock: datetime | None = None
    """This desk's wall clock (``Store.clock``) when the snapshot was read: a lease's end in a
    sentence is it plus the time the lease had left then."""
    _nursery: trio.Nursery | None = None
    _refusal: str | None = None
    """The store's refusal last said (:meth:`_refused`), until a write goes through."""

    # -- running ---------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep the snapshot current until cancelled; claims are released on the way out."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                try:
                    await self.refresh()
                    task_status.started()
                    while True:
                        woken = self.wakes.board()
                        await self.refresh()
                        with trio.move_on_after(self._until_next_expiry()):
                            await woken.wait()
                finally:
                    # Before the nursery closes: from here on a claim that comes back from
                    # the store (``open``) is given back instead of kept (the nursery takes
                    # no keeper once it has closed, which happens before this task resumes).
                    self._nursery = None
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                for request_id, held in list(self._claims.items()):
                    # The store away: the leases run out.
                    await self.close(request_id, surface=held.surface)

    def _until_next_expiry(self) -> float:
        # The time left that the database reported, less the time since it was read (on this
        # process's monotonic clock): a desk whose wall clock is not the database's neither
        # re-reads over and over nor waits the difference on top.
        elapsed = trio.current_time() - self._read_at
        # Only live leases: one that ran out stays in its row (a dead desk's) until another
        # desk takes the form, and it has nothing more to time.
        others = [left for row in self._forms if (left := self._others_lease(row)) is not None]
        leases = [left - elapsed for left in others]
        # And the instant another desk's claim shows its desk stopped answering, unless it
        # extended the claim by then (its person is told when the form is free: ``stopped``).
        leases += [
            left - self._stopped_below - elapsed for left in others if left >= self._stopped_below
        ]
        # And a heartbeat after the store is back: the desks that answer have extended their
        # claims by then (``_next_beat``), so the board shows them live again, not stopped
        # answering, and a claim that ran out while the store was away is kept for its desk
        # no more (``free``).
        back = self.wakes.came_back
        if back is not None and trio.current_time() < back + self.heartbeat:
            leases.append(back + self.heartbeat - trio.current_time())
        # And an agent's wait whose desk stopped extending it: the agent is blocked no more.
        leases += [row.wait_left - elapsed for row in self._forms if row.wait_left is not None]
        return max(0.05, min(leases) + 0.05) if leases else math.inf

    async def refresh(self) -> None:
        """Re-read the board; while the store stays unreachable the snapshot stays as it was
        (the listener's reconnection wakes every board to read it again)."""
        shown = [row.request_id for row in self._forms]
        try:
            self._forms, ends = await self.store.run(Store.board_since, self.store.store, shown)
        except psycopg.OperationalError:
            return
        except psycopg.Error as error:
            self._refused(error)
            return
        self._read_at = trio.current_time()
        self._read_clock = self.store.store.clock()
        for ending in ends:
            _remember(self._ends, ending.request_id, ending)
        for request_id in list(self._claims):
            if not any(row.request_id == request_id for row in self._forms):
                self._claims.pop(request_id, None)  # answered (here or elsewhere)
        event, self._changed = self._changed, trio.Event()
        event.set()
        self.on_change()

    # -- what a view reads -------------------------------------------------------------------

    def snapshot(self) -> list[FormRow]:
        """Every pending form, oldest first, with its claim and draft."""
        return list(self._forms)

    def ended(self, request_id: str) -> Left | None:
        """What became of ``request_id``, when it left the board lately."""
        return self._ends.get(request_id)

    def ending_text(
        self, request_id: str, *, title: str | None = None, short: bool = False
    ) -> str | None:
        """What became of ``request_id``, in the sentence every surface of a team desk says
        when it was showing the form (``None``: not known to have left). ``title``: the form
        named so (a terminal that shows the next form by then); ``short``: in a few words,
        for a screen too short for the sentence."""
        ending = self._ends.get(request_id)
        if ending is None:
            return None
        subject = "This form" if title is None else f"“{title}”"
        if short:
            verb = {"submitted": "answered", "cancelled": "cancelled"}.get(ending.ended)
            return f"{subject} withdrawn." if verb is None else f"{subject} {verb} by {ending.by}."
        if ending.ended == "withdrawn":
            return subject + WITHDRAWN_TEXT.removeprefix("This form")
        if ending.desk == self.desk:
            surface = self._answered_from.get(request_id)
            where = (
                "on this desk" if surface is None else f"on this desk's {_SURFACE_NAMES[surface]}"
            )
        else:
            at = "" if ending.at is None else f" at {local_time(ending.at)}"
            where = f"on {machine(ending.desk)}{at}"
        if ending.ended == "cancelled":
            return (
                f"{subject} was cancelled elsewhere: {ending.by} cancelled it {where}; its agent "
                "was told “User cancelled the ask flow”."
            )
        return f"{subject} was answered elsewhere: {ending.by} answered it {where}."

    @property
    def _stopped_below(self) -> float:
        """The time left under which another desk's claim shows that desk stopped answering
        (killed, its machine asleep or cut off): every desk that answers extends its claims to
        a full lease every heartbeat, so it missed one by half a heartbeat. Every desk of a
        store runs with the same lease and heartbeat (the defaults: only tests set others)."""
        return self.lease - 1.5 * self.heartbeat

    def stopped(self, row: FormRow) -> str | None:
        """Said where a form another desk holds shows who is on it (the terminal's status line,
        the page), once that desk stopped answering: when the form is free again, its lease
        run out ("bob's desk stopped answering; free at 23:41:20"); the person waited without
        knowing how long. ``None`` while that desk extends its claim, and for a form no other
        desk holds. As the board was read: the board is read again when a claim misses its
        heartbeat (``_until_next_expiry``)."""
        left = self._others_lease(row)
        if left is None or left >= self._stopped_below or self._read_clock is None:
            return None
        free = self._read_clock + timedelta(seconds=left)
        return f"{row.claimed_by}'s desk stopped answering; free at {local_time(free)}"

    def _others_lease(self, row: FormRow) -> float | None:
        """The time ``row``'s lease had left when the board was read, when another desk holds
        a live claim of it (``None``: no live claim, or this desk's own)."""
        if not row.claim_live or row.request_id in self._claims:
            return None
        return row.lease_left

    def free(self, row: FormRow) -> bool:
        """``row``'s form is this desk's to take unasked (its terminal shows the first free
        form): no live claim, and not one kept for its desk after the store was away.

        A claim whose lease ran out while the store was away (from this desk) is its desk's
        for a heartbeat more once the store is back: that desk extends it first
        (:meth:`_next_beat`), its person still typing on the form (an idle desk took it at
        once, and what that person had typed since the store went away stayed on their
        screen only). A person's own act on the form (typing on the page, answering it)
        takes it as before."""
        if row.claim_live:
            return False
        return self._kept_for_its_desk(row) is None

    def _kept_for_its_desk(self, row: FormRow) -> float | None:
        """Until when (``trio.current_time``) ``row``'s form is left to the desk whose claim
        ran out while the store was away (``None``: it is not)."""
        went, back = self.wakes.went_away, self.wakes.came_back
        if row.claimed_by is None or row.lease_left is None or went is None or back is None:
            return None
        ran_out = self._read_at + row.lease_left
        until = back + self.heartbeat
        if back < went or ran_out < went or trio.current_time() >= until:
            return None
        return until

    def claimed_here(self, request_id: str) -> Claim | None:
        held = self._claims.get(request_id)
        return None if held is None else held.claim

    def surface_of(self, request_id: str) -> Surface | None:
        """Which surface of this desk holds ``request_id`` (``None``: none of them)."""
        held = self._claims.get(request_id)
        return None if held is None else held.surface

    def _elsewhere_here(self, request_id: str, surface: Surface) -> Refused | None:
        """The refusal of ``surface``'s claim, draft or release of a form another surface of
        this desk holds: that surface shows it, and a Later or a draft from here would take
        it away from under it or write over what it shows."""
        held = self._claims.get(request_id)
        if held is None or held.surface == surface:
            return None
        where = _SURFACE_NAMES[held.surface]
        # One sentence, read as a note on the other surface (not an error: its person's
        # answer goes through from either, and what they type waits for the form there).
        return Refused(
            "claimed",
            f"{self.person} has this form open on this desk's {where}: an answer sent from "
            f"here still goes through, and what is typed here is saved once the {where} puts "
            "the form back.",
            holder=self.person,
            desk=self.desk,
        )

    async def next_change(self) -> None:
        """Return once the board is read again."""
        await self._changed.wait()

    async def wait_for(self, predicate: Callable[[list[FormRow]], bool]) -> list[FormRow]:
        while not predicate(self._forms):
            await self._changed.wait()
        return self.snapshot()

    # -- what a person does ------------------------------------------------------------------

    async def open(
        self, request_id: str | None = None, *, surface: Surface = "terminal"
    ) -> Claim | Refused:
        """Claim a form (``None``: the first free one) for ``surface`` and keep its lease
        alive."""
        if (
            request_id is not None
            and (refused := self._elsewhere_here(request_id, surface)) is not None
        ):
            return refused
        try:
            claim = await self.store.run(
                Store.claim,
                self.store.store,
                request_id,
                desk=self.desk,
                person=self.person,
                lease=self.lease,
                token=str(uuid.uuid4()),  # the same for a retry of this claim
            )
        except psycopg.OperationalError:
            return UNREACHABLE
        except psycopg.Error as error:
            return self._refused(error)
        self._wrote()
        if isinstance(claim, Claim):
            held = self._claims[claim.request_id] = _Held(claim, surface)
            if self._nursery is None:
                # The board stopped (the desk quits) while the claim was on its way: nothing
                # would keep its lease alive nor release it, and the form would stay taken
                # until the lease ran out.
                with trio.CancelScope(shield=True), trio.move_on_after(5):
                    await self.close(claim.request_id, surface=surface)
                return STOPPED
            self._nursery.start_soon(self._keep, held)
        return claim

    async def _keep(self, held: _Held) -> None:
        claim = held.claim
        while self._claims.get(claim.request_id) is held:
            await self._next_beat()
            if self._claims.get(claim.request_id) is not held:
                return
            try:
                alive = await self.store.run(
                    Store.heartbeat, self.store.store, claim.token, lease=self.lease
                )
            except psycopg.OperationalError:
                continue  # the store is away: extend at the next beat (the claim may run out)
            except psycopg.Error as error:
                self._refused(error)  # extend at the next beat, as while it is away
                continue
            self._wrote()
            if alive is None:
                self._claims.pop(claim.request_id, None)
                return

    async def _next_beat(self) -> None:
        """Return after a heartbeat's while, or once the store is back after it was away: a
        claim whose lease ran out meanwhile is then extended first by its own desk, whose
        person still has the form on the screen (the other desks leave it a heartbeat:
        :meth:`free`)."""
        with trio.move_on_after(self.heartbeat):
            while True:
                reach = self.wakes.reach()
                await reach.wait()
                if not self.wakes.away:
                    return

    async def save_draft(
        self, request_id: str, draft: dict[str, Any], *, surface: Surface = "terminal"
    ) -> bool | Refused:
        """Keep the draft of a form ``surface`` holds: ``False`` when the claim was lost,
        refused when another surface of this desk holds it or the store cannot hold its text
        (:data:`NOT_STORABLE`)."""
        refused = self._elsewhere_here(request_id, surface)
        if refused is not None:
            return refused
        held = self._claims.get(request_id)
        if held is None:
            return False
        try:
            saved = await self.store.run(
                Store.save_draft, self.store.store, held.claim.token, draft, person=self.person
            )
        except psycopg.DataError:
            return NOT_STORABLE
        except psycopg.OperationalError:
            return UNREACHABLE
        except psycopg.Error as error:
            return self._refused(error)
        self._wrote()
        return saved

    async def close(
        self,
        request_id: str,
        draft: dict[str, Any] | None = None,
        *,
        surface: Surface = "terminal",
    ) -> Refused | None:
        """Put a form ``surface`` claimed back for every desk (with its draft); refused, and
        nothing changed, when another surface of this desk holds it. While the store stays
        unreachable the claim is dropped here only: its lease runs out by itself, and the form
        comes back with the last draft the store kept."""
        refused = self._elsewhere_here(request_id, surface)
        if refused is not None:
            return refused
        held = self._claims.pop(request_id, None)
        if held is not None:
            try:
                await self.store.run(Store.release, self.store.store, held.claim.token, draft)
            except psycopg.OperationalError:
                pass
            except psycopg.Error as error:
                self._refused(error)  # as while it is away: the lease runs out by itself
        return None

    async def put_back(
        self, request_id: str, draft: dict[str, Any], *, surface: Surface
    ) -> Refused | None:
        """Later: put a form ``surface`` claimed back for every desk, with its draft, once the
        store has it. Unlike :meth:`close`, a store that is away or refuses the write leaves
        the claim held (its lease kept alive) and says why, so nothing says "saved for later"
        before the store has it. A form this desk holds no claim on is free already."""
        refused = self._elsewhere_here(request_id, surface)
        if refused is not None:
            return refused
        held = self._claims.get(request_id)
        if held is None:
            return None
        try:
            await self.store.run(Store.release, self.store.store, held.claim.token, draft)
        except psycopg.OperationalError:
            return UNREACHABLE
        except psycopg.Error as error:
            return self._refused(error)
        self._wrote()
        if self._claims.get(request_id) is held:
            self._claims.pop(request_id, None)
        return None

    async def answer(
        self, request_id: str, response: Mapping[str, Any], *, surface: Surface = "page"
    ) -> Submitted | Refused:
        """Answer a form as this desk's person, from any of its surfaces: ``response`` as
        ``pi-agent-ask:submit`` takes it. The first submission wins; a later one is refused
        with a sentence."""
        row = next((r for r in self._forms if r.request_id == request_id), None)
        if row is None:
            await self.refresh()
            row = next((r for r in self._forms if r.request_id == request_id), None)
        if row is None:
            return await self.refusal(request_id)
        result = result_of_response(row, response)
        if isinstance(result, str):
            return Refused("invalid", result)
        return await self.submit(request_id, result, surface=surface)

    async def refusal(self, request_id: str) -> Refused:
        """Why ``request_id`` cannot be answered now (answered, held elsewhere, unknown)."""
        try:
            return await self.store.run(Store.submit_refusal, self.store.store, request_id)
        except psycopg.OperationalError:
            return UNREACHABLE
        except psycopg.Error as error:
            return self._refused(error)

    async def submit(
        self, request_id: str, result: dict[str, Any], *, surface: Surface = "terminal"
    ) -> Submitted | Refused:
        """Record the answer under this desk's claim when it holds the form, whichever of its
        surfaces holds it (:meth:`answer`); ``surface``: the one it came from."""
        held = self._claims.get(request_id)
        # Before the store call: a board read woken by its commit may find the form gone
        # first. Forgotten again unless this answer is the one the store took.
        mine = request_id not in self._answered_from
        if mine:
            _remember(self._answered_from, request_id, surface)
        done: Submitted | Refused = UNREACHABLE
        try:
            done = await self.store.run(
                Store.submit,
                self.store.store,
                request_id,
                result,
                person=self.person,
                desk=self.desk,
                claim_token=None if held is None else held.claim.token,
            )
        except psycopg.DataError:
            done = NOT_STORABLE  # nothing was written: the claim holds
            return done
        except psycopg.OperationalError:
            return UNREACHABLE  # the claim holds (its heartbeat goes on)
        except psycopg.Error as error:
            done = self._refused(error)  # nothing was written: the claim holds
            return done
        finally:
            if mine and isinstance(done, Refused):
                self._answered_from.pop(request_id, None)
        if self._claims.get(request_id) is held:
            self._claims.pop(request_id, None)  # answered, or the claim is gone
        self._wrote()
        return done

    def _wrote(self) -> None:
        """A write of this desk went through: after a refusal, the desk says the store takes
        its writes again (the refusal's notice stayed the latest, on the terminal's status
        line and above the page's form, as if the store still refused)."""
        if self._refusal is not None:
            self._refusal = None
            self.notice(WRITES_AGAIN)

    def _refused(self, error: psycopg.Error) -> Refused:
        """The store refused a call of this desk (:func:`store_refused`): said as a notice of
        the desk once, not at every heartbeat, until a write goes through again."""
        refused = store_refused(error)
        if refused.message != self._refusal:
            self._refusal = refused.message
            self.notice(refused.message)
        return refused


def _remember(kept: dict[str, _V], key: str, value: _V) -> None:
    """Keep ``value`` under ``key`` among the latest :data:`ENDINGS_KEPT`."""
    kept.pop(key, None)
    kept[key] = value
    while len(kept) > ENDINGS_KEPT:
        del kept[next(iter(kept))]
