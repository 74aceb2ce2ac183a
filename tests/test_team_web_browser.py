"""Two team desks' web pages in a real browser: Chromium driven by Selenium, an agent on the
official MCP SDK client over ``pi-agent-ask mcp --desk URL`` with its token, two desks (ann's
and bob's) on one real PostgreSQL. The two pages are two tabs under two host names
(``127.0.0.1`` and ``localhost``), since a browser keeps one cookie per host whatever the
port.

A person typing on ann's page claims the form; bob's page says ann is on it, refuses bob's
typing and his Submit with the store's sentence and keeps his text; ann's answer reaches the
agent and leaves bob's page (his unsent text shown in the status line); a background form ann
puts back ("Later") is taken over by bob's page with the text he typed while ann held it; the
history names who answered. The screenshot of bob's page while ann holds the form is
``docs/team-web.png`` (``PI_AGENT_ASK_SCREENSHOTS=docs``, see ``tests/test_web_browser.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS
from pi_agent_ask.desk.web.testing import browser_missing, by_role
from pi_agent_ask.store.db import FormRow, Refused, Store, machine
from tests.store_support import (  # noqa: F401
    Cluster,
    agent,
    ask,
    desk_url,
    store_db,
    team_desk,
)
from tests.test_web_browser import (  # noqa: F401
    browser,
    d_text,
    form_shown,
    offline,
    run,
    screenshots,
    sign_in,
    wait_until,
)

MISSING = browser_missing()
pytestmark = [
    *(pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS),
    pytest.mark.skipif(MISSING is not None, reason=MISSING or ""),
    pytest.mark.e2e,
]


def _row(rows: list[FormRow], request_id: str) -> FormRow | None:
    return next((r for r in rows if r.request_id == request_id), None)


def _note_of(row: FormRow) -> str | None:
    """The note of the first question in ``row``'s stored draft."""
    drafts = (row.draft or {}).get("drafts") or [{}]
    note = drafts[0].get("note")
    return note if isinstance(note, str) else None


def note(driver: Any) -> Any:
    return driver.find_element("css selector", "#ask-form textarea.note")


def held_badge(driver: Any) -> str:
    badge = driver.find_element("css selector", "#ask-form .held-by")
    return "" if badge.get_attribute("hidden") is not None else str(badge.text)


def errors(driver: Any) -> str:
    return d_text(driver, "#form-errors")


