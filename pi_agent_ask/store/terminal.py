"""A team desk's terminal: the desk's screen (``desk/terminal.py``) over the store's board.

The person sees one form at a time, the oldest free one of any agent; showing it claims it
(``TeamBoard.open``), so the other desks show who is on it. The form is the same form actor
and view as everywhere (``actors/form.run_form`` on the desk's ``Board``): its drafts are
saved to the store as they change, so a desk that dies hands its form back with them. An
answer is recorded under the person's name (``--as``); Esc puts the form back for everyone
(with its draft) and moves to the next; a form answered or cancelled meanwhile on another
desk (or on this desk's page) is taken off the screen, saying what became of it in the
page's words (``TeamBoard.ending_text``). The agents pane counts every agent's pending forms,
and the status line says what the other desks are answering.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any, Final

import attrs
import trio

from pi_agent_ask.actors.form import FormInput, Saved, answer_saved, run_form
from pi_agent_ask.desk.board import AgentSurface, Board, Shown, put_aside_hint
from pi_agent_ask.desk.terminal import Brief, Listing
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.result import build_result
from pi_agent_ask.form.types import Draft
from pi_agent_ask.form.validate import params_from_saved
from pi_agent_ask.store.board import TeamBoard, form_title
from pi_agent_ask.store.db import Claim, FormRow, Refused, Submitted
from pi_agent_ask.store.wakes import Wakes

__all__ = [
    "STORE_REFUSED_SHORT",
    "WRITES_AGAIN_SHORT",
    "answer_on_terminal",
    "blocks",
    "draft_json",
    "form_of",
    "say_the_store_s_reach",
]


def draft_json(state: fs.FormState) -> dict[str, Any]:
    """``state``'s drafts as the store keeps them, with the text of an editor still open as
    closing it would keep it: a desk that dies mid-sentence hands the form back with what was
    typed, and the other desks show it as it is typed (the drafts alone had it only once the
    editor closed)."""
    if state.editor is not None:
        state, _effects = fs.reduce(state, fs.EditorClose())
    return {"drafts": [draft.to_json() for draft in state.drafts]}


def form_of(row: FormRow, settings: fs.FormSettings | None) -> fs.FormState | None:
    """The form of ``row`` with its saved draft (``None``: its questions are not valid)."""
    params = params_from_saved(row.params)
    if params is None:
        return None
    state = fs.new_form(params, settings, background=True)
    saved = (row.draft or {}).get("drafts")
    if isinstance(saved, list) and len(saved) == len(params.questions):
        try:
            drafts = tuple(Draft.from_json(item) for item in saved)
        except (TypeError, ValueError, KeyError):
            return state
        state = attrs.evolve(state, drafts=drafts)
    return state


SLOW: Final = 5.0
"""Seconds an answer waits for the store before the status line says it is on its way."""
NO_OTHERS = "Other desks: no one is on a form."
STORE_AWAY = (
    "The team's store cannot be reached (PostgreSQL is away or restarting): what you type is "
    "kept here and saved once it is back; the forms waiting show again then."
)
STORE_AWAY_SHORT = "Store away: what you type is kept."
STORE_REFUSED_SHORT = "Store refused a write: text kept."
"""A refusal of the store (``TeamBoard.notice``) on a short screen's one status row."""
WRITES_AGAIN_SHORT = "Store takes writes again."
"""``TeamBoard``'s ``WRITES_AGAIN`` on a short screen's one status row."""
NOT_PUT_BACK_SHORT = "Not put back: store did not take it."
"""Esc the store did not take (away, refusing writes), on a short screen's one status row."""
SAVING_FOR_LATER = "Saving for later…"
"""The status line while Esc waits for the store to take the put-back (the form stays)."""
STORE_BACK = "The team's store is back."


def _on_it(refused: Refused) -> str:
    """Who holds a form the store refused this desk, for a short screen's one status row: the
    person, or "another desk" when the store named no one (a claim of it in flight)."""
    return f"{refused.holder or 'another desk'} is on it."


def blocks(row: FormRow) -> bool:
    """``row``'s agent waits on it: a foreground ask, or a ``wait_for_answers`` in progress."""
    return not row.background or row.agent_waits


