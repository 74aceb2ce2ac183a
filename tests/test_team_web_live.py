"""A team desk's page in a real browser (Chromium through Selenium) while the team works
around it, on a real PostgreSQL: forms arriving and leaving at other desks, the store slow,
away or refusing writes under the page, the desk's notices, Later, text typed offline on a
form another desk takes meanwhile. What the page says must follow without a reload."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
import trio

from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS
from pi_agent_ask.desk.web.testing import browser_missing
from pi_agent_ask.store.db import Refused, Store
from pi_agent_ask.store.run import TeamDesk
from tests.store_support import (  # noqa: F401
    YES,
    Cluster,
    ask,
    desk_url,
    new_sessions_read_only,
    store_db,
    team_desk,
)
from tests.test_web_browser import (  # noqa: F401
    browser,
    d_text,
    form_shown,
    offline,
    run,
    sign_in,
    wait_until,
)
from tests.test_web_browser_recovery import record_status

MISSING = browser_missing()
pytestmark = [
    *(pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS),
    pytest.mark.skipif(MISSING is not None, reason=MISSING or ""),
    pytest.mark.e2e,
]


async def _ask(desk: TeamDesk, agent: str, call: str, label: str) -> str:
    request_id, _bg, _state = await desk.store.run(
        Store.ask, desk.store.store, agent, call, ask(label, background=True), background=True
    )
    return request_id


def more_waiting(driver: Any) -> str:
    """The form's "N more waiting", as shown ("" when hidden)."""
    found = driver.find_elements("css selector", "#ask-form .more-waiting")
    if not found or found[0].get_attribute("hidden") is not None:
        return ""
    return str(found[0].text)


def form_label(driver: Any) -> str:
    return str(driver.find_element("css selector", "#ask-form legend").text)


async def test_more_waiting_follows_forms_arriving_and_leaving_without_a_reload(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
    browser: Any,  # noqa: F811
) -> None:
    """Ann's page shows one form; forms asked meanwhile, answered or cancelled at bob's desk
    or removed from the store change its "N more waiting" as they happen (it kept the count
    of when the form was loaded until a reload)."""
    with trio.fail_after(120):
        async with team_desk(desk_url, "ann") as ann, team_desk(desk_url, "bob") as bob:
            await _ask(ann, "alpha", "c1", "First")
            await ann.board.wait_for(lambda rows: len(rows) == 1)
            url = ann.web.login_url()

            def opened() -> str:
                sign_in(browser, url)
                wait_until(browser, form_shown)
                return more_waiting(browser)

            assert await run(opened) == ""
            second = await _ask(ann, "beta", "c1", "Second")
            third = await _ask(ann, "gamma", "c1", "Third")
            await run(lambda: wait_until(browser, lambda d: more_waiting(d) == "2 more waiting"))
            await bob.board.wait_for(lambda rows: len(rows) == 3)
            assert not isinstance(await bob.board.answer(second, YES), Refused)
            await run(lambda: wait_until(browser, lambda d: more_waiting(d) == "1 more waiting"))
            fourth = await _ask(ann, "delta", "c1", "Fourth")
            await run(lambda: wait_until(browser, lambda d: more_waiting(d) == "2 more waiting"))
            assert not isinstance(await bob.board.answer(third, {"kind": "cancel"}), Refused)
            await run(lambda: wait_until(browser, lambda d: more_waiting(d) == "1 more waiting"))
            with psycopg.connect(pg_cluster.url(store_db), autocommit=True) as conn:
                conn.execute("DELETE FROM pi_agent_ask.requests WHERE request_id = %s", (fourth,))
                conn.execute("NOTIFY pi_agent_ask, 'b'")
            await run(lambda: wait_until(browser, lambda d: more_waiting(d) == ""))
            assert await run(lambda: form_label(browser)) == "1. First"


def alert(driver: Any) -> str:
    """What the page says beside the form's buttons."""
    return str(driver.find_element("css selector", "#form-errors").text)