async def test_two_desks_pages_show_who_is_on_a_form_and_refuse_the_other_in_words(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
    browser: Any,  # noqa: F811
    screenshots: Path,  # noqa: F811
) -> None:
    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    with trio.fail_after(240):
        async with (
            team_desk(desk_url, "ann") as ann,
            team_desk(desk_url, "bob") as bob,
            agent([ann.url], token) as alpha,
        ):
            ann_url = ann.web.login_url()
            bob_url = bob.web.login_url().replace("//127.0.0.1:", "//localhost:")
            await run(lambda: sign_in(browser, ann_url))
            ann_tab = browser.current_window_handle

            def bob_tab() -> str:
                browser.switch_to.new_window("tab")
                sign_in(browser, bob_url)
                return str(browser.current_window_handle)

            bob_tab_handle = await run(bob_tab)

            def to(tab: str) -> None:
                browser.switch_to.window(tab)

            results: list[Any] = []
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    results.append(await alpha.call_tool("ask_user", ask("Ship it")))

                nursery.start_soon(call)
                rows = await ann.board.wait_for(lambda rows: len(rows) == 1)
                first = rows[0].request_id

                # Ann opens the form on her page and types: her desk claims it.
                def ann_types() -> None:
                    to(ann_tab)
                    browser.get(ann_url.split("/login")[0] + "/")
                    wait_until(browser, form_shown)
                    note(browser).send_keys("ann: ship on Monday")

                await run(ann_types)
                await bob.board.wait_for(
                    lambda rows: (
                        (row := _row(rows, first)) is not None
                        and row.claimed_by == "ann"
                        and row.claim_live
                        and _note_of(row) == "ann: ship on Monday"
                    )
                )

                # Bob's page says who is on it; his typing is refused in words and kept.
                def bob_types() -> str:
                    to(bob_tab_handle)
                    wait_until(browser, form_shown)
                    wait_until(browser, lambda d: held_badge(d).startswith("ann is answering"))
                    # Ann's draft is shown here before bob types (a page takes in another
                    # desk's draft while its person is not typing).
                    wait_until(
                        browser, lambda d: note(d).get_attribute("value") == "ann: ship on Monday"
                    )
                    by_role(browser, "radio", "Yes").click()
                    note(browser).send_keys("bob: not before the audit")
                    wait_until(browser, lambda d: "ann is answering this form on " in errors(d))
                    return errors(browser)

                refusal = await run(bob_types)
                assert f"on {machine(ann.board.desk)} (until " in refusal
                assert "What you typed stays on this page" in refusal
                (row,) = await bob.store.run(Store.board, bob.store.store)
                assert row.claimed_by == "ann"  # bob's page did not take the form
                assert row.draft is not None and "ann: ship" in str(row.draft)

                def picture() -> bool:
                    """The whole form in the picture: who holds it above, the refusal of bob's
                    typing below, next to the buttons."""
                    size = browser.get_window_size()
                    browser.set_window_size(size["width"], 1100)
                    try:
                        return bool(browser.save_screenshot(str(screenshots / "team-web.png")))
                    finally:
                        browser.set_window_size(size["width"], size["height"])

                assert await run(picture)

                # Bob submits anyway: refused with the store's sentence, his text stays.
                def bob_submits() -> str:
                    submit = by_role(browser, "button", "Submit")
                    submit.click()  # the review step
                    review = by_role(browser, "heading", "Review your answers")
                    wait_until(browser, lambda d: review.is_displayed())
                    assert by_role(browser, "radio", "Yes").is_selected()
                    # The refusal of the draft is on the page: clear it to see the submission's.
                    browser.execute_script("document.getElementById('form-errors').textContent=''")
                    submit.click()
                    wait_until(browser, lambda d: "ann is answering this form" in errors(d))
                    assert str(note(browser).get_attribute("value")).endswith(
                        "bob: not before the audit"
                    )
                    return errors(browser)

                assert "ann is answering this form" in await run(bob_submits)

                # Ann submits: the agent has her answer, bob's page lets the form go and
                # shows what he typed and did not send.
                def ann_submits() -> None:
                    to(ann_tab)
                    by_role(browser, "radio", "Yes").click()
                    submit = by_role(browser, "button", "Submit")
                    submit.click()
                    review = by_role(browser, "heading", "Review your answers")
                    wait_until(browser, lambda d: review.is_displayed())
                    submit.click()
                    wait_until(browser, lambda d: not form_shown(d))

                await run(ann_submits)
            (result,) = results
            assert not result.is_error, result
            assert result.structured_content["answers"]["q"]["values"] == ["yes"]
            assert result.structured_content["answers"]["q"]["note"] == "ann: ship on Monday"

            def bob_told() -> str:
                to(bob_tab_handle)
                wait_until(browser, lambda d: not form_shown(d))
                wait_until(browser, lambda d: "not sent" in d_text(d, "#status"))
                return d_text(browser, "#status")

            told = await run(bob_told)
            assert "bob: not before the audit" in told

            # A background form ann holds and puts back: bob's page takes it over with the
            # text he typed meanwhile.
            queued = await alpha.call_tool("ask_user", ask("Rename", background=True))
            assert not queued.is_error, queued
            rows = await ann.board.wait_for(lambda rows: len(rows) == 1)
            second = rows[0].request_id

            def ann_holds() -> None:
                to(ann_tab)
                wait_until(browser, form_shown)
                note(browser).send_keys("ann: thinking")

            await run(ann_holds)
            await bob.board.wait_for(
                lambda rows: (
                    (row := _row(rows, second)) is not None
                    and row.claimed_by == "ann"
                    and _note_of(row) == "ann: thinking"
                )
            )

            def bob_waits() -> None:
                to(bob_tab_handle)
                wait_until(browser, form_shown)
                wait_until(browser, lambda d: held_badge(d).startswith("ann is answering"))
                wait_until(browser, lambda d: note(d).get_attribute("value") == "ann: thinking")
                note(browser).send_keys("bob: call it moonbeam")
                wait_until(browser, lambda d: "ann is answering this form" in errors(d))

            await run(bob_waits)

            def ann_puts_back() -> None:
                to(ann_tab)
                by_role(browser, "button", "Later").click()
                wait_until(browser, lambda d: "Saved for later" in d_text(d, "#status"))

            await run(ann_puts_back)
            # The page claims the form, then saves the text under the claim (two writes).
            await ann.board.wait_for(
                lambda rows: (
                    (row := _row(rows, second)) is not None
                    and row.claimed_by == "bob"
                    and row.claim_live
                    and row.draft is not None
                    and row.draft["drafts"][0]["note"].endswith("bob: call it moonbeam")
                )
            )

            def bob_saved() -> tuple[str, str]:
                to(bob_tab_handle)
                wait_until(browser, lambda d: "you are on this form now" in d_text(d, "#status"))
                return errors(browser), str(note(browser).get_attribute("value"))

            shown_errors, kept = await run(bob_saved)
            assert shown_errors == ""
            assert kept.endswith("bob: call it moonbeam")

            # History on bob's page names who answered the first form.
            def history() -> str:
                browser.get(bob_url.split("/login")[0] + "/history?agent=alpha")
                wait_until(browser, lambda d: d.find_elements("css selector", ".answered-by"))
                return str(browser.find_element("css selector", ".answered-by").text)

            assert await run(history) == "ann"
            await run(lambda: browser.switch_to.window(ann_tab))