def _others(team: TeamBoard) -> Listing | None:
    """What the other desks are on, shortened to the screen with a count of the rest."""
    busy = [
        row
        for row in team.snapshot()
        if row.claim_live and team.claimed_here(row.request_id) is None
    ]
    if not busy:
        return None
    forms = f"{len(busy)} form{'s' if len(busy) > 1 else ''}"
    # In fewer words, each person once ("bob, bob" read as a stutter): with how many forms
    # when more than one (their page and their terminal, or a desk of theirs that died).
    people: dict[str, int] = {}
    for row in busy:
        people[str(row.claimed_by)] = people.get(str(row.claimed_by), 0) + 1
    return Listing(
        "Other desks: ",
        tuple(_on_form(team, row) for row in busy),
        tuple(person if n == 1 else f"{person} on {n} forms" for person, n in people.items()),
        f"Other desks: on {forms}",
    )


def _on_form(team: TeamBoard, row: FormRow) -> str:
    """Who is on ``row``'s form at another desk, and when it is free if that desk stopped
    answering ("bob on alpha's form (bob's desk stopped answering; free at 23:41:20)")."""
    stopped = team.stopped(row)
    return f"{row.claimed_by} on {row.agent_key}'s form" + (
        "" if stopped is None else f" ({stopped})"
    )


async def answer_on_terminal(
    team: TeamBoard,
    board: Board,
    notice: Any,
    settings: fs.FormSettings | None = None,
    hint: Callable[[str], None] = lambda _text: None,
    busy: Callable[[str | None], None] = lambda _text: None,
) -> None:
    """Show the store's free forms one at a time on ``board``'s display until cancelled;
    ``hint`` says what Esc did, ``busy`` what it is doing (``DeskSurface.hint``, ``.busy``)."""
    others: Listing | None = None  # what the status line last said the other desks are on

    def counts() -> None:
        nonlocal others
        pending: dict[str, int] = {}
        for row in team.snapshot():
            pending[row.agent_key] = pending.get(row.agent_key, 0) + 1
        for key in {*pending, *(agent.key for agent in board.agents())}:
            board.set_pending(key, pending.get(key, 0))
        board.touch()  # a foreground call cut meanwhile leaves its form a background one
        # Said when it changes, not at every change of the board: the same line again would
        # push out a sentence shown after it; and when no other desk is on a form any more,
        # the line saying one was must go.
        text = _others(team)
        if text != others:
            others = text
            notice(text or NO_OTHERS)

    def waited_on(shown: Shown) -> bool:
        return any(blocks(row) for row in team.snapshot() if row.request_id == shown.flow_id)

    def waits_in_line(key: str) -> bool:
        return any(blocks(row) and row.agent_key == key for row in team.snapshot())

    board.waited_on = waited_on
    board.waits_in_line = waits_in_line

    previous = team.on_change

    def changed() -> None:
        previous()
        counts()

    team.on_change = changed
    # The board was read before this hook was in place: counted now, not at its next change
    # (a desk started while every form was held elsewhere showed no agent and no form, and
    # said nothing of the other desks, until something changed).
    counts()
    await _one_form_after_another(team, board, notice, settings, hint, busy)


async def say_the_store_s_reach(wakes: Wakes, notice: Callable[[Brief | str], None]) -> None:
    """Say when the store goes away and when it is back, as the desk's notices (its terminal's
    status line, its page): while it is away, a form put back leaves an empty screen and
    drafts wait, which would otherwise look like nothing waits."""
    while True:
        reach = wakes.reach()
        await reach.wait()
        notice(Brief(STORE_AWAY, STORE_AWAY_SHORT) if wakes.away else STORE_BACK)