async def test_a_submit_waiting_on_the_store_says_it_is_sending_and_keeps_the_text(
    pg_cluster: Cluster,
    desk_url: str,  # noqa: F811
    browser: Any,  # noqa: F811
) -> None:
    """Submit while PostgreSQL is away: the page says at once that it is sending (it showed
    nothing, and took no second click), then, the store still away, that the desk has not
    answered yet, as a desk of files' page does on a link that holds the request; the
    answer and the note typed stay on the page, and once the store is back the answer is
    recorded and the form leaves."""
    with trio.fail_after(150):
        async with team_desk(desk_url, "ann") as ann:
            request_id = await _ask(ann, "alpha", "c1", "Ship")
            await ann.board.wait_for(lambda rows: len(rows) == 1)
            url = ann.web.login_url()

            def reviewed() -> None:
                sign_in(browser, url)
                wait_until(browser, form_shown)
                browser.find_element("css selector", "#ask-form textarea.note").send_keys("ok")
                browser.find_element("css selector", "#ask-form input.choice").click()
                browser.find_element("css selector", "#submit").click()
                wait_until(browser, lambda d: d.find_element("id", "review").is_displayed())

            await run(reviewed)
            # The page's draft is in the store (its claim, its note) before the store goes.
            await ann.board.wait_for(
                lambda rows: bool(rows) and "ok" in str(rows[0].draft) and rows[0].claim_live
            )
            await run(pg_cluster.stop)
            stopped = True
            try:

                def sent() -> tuple[str, str, str]:
                    browser.find_element("css selector", "#submit").click()
                    first = wait_until(browser, lambda d: alert(d))
                    slow = wait_until(browser, lambda d: "not answered yet" in alert(d), 15)
                    assert slow
                    note = browser.find_element("css selector", "#ask-form textarea.note")
                    return first, alert(browser), str(note.get_attribute("value"))

                first, slowly, note = await run(sent)
                assert first == "Sending…", first
                assert slowly.startswith("Sending… the desk has not answered yet"), slowly
                assert "everything you entered stays here" in slowly
                assert note == "ok"
                await run(pg_cluster.start)
                stopped = False
            finally:
                if stopped:
                    await run(pg_cluster.start)
            said = await run(
                lambda: wait_until(
                    browser,
                    lambda d: not form_shown(d) and d.find_element("id", "status").text,
                    60,
                )
            )
            assert said == "Sent to the agent.", said
            (outcome,) = await ann.store.run(Store.outcomes, ann.store.store, [request_id])
            assert outcome["answered_by"] == "ann"


def desk_notice(driver: Any) -> str:
    """The desk's notice above the form, as shown ("" when hidden)."""
    box = driver.find_element("id", "desk-notice")
    return "" if box.get_attribute("hidden") is not None else str(box.text)


async def test_the_desk_s_notices_show_on_its_page_and_a_refused_write_does_not_end_it(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
    browser: Any,  # noqa: F811
) -> None:
    """The store refuses the desk's writes (read-only, as a standby during a failover): the
    page says so above the form, as a desk of files shows its notices, keeps what was typed,
    and the desk carries on (it ended, with an internal error, at the first refused write);
    writable again, the text is saved. Later while the store refuses writes says "Not saved
    for later" and why, beside the buttons, and keeps the form and its claim (the page said
    "Saved for later" before the store had the put-back, and whatever became of it); once
    the store takes writes, Later puts it back. PostgreSQL stopped and started: the page
    says the store is away, then back (only the terminal said it)."""
    admin = pg_cluster.url()  # another database: the store's own may be read-only
    with trio.fail_after(150):
        async with team_desk(desk_url, "ann") as ann:
            request_id = await _ask(ann, "alpha", "c1", "Ship")
            await ann.board.wait_for(lambda rows: len(rows) == 1)
            url = ann.web.login_url()
            await run(lambda: (sign_in(browser, url), wait_until(browser, form_shown)))
            new_sessions_read_only(admin, store_db, True)
            try:

                def typed() -> tuple[str, str]:
                    note = browser.find_element("css selector", "#ask-form textarea.note")
                    note.send_keys("typed while read-only")
                    said = wait_until(browser, lambda d: "refused" in desk_notice(d) and alert(d))
                    return desk_notice(browser), str(said)

                notice, refusal = await run(typed)
            finally:
                new_sessions_read_only(admin, store_db, False)
            assert "The team's store refused this desk's write" in notice, notice
            assert "read-only transaction" in notice
            assert "What you typed stays on this page" in refusal, refusal

            # Writable again: the page saves the text by itself (it waited for a change).
            await run(
                lambda: wait_until(
                    browser, lambda d: d_text(d, "#status") == "Your draft is saved.", 20
                )
            )
            rows = await ann.board.wait_for(
                lambda rows: bool(rows) and "typed while read-only" in str(rows[0].draft)
            )
            await run(
                lambda: wait_until(
                    browser, lambda d: "takes this desk's writes again" in desk_notice(d)
                )
            )
            assert rows[0].request_id == request_id and rows[0].claimed_by == "ann"

            def later() -> str:
                record_status(browser)
                browser.find_element("id", "later").click()
                return str(wait_until(browser, lambda d: "Not saved" in (t := alert(d)) and t))

            new_sessions_read_only(admin, store_db, True)
            try:
                refused = await run(later)
                status = await run(lambda: list(browser.execute_script("return window.said")))
            finally:
                new_sessions_read_only(admin, store_db, False)
            # One sentence: what happened, then what to do, once.
            assert refused.startswith(
                "Not saved for later: the team's store refused this desk's write ("
            ), refused
            assert refused.endswith(
                "), so the form stays here with your answers: press Later again once the desk "
                "can write, or answer it."
            ), refused
            assert "try again" not in refused, refused
            assert not [s for s in status if "Saved for later" in s], status
            assert await run(lambda: form_shown(browser))
            (row,) = await ann.store.run(Store.board, ann.store.store)  # the store's own
            assert row.claimed_by == "ann" and row.claim_live  # nothing was put back
            await run(lambda: browser.find_element("id", "later").click())
            await ann.board.wait_for(lambda rows: bool(rows) and not rows[0].claim_live)
            await run(
                lambda: wait_until(browser, lambda d: "Saved for later" in d_text(d, "#status"))
            )

            await run(pg_cluster.stop)
            try:
                away = await run(
                    lambda: wait_until(
                        browser, lambda d: "cannot be reached" in (t := desk_notice(d)) and t, 20
                    )
                )

                # Typed while the store is away: said beside the form at once, not after a
                # store call's minute of retries with the page silent meanwhile.
                def typed_away() -> str:
                    note = browser.find_element("css selector", "#ask-form textarea.note")
                    note.send_keys(" and while it is away")
                    return str(wait_until(browser, lambda d: "reached" in (t := alert(d)) and t))

                beside = await run(typed_away)
            finally:
                await run(pg_cluster.start)
            assert away.startswith("Desk notice, "), away
            assert "The team's store cannot be reached (PostgreSQL is away" in away
            assert beside == (
                "The team's store cannot be reached (PostgreSQL is away or restarting): your "
                "draft is saved once the store takes it. What you typed stays on this page too."
            ), beside
            await run(
                lambda: wait_until(
                    browser, lambda d: "The team's store is back." in desk_notice(d), 20
                )
            )


