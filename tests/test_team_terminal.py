"""A team desk's terminal (real prompt_toolkit input through a pipe, output on a pyte screen):
the form shown is claimed, so another desk of the store shows who is on it; keys answer it,
recorded under the person's name; the agent gets the answer."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import psycopg
import pytest
import trio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from prompt_toolkit.input import create_pipe_input

from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS
from pi_agent_ask.store import terminal
from pi_agent_ask.store.db import Claim, Refused, Store, desk_name, machine
from pi_agent_ask.ui.testing import VirtualTerminal
from tests.store_support import (  # noqa: F401
    Cluster,
    desk_url,
    new_sessions_read_only,
    store_db,
    team_desk,
)
from tests.test_web import signed_in

pytestmark = [pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS]

HOST = machine(desk_name())
"""The machine the test desks run on, as sentences name a desk (not by its id)."""


def ask(label: str) -> dict[str, Any]:
    return {
        "questions": [
            {
                "id": "q",
                "label": label,
                "prompt": f"Question {label}?",
                "options": [{"value": "yes", "label": "Yes"}, {"value": "no", "label": "No"}],
            }
        ],
        "background": True,
    }


@asynccontextmanager
async def client(url: str, token: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=None)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _lease_ran_out(url: str, ago: float = 1.0) -> None:
    """Every claim's lease in the store is over, since ``ago`` seconds (as after a desk
    stalled that long)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET ROLE pi_agent_ask_desk")
        conn.execute(
            "UPDATE pi_agent_ask.requests SET lease_until = now() - make_interval(secs => %s)",
            (ago,),
        )


def _pane_row(text: str, key: str) -> str:
    """The agents pane's part of ``key``'s row on the screen ("" while it has none)."""
    rows = [line.split("│")[0] for line in text.splitlines()]
    return next((row for row in rows if f" {key} " in row), "")


@asynccontextmanager
async def ann_at_a_terminal(
    url: str, tmp_path: Any, pipe: Any, term: VirtualTerminal, **options: Any
) -> AsyncIterator[Any]:
    """A team desk with its terminal: keys from ``pipe``, the screen on ``term``; answers are
    recorded as ann's (``options``: the desk's others, as ``team_desk`` takes them)."""
    async with team_desk(
        url,
        "ann",
        headless=False,
        settings=tmp_path / "settings.json",
        input=pipe,
        output=term.output,
        **options,
    ) as desk:
        yield desk


