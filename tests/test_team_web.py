"""A team desk's web page on a real PostgreSQL, driven over HTTP (a real desk, signed in with
a one-time code): every pending form of the store, who is on a form claimed by another desk,
an answer through the store under the person's name (a form another desk holds is refused
with the store's sentence), a draft from the page claiming the form for every desk to see,
history and export naming the answerer, and the TLS rule of a non-loopback listen."""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest
import trio

from pi_agent_ask.desk.http import ListenError
from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS
from pi_agent_ask.store.db import Claim, FormRow, Refused, Store, machine
from pi_agent_ask.store.run import TeamDesk, run_team_desk
from pi_agent_ask.store.testing import desk_process
from tests.store_support import (  # noqa: F401
    YES,
    Cluster,
    desk_url,
    store_db,
    team_desk,
)
from tests.test_web import signed_in


def _params(label: str) -> dict[str, Any]:
    return {
        "title": label,
        "questions": [
            {
                "id": "q",
                "label": label,
                "prompt": f"{label}?",
                "type": "single",
                "options": [{"value": "yes", "label": "Yes"}, {"value": "no", "label": "No"}],
            }
        ],
    }


async def _ask(
    desk: TeamDesk, agent: str, call: str, label: str, *, background: bool = True
) -> str:
    request_id, _bg, _state = await desk.store.run(
        Store.ask, desk.store.store, agent, call, _params(label), background=background
    )
    return request_id


def _claimed_by(rows: list[FormRow], request_id: str, person: str) -> bool:
    return any(r.request_id == request_id and r.claimed_by == person and r.claim_live for r in rows)


async def test_the_page_answers_through_the_store(desk_url: str) -> None:  # noqa: F811
    with trio.fail_after(90):
        async with team_desk(desk_url, "ann") as ann, team_desk(desk_url, "bob") as bob:
            first = await _ask(ann, "alpha", "c1", "Ship")
            held = await _ask(ann, "alpha", "c2", "Held")
            other = await _ask(ann, "beta", "c1", "Other")
            waited = await _ask(ann, "gamma", "c1", "Waited on", background=False)
            claim = await bob.board.open(held)
            assert isinstance(claim, Claim) and claim.request_id == held
            await ann.board.wait_for(lambda rows: _claimed_by(rows, held, "bob"))
            base = ann.web.base_url
            async with httpx2.AsyncClient(timeout=30) as http:
                csrf = await signed_in(http, ann.web.login_url())
                headers = {"origin": base, "x-csrf-token": csrf}
                page = await http.get(base + "/")
                assert page.status_code == 200
                assert f"alpha/{first}" in page.text and "beta" in page.text
                on_held = await http.get(base + "/", params={"form": f"alpha/{held}"})
                assert f'data-form-id="alpha/{held}"' in on_held.text
                # The machine in plain words, not the desk's id.
                assert f"bob is answering this on {machine(bob.board.desk)}." in on_held.text
                assert bob.board.desk not in on_held.text
                # A background question can wait ("Later"); one the agent waits on says so.
                assert 'id="later"' in on_held.text
                blocked = '<p class="badge blocked when-blocked">The agent is blocked'
                assert blocked not in on_held.text
                on_waited = await http.get(base + "/", params={"form": f"gamma/{waited}"})
                assert f'data-form-id="gamma/{waited}"' in on_waited.text
                assert blocked in on_waited.text and 'id="later"' not in on_waited.text
                # Four forms waiting: the page shows one, three behind it (each counted once).
                assert '<a href="#queue">3 more waiting</a>' in on_waited.text

                # A form another desk holds: the store refuses, in its words.
                refused = await http.post(
                    base + "/api/submit",
                    json={"form": f"alpha/{held}", "drafts": [{"selected": [1]}]},
                    headers=headers,
                )
                assert refused.status_code == 422
                assert refused.json()["error"].startswith(
                    f"bob is answering this form on {machine(bob.board.desk)} (until "
                )

                # A free form: answered through the store under this desk's person.
                done = await http.post(
                    base + "/api/submit",
                    json={"form": f"alpha/{first}", "drafts": [{"selected": [0]}]},
                    headers=headers,
                )
                assert done.status_code == 200, done.text
                (outcome,) = await ann.store.run(Store.outcomes, ann.store.store, [first])
                assert outcome["answered_by"] == "ann"
                assert outcome["result"]["answers"]["q"]["values"] == ["yes"]
                await bob.board.wait_for(lambda rows: all(r.request_id != first for r in rows))

                # A draft typed on the page claims the form: the other desk sees who and what.
                drafted = await http.post(
                    base + "/api/draft",
                    json={"form": f"beta/{other}", "drafts": [{"selected": [1], "note": "hm"}]},
                    headers=headers,
                )
                assert drafted.status_code == 200, drafted.text
                rows = await bob.board.wait_for(
                    lambda rows: (
                        _claimed_by(rows, other, "ann")
                        and any(r.request_id == other and r.draft for r in rows)
                    )
                )
                (row,) = [r for r in rows if r.request_id == other]
                assert row.draft is not None and row.draft["drafts"][0]["note"] == "hm"

                history = await http.get(base + "/history", params={"agent": "alpha"})
                assert history.status_code == 200
                assert 'class="answered-by">ann<' in history.text
                # The answer's time, the store's, after the badge; the asked time named so.
                answered_at = outcome["answered_at"].astimezone(dt.UTC)
                stamp = answered_at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
                assert f'answered</span> <time class="answered-at" datetime="{stamp}"' in (
                    history.text
                ), history.text
                export = await http.get(base + "/history/export", params={"agent": "alpha"})
                assert export.status_code == 200
                assert "### Answered by\n\n```text\nann\n```" in export.text

                # A sign-in code needs the page's own token (desk login-url reads it from the
                # desk's sign-in file); an agent's token or none is refused.
                no_code = await http.post(base + "/login-code", headers={"authorization": "Bearer"})
                assert no_code.status_code == 401
                code = await http.post(
                    base + "/login-code", headers={"authorization": f"Bearer {ann.web.token}"}
                )
                assert code.json()["url"].startswith(base + "/login?code=")