async def _one_form_after_another(
    team: TeamBoard,
    board: Board,
    notice: Any,
    settings: fs.FormSettings | None,
    hint: Callable[[str], None],
    busy: Callable[[str | None], None],
) -> None:
    later: set[str] = set()  # put back with Esc: behind every other free form
    while True:
        forms = await team.wait_for(lambda rows: any(team.free(row) for row in rows))
        free = [row for row in forms if team.free(row)]
        first = [row for row in free if row.request_id not in later] or free
        if all(row.request_id in later for row in free):
            later.clear()
        claim = await team.open(first[0].request_id)
        if not isinstance(claim, Claim):
            if claim.reason == "unavailable":
                # The store did not take the claim (away, or refusing writes: a desk notice
                # says which): again when the board changes or after a heartbeat's while,
                # not at once over and over.
                with trio.move_on_after(team.heartbeat):
                    await team.next_change()
            await team.refresh()
            continue
        outcome = await _show(team, board, claim, settings, notice, busy)
        if outcome == "later":
            later.add(claim.request_id)
            ahead = sum(
                1
                for row in team.snapshot()
                if team.free(row) and row.request_id != claim.request_id
            )
            hint(put_aside_hint(ahead))
        elif isinstance(outcome, Refused):
            notice(outcome.message)
        elif isinstance(outcome, Brief):
            notice(outcome)


async def _show(
    team: TeamBoard,
    board: Board,
    claim: Claim,
    settings: fs.FormSettings | None,
    notice: Any,
    busy: Callable[[str | None], None],
) -> str | Refused | Brief | None:
    request_id = claim.request_id
    state = form_of(claim.row, settings)
    if state is None:
        await team.close(request_id)
        return Refused("invalid", "A form's stored questions are not valid; it was skipped.")
    while True:
        final, last, deferred, gone = await _run(team, board, claim, state, notice, busy)
        if gone is not None:
            return gone
        kept = last if final is None else final
        if deferred:
            return "later"  # put back (``_run``)
        if final is None or final.outcome is None:
            await team.close(request_id, draft_json(kept))
            return "later"
        result = build_result(
            final.params,
            final.drafts,
            presented_types=final.types,
            cancelled=final.outcome.cancelled,
            request_id=request_id,
        )
        done = await _submit(team, request_id, result.to_details(), form_title(claim.row), notice)
        if isinstance(done, Refused) and done.reason == "unavailable":
            # Nothing reached the store: the form comes back as it was answered, to send again.
            notice(Brief(done.message, "Not sent: the store did not take it."))
            state = attrs.evolve(final, outcome=None)
            continue
        if isinstance(done, Refused) and done.reason in ("claimed", "lease_lost"):
            # This desk's claim ran out under the form and another desk holds it now: the
            # answer stays on the screen, to send once they let the form go (their answer
            # takes it off the screen, saying so), not dropped with the form.
            said = f"{done.message} Your answer was not sent: it stays here to send again."
            notice(Brief(said, f"Not sent: {_on_it(done)}"))
            state = attrs.evolve(final, outcome=None)
            continue
        return done if isinstance(done, Refused) else None