async def test_later_on_a_form_another_desk_holds_says_so_and_never_claims_it_later(
    desk_url: str,  # noqa: F811
    browser: Any,  # noqa: F811
) -> None:
    """Ann presses Later on a form bob's desk holds, having typed nothing: the page says that
    Later changes nothing, and sends no draft. (It saved the drafts first, which the store
    refused while bob held the form; the page then kept them as unsaved text and, once bob
    let the form go, claimed it for ann by itself.)"""
    with trio.fail_after(120):
        async with team_desk(desk_url, "ann") as ann, team_desk(desk_url, "bob") as bob:
            request_id, _bg, _state = await ann.store.run(
                Store.ask,
                ann.store.store,
                "alpha",
                "c1",
                ask("Rename", background=True),
                background=True,
            )
            await bob.board.wait_for(lambda rows: _row(rows, request_id) is not None)
            assert not isinstance(await bob.board.open(request_id), Refused)
            await ann.board.wait_for(
                lambda rows: (row := _row(rows, request_id)) is not None and row.claim_live
            )
            ann_url = ann.web.login_url()

            def ann_presses_later() -> list[str]:
                sign_in(browser, ann_url)
                browser.get(ann_url.split("/login")[0] + "/")
                wait_until(browser, form_shown)
                wait_until(browser, lambda d: held_badge(d).startswith("bob is answering"))
                by_role(browser, "button", "Later").click()
                wait_until(browser, lambda d: "Later here changes nothing" in errors(d))
                return [
                    str(name)
                    for name in browser.execute_script(
                        "return performance.getEntriesByType('resource')"
                        ".map(function (e) { return e.name; })"
                    )
                    if "/api/" in str(name)
                ]

            sent = await run(ann_presses_later)
            assert [name.rsplit("/", 1)[1] for name in sent] == ["later"]
            await bob.board.close(request_id)
            await run(lambda: wait_until(browser, lambda d: held_badge(d) == ""))
            (row,) = await ann.store.run(Store.board, ann.store.store)
            assert row.claimed_by is None and not row.claim_live


