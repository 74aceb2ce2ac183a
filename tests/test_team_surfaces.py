"""One team desk with both its terminal (real prompt_toolkit input through a pipe, a pyte
screen) and its web page (over HTTP, signed in): each surface keeps to the forms it claimed.
A form open on the terminal is the terminal's: the page says so, and its Later and its typing
leave the form, the claim and the terminal's draft where they are, each saying so in a
sentence. An answer from the page is taken (one desk is one person, who may have walked away
from the terminal), and the terminal says where it was answered."""

from __future__ import annotations

import functools
import re
from datetime import datetime, timedelta
from typing import Any

import httpx2
import pytest
import trio
from prompt_toolkit.input import create_pipe_input

from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS
from pi_agent_ask.store.board import HEARTBEAT, LEASE
from pi_agent_ask.store.db import Claim, Refused, Store, Submitted
from pi_agent_ask.ui.testing import VirtualTerminal
from tests.store_support import (  # noqa: F401
    YES,
    Cluster,
    desk_url,
    store_db,
    team_desk,
)
from tests.test_team_terminal import ann_at_a_terminal, ask
from tests.test_web import signed_in

pytestmark = [pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS]

ON_THE_TERMINAL = "ann has this form open on this desk's terminal"


async def test_the_page_leaves_a_form_open_on_the_same_desk_s_terminal_to_it(
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    term = VirtualTerminal(110, 30)
    with trio.fail_after(90), create_pipe_input() as pipe:
        async with ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk:
            request_id, _bg, _state = await desk.store.run(
                Store.ask, desk.store.store, "alpha", "c1", ask("Deploy"), background=True
            )
            await term.wait_for("Question Deploy?")
            pipe.send_text("2")  # "No", on the terminal: its draft goes to the store
            await term.wait_for("Review your answers")
            await desk.board.wait_for(lambda rows: bool(rows) and rows[0].draft is not None)
            base = desk.web.base_url
            form = {"form": f"alpha/{request_id}"}
            async with httpx2.AsyncClient(timeout=30) as http:
                csrf = await signed_in(http, desk.web.login_url())
                headers = {"origin": base, "x-csrf-token": csrf}

                later = await http.post(base + "/api/later", json=form, headers=headers)
                assert later.status_code == 423, later.text
                assert later.json()["error"].startswith(
                    "ann is answering this on this desk's terminal."
                )
                assert "Later here changes nothing" in later.json()["error"]
                assert desk.board.claimed_here(request_id) is not None

                page = await http.get(base + "/", params=form)
                assert "ann is answering this on this desk&#39;s terminal" in page.text

                typed = {**form, "drafts": [{"selected": [0], "note": "from the page"}]}
                refused = await http.post(base + "/api/draft", json=typed, headers=headers)
                assert refused.status_code == 423, refused.text
                body = refused.json()
                assert body["code"] == "here" and body["heldBy"] == "ann"
                assert body["desk"] == desk.board.desk
                assert body["error"].startswith(ON_THE_TERMINAL)

                (row,) = await desk.store.run(Store.board, desk.store.store)
                assert row.claim_live and row.claimed_by == "ann"
                assert row.draft is not None and row.draft["drafts"][0]["selected"] == [1]
                assert row.draft["drafts"][0].get("note") in (None, "")
                assert "Question Deploy?" in term.text()  # still open on the terminal

                # Ann, away from her terminal, answers on the page: taken, and the terminal
                # says where it went.
                sent = await http.post(base + "/api/submit", json=typed, headers=headers)
                assert sent.status_code == 200, sent.text
            await term.wait_for(
                "“Deploy” was answered elsewhere: ann answered it on this desk's web page."
            )
            await term.wait_for("No questions waiting")
            (outcome,) = await desk.store.run(Store.outcomes, desk.store.store, [request_id])
            assert outcome["answered_by"] == "ann" and outcome["answered_on"] == desk.board.desk
            assert outcome["result"]["answers"]["q"]["values"] == ["yes"]
            assert outcome["result"]["answers"]["q"]["note"] == "from the page"


async def test_the_terminal_leaves_a_form_the_same_desk_s_page_holds_to_it(
    desk_url: str,  # noqa: F811
) -> None:
    """The other way round, on the desk's board: a form the page claimed (its person typing)
    is not the terminal's to open, draft or put back; each is refused in a sentence and the
    page's claim and draft stay. An answer is taken from either."""
    with trio.fail_after(60):
        async with team_desk(desk_url, "ann") as desk:
            request_id, _bg, _state = await desk.store.run(
                Store.ask, desk.store.store, "alpha", "c1", ask("Deploy"), background=True
            )
            await desk.board.wait_for(lambda rows: bool(rows))
            claim = await desk.board.open(request_id, surface="page")
            assert isinstance(claim, Claim)
            typed = {"drafts": [{"note": "from the page"}]}
            assert await desk.board.save_draft(request_id, typed, surface="page") is True
            on_the_page = "ann has this form open on this desk's web page"
            refusals = [
                await desk.board.open(request_id),
                await desk.board.save_draft(request_id, {"drafts": []}),
                await desk.board.close(request_id),
            ]
            for refused in refusals:
                assert isinstance(refused, Refused), refused
                assert refused.reason == "claimed" and refused.message.startswith(on_the_page)
            assert desk.board.surface_of(request_id) == "page"
            (row,) = await desk.store.run(Store.board, desk.store.store)
            assert row.claim_live and row.draft == typed
            assert isinstance(await desk.board.answer(request_id, YES), Submitted)


async def test_a_form_whose_desk_stopped_answering_says_when_it_is_free(
    desk_url: str,  # noqa: F811
    tmp_path: Any,
) -> None:
    """Bob's desk holds a form and stops answering (killed: it extends its claim no more). The
    form is free once the claim's lease runs out, and ann's terminal and page say when, where
    they say bob is on it, once his desk missed a heartbeat: she waited without knowing how
    long. Bob's claim is made here with half a second more than the lease a desk that answers
    never lets its claim fall under (a heartbeat and a half after its last extension, with
    the desks' lease and heartbeat): ann's desk reads the board again by itself when it
    falls under, since nothing notifies a heartbeat that did not come."""
    term = VirtualTerminal(110, 30)
    said = re.compile(r"bob's desk stopped answering; free at (\d\d:\d\d:\d\d)")
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with ann_at_a_terminal(desk_url, tmp_path, pipe, term) as desk:
            await desk.store.run(
                Store.ask, desk.store.store, "alpha", "c1", ask("First"), background=True
            )
            await term.wait_for("Question First?")
            held, _bg, _state = await desk.store.run(
                Store.ask, desk.store.store, "beta", "c1", ask("Held"), background=True
            )
            lease = LEASE - 1.5 * HEARTBEAT + 0.5
            claim = await desk.store.run(
                functools.partial(
                    Store.claim,
                    desk.store.store,
                    held,
                    desk="bob-vm:1:ab",
                    person="bob",
                    lease=lease,
                )
            )
            assert isinstance(claim, Claim)
            expected = datetime.now().astimezone() + timedelta(seconds=lease)
            await term.wait_for(lambda t: said.search(t.rows()[-1]) is not None)
            status = term.rows()[-1].strip()
            assert status.startswith("Other desks: bob on beta's form (bob's desk stopped"), status
            match = said.search(status)
            assert match is not None
            free = datetime.combine(
                expected.date(), datetime.strptime(match[1], "%H:%M:%S").time(), expected.tzinfo
            )
            assert abs((free - expected).total_seconds()) < 5, (free, expected)
            # The page says it in the same words, where it says who is on the form.
            async with httpx2.AsyncClient(timeout=30) as http:
                await signed_in(http, desk.web.login_url())
                page = await http.get(desk.web.base_url + "/", params={"form": f"beta/{held}"})
            assert f"bob&#39;s desk stopped answering; free at {match[1]}." in page.text