async def test_a_non_loopback_team_desk_needs_tls(desk_url: str) -> None:  # noqa: F811
    with pytest.raises(ListenError, match="without TLS"):
        await run_team_desk(desk_url, listen_on="0.0.0.0:0", allow_remote=True)


async def test_a_draft_on_a_form_another_desk_holds_is_refused_and_says_who(
    desk_url: str,  # noqa: F811
) -> None:
    """Typing on the page into a form another desk holds: the draft is refused (423) with the
    store's sentence and who holds it, the holder's claim and draft stay as they were, and
    the same draft goes through once the holder lets the form go."""
    with trio.fail_after(90):
        async with team_desk(desk_url, "ann") as ann, team_desk(desk_url, "bob") as bob:
            held = await _ask(ann, "alpha", "c1", "Held")
            claim = await bob.board.open(held)
            assert isinstance(claim, Claim) and claim.request_id == held
            mine = {"drafts": [{"selected": [1], "note": "bob's"}]}
            assert await bob.board.save_draft(held, mine)
            await ann.board.wait_for(lambda rows: _claimed_by(rows, held, "bob"))
            base = ann.web.base_url
            async with httpx2.AsyncClient(timeout=30) as http:
                csrf = await signed_in(http, ann.web.login_url())
                headers = {"origin": base, "x-csrf-token": csrf}
                typed = {"form": f"alpha/{held}", "drafts": [{"selected": [0], "note": "ann's"}]}
                refused = await http.post(base + "/api/draft", json=typed, headers=headers)
                assert refused.status_code == 423, refused.text
                body = refused.json()
                assert body["code"] == "held"
                assert body["heldBy"] == "bob" and body["desk"] == bob.board.desk
                assert body["error"].startswith(
                    f"bob is answering this form on {machine(bob.board.desk)} (until "
                )
                assert bob.board.desk not in body["error"]  # the id is the JSON's ``desk``
                (row,) = await ann.store.run(Store.board, ann.store.store)
                assert row.claimed_by == "bob" and row.draft == mine

                await bob.board.close(held)
                await ann.board.wait_for(
                    lambda rows: any(r.request_id == held and not r.claim_live for r in rows)
                )
                saved = await http.post(base + "/api/draft", json=typed, headers=headers)
                assert saved.status_code == 200, saved.text
                (row,) = await ann.store.run(Store.board, ann.store.store)
                assert row.claimed_by == "ann" and row.claim_live
                assert row.draft is not None and row.draft["drafts"][0]["note"] == "ann's"