async def test_text_typed_offline_on_a_form_another_desk_took_meanwhile_says_who_holds_it(
    desk_url: str,  # noqa: F811
    browser: Any,  # noqa: F811
) -> None:
    """Ann types on her page with the network gone, and bob's desk takes the form meanwhile:
    with the network back the page says bob is on it and that her text waits for the form
    to be free (it kept saying the desk could not be reached), and saves it once he lets it
    go."""
    with trio.fail_after(120):
        async with team_desk(desk_url, "ann") as ann, team_desk(desk_url, "bob") as bob:
            request_id = await _ask(ann, "alpha", "c1", "Ship")
            await ann.board.wait_for(lambda rows: len(rows) == 1)
            url = ann.web.login_url()
            await run(lambda: (sign_in(browser, url), wait_until(browser, form_shown)))

            def typed_offline() -> None:
                offline(browser, True)
                note = browser.find_element("css selector", "#ask-form textarea.note")
                note.send_keys("ann: offline")
                wait_until(browser, lambda d: "could not be reached" in alert(d))

            try:
                await run(typed_offline)
                await bob.board.wait_for(lambda rows: len(rows) == 1)
                assert not isinstance(await bob.board.open(request_id), Refused)
            finally:
                await run(lambda: offline(browser, False))
            said = await run(
                lambda: wait_until(
                    browser, lambda d: "bob is answering" in (t := alert(d)) and t, 30
                )
            )
            assert "saved as soon as the form is free" in said, said
            await bob.board.close(request_id)
            rows = await ann.board.wait_for(
                lambda rows: bool(rows) and "ann: offline" in str(rows[0].draft)
            )
            assert rows[0].claimed_by == "ann"


async def test_later_shows_the_next_form_and_the_form_put_back_comes_last(
    desk_url: str,  # noqa: F811
    browser: Any,  # noqa: F811
) -> None:
    """Later on the page puts the form back for every desk and shows the next one, the form
    put back coming after the others, as Esc on the terminal does (the page said "Saved for
    later" and went on showing the same form); alone in line, it comes back."""
    with trio.fail_after(120):
        async with team_desk(desk_url, "ann") as ann:
            await _ask(ann, "alpha", "c1", "First")
            await _ask(ann, "beta", "c1", "Second")
            await ann.board.wait_for(lambda rows: len(rows) == 2)
            url = ann.web.login_url()

            def later() -> tuple[str, str]:
                before = form_label(browser)
                browser.find_element("id", "later").click()
                wait_until(browser, lambda d: form_label(d) != before)
                status = browser.find_element("id", "status").text
                return form_label(browser), str(status)

            await run(lambda: (sign_in(browser, url), wait_until(browser, form_shown)))
            assert await run(lambda: form_label(browser)) == "1. First"
            shown, status = await run(later)
            assert shown == "1. Second", shown
            assert status.startswith("Saved for later"), status
            shown, _status = await run(later)
            assert shown == "1. First", shown  # behind the second, put back later
            (first,) = [r for r in ann.board.snapshot() if r.agent_key == "alpha"]
            assert not first.claim_live  # put back for every desk
            (second,) = [r for r in ann.board.snapshot() if r.agent_key == "beta"]
            assert not isinstance(await ann.board.answer(second.request_id, YES), Refused)
            await ann.board.wait_for(lambda rows: len(rows) == 1)

            def alone() -> str:
                browser.find_element("id", "later").click()
                wait_until(
                    browser, lambda d: "Saved for later" in d.find_element("id", "status").text
                )
                wait_until(browser, lambda d: form_shown(d) and form_label(d) == "1. First")
                return form_label(browser)

            assert await run(alone) == "1. First"