async def _submit(
    team: TeamBoard, request_id: str, result: dict[str, Any], title: str, notice: Any
) -> Submitted | Refused:
    """Record the answer, saying so when the store is slow to take it (away, restarting):
    the form has left the screen by then, and the next form, or "No questions waiting.",
    read as an answer gone without a word. Said after :data:`SLOW` seconds, as the page
    says a Submit it sent is still on its way."""
    slow = False

    async def tell() -> None:
        nonlocal slow
        await trio.sleep(SLOW)
        slow = True
        notice(
            Brief(
                f"Sending your answer to “{title}”… the team's store has not answered yet: "
                "it is recorded once the store takes it, or the form comes back here to send "
                "again.",
                f"Sending “{title}”…",
            )
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(tell)
        done = await team.submit(request_id, result)
        nursery.cancel_scope.cancel()
    if slow and isinstance(done, Submitted):
        notice(Brief(f"Your answer to “{title}” is recorded.", f"“{title}” answered."))
    return done


async def _save_drafts(
    team: TeamBoard,
    request_id: str,
    drafts: trio.MemoryReceiveChannel[fs.FormState],
    notice: Any,
    writes: trio.Lock,
    put_back: Callable[[], bool],
) -> None:
    """Save the form's drafts as they come, each time the newest one waiting; one write at a
    time with Esc's put-back (``writes``), and none after it (``put_back``): a save refused
    for the claim it released would claim the form again."""
    async for changed in drafts:
        with contextlib.suppress(trio.WouldBlock):
            while True:
                changed = drafts.receive_nowait()
        async with writes:
            if put_back():
                return  # the put-back carried the newest draft
            await _save_draft(team, request_id, changed, notice)


async def _save_draft(team: TeamBoard, request_id: str, changed: fs.FormState, notice: Any) -> None:
    saved = await team.save_draft(request_id, draft_json(changed))
    if isinstance(saved, Refused) and saved.reason != "unavailable":
        # Text the store cannot keep. The store away or refusing writes is the desk's
        # notice already (``say_the_store_s_reach``, ``TeamBoard.notice``).
        notice(saved.message)
    if saved is not False:
        return
    # The claim is gone (it ran out while this desk stalled or the store was away, and
    # another desk took the form): take it back if that desk let it go, else say that
    # what is typed here is not kept, and who is on the form.
    again = await team.open(request_id)
    if isinstance(again, Claim):
        await team.save_draft(request_id, draft_json(changed))
    else:
        said = f"{again.message} Your claim ran out: what you type here is not kept."
        notice(Brief(said, f"Claim lost: {_on_it(again)}"))


async def _run(
    team: TeamBoard,
    board: Board,
    claim: Claim,
    state: fs.FormState,
    notice: Any,
    busy: Callable[[str | None], None],
) -> tuple[fs.FormState | None, fs.FormState, bool, Brief | None]:
    """One showing of the claimed form: its final state, its last state, whether it was put
    back (Esc), and why it left the screen when it ended elsewhere."""
    request_id = claim.request_id
    send, receive = trio.open_memory_channel[FormInput](16)
    last = state
    deferred = False
    gone: Brief | None = None

    # The drafts go to the store from a task of their own, the latest first: a key acts on
    # the screen at once even while the store is away or slow (a save waits for it for up to
    # a minute), and only the newest draft is saved once it answers.
    drafts_tx, drafts_rx = trio.open_memory_channel[fs.FormState](math.inf)

    async def on_change(changed: fs.FormState, saved: Saved | None) -> None:
        nonlocal last
        last = changed
        answer_saved(saved, None)  # the team's page saves its drafts its own way (``web.py``)
        drafts_tx.send_nowait(changed)

    writes = trio.Lock()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            _save_drafts, team, request_id, drafts_rx, notice, writes, lambda: deferred
        )
        scope = trio.CancelScope()

        async def on_defer() -> str | None:
            # Esc: put back once the store has it, the form on the screen meanwhile saying so
            # (keys typed meanwhile wait for the answer: the form is read again after it). A
            # store away (for up to a store call's retries) or refusing the write leaves the
            # claim held and the form as it is, and the status line says why. (The form left
            # the screen before the store call, for up to a minute while the store was away.)
            nonlocal deferred
            busy(SAVING_FOR_LATER)
            try:
                async with writes:
                    refused = await team.put_back(request_id, draft_json(last), surface="terminal")
                    deferred = refused is None
            finally:
                busy(None)
            if refused is None:
                scope.cancel()
                return None
            cause = refused.cause or refused.message.rstrip(".")
            said = f"Not put back for later: {cause}, so the form stays here as you left it: "
            notice(Brief(said + "press Esc again in a while, or answer it.", NOT_PUT_BACK_SHORT))
            return refused.message

        async def left_elsewhere() -> None:
            nonlocal gone
            await team.wait_for(lambda rows: all(row.request_id != request_id for row in rows))
            if team.claimed_here(request_id) is None:
                # Answered or cancelled on another desk or on this desk's page, or removed
                # from the store: said as the page says it.
                # Named: by the time it is read the next form is on the screen.
                title = form_title(claim.row)
                said = team.ending_text(request_id, title=title)
                short = team.ending_text(request_id, title=title, short=True)
                gone = Brief(
                    said or f"“{title}” is not waiting any more.", short or f"“{title}” left."
                )
                scope.cancel()

        nursery.start_soon(left_elsewhere)
        final = await run_form(
            flow_id=request_id,
            state=state,
            inbox=receive,
            commands=send,
            surface=AgentSurface(board, claim.row.agent_key),
            on_change=on_change,
            on_defer=on_defer,
            scope=scope,
        )
        nursery.cancel_scope.cancel()
    return final, last, deferred, gone