async def _login_url(env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "pi_agent_ask", "desk", "login-url"]
    return await trio.run_process(
        command, env=env, capture_stdout=True, capture_stderr=True, check=False
    )


async def test_desk_login_url_reaches_a_team_desk_process(
    desk_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """``pi-agent-ask desk login-url`` against a ``desk --store`` process: a one-time URL that
    signs a browser in, as for a desk of files; once the desk is gone (killed, its sign-in file
    left behind), "no desk is running"."""
    env = {**os.environ, "PI_AGENT_ASK_DESK_FILE": str(tmp_path / "desk.json")}
    with trio.fail_after(90):
        process, mcp_url = await desk_process(desk_url, "ann", env=env)
        try:
            assert (tmp_path / "desk.team.json").stat().st_mode & 0o777 == 0o600
            made = await _login_url(env)
            assert made.returncode == 0, made.stderr
            (url,) = made.stdout.decode().splitlines()
            base = mcp_url.removesuffix("/mcp")
            assert url.startswith(base + "/login?code=")
            async with httpx2.AsyncClient(timeout=30) as http:
                await signed_in(http, url)
                page = await http.get(base + "/")
                assert page.status_code == 200 and "No questions waiting" in page.text
        finally:
            process.send_signal(signal.SIGKILL)
            await process.wait()
        assert (tmp_path / "desk.team.json").exists()  # a killed desk leaves its file
        gone = await _login_url(env)
        assert gone.returncode == 2
        assert gone.stdout == b""
        assert b"no desk is running" in gone.stderr


async def test_a_page_claim_ends_a_lease_after_its_last_draft(desk_url: str) -> None:  # noqa: F811
    """A draft typed on the page claims the form; a page that goes quiet (its person left,
    the tab closed) puts the form back for every desk a lease after its last draft, with
    that draft, so another desk can take it over; the page's next draft claims it again."""
    with trio.fail_after(90):
        async with (
            team_desk(desk_url, "ann", lease=1.0, heartbeat=0.25) as ann,
            team_desk(desk_url, "bob") as bob,
        ):
            held = await _ask(ann, "alpha", "c1", "Held")
            await ann.board.wait_for(lambda rows: any(r.request_id == held for r in rows))
            base = ann.web.base_url
            async with httpx2.AsyncClient(timeout=30) as http:
                csrf = await signed_in(http, ann.web.login_url())
                headers = {"origin": base, "x-csrf-token": csrf}
                typed = {"form": f"alpha/{held}", "drafts": [{"note": "ann was here"}]}
                saved = await http.post(base + "/api/draft", json=typed, headers=headers)
                assert saved.status_code == 200, saved.text
                await bob.board.wait_for(lambda rows: _claimed_by(rows, held, "ann"))
                # Nothing more from the page: the claim ends, the draft stays.
                rows = await bob.board.wait_for(
                    lambda rows: any(r.request_id == held and r.claimed_by is None for r in rows)
                )
                (row,) = rows
                assert row.draft is not None and row.draft["drafts"][0]["note"] == "ann was here"
                claim = await bob.board.open(held)
                assert isinstance(claim, Claim)
                await bob.board.close(held)
                again = await http.post(base + "/api/draft", json=typed, headers=headers)
                assert again.status_code == 200, again.text
                await bob.board.wait_for(lambda rows: _claimed_by(rows, held, "ann"))


async def test_a_refused_submit_leaves_the_page_s_claim_to_end_when_the_page_goes_quiet(
    desk_url: str,  # noqa: F811
) -> None:
    """A Submit the store refuses while the page holds the form (text PostgreSQL cannot keep:
    a NUL) keeps the claim for the person to fix the text; if they leave instead, the claim
    ends a lease after the page's last word, as after a draft, and the form goes back for
    every desk with the draft it had: it is not held by this desk for as long as it runs."""
    with trio.fail_after(90):
        async with (
            team_desk(desk_url, "ann", lease=1.0, heartbeat=0.25) as ann,
            team_desk(desk_url, "bob") as bob,
        ):
            held = await _ask(ann, "alpha", "c1", "Held")
            await ann.board.wait_for(lambda rows: any(r.request_id == held for r in rows))
            base = ann.web.base_url
            async with httpx2.AsyncClient(timeout=30) as http:
                csrf = await signed_in(http, ann.web.login_url())
                headers = {"origin": base, "x-csrf-token": csrf}
                typed = {"form": f"alpha/{held}", "drafts": [{"note": "ann was here"}]}
                saved = await http.post(base + "/api/draft", json=typed, headers=headers)
                assert saved.status_code == 200, saved.text
                await bob.board.wait_for(lambda rows: _claimed_by(rows, held, "ann"))
                bad = {"form": f"alpha/{held}", "drafts": [{"selected": [0], "note": "a\x00b"}]}
                refused = await http.post(base + "/api/submit", json=bad, headers=headers)
                assert refused.status_code == 422, refused.text
                assert "NUL" in refused.json()["error"]
                rows = await bob.board.wait_for(
                    lambda rows: any(r.request_id == held and r.claimed_by is None for r in rows)
                )
                (row,) = rows
                assert row.draft is not None and row.draft["drafts"][0]["note"] == "ann was here"
                claim = await bob.board.open(held)
                assert isinstance(claim, Claim)


async def test_the_page_opens_on_a_form_no_one_else_is_answering(
    desk_url: str,  # noqa: F811
) -> None:
    """With two people on duty, a page opened (or moving on after a form left) shows the first
    form no one else is on, not the one another desk or this desk's terminal holds: that one
    it could only watch. When every form is held, it shows the first."""
    with trio.fail_after(90):
        async with team_desk(desk_url, "ann") as ann, team_desk(desk_url, "bob") as bob:
            held = await _ask(ann, "alpha", "c1", "Held")
            free = await _ask(ann, "alpha", "c2", "Free")
            assert isinstance(await bob.board.open(held), Claim)
            await ann.board.wait_for(lambda rows: _claimed_by(rows, held, "bob"))
            base = ann.web.base_url
            async with httpx2.AsyncClient(timeout=30) as http:
                await signed_in(http, ann.web.login_url())
                page = await http.get(base + "/")
                assert f'data-form-id="alpha/{free}"' in page.text
                fragment = await http.get(base + "/fragment/form")
                assert f'data-form-id="alpha/{free}"' in fragment.text
                assert isinstance(await bob.board.open(free), Claim)
                await ann.board.wait_for(lambda rows: _claimed_by(rows, free, "bob"))
                page = await http.get(base + "/")
                assert f'data-form-id="alpha/{held}"' in page.text


# A live stream left open: httpx2's generators under it are collected unfinished.
@pytest.mark.filterwarnings(*SDK_CLIENT_WARNINGS)
async def test_the_page_says_what_became_of_a_form_that_left_it(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    """A form leaves ann's page because bob answered it, bob cancelled it, ann answered it on
    her terminal, or it was removed from the store: the page says which, and who, in the
    live stream (what a page still showing the form reads), in a refused Submit and under a
    link to the form (it said "answered elsewhere" of each), naming the form as the terminal
    does ("This form" read as the next form, shown by then)."""
    with trio.fail_after(90):
        async with team_desk(desk_url, "ann") as ann, team_desk(desk_url, "bob") as bob:
            answered = await _ask(ann, "alpha", "c1", "Answered")
            cancelled = await _ask(ann, "alpha", "c2", "Cancelled")
            removed = await _ask(ann, "alpha", "c3", "Removed")
            on_terminal = await _ask(ann, "alpha", "c4", "Terminal")
            base = ann.web.base_url
            async with httpx2.AsyncClient(timeout=30) as http:
                csrf = await signed_in(http, ann.web.login_url())
                headers = {"origin": base, "x-csrf-token": csrf}
                await bob.board.wait_for(lambda rows: len(rows) == 4)
                assert not isinstance(await bob.board.answer(answered, YES), Refused)
                cancel = {"kind": "cancel"}
                assert not isinstance(await bob.board.answer(cancelled, cancel), Refused)
                with psycopg.connect(pg_cluster.url(store_db), autocommit=True) as conn:
                    conn.execute(
                        "DELETE FROM pi_agent_ask.requests WHERE request_id = %s", (removed,)
                    )
                    conn.execute("NOTIFY pi_agent_ask, 'b'")
                assert not isinstance(
                    await ann.board.answer(on_terminal, YES, surface="terminal"), Refused
                )
                await ann.board.wait_for(lambda rows: not rows)

                by_bob = f"bob answered it on {machine(bob.board.desk)} at "
                # Each named as the terminal names it: the page says it above the next form.
                said = {
                    answered: f"“Answered” was answered elsewhere: {by_bob}",
                    cancelled: f"“Cancelled” was cancelled elsewhere: bob cancelled it on "
                    f"{machine(bob.board.desk)} at ",
                    removed: "“Removed” was withdrawn without an answer: it is not in the "
                    "team's store any more",
                    on_terminal: "“Terminal” was answered elsewhere: ann answered it on this "
                    "desk's terminal.",
                }
                async with http.stream("GET", base + "/events") as stream:
                    async for line in stream.aiter_lines():
                        if line.startswith("data: "):
                            ended = json.loads(line[6:])["ended"]
                            break
                for request_id, sentence in said.items():
                    form = f"alpha/{request_id}"
                    assert ended[form].startswith(sentence), ended
                    late = await http.post(
                        base + "/api/submit",
                        json={"form": form, "drafts": [{"selected": [0]}]},
                        headers=headers,
                    )
                    assert late.status_code == 409 and late.json()["error"] == ended[form]
                    page = await http.get(base + "/", params={"form": form})
                    assert html.unescape(page.text).count(sentence) == 1
                assert "cancelled it" in ended[f"alpha/{cancelled}"]
                assert "“User cancelled the ask flow”" in ended[f"alpha/{cancelled}"]


async def test_an_answer_the_store_refused_is_not_named_as_where_the_form_was_answered(
    desk_url: str,  # noqa: F811
) -> None:
    """The page's answer is refused (text PostgreSQL cannot keep), then the terminal of the
    same desk answers: what became of the form names the terminal, not the page."""
    with trio.fail_after(60):
        async with team_desk(desk_url, "ann") as ann:
            request_id = await _ask(ann, "alpha", "c1", "Ship")
            await ann.board.wait_for(lambda rows: len(rows) == 1)
            nul = {"kind": "answer", "answers": {"q": {"values": ["yes"], "note": "a\x00b"}}}
            refused = await ann.board.answer(request_id, nul, surface="page")
            assert isinstance(refused, Refused) and refused.reason == "invalid", refused
            assert not isinstance(
                await ann.board.answer(request_id, YES, surface="terminal"), Refused
            )
            await ann.board.wait_for(lambda rows: not rows)
            assert ann.board.ending_text(request_id) == (
                "This form was answered elsewhere: ann answered it on this desk's terminal."
            )