async def test_the_person_answers_on_the_team_desks_terminal(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    term = VirtualTerminal(110, 30)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with (
            ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk,
            team_desk(desk_url, "bob") as other,
            client(desk.url, token) as alpha,
        ):
            await term.wait_for("pi-agent-ask desk")
            # The page's one-time sign-in URL, while no question is on display.
            await term.wait_for(desk.web.base_url + "/login?code=")
            receipt = await alpha.call_tool("ask_user", ask("Deploy"))
            request_id = receipt.structured_content["requestId"]
            await term.wait_for("Question Deploy?")
            assert "From alpha" in term.text()
            # The form hides the sign-in lines: the idle status line says how to have them.
            await term.wait_for("Ctrl-O: a sign-in link for the web page")
            # Shown here means claimed: the other desk shows who is on it.
            (row,) = await other.board.wait_for(lambda rows: bool(rows) and rows[0].claim_live)
            assert (row.request_id, row.claimed_by) == (request_id, "ann")
            pipe.send_text("2")
            await term.wait_for("Review your answers")
            (row,) = await other.board.wait_for(lambda rows: bool(rows) and rows[0].draft)
            assert row.draft["drafts"][0]["selected"] == [1]
            pipe.send_text("1")
            await term.wait_for("again")
            pipe.send_text("1")
            await term.wait_for("No questions waiting")
            waited = await alpha.call_tool("wait_for_answers", {})
            (result,) = waited.structured_content["results"]
            assert result["result"]["answers"]["q"]["values"] == ["no"]
            rows = await desk.store.run(Store.outcomes, desk.store.store)
            assert [r["answered_by"] for r in rows] == ["ann"]


async def test_the_team_terminal_says_when_the_agent_waits_on_the_form(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """Every form on a team desk's terminal is put back with Esc, but the header and the agents
    pane still tell a foreground ask (its agent is blocked) from a background one."""
    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    term = VirtualTerminal(110, 30)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with (
            ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk,
            client(desk.url, token) as alpha,
            trio.open_nursery() as nursery,
        ):
            await term.wait_for("pi-agent-ask desk")
            answers: dict[str, Any] = {}
            answered = trio.Event()

            async def foreground() -> None:
                result = await alpha.call_tool("ask_user", {**ask("Now"), "background": False})
                answers.update(result.structured_content["answers"])
                answered.set()

            nursery.start_soon(foreground)
            await term.wait_for("Question Now?")
            await term.wait_for("the agent is blocked until you answer")
            assert "background question" not in term.text()
            (pane_row,) = [line for line in term.text().splitlines() if "▶ alpha" in line]
            assert "⏸" in pane_row.split("│")[0]  # the agents pane marks it
            pipe.send_text("1")
            await term.wait_for("Review your answers")
            pipe.send_text("1")
            await term.wait_for("again")
            pipe.send_text("1")
            await term.wait_for("No questions waiting")
            await answered.wait()
            assert answers["q"]["values"] == ["yes"]
            await alpha.call_tool("ask_user", ask("Later"))
            await term.wait_for("Question Later?")
            await term.wait_for("background question: the agent goes on working")
            assert "blocked until you answer" not in term.text()


async def test_escape_with_nothing_else_in_line_says_the_form_stays(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """Esc puts the form behind every other free form; with none, the same form is back at
    once, and the status line says so (before, nothing on screen changed)."""
    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    term = VirtualTerminal(40, 12)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with (
            ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk,
            client(desk.url, token) as alpha,
        ):
            await alpha.call_tool("ask_user", ask("Deploy"))
            await term.wait_for("Question Deploy?")
            pipe.send_text("\x1b")
            await term.wait_for("Nothing else is in line: it stays.")
            await alpha.call_tool("ask_user", ask("Merge"))
            await term.wait_for(lambda t: "alpha 2" in t.rows()[0])
            pipe.send_text("\x1b")
            await term.wait_for("Question Merge?")
            await term.wait_for("Deferred: 1 other form goes first.")
            # A notice after it is newer, and says it (what Esc did hid it until a key).
            (deploy,) = [
                r for r in desk.board.snapshot() if r.params["questions"][0]["label"] == "Deploy"
            ]
            await _claimed_on_another_desk(desk, deploy.request_id, "bob")
            await term.wait_for("Other desks: bob on alpha's form")
            assert "Deferred" not in term.text()


async def test_the_status_line_stops_naming_another_desk_once_it_lets_its_form_go(
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """The status line's "Other desks: bob on alpha's form" is what the other desks are on
    now: once bob puts the form back, or answers it, the line says no one is (it stayed for as
    long as the desk ran)."""
    term = VirtualTerminal(110, 30)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with (
            ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk,
            team_desk(desk_url, "bob") as bob,
        ):
            await desk.store.run(
                Store.ask, desk.store.store, "alpha", "c1", ask("First"), background=True
            )
            await term.wait_for("Question First?")
            second, _bg, _state = await desk.store.run(
                Store.ask, desk.store.store, "alpha", "c2", ask("Second"), background=True
            )
            await bob.board.wait_for(lambda rows: len(rows) == 2)
            assert not isinstance(await bob.board.open(second), Refused)
            await term.wait_for("Other desks: bob on alpha's form")
            await bob.board.close(second)
            await term.wait_for("Other desks: no one is on a form.")
            assert not isinstance(await bob.board.open(second), Refused)
            await term.wait_for("Other desks: bob on alpha's form")
            done = await bob.board.answer(
                second, {"kind": "answer", "answers": {"q": {"values": ["yes"]}}}
            )
            assert not isinstance(done, Refused)
            await term.wait_for("Other desks: no one is on a form.")
            assert "bob on alpha's form" not in term.text()


async def test_the_agents_pane_marks_every_agent_blocked_on_a_form_not_only_the_one_shown(
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """An agent whose foreground ask waits in line behind the form on display is blocked on
    the team too: its row in the agents pane has the ⏸ of the legend, as on a desk of files,
    and loses it once its form is answered."""
    term = VirtualTerminal(110, 30)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk:
            await desk.store.run(
                Store.ask, desk.store.store, "alpha", "c1", ask("First"), background=True
            )
            await term.wait_for("Question First?")
            waited, _bg, _state = await desk.store.run(
                Store.ask, desk.store.store, "beta", "c1", ask("Blocking"), background=False
            )

            await term.wait_for(lambda t: "⏸" in _pane_row(t.text(), "beta"))
            assert "⏸" not in _pane_row(term.text(), "alpha")  # its form is a background one
            done = await desk.board.answer(
                waited, {"kind": "answer", "answers": {"q": {"values": ["yes"]}}}
            )
            assert not isinstance(done, Refused)
            await term.wait_for(lambda t: "⏸" not in _pane_row(t.text(), "beta"))


async def test_an_agent_waiting_for_answers_shows_blocked_on_every_desk(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """``wait_for_answers`` blocks the agent on its pending background forms, whichever desk
    serves the call (here bob's): ann's terminal (header and agents pane) and ann's page say
    so, as a desk of files does (they said the agent goes on working), until the call ends."""
    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    term = VirtualTerminal(110, 30)
    blocked = '<p class="badge blocked when-blocked">The agent is blocked'
    with trio.fail_after(90), create_pipe_input() as pipe:
        async with (
            ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk,
            team_desk(desk_url, "bob") as bob,
            httpx2.AsyncClient(timeout=30) as http,
        ):
            request_id, _bg, _state = await desk.store.run(
                Store.ask, desk.store.store, "alpha", "c1", ask("Deploy"), background=True
            )
            await term.wait_for("Question Deploy?")
            await term.wait_for("background question: the agent goes on working")
            await signed_in(http, desk.web.login_url())
            page = desk.web.base_url + "/"
            form = {"form": f"alpha/{request_id}"}
            assert blocked not in (await http.get(page, params=form)).text
            async with trio.open_nursery() as nursery:

                async def waits() -> None:
                    async with client(bob.url, token) as alpha:
                        await alpha.call_tool("wait_for_answers", {})

                nursery.start_soon(waits)
                await term.wait_for("the agent is blocked until you answer")
                await term.wait_for(lambda t: "⏸" in _pane_row(t.text(), "alpha"))
                shown = await http.get(page, params=form)
                assert blocked in shown.text and 'id="later"' in shown.text
                nursery.cancel_scope.cancel()  # the agent goes away: its call ends
            await term.wait_for("background question: the agent goes on working")
            assert "⏸" not in _pane_row(term.text(), "alpha")
            assert blocked not in (await http.get(page, params=form)).text


async def _claimed_on_another_desk(desk: Any, request_id: str, person: str) -> None:
    """``person`` claims ``request_id`` from a desk of theirs (not ann's), for a minute."""
    claim = await desk.store.run(
        functools.partial(
            Store.claim,
            desk.store.store,
            request_id,
            desk=f"{person}-laptop:4711:ab12",
            person=person,
            lease=60,
        )
    )
    assert isinstance(claim, Claim)


async def _taken_by_bob(desk: Any, bob: Any, term: VirtualTerminal, url: str) -> str:
    """A background form on ann's screen whose claim ran out (as if the store was away longer
    than a lease) and which bob's desk then took: its request id."""
    request_id, _bg, _state = await desk.store.run(
        Store.ask, desk.store.store, "alpha", "c1", ask("Deploy"), background=True
    )
    await term.wait_for("Question Deploy?")
    await trio.to_thread.run_sync(_lease_ran_out, url)
    await bob.board.refresh()  # nothing notifies a lease that ran out by hand
    assert isinstance(await bob.board.open(request_id), Claim)
    return str(request_id)


async def test_after_an_outage_longer_than_a_lease_the_desk_that_was_typing_keeps_its_form(
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """The store is away longer than a lease while bob types on a form. Once it is back,
    ann's idle terminal, which takes the first free form unasked, leaves that form to bob's
    desk for a heartbeat, and bob's desk extends its claim as soon as the store is back: bob
    keeps the form and saves what he typed (ann's desk took it at once, and bob's words since
    the store went away stayed on his screen only). A form whose desk did not come back
    (carol's) is ann's a heartbeat later. The outage is each desk's listener losing the
    store and reaching it again (``Wakes``), bob's first; the leases run out by hand."""
    term = VirtualTerminal(110, 30)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with team_desk(desk_url, "bob") as bob:
            store = bob.store.store
            typed, _bg, _state = await bob.store.run(
                Store.ask, store, "alpha", "c1", ask("Typed"), background=True
            )
            gone, _bg, _state = await bob.store.run(
                Store.ask, store, "alpha", "c2", ask("Gone"), background=True
            )
            await bob.board.wait_for(lambda rows: len(rows) == 2)
            assert isinstance(await bob.board.open(typed), Claim)
            claim = await bob.store.run(
                functools.partial(
                    Store.claim, store, gone, desk="carol-vm:1:ab", person="carol", lease=60
                )
            )
            assert isinstance(claim, Claim)
            async with ann_at_a_terminal(desk_url, tmp_path, pipe, term, heartbeat=1.0) as ann:
                await term.wait_for("2 waiting, none free here.")
                bob.board.wakes.lost()
                ann.board.wakes.lost()
                await trio.to_thread.run_sync(_lease_ran_out, desk_url, 0.0)
                ann.board.wakes.listening()  # ann's desk reaches the store first
                await ann.board.wait_for(lambda rows: not any(r.claim_live for r in rows))
                bob.board.wakes.listening()
                await term.wait_for("Question Gone?")
                (row, _gone) = await bob.store.run(Store.board, store)
                assert (row.request_id, row.claimed_by, row.claim_live) == (typed, "bob", True)
                assert await bob.board.save_draft(typed, {"drafts": [{"note": "bob's"}]})
                assert "Question Typed?" not in term.text()


async def test_typing_on_a_form_whose_claim_ran_out_says_so_or_takes_it_back(
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """Ann's claim ran out (her desk stalled, or the store was away longer than a lease) and
    bob's desk took the form: what she types is not kept, and her terminal says so and who is
    on it (it was dropped without a word). Once bob lets it go, her next change takes the
    form back and keeps her draft."""
    term = VirtualTerminal(110, 30)
    with trio.fail_after(90), create_pipe_input() as pipe:
        async with (
            ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk,
            team_desk(desk_url, "bob") as bob,
        ):
            request_id = await _taken_by_bob(desk, bob, term, desk_url)
            pipe.send_text("2")  # "No": a change of the draft
            await term.wait_for("Your claim ran out:")  # ... what you type here is not kept.
            assert f"bob is answering this form on {HOST} (until" in term.text()
            await bob.board.close(request_id)
            await desk.board.wait_for(lambda rows: bool(rows) and not rows[0].claim_live)
            pipe.send_text("\x1b[Z")  # Shift+Tab, back to the question: another change
            pipe.send_text("1")
            # The claim, then the draft under it (two writes).
            rows = await bob.board.wait_for(
                lambda rows: (
                    bool(rows)
                    and rows[0].claimed_by == "ann"
                    and rows[0].claim_live
                    and rows[0].draft is not None
                )
            )
            assert rows[0].draft_by == "ann"


async def test_an_answer_refused_for_a_claim_that_ran_out_stays_on_the_screen(
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """Ann answers a form whose claim ran out under it (the store was away longer than a
    lease) while bob's desk holds it: the store refuses her answer, and it stays on her screen
    to send again, not dropped with the form (it left the screen, her answer gone). Once bob
    lets the form go, her answer goes through."""
    term = VirtualTerminal(110, 30)
    with trio.fail_after(90), create_pipe_input() as pipe:
        async with (
            ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk,
            team_desk(desk_url, "bob") as bob,
        ):
            request_id = await _taken_by_bob(desk, bob, term, desk_url)
            pipe.send_text("2")  # "No"
            await term.wait_for("Review your answers")
            pipe.send_text("1")
            await term.wait_for("again")
            pipe.send_text("1")  # Submit
            await term.wait_for("Your answer was not sent: it stays here to send again.")
            assert f"bob is answering this form on {HOST} (until" in term.text()
            assert "Review your answers" in term.text() and "→ No" in term.text()
            # On a short screen, each in a few words that name who is on it (the sentences
            # were cut at the edge: "bob is answering this form on ...").
            term.resize(40, 12)
            pipe.send_text("\x1b[Z")  # Shift+Tab: back to the question
            pipe.send_text("1")  # "Yes": a change of the draft, which the store refuses
            await term.wait_for("Claim lost: bob is on it.")
            await term.wait_for("Review your answers")
            pipe.send_text("1")
            await term.wait_for("again")
            pipe.send_text("1")  # Submit
            await term.wait_for("Not sent: bob is on it.")
            await bob.board.close(request_id)
            await desk.board.wait_for(lambda rows: bool(rows) and not rows[0].claim_live)
            pipe.send_text("1")
            await term.wait_for("again")
            pipe.send_text("1")  # Submit again: no one holds the form now
            await term.wait_for("No questions waiting")
            (outcome,) = await desk.store.run(Store.outcomes, desk.store.store)
            assert outcome["answered_by"] == "ann"
            assert outcome["result"]["answers"]["q"]["values"] == ["yes"]


async def test_the_terminal_says_a_form_on_display_was_cancelled_on_another_desk(
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """Bob cancels the form on ann's screen from his desk (her desk stalled: its claim ran
    out): the form leaves her screen and the status line says which form was cancelled, by
    whom, in the page's words (it said bob "already answered" it)."""
    term = VirtualTerminal(200, 30)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with (
            ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk,
            team_desk(desk_url, "bob") as bob,
        ):
            request_id, _bg, _state = await desk.store.run(
                Store.ask, desk.store.store, "alpha", "c1", ask("Deploy"), background=True
            )
            await term.wait_for("Question Deploy?")
            _lease_ran_out(desk_url)  # ann's desk stalled: bob may take the form
            await bob.board.refresh()
            assert not isinstance(await bob.board.answer(request_id, {"kind": "cancel"}), Refused)
            await term.wait_for(f"“Deploy” was cancelled elsewhere: bob cancelled it on {HOST} at ")
            await term.wait_for("No questions waiting")
            assert "already answered" not in term.text()


@pytest.mark.parametrize("size", [(40, 12), (60, 15)])
async def test_other_desks_stay_readable_on_a_short_screen(
    desk_url: str,  # noqa: F811
    tmp_path: Any,
    size: tuple[int, int],
) -> None:
    """On a short screen the status line has one row: "Other desks: ..." names the desks
    that fit whole and counts the rest (it ended at the edge, mid-name), and the form keeps
    its rows."""
    term = VirtualTerminal(*size)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk:
            for agent in ("alpha", "beta", "gamma", "delta"):
                await desk.store.run(
                    Store.ask, desk.store.store, agent, "c1", ask(agent.title()), background=True
                )
            await term.wait_for("Question Alpha?")
            await desk.board.wait_for(lambda rows: len(rows) == 4)
            for person, agent in (("bob", "beta"), ("carol", "gamma"), ("dave", "delta")):
                (row,) = [r for r in desk.board.snapshot() if r.agent_key == agent]
                await _claimed_on_another_desk(desk, row.request_id, person)
            full = {"bob": "bob on beta's form", "carol": "carol on gamma's form"}
            full["dave"] = "dave on delta's form"
            await term.wait_for(lambda t: "dave" in t.rows()[-1] or "more" in t.rows()[-1])
            status = term.rows()[-1].strip()
            assert status.startswith("Other desks: bob"), status
            *named, last = status.removeprefix("Other desks: ").split(", ")
            if last.startswith("+"):
                assert last == f"+{3 - len(named)} more", status
            else:
                named.append(last)
            in_full, in_short = list(full.values()), list(full)
            assert named in (in_full[: len(named)], in_short[: len(named)]), status
            assert "Question Alpha?" in term.text()  # the form keeps its rows
            assert "1. ( ) Yes" in term.text()


async def test_on_a_short_screen_with_no_form_left_the_ending_is_said_whole(
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """At 40x12 a notice has one row while a form is on display (the rows are the form's);
    once bob's answer took the last form off ann's screen, what became of it is said whole,
    wrapped, not cut at the edge."""
    term = VirtualTerminal(40, 12)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with (
            ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk,
            team_desk(desk_url, "bob") as bob,
        ):
            request_id, _bg, _state = await desk.store.run(
                Store.ask, desk.store.store, "alpha", "c1", ask("Deploy"), background=True
            )
            await term.wait_for("Question Deploy?")
            _lease_ran_out(desk_url)
            await bob.board.refresh()
            yes = {"kind": "answer", "answers": {"q": {"values": ["yes"]}}}
            assert not isinstance(await bob.board.answer(request_id, yes), Refused)
            await term.wait_for("No questions waiting")
            said = f"“Deploy” was answered elsewhere: bob answered it on {HOST} at "

            def whole(t: VirtualTerminal) -> bool:
                return said in " ".join(row.strip() for row in t.rows()[-4:])

            await term.wait_for(whole)


async def test_keys_act_on_the_form_while_the_store_is_away(
    pg_cluster: Cluster,
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """PostgreSQL stops while ann answers on her terminal: her key selects at once, as
    always (the screen waited for the store to save the draft, which waits for the server
    for up to a minute), and the draft reaches the store once it is back."""
    term = VirtualTerminal(110, 30)
    with trio.fail_after(90), create_pipe_input() as pipe:
        async with ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk:
            await desk.store.run(
                Store.ask, desk.store.store, "alpha", "c1", ask("Deploy"), background=True
            )
            await term.wait_for("Question Deploy?")
            pg_cluster.stop()
            try:
                pipe.send_text("2")
                with trio.fail_after(5):
                    await term.wait_for("Review your answers")
            finally:
                pg_cluster.start()

            def saved(rows: list[Any]) -> bool:
                return bool(rows) and (rows[0].draft or {}).get("drafts", [{}])[0].get(
                    "selected"
                ) == [1]

            await desk.board.wait_for(saved)


async def test_on_a_short_screen_the_ending_of_the_form_before_is_said_briefly(
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """At 60x15 the next form takes the screen at once and the status line has one row: what
    became of the form before is said in a few words, naming it (the sentence was cut at
    the edge, and "This form" read as the form now on display)."""
    term = VirtualTerminal(60, 15)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with (
            ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk,
            team_desk(desk_url, "bob") as bob,
        ):
            first, _bg, _state = await desk.store.run(
                Store.ask, desk.store.store, "alpha", "c1", ask("Deploy"), background=True
            )
            await desk.store.run(
                Store.ask, desk.store.store, "alpha", "c2", ask("Merge"), background=True
            )
            await term.wait_for("Question Deploy?")
            _lease_ran_out(desk_url)
            await bob.board.refresh()
            assert not isinstance(await bob.board.answer(first, {"kind": "cancel"}), Refused)
            await term.wait_for("Question Merge?")
            await term.wait_for(lambda t: t.rows()[-1].strip() == "“Deploy” cancelled by bob.")


@pytest.mark.parametrize(
    ("size", "away"),
    [
        ((110, 30), "The team's store cannot be reached"),
        ((40, 12), "Store away: what you type is kept."),
    ],
)
async def test_the_status_line_says_when_the_store_is_away_and_when_it_is_back(
    pg_cluster: Cluster,
    desk_url: str,  # noqa: F811
    tmp_path: Any,
    size: tuple[int, int],
    away: str,
) -> None:
    """PostgreSQL stops: the terminal says so (a form put back then left "No questions
    waiting." on the screen with nothing said), briefly on a short screen, and says when it
    is back."""
    term = VirtualTerminal(*size)

    def said(text: str) -> Callable[[VirtualTerminal], bool]:
        return lambda t: text in " ".join(row.strip() for row in t.rows()[-3:])

    with trio.fail_after(60), create_pipe_input() as pipe:
        async with ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk:
            await desk.store.run(
                Store.ask, desk.store.store, "alpha", "c1", ask("Deploy"), background=True
            )
            await term.wait_for("Question Deploy?")
            pg_cluster.stop()
            try:
                await term.wait_for(said(away))
            finally:
                pg_cluster.start()
            await term.wait_for(said("The team's store is back."))


async def test_text_typed_in_an_open_editor_is_saved_as_it_is_typed(
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """Ann types her own answer and has not closed the editor when her desk dies: the store
    has what she typed, so the form comes back with it, and bob's desk shows it as it is
    typed (the store's draft had it only once the editor closed: a desk killed mid-sentence
    lost the sentence)."""
    term = VirtualTerminal(110, 30)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with (
            ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk,
            team_desk(desk_url, "bob") as bob,
        ):
            await desk.store.run(
                Store.ask, desk.store.store, "alpha", "c1", ask("Deploy"), background=True
            )
            await term.wait_for("Question Deploy?")
            pipe.send_text("3")  # Type your own: the editor opens
            pipe.send_text("after the audit")
            await term.wait_for("after the audit")
            (row,) = await bob.board.wait_for(
                lambda rows: bool(rows) and "after the audit" in str(rows[0].draft)
            )
            (draft,) = row.draft["drafts"]
            assert draft["customText"] == "after the audit", draft


async def test_on_a_short_screen_a_person_on_two_forms_is_named_once(
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """At 40x12 the status line names only the people on the other desks' forms: bob, on two
    forms (his page and his terminal, say), is named once, with how many ("bob, bob")."""
    term = VirtualTerminal(40, 12)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk:
            for agent in ("alpha", "beta", "gamma"):
                await desk.store.run(
                    Store.ask, desk.store.store, agent, "c1", ask(agent.title()), background=True
                )
            await term.wait_for("Question Alpha?")
            await desk.board.wait_for(lambda rows: len(rows) == 3)
            for agent in ("beta", "gamma"):
                (row,) = [r for r in desk.board.snapshot() if r.agent_key == agent]
                await _claimed_on_another_desk(desk, row.request_id, "bob")
            await term.wait_for(lambda t: t.rows()[-1].strip() == "Other desks: bob on 2 forms")


async def test_an_answer_waiting_on_the_store_is_said_to_be_on_its_way(
    pg_cluster: Cluster,
    desk_url: str,  # noqa: F811
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PostgreSQL stops as ann submits on her terminal: the form leaves the screen ("1
    waiting, not free here.": it is in the store until the answer is) while the answer waits
    for the store, and the status line says it
    is on its way (it said only that the store was away, which read as the answer gone);
    once the store is back the answer is recorded, and the status line says so. (Said after
    half a second here instead of ``SLOW``'s 5: the sentence is the same.)"""
    monkeypatch.setattr(terminal, "SLOW", 0.5)
    term = VirtualTerminal(110, 30)

    def said(text: str) -> Callable[[VirtualTerminal], bool]:
        return lambda t: text in " ".join(row.strip() for row in t.rows()[-3:])

    with trio.fail_after(90), create_pipe_input() as pipe:
        async with ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk:
            request_id, _bg, _state = await desk.store.run(
                Store.ask, desk.store.store, "alpha", "c1", ask("Deploy"), background=True
            )
            await term.wait_for("Question Deploy?")
            pipe.send_text("1")
            await term.wait_for("Review your answers")
            pipe.send_text("1")
            await term.wait_for("again")
            await trio.to_thread.run_sync(pg_cluster.stop)
            stopped = True
            try:
                pipe.send_text("1")
                await term.wait_for("1 waiting, not free here.")
                await term.wait_for(said("Sending your answer to “Deploy”…"))
                await trio.to_thread.run_sync(pg_cluster.start)
                stopped = False
            finally:
                if stopped:
                    await trio.to_thread.run_sync(pg_cluster.start)
            await term.wait_for(said("Your answer to “Deploy” is recorded."))
            (outcome,) = await desk.store.run(Store.outcomes, desk.store.store, [request_id])
            assert outcome["answered_by"] == "ann"


async def test_on_a_short_screen_a_write_the_store_refused_is_said_briefly(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """At 40x12, the store refusing writes (read-only): the status line's one row says so in
    a few words (the sentence was cut at the edge, "The team's store refused this desk's"),
    the desk carries on, and once a write goes through it says the store takes writes again
    (the refusal stayed the last word, as if the store still refused)."""
    term = VirtualTerminal(40, 12)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk:
            await desk.store.run(
                Store.ask, desk.store.store, "alpha", "c1", ask("Deploy"), background=True
            )
            await term.wait_for("Question Deploy?")
            new_sessions_read_only(pg_cluster.url(), store_db, True)
            try:
                pipe.send_text("2")  # a draft to save: refused
                await term.wait_for(
                    lambda t: t.rows()[-1].strip() == "Store refused a write: text kept."
                )
            finally:
                new_sessions_read_only(pg_cluster.url(), store_db, False)
            pipe.send_text("1")  # on the review: Submit, armed (a change of the form): saved
            (row,) = await desk.board.wait_for(
                lambda rows: bool(rows) and rows[0].draft is not None
            )
            assert row.draft["drafts"][0]["selected"] == [1]  # "No", chosen while refused
            # A write went through: the status line says so (the refusal stayed the latest).
            await term.wait_for(lambda t: t.rows()[-1].strip() == "Store takes writes again.")


def _url_on_screen(rows: list[str], base: str) -> str | None:
    """The sign-in URL drawn from the row that starts it: its first row after one space, the
    rows that go on after three (``None`` while no row starts one)."""
    start = next((n for n, row in enumerate(rows) if row.startswith(" " + base)), None)
    if start is None:
        return None
    url = rows[start].strip()
    for row in rows[start + 1 :]:
        if not row.startswith("   ") or row[3:4] in ("", " "):
            break
        url += row.strip()
    return url


async def test_at_40_columns_the_sign_in_link_reads_as_one_and_ctrl_o_shows_one_over_a_form(
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """At 40 columns the sign-in URL goes on under itself, indented, never from the screen's
    first column, where it read as text of its own; with a form on display (which hides the
    sign-in lines) Ctrl-O shows a new link in the status line, drawn the same way. Each one,
    read off the screen, signs a browser in."""
    term = VirtualTerminal(40, 12)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk:
            base = desk.web.base_url
            await term.wait_for(lambda t: _url_on_screen(t.rows(), base) is not None)
            first = _url_on_screen(term.rows(), base)
            assert first is not None
            async with httpx2.AsyncClient(timeout=30) as http:
                await signed_in(http, first)  # the whole URL, read off the screen
            await desk.store.run(
                Store.ask, desk.store.store, "alpha", "c1", ask("Deploy"), background=True
            )
            await term.wait_for("Question Deploy?")
            assert "/login?code=" not in term.text()
            pipe.send_text("\x0f")  # Ctrl-O
            await term.wait_for("Sign-in link for the web page")
            await term.wait_for(lambda t: _url_on_screen(t.rows(), base) is not None)
            rows = term.rows()
            second = _url_on_screen(rows, base)
            assert all(len(row) <= 40 for row in rows), rows
            assert second is not None and second != first
            async with httpx2.AsyncClient(timeout=30) as http:
                await signed_in(http, second)
            pipe.send_text("\x1b[B")  # the next key: the link goes, the form is as it was
            await term.wait_for(lambda t: "Sign-in link" not in t.text())
            assert "Question Deploy?" in term.text()


async def test_escape_the_store_refuses_brings_the_form_back_with_its_text(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """Esc while the store refuses writes (read-only, as a standby during a failover) puts
    nothing back: the form comes back with what was typed, the status line says why, and the
    claim stays this desk's (the claim was dropped here only and "Deferred" said all the
    same; past a store call's retries, text typed while the store was away went with it).
    Once the store takes writes, Esc puts it back."""
    term = VirtualTerminal(40, 12)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk:
            for label in ("Deploy", "Merge"):
                await desk.store.run(
                    Store.ask, desk.store.store, "alpha", label, ask(label), background=True
                )
            await term.wait_for("Question Deploy?")
            new_sessions_read_only(pg_cluster.url(), store_db, True)
            try:
                pipe.send_text("2")  # "No", then the review; the draft is refused
                await term.wait_for("Store refused a write: text kept.")
                pipe.send_text("\x1b")  # Esc: later
                await term.wait_for("Not put back: store did not take it.")
                await term.wait_for("Review your answers")
                assert "Deferred" not in term.text()
                assert "→ No" in term.text(), term.text()  # as it was answered
                # From the store itself (the board's copy may be from before the claim: its
                # re-read can meet a session the read-only switch ended).
                (row, _merge) = await desk.store.run(Store.board, desk.store.store)
                assert row.claimed_by == "ann" and row.claim_live
                # The keys go on: the form answered Esc with its snapshot (the keys stayed
                # parked for the answer to Esc, which never came).
                pipe.send_text("\x1b[Z")  # Shift+Tab: back to the question
                await term.wait_for("Question Deploy?")
            finally:
                new_sessions_read_only(pg_cluster.url(), store_db, False)
            pipe.send_text("\x1b")
            await term.wait_for("Question Merge?")
            await term.wait_for("Deferred: 1 other form goes first.")
            rows = await desk.board.wait_for(
                lambda rows: any(r.request_id == row.request_id and not r.claim_live for r in rows)
            )
            (put_back,) = [r for r in rows if r.request_id == row.request_id]
            assert put_back.draft is not None
            assert put_back.draft["drafts"][0]["selected"] == [1]  # what was typed, kept


async def test_escape_keeps_the_form_on_screen_saying_so_until_the_store_has_it(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """Esc while the store is slow to take the put-back (its row locked by another session,
    as a store away holds it for up to a store call's retries): the form stays on the screen,
    the status line saying "Saving for later…", until the store has it; then the next form.
    (The form left the screen first, for up to a minute, and came back only if the store
    refused.)"""
    term = VirtualTerminal(40, 12)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk:
            for label in ("Deploy", "Merge"):
                await desk.store.run(
                    Store.ask, desk.store.store, "alpha", label, ask(label), background=True
                )
            await term.wait_for("Question Deploy?")
            pipe.send_text("2")  # "No": its draft goes to the store
            await term.wait_for("Review your answers")
            rows = await desk.board.wait_for(lambda rows: rows[0].draft is not None)
            locker = await trio.to_thread.run_sync(psycopg.connect, pg_cluster.url(store_db))
            try:
                await trio.to_thread.run_sync(
                    locker.execute,
                    "SELECT 1 FROM pi_agent_ask.requests WHERE request_id = %s FOR UPDATE",
                    (rows[0].request_id,),
                )
                pipe.send_text("\x1b")  # Esc: later, the store's answer held back
                with trio.fail_after(10):
                    await term.wait_for("Saving for later…")
                await trio.sleep(0.5)  # the old form was gone from the screen by then
                assert "→ No" in term.text() and "Review your answers" in term.text()
                assert "Saving for later…" in term.text()
            finally:
                await trio.to_thread.run_sync(locker.rollback)
                await trio.to_thread.run_sync(locker.close)
            await term.wait_for("Question Merge?")
            await term.wait_for("Deferred: 1 other form goes first.")
            assert "Saving for later…" not in term.text()
            request_id = rows[0].request_id
            rows = await desk.board.wait_for(
                lambda rows: any(r.request_id == request_id and not r.claim_live for r in rows)
            )
            (row,) = [r for r in rows if r.request_id == request_id]
            assert row.draft is not None
            assert row.draft["drafts"][0]["selected"] == [1]


def _held_by_others(url: str) -> None:
    """Two forms in the store at ``url``, each held by another desk's person for a minute."""
    store = Store(url)
    store.open()
    try:
        for person, agent in (("bob", "alpha"), ("carol", "beta")):
            request_id, _bg, _state = store.ask(agent, "c1", ask(agent.title()), background=True)
            claim = store.claim(request_id, desk=f"{person}-laptop:1:ab12", person=person, lease=60)
            assert isinstance(claim, Claim)
    finally:
        store.close()


async def test_with_every_form_held_elsewhere_the_screen_does_not_say_none_wait(
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """A desk started while every waiting form is held by another desk: nothing is on
    display, the agents line counts the forms, and the line above where the form goes says
    how many wait and that none is free here (it said "No questions waiting." beside the
    agents' counts of them; and until the board changed, the desk had not counted them at
    all: no agent, no form, no word of the other desks)."""
    await trio.to_thread.run_sync(_held_by_others, desk_url)
    term = VirtualTerminal(40, 12)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with ann_at_a_terminal(desk_url, tmp_path, pipe, term):
            with trio.move_on_after(30):
                await term.wait_for(lambda t: t.rows()[1].strip() == "2 waiting, none free here.")
            rows = term.rows()
            assert rows[1].strip() == "2 waiting, none free here.", rows
            assert "alpha 1" in rows[0] and "beta 1" in rows[0], rows