async def test_a_form_open_on_the_same_desk_s_terminal_is_a_note_on_its_page_not_an_error(
    desk_url: str,  # noqa: F811
    browser: Any,  # noqa: F811
) -> None:
    """Ann types on her page with the network gone, and her desk's terminal takes the form
    meanwhile (its claim, as the terminal takes it); back online, and answering on the page:
    her typing is not saved while the terminal shows the form, and the page says so in one
    sentence, a calm note beside the review (it was a red alert, with a second sentence about
    the form being free), and her answer goes through, with what she typed."""
    with trio.fail_after(60):
        async with team_desk(desk_url, "ann") as ann:
            request_id, _bg, _state = await ann.store.run(
                Store.ask,
                ann.store.store,
                "alpha",
                "c1",
                ask("Rename", background=True),
                background=True,
            )
            await ann.board.wait_for(lambda rows: _row(rows, request_id) is not None)
            url = ann.web.login_url()

            def typed_offline() -> None:
                sign_in(browser, url)
                wait_until(browser, form_shown)
                offline(browser, True)
                note(browser).send_keys("from the phone")
                wait_until(browser, lambda d: "could not be reached" in errors(d))

            try:
                await run(typed_offline)
                assert not isinstance(await ann.board.open(request_id), Refused)  # the terminal
            finally:
                await run(lambda: offline(browser, False))

            def status_note(driver: Any) -> str:
                return d_text(driver, "#form-note")  # role status, beside the buttons

            def answers() -> tuple[str, str, str]:
                back = wait_until(browser, lambda d: (t := status_note(d)) and t)
                wait_until(browser, lambda d: errors(d) == "")
                # The desk answered: the page no longer says it cannot be reached.
                wait_until(browser, lambda d: "cannot be reached" not in d_text(d, "#status"))
                by_role(browser, "radio", "Yes").click()
                by_role(browser, "button", "Submit").click()  # the review, the note beside it
                wait_until(browser, lambda d: by_role(d, "heading", "Review your answers"))
                said, shown = status_note(browser), errors(browser)
                by_role(browser, "button", "Submit").click()
                wait_until(browser, lambda d: "Sent to the agent" in d_text(d, "#status"))
                return str(back), said, shown

            back, said, alert = await run(answers)
            sentence = (
                "ann has this form open on this desk's terminal: an answer sent from here still "
                "goes through, and what is typed here is saved once the terminal puts the form "
                "back."
            )
            assert back == said == sentence
            assert alert == ""
            (outcome,) = await ann.store.run(Store.outcomes, ann.store.store, [request_id])
            assert outcome["answered_by"] == "ann"
            assert outcome["result"]["answers"]["q"]["note"] == "from the phone"


GATE = """
window.draftsAnswered = 0;
const gate = new Promise(function (open) { window.openGate = open; });
const fetchNow = window.fetch;
window.fetch = async function (path, options) {
  const response = await fetchNow(path, options);
  if (path !== "/api/draft") return response;
  window.draftsAnswered += 1;
  await gate;  // its answer reaches the page once the test says
  return response;
};
"""
"""The page's draft answers held back in the page until ``openGate()``: the answer to a save
comes after board events that came while it was on its way."""


async def test_a_draft_refused_while_the_form_was_freed_meanwhile_is_saved_again(
    desk_url: str,  # noqa: F811
    browser: Any,  # noqa: F811
) -> None:
    """Bob types on a form ann's desk holds; his save is refused, and its answer reaches the
    page only after the board event saying ann let the form go (a loaded machine's timing,
    forced here). The page saves the text again then, claiming the form for bob: the board
    event was read while the save was on its way, which held back a save of text not kept,
    and nothing followed it again (the text stayed unsaved for good)."""
    with trio.fail_after(60):
        async with team_desk(desk_url, "bob") as bob:
            request_id, _bg, _state = await bob.store.run(
                Store.ask,
                bob.store.store,
                "alpha",
                "c1",
                ask("Rename", background=True),
                background=True,
            )
            claim = await bob.store.run(
                Store.claim,
                bob.store.store,
                request_id,
                desk="ann-laptop:1:ab12",
                person="ann",
                lease=60,
            )
            assert not isinstance(claim, Refused)
            await bob.board.wait_for(
                lambda rows: (row := _row(rows, request_id)) is not None and row.claim_live
            )
            url = bob.web.login_url()

            def bob_types() -> None:
                sign_in(browser, url)
                wait_until(browser, lambda d: held_badge(d).startswith("ann is answering"))
                browser.execute_script(GATE)
                # All at once: one save (typed key by key, a slow machine makes several).
                browser.execute_script(
                    "const box = document.querySelector('#ask-form textarea.note');"
                    "box.value = 'bob: call it moonbeam';"
                    "box.dispatchEvent(new Event('input', { bubbles: true }));"
                )
                wait_until(browser, lambda d: d.execute_script("return window.draftsAnswered"))

            await run(bob_types)
            await bob.store.run(Store.release, bob.store.store, claim.token)

            def saved() -> str:
                wait_until(browser, lambda d: held_badge(d) == "")  # the board event is in
                browser.execute_script("window.openGate()")
                wait_until(browser, lambda d: "you are on this form now" in d_text(d, "#status"))
                return errors(browser)

            assert await run(saved) == ""
            await bob.board.wait_for(
                lambda rows: (
                    (row := _row(rows, request_id)) is not None
                    and row.claimed_by == "bob"
                    and _note_of(row) == "bob: call it moonbeam"
                )
            )
