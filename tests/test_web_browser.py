"""The web desk in a real browser: Chromium driven by Selenium, agents on the official MCP
SDK client, against a real desk (hypercorn on Trio). Elements are found by role and
accessible name (``pi_agent_ask.desk.web.testing``)."""

from __future__ import annotations

import functools
import gc
import json
import os
import queue
import resource
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import attrs
import httpx2
import pytest
import trio
import trio.testing

from pi_agent_ask.actors.form import UserCommand
from pi_agent_ask.desk.board import Board
from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS, desk_client, open_desk
from pi_agent_ask.desk.web.auth import ATTEMPT_LIMIT
from pi_agent_ask.desk.web.security import COOKIE
from pi_agent_ask.desk.web.testing import (
    area_brightness,
    brightness,
    browser_missing,
    by_role,
    emulate_scheme,
    roles,
    set_viewport,
    start_browser,
)
from pi_agent_ask.desk.web.view import MAX_TEXT
from pi_agent_ask.form import state as fs
from pi_agent_ask.ui.render.footer import no_such_row

MISSING = browser_missing()
pytestmark = [
    *(pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS),
    pytest.mark.skipif(MISSING is not None, reason=MISSING or ""),
    pytest.mark.e2e,
]
SCREENSHOTS = "PI_AGENT_ASK_SCREENSHOTS"
"""Where the tests save the page's screenshots: a temporary folder unless this names one
(``PI_AGENT_ASK_SCREENSHOTS=docs`` refreshes the ones in the guide)."""
T = TypeVar("T")


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    """The folder for this test's screenshots (see ``SCREENSHOTS``)."""
    return Path(os.environ.get(SCREENSHOTS) or tmp_path)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = start_browser()
    try:
        yield driver
    finally:
        driver.quit()


async def run(fn: Callable[[], T]) -> T:
    """A blocking browser step, off the event loop (the desk runs on it)."""
    return await trio.to_thread.run_sync(fn)


# What Chromium says when asked about the document it is leaving, depending on how far the
# new document has come: the element's document is gone, or the whole frame is.
LEAVING_THE_DOCUMENT = ("does not belong to the document", "Frame is detached")


def wait_until(driver: Any, predicate: Callable[[Any], Any], timeout: float = 10.0) -> Any:
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    def attempt(d: Any) -> Any:
        try:
            return predicate(d)
        except WebDriverException as error:
            # Asked about an element of the document it is leaving (a link followed, a form
            # posted), Chromium answers with one of these errors instead of a stale element:
            # not yet.
            if any(said in (error.msg or "") for said in LEAVING_THE_DOCUMENT):
                return False
            raise

    # Until the deadline, a part of the page being swapped, or not there yet, means "not yet".
    wait = WebDriverWait(
        driver,
        timeout,
        poll_frequency=0.02,
        ignored_exceptions=[StaleElementReferenceException, AssertionError],
    )
    return wait.until(attempt)


def sign_in(driver: Any, url: str) -> None:
    driver.delete_all_cookies()
    driver.get(url)
    wait_until(driver, lambda d: d.find_elements("css selector", 'meta[name="csrf-token"]'))


def form_shown(driver: Any) -> bool:
    return bool(driver.find_elements("css selector", "#ask-form"))


def question(driver: Any, label: str) -> Any:
    return by_role(driver, "group", label, exact=False)


def ask(*questions: dict[str, Any], background: bool = False, title: str = "Set-up") -> dict:
    return {"title": title, "questions": list(questions), "background": background}


def single(qid: str, label: str, *options: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": qid, "label": label, "prompt": f"{label}?", "options": list(options), **extra}


def colour() -> dict[str, Any]:
    """One background question with two choices: the form most tests answer on the page."""
    return ask(single("q", "Colour", opt("red", "Red"), opt("blue", "Blue")), background=True)


async def shown_on_page(browser: Any, desk: Any, client: Any, payload: dict[str, Any]) -> None:
    """Sign ``browser`` in to ``desk``, have ``client`` ask ``payload``, and wait until the
    page shows its form."""
    assert desk.web is not None
    url = desk.web.login_url()
    await run(lambda: sign_in(browser, url))
    await client.call_tool("ask_user", payload)
    await run(lambda: wait_until(browser, form_shown))


def opt(value: str, label: str, **extra: Any) -> dict[str, Any]:
    return {"value": value, "label": label, **extra}


def fill_form(driver: Any) -> None:
    """The person answers the four questions of ``FULL_FORM`` by keyboard, mouse and typing."""
    from selenium.webdriver.common.keys import Keys

    db = question(driver, "Database")
    by_role(db, "radio", "SQLite").click()
    # The keyboard, as on the terminal: 2 picks the second option of the focused question.
    by_role(db, "radio", "SQLite").send_keys("2")
    assert by_role(db, "radio", "Postgres (recommended) — Runs in a container").is_selected()
    by_role(db, "textbox", "Note").send_keys("Version 16 please")
    features = question(driver, "Features")
    by_role(features, "checkbox", "Auth").click()
    by_role(features, "checkbox", "Search").send_keys(Keys.SPACE)
    by_role(features, "button", "Note on Auth").click()
    by_role(features, "textbox", "Note on Auth").send_keys("OAuth only")
    name = question(driver, "Name")
    by_role(name, "textbox", "Type your own").send_keys("moonbeam")
    # Scrolled to where a person sees it: at the window's bottom edge, where the driver
    # scrolls it, it is under Submit, Cancel and Later, which stay at the bottom.
    skip = by_role(question(driver, "Deploy"), "button", "Skip")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", skip)
    skip.click()
    # Enter, as on the terminal, goes to the review step.
    by_role(question(driver, "Database"), "radio", "SQLite").send_keys(Keys.ENTER)
    review = by_role(driver, "heading", "Review your answers")
    wait_until(driver, lambda d: review.is_displayed())
    assert "Deploy: skipped" in d_text(driver, "#review-list")
    assert "Name: “moonbeam”" in d_text(driver, "#review-list")


def d_text(driver: Any, selector: str) -> str:
    return str(driver.find_element("css selector", selector).text)


FULL_FORM = ask(
    single(
        "db",
        "Database",
        opt("sqlite", "SQLite"),
        opt("pg", "Postgres", recommended=True, description="Runs in a container"),
    ),
    single(
        "features",
        "Features",
        opt("auth", "Auth"),
        opt("search", "Search"),
        opt("admin", "Admin"),
        type="multi",
    ),
    single("name", "Name", opt("alpha", "Alpha"), opt("beta", "Beta")),
    single("deploy", "Deploy", opt("now", "Now"), opt("later", "Later")),
)


async def test_one_time_sign_in_and_a_full_answer_reach_the_agent_once(
    tmp_path: Path, browser: Any
) -> None:
    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            assert desk.web is not None
            url = desk.web.login_url()
            await run(lambda: sign_in(browser, url))
            # Used once: the same URL no longer signs anyone in.
            await run(browser.delete_all_cookies)
            await run(lambda: browser.get(url))
            await run(
                lambda: wait_until(
                    browser, lambda d: "not valid" in by_role(d, "alert", "", exact=False).text
                )
            )
            await run(lambda: browser.get(url.split("/login")[0] + "/"))
            assert not form_shown(browser) and "Sign in" in browser.page_source
            fresh = desk.web.login_url()
            await run(lambda: sign_in(browser, fresh))

            results: list[Any] = []
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    results.append(await alpha.call_tool("ask_user", FULL_FORM))

                nursery.start_soon(call)
                await run(lambda: wait_until(browser, form_shown))
                assert (
                    "alpha"
                    in by_role(browser, "heading", "Set-up")
                    .find_element("xpath", "preceding::strong[1]")
                    .text
                )
                assert "blocked" in browser.find_element("css selector", ".from").text
                base_url = url.split("/login")[0]

                def second_page() -> tuple[str, str]:
                    """The same form open in a second tab (another page on it)."""
                    first = browser.current_window_handle
                    browser.switch_to.new_window("tab")
                    browser.get(base_url + "/")
                    wait_until(browser, form_shown)
                    second = browser.current_window_handle
                    browser.switch_to.window(first)
                    return first, second

                first_tab, second_tab = await run(second_page)
                await run(lambda: fill_form(browser))

                def submit_until_gone() -> None:
                    """Click Submit until the form is gone (the review step comes first)."""
                    from selenium.common.exceptions import StaleElementReferenceException

                    clicks = 0
                    while True:
                        # The form gone (sent), or its Submit button: a form can leave the
                        # page between the two looks.
                        submit = wait_until(
                            browser,
                            lambda d: not form_shown(d) or by_role(d, "button", "Submit"),
                        )
                        if submit is True:
                            return
                        assert clicks < 3, "Submit did not send the form"
                        try:
                            submit.click()
                        except StaleElementReferenceException:
                            continue  # the page is swapping the form out
                        clicks += 1
                        wait_until(
                            browser,
                            lambda d: (
                                not form_shown(d)
                                or not d.find_element("css selector", "#review").get_attribute(
                                    "hidden"
                                )
                            ),
                        )
                        if clicks == 2:
                            wait_until(browser, lambda d: not form_shown(d))

                await run(submit_until_gone)

                def told_in_the_other_tab() -> str:
                    browser.switch_to.window(second_tab)
                    wait_until(browser, lambda d: not form_shown(d))
                    text = d_text(browser, "#status")
                    browser.close()
                    browser.switch_to.window(first_tab)
                    return text

                assert "answered elsewhere" in await run(told_in_the_other_tab)
            (result,) = results
            assert not result.is_error, result
            answers = result.structured_content["answers"]
            assert answers["db"]["values"] == ["pg"]
            assert answers["db"]["note"] == "Version 16 please"
            assert answers["features"]["values"] == ["auth", "search"]
            assert answers["features"]["optionNotes"] == {"auth": "OAuth only"}
            assert answers["name"]["customText"] == "moonbeam"
            assert "deploy" not in answers
            assert result.structured_content["skippedQuestionIds"] == ["deploy"]
            assert set(answers) == {"db", "features", "name"}
            # Exactly once: nothing more arrives for the agent afterwards.
            again = await alpha.call_tool("wait_for_answers", {})
            assert again.structured_content.get("results", []) == []
            # A second submission (another page still showing the form) is refused in words.
            cookie = (await run(lambda: browser.get_cookie(COOKIE)))["value"]
            csrf = await run(
                lambda: browser.find_element(
                    "css selector", 'meta[name="csrf-token"]'
                ).get_attribute("content")
            )
            base = url.split("/login")[0]
            async with httpx2.AsyncClient(cookies={COOKIE: cookie}) as http:
                late = await http.post(
                    base + "/api/submit",
                    json={"form": "alpha/none", "drafts": []},
                    headers={"origin": base, "x-csrf-token": csrf},
                )
            assert late.status_code == 409 and "answered elsewhere" in late.json()["error"]
            # A form the desk knows nothing of: the page says it naming its own form.
            assert late.json()["code"] == "gone"


async def answer_on_the_board(board: Board) -> None:
    """What the terminal does on ``1`` then Enter: commands into the displayed form."""
    shown = board.current
    assert shown is not None
    await shown.commands.send(UserCommand(fs.Number(1)))
    await shown.commands.send(UserCommand(fs.Confirm()))


async def test_a_form_answered_on_the_terminal_leaves_the_page_and_a_reload_keeps_a_draft(
    tmp_path: Path, browser: Any
) -> None:
    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "beta") as beta:
            await shown_on_page(browser, desk, beta, colour())
            # A draft typed on the page is journaled as it is typed; a reload shows it.
            await run(
                lambda: by_role(question(browser, "Colour"), "textbox", "Note").send_keys("teal?")
            )
            await desk.board.wait_for(
                lambda b: b.current is not None and b.current.state.drafts[0].note == "teal?"
            )
            await run(browser.refresh)
            await run(lambda: wait_until(browser, form_shown))
            note = by_role(question(browser, "Colour"), "textbox", "Note")
            assert note.get_attribute("value") == "teal?"
            # The terminal edits the note (N, text, Enter): the page shows the new draft.
            current = desk.board.current
            assert current is not None
            for command in (
                fs.OpenQuestionNote(),
                fs.EditorChanged("teal, from the terminal"),
                fs.EditorSubmit(),
            ):
                await current.commands.send(UserCommand(command))

            def note_text(driver: Any) -> bool:
                box = by_role(question(driver, "Colour"), "textbox", "Note")
                return box.get_attribute("value") == "teal, from the terminal"

            await run(lambda: wait_until(browser, note_text))
            # The terminal answers it: the page lets go of it and says why.
            await answer_on_the_board(desk.board)
            await run(lambda: wait_until(browser, lambda d: not form_shown(d)))
            status = by_role(browser, "status", "", exact=False).text
            assert status == "“Set-up” was answered elsewhere (on the terminal or another page)."
            waited = await beta.call_tool("wait_for_answers", {})
            (entry,) = waited.structured_content["results"]
            assert entry["result"]["answers"]["q"]["values"] == ["red"]
            assert entry["result"]["answers"]["q"]["note"] == "teal, from the terminal"


def in_view(driver: Any, element: Any) -> bool:
    """Whether ``element`` is wholly inside the browser's viewport (where the person looks)."""
    return bool(
        driver.execute_script(
            "const r = arguments[0].getBoundingClientRect();"
            "return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight;",
            element,
        )
    )


async def test_on_a_long_form_cancel_asks_again_where_the_person_pressed_it(
    tmp_path: Path, browser: Any
) -> None:
    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "gamma") as gamma:
            assert desk.web is not None
            url = desk.web.login_url()
            await run(lambda: browser.set_window_size(1280, 900))
            await run(lambda: sign_in(browser, url))
            await gamma.call_tool("ask_user", {**FULL_FORM, "background": True})
            await run(lambda: wait_until(browser, form_shown))

            def first_cancel() -> tuple[bool, str]:
                by_role(question(browser, "Database"), "radio", "SQLite").click()
                cancel = by_role(browser, "button", "Cancel")
                browser.execute_script("arguments[0].scrollIntoView({block: 'end'})", cancel)
                cancel.click()
                alert = by_role(browser, "alert", "", exact=False)
                wait_until(browser, lambda d: "Press Cancel again" in alert.text)
                return in_view(browser, alert) and in_view(browser, cancel), str(alert.text)

            seen, text = await run(first_cancel)
            # The sentence is next to the button, not a screen away above the questions, and
            # the button is still where the person can press it again.
            assert seen, text
            assert desk.board.current is not None  # asked, not cancelled
            await run(lambda: by_role(browser, "button", "Cancel").click())
            await run(lambda: wait_until(browser, lambda d: not form_shown(d)))
            waited = await gamma.call_tool("wait_for_answers", {})
            (entry,) = waited.structured_content["results"]
            assert entry["result"]["cancelled"] is True


async def test_on_a_phone_the_review_and_its_submit_are_in_view_once_shown(
    tmp_path: Path, browser: Any
) -> None:
    """At 390x844, Submit on a four-question form shows the review: its heading, its last
    line and the Submit that sends it are all on screen (the page used to scroll only as far
    as the heading, the answers and the button below the fold)."""
    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "theta") as theta:
            await shown_on_page(browser, desk, theta, {**FULL_FORM, "background": True})

            def review_in_view() -> list[bool]:
                set_viewport(browser, 390, 844, mobile=True)
                try:
                    submit = by_role(browser, "button", "Submit")
                    browser.execute_script("arguments[0].scrollIntoView({block: 'end'})", submit)
                    submit.click()
                    heading = by_role(browser, "heading", "Review your answers")
                    wait_until(browser, lambda d: heading.is_displayed())
                    last = browser.find_elements("css selector", "#review-list li")[-1]
                    return [in_view(browser, e) for e in (heading, last, submit)]
                finally:
                    browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

            assert await run(review_in_view) == [True, True, True]


async def test_enter_twice_from_an_option_reviews_then_submits(
    tmp_path: Path, browser: Any
) -> None:
    """The keyboard way, as on the terminal: a number key chooses, Enter shows the review
    (which takes the focus, so a screen reader reads it), Enter again sends it; Escape on the
    review goes back to the answers (it did nothing: the way back was Shift+Tab through the
    form)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "delta") as delta:
            await shown_on_page(browser, desk, delta, colour())

            def keyboard() -> str:
                by_role(question(browser, "Colour"), "radio", "Red").send_keys("2")
                ActionChains(browser).send_keys(Keys.ENTER).perform()
                review = by_role(browser, "heading", "Review your answers")
                wait_until(browser, lambda d: review.is_displayed())
                assert "Colour: Blue" in d_text(browser, "#review-list")
                # A digit on the review (the terminal's review reads 1 as Submit) changes no
                # answer: the number keys choose only in the question that has the focus.
                ActionChains(browser).send_keys("1").perform()
                assert review.is_displayed()
                assert by_role(question(browser, "Colour"), "radio", "Blue").is_selected()
                # Escape leaves the review, the focus back where it was (Submit: choosing in
                # the last question moved it there); Enter there shows the review again.
                ActionChains(browser).send_keys(Keys.ESCAPE).perform()
                wait_until(browser, lambda d: not review.is_displayed())
                back = browser.switch_to.active_element
                assert back == by_role(browser, "button", "Submit"), back.text
                ActionChains(browser).send_keys(Keys.ENTER).perform()
                wait_until(browser, lambda d: review.is_displayed())
                focused = str(browser.switch_to.active_element.text)
                ActionChains(browser).send_keys(Keys.ENTER).perform()
                wait_until(browser, lambda d: not form_shown(d))
                return focused

            assert await run(keyboard) == "Review your answers"
            waited = await delta.call_tool("wait_for_answers", {})
            (entry,) = waited.structured_content["results"]
            assert entry["result"]["answers"]["q"]["values"] == ["blue"]


async def test_options_from_ten_on_are_chosen_with_two_digits_as_on_the_terminal(
    tmp_path: Path, browser: Any, screenshots: Path
) -> None:
    """Twelve options, numbered rows 1 to 13 (Type your own is the thirteenth, as on the
    terminal): two digits typed in a row choose from 10 on (1 then 2: option 12), a lone 1
    chooses option 1 once no second digit follows, and 13 goes to Type your own. Options 10
    and up used to have no key at all."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    twelve = [opt(f"o{n}", f"Option {n}") for n in range(1, 13)]
    payload = ask(
        single("many", "Many", *twelve),
        single("multi", "Several", *twelve, type="multi"),
        background=True,
    )
    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "zeta") as zeta:
            await shown_on_page(browser, desk, zeta, payload)

            def keyboard() -> tuple[str, str, str]:
                many = question(browser, "Many")
                by_role(many, "radio", "Option 3").send_keys("12")
                wait_until(browser, lambda d: by_role(many, "radio", "Option 12").is_selected())
                # A one-answer question's choice moves the focus on, as any digit does.
                several = question(browser, "Several")
                by_role(several, "checkbox", "Option 2").send_keys("1", "1")
                wait_until(
                    browser, lambda d: by_role(several, "checkbox", "Option 11").is_selected()
                )
                ActionChains(browser).send_keys("1").perform()  # a lone 1: option 1, a moment later
                wait_until(
                    browser, lambda d: by_role(several, "checkbox", "Option 1").is_selected()
                )
                # 1 then 5 is no row of 13: nothing changes, and the page says so (it toggled
                # option 1 and then option 5).
                ActionChains(browser).send_keys("1", "5").perform()
                status = "No row 15: this question's rows are 1-13."
                wait_until(browser, lambda d: d_text(d, "#form-note") == status)
                hint = d_text(browser, "fieldset.question .hint")
                # Enter after a first digit picks its own row at once, as on the terminal (it
                # picked it and showed the review).
                choices = many.find_elements("css selector", "input.choice")  # by role: slower
                choices[11].send_keys("1", Keys.ENTER)
                wait_until(browser, lambda d: choices[0].is_selected())
                assert not browser.find_element("id", "review").is_displayed()
                ActionChains(browser).send_keys("1", "3").perform()
                wait_until(
                    browser,
                    lambda d: "custom" in str(d.switch_to.active_element.get_attribute("class")),
                )
                active = browser.switch_to.active_element
                return (
                    str(active.get_attribute("id")),
                    hint,
                    ",".join(
                        str(i.get_attribute("value"))
                        for i in several.find_elements("css selector", "input:checked")
                    ),
                )

            focused, hint, checked = await run(keyboard)
            await run(lambda: browser.save_screenshot(str(screenshots / "web-twelve-options.png")))
            assert focused == "q1-custom", focused
            assert "1 then 2" in hint, hint
            assert checked == "0,10", checked  # options 1 and 11; 13 chose no option
            assert not await run(
                lambda: by_role(question(browser, "Several"), "checkbox", "Option 3").is_selected()
            )


def offline(driver: Any, off: bool) -> None:
    """Cut the page off the network (a phone in a tunnel), or give it back."""
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd(
        "Network.emulateNetworkConditions",
        {"offline": off, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
    )


async def test_a_submit_the_network_lost_says_so_and_can_be_sent_again(
    tmp_path: Path, browser: Any
) -> None:
    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "eps") as eps:
            await shown_on_page(browser, desk, eps, colour())

            def lost() -> str:
                by_role(question(browser, "Colour"), "radio", "Blue").click()
                submit = by_role(browser, "button", "Submit")
                submit.click()  # the review
                wait_until(browser, lambda d: by_role(d, "heading", "Review your answers"))
                offline(browser, True)
                try:
                    submit.click()
                    return str(
                        wait_until(
                            browser,
                            lambda d: (
                                "could not be reached"
                                in (alert := by_role(d, "alert", "", exact=False)).text
                                and alert.text
                            ),
                        )
                    )
                finally:
                    offline(browser, False)

            told = await run(lost)
            assert "nothing was sent" in told
            assert desk.board.current is not None

            def status(d: Any) -> str:
                return str(d.find_element("id", "status").text)

            def typed_offline() -> str:
                # What the Submit above left: the submit's sentence beside the buttons, and
                # when its draft save was still due, that save's sentence on the status line
                # until the page is back and saves it. Read only what typing says: the status
                # line, once it says nothing of the earlier save.
                wait_until(browser, lambda d: "not saved yet" not in status(d))
                offline(browser, True)
                try:
                    by_role(question(browser, "Colour"), "textbox", "Note").send_keys("navy")
                    return str(
                        wait_until(browser, lambda d: "not saved yet" in status(d) and status(d))
                    )
                finally:
                    offline(browser, False)

            told = await run(typed_offline)
            assert told.startswith("The desk cannot be reached"), told
            # Back online, the page saves what was typed meanwhile by itself.
            await desk.board.wait_for(
                lambda b: b.current is not None and b.current.state.drafts[0].note == "navy"
            )

            def again() -> None:
                submit = by_role(browser, "button", "Submit")
                submit.click()  # the review again (the note changed it)
                wait_until(browser, lambda d: by_role(d, "heading", "Review your answers"))
                submit.click()
                wait_until(browser, lambda d: not form_shown(d))

            await run(again)
            waited = await eps.call_tool("wait_for_answers", {})
            (entry,) = waited.structured_content["results"]
            assert entry["result"]["answers"]["q"]["values"] == ["blue"]
            assert entry["result"]["answers"]["q"]["note"] == "navy"


async def test_a_page_whose_desk_went_away_says_so(tmp_path: Path, browser: Any) -> None:
    """A page left open (a phone) while the desk stops (the laptop sleeps, the desk restarts)
    does not go on looking live: its status line says the live connection is lost."""
    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "zeta") as zeta:
            await shown_on_page(browser, desk, zeta, colour())
            assert await run(lambda: d_text(browser, "#status")) == ""
        told = await run(
            lambda: wait_until(
                browser,
                lambda d: (
                    "connection to the desk is lost" in d_text(d, "#status")
                    and d_text(d, "#status")
                ),
            )
        )
        assert "reconnects by itself" in told
        # The desk's side of the stream ended with the desk, leaving nothing to finalise.
        gc.collect()
        await trio.testing.wait_all_tasks_blocked()


async def test_text_typed_after_the_session_ended_is_not_left_without_asking(
    tmp_path: Path, browser: Any
) -> None:
    """A desk restart signs everyone out: a page still open has the drafts typed after it
    refused, says so, keeps the text, and leaving it (to open a new sign-in link) asks
    first."""
    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "eta") as eta:
            await shown_on_page(browser, desk, eta, colour())
            cookie = (await run(lambda: browser.get_cookie(COOKIE)))["value"]
            desk.web.auth.sign_out(cookie)

            def typed_signed_out() -> bool:
                by_role(question(browser, "Colour"), "textbox", "Note").send_keys("teal")
                wait_until(browser, lambda d: "Not signed in" in d_text(d, "#form-errors"))
                # Whether leaving would ask (chromedriver answers a real dialog by itself).
                return bool(
                    browser.execute_script(
                        "const e = new Event('beforeunload', {cancelable: true});"
                        "window.dispatchEvent(e); return e.defaultPrevented;"
                    )
                )

            assert await run(typed_signed_out), "leaving the page would not ask"
            note = by_role(question(browser, "Colour"), "textbox", "Note")
            assert await run(lambda: note.get_attribute("value")) == "teal"


@pytest.mark.parametrize("width", [390, 1280], ids=["phone", "desktop"])
async def test_sign_out_in_the_header_ends_the_session_on_the_desk(
    tmp_path: Path, browser: Any, screenshots: Path, width: int
) -> None:
    """Sign out, in the header on a phone and on a desktop: a draft still on its way is saved
    first, the desk ends the session (its cookie no longer opens the page, the desk's live
    stream or its API, for any client), the browser shows the sign-in page saying so, and
    only a new link signs in again."""
    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "eta") as eta:
            await shown_on_page(browser, desk, eta, colour())
            cookie = (await run(lambda: browser.get_cookie(COOKIE)))["value"]
            base = desk.web.base_url

            def sign_out() -> tuple[str, bool]:
                set_viewport(browser, width, 844, mobile=width < 900)
                try:
                    by_role(question(browser, "Colour"), "textbox", "Note").send_keys("teal")
                    button = by_role(browser, "button", "Sign out")
                    reachable = in_view(browser, button) and no_horizontal_scroll(browser)
                    browser.save_screenshot(str(screenshots / f"web-sign-out-{width}.png"))
                    button.click()
                    wait_until(browser, lambda d: by_role(d, "heading", "Sign in to the desk"))
                    return d_text(browser, "main"), reachable
                finally:
                    browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

            said, reachable = await run(sign_out)
            assert reachable, "Sign out is off screen or the page scrolls sideways"
            assert "You signed out" in said, said
            assert desk.board.current is not None
            assert desk.board.current.state.drafts[0].note == "teal"  # saved before leaving
            assert await run(lambda: browser.get_cookie(COOKIE)) is None
            async with httpx2.AsyncClient(cookies={COOKIE: cookie}) as old:
                assert (await old.get(base + "/")).status_code == 401
                assert (await old.get(base + "/events")).status_code == 401
                assert (await old.get(base + "/session")).status_code == 401
            await run(lambda: browser.get(base + "/"))
            assert not await run(lambda: form_shown(browser))
            url = desk.web.login_url()
            await run(lambda: sign_in(browser, url))
            assert await run(lambda: form_shown(browser))


HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'


async def test_right_to_left_agent_text_reads_right_to_left(tmp_path: Path, browser: Any) -> None:
    """Hebrew or Arabic from an agent (a prompt, a label, a description) and typed by the
    person each run in their own direction, whatever the page's: a Hebrew prompt starts at the
    right, its question mark at its end, and an option's number stays before its label."""
    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "rtl") as rtl:
            form = ask(
                single(
                    "q",
                    "שאלה",
                    opt("y", "כן", description="وصف بالعربية"),
                    opt("n", "No"),
                    prompt="מה דעתך?",
                ),
                background=True,
                title="עברית",
            )
            await shown_on_page(browser, desk, rtl, form)

            def directions() -> list[str]:
                group = question(browser, "שאלה")
                by_role(group, "textbox", "Note").send_keys("הערה")
                return list(
                    browser.execute_script(
                        "const g = arguments[0];"
                        "const dir = e => getComputedStyle(e).direction;"
                        "return [dir(document.querySelector('h1')), dir(g.querySelector('.prompt')),"
                        " dir(g.querySelector('.olabel span')), dir(g.querySelector('.desc span')),"
                        " dir(g.querySelector('textarea.note')), dir(g.querySelector('label'))];",
                        group,
                    )
                )

            assert await run(directions) == ["rtl", "rtl", "rtl", "rtl", "rtl", "ltr"]

            def review_direction() -> tuple[str, float]:
                by_role(browser, "button", "Submit").click()
                review = by_role(browser, "heading", "Review your answers")
                wait_until(browser, lambda d: review.is_displayed())
                line = browser.find_element("css selector", "#review-list li")
                # Just outside the review's box, beside the line: the page's own background,
                # with nothing of the line (its number, on its right) drawn there.
                beside = browser.execute_script(
                    "const box = document.getElementById('review').getBoundingClientRect();"
                    "const r = arguments[0].getBoundingClientRect();"
                    "return {x: box.right + window.scrollX, y: r.top + window.scrollY,"
                    " width: 12, height: r.height, scale: 1};",
                    line,
                )
                return (
                    str(
                        browser.execute_script(
                            "return getComputedStyle(arguments[0]).direction", line
                        )
                    ),
                    area_brightness(browser, beside),
                )

            direction, beside = await run(review_direction)
            assert direction == "rtl"
            assert beside == 1.0, "the line's number is drawn outside the review's box"


async def test_on_a_phone_agents_in_the_menu_keeps_the_form_shown(
    tmp_path: Path, browser: Any
) -> None:
    """The phone's menu link to the agents goes down the same page: the form on display (and
    anything typed in it) stays, where it used to reload the desk's first form."""
    with trio.fail_after(120):
        async with (
            open_desk(tmp_path) as desk,
            desk_client(desk.address, "first") as first,
            desk_client(desk.address, "second") as second,
        ):
            await shown_on_page(browser, desk, first, colour())
            await second.call_tool(
                "ask_user", ask(single("t", "Tone", opt("plain", "Plain")), background=True)
            )

            def agents_from_the_menu() -> tuple[str, bool]:
                set_viewport(browser, 390, 844, mobile=True)
                try:
                    link = wait_until(browser, lambda d: by_role(d, "link", "second"))
                    link.click()
                    wait_until(browser, lambda d: "second" in d_text(d, ".from"))
                    by_role(question(browser, "Tone"), "textbox", "Note").send_keys("calm")
                    by_role(browser, "link", "Agents").click()
                    # The list comes into view as the page scrolls to it (and may be swapped
                    # by a board change meanwhile): found again until it is there.
                    wait_until(browser, lambda d: in_view(d, by_role(d, "heading", "Agents")))
                    return d_text(browser, ".from"), "form=" in browser.current_url
                finally:
                    browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

            shown, kept = await run(agents_from_the_menu)
            assert "second" in shown and kept


async def test_on_a_phone_a_form_answered_elsewhere_is_told_where_the_person_reads(
    tmp_path: Path, browser: Any
) -> None:
    """Scrolled down a long form on a phone when the terminal answers it: the next form takes
    its place, and the sentence saying the first was answered elsewhere is on screen (it
    used to be at the top of the page, off screen, over another agent's form shown without
    a word)."""
    with trio.fail_after(120):
        async with (
            open_desk(tmp_path) as desk,
            desk_client(desk.address, "first") as first,
            desk_client(desk.address, "second") as second,
        ):
            many = [
                opt(f"o{n}", f"Option {n}", description="what it means " * 6) for n in range(12)
            ]
            await shown_on_page(
                # No title: named by its question's label, as the terminal names it.
                browser,
                desk,
                first,
                {"questions": [single("q", "Many", *many)], "background": True},
            )
            await second.call_tool("ask_user", {**FULL_FORM, "background": True, "title": "Next"})

            def scrolled_down() -> None:
                set_viewport(browser, 390, 844, mobile=True)
                submit = by_role(browser, "button", "Submit")
                browser.execute_script("arguments[0].scrollIntoView({block: 'end'})", submit)

            def told() -> bool:
                try:
                    wait_until(browser, lambda d: by_role(d, "heading", "Next"))
                    status = by_role(browser, "status", "", exact=False)
                    # The form named: read above the next one, "This form" was that one.
                    said = "“Many” was answered elsewhere (on the terminal or another page)."
                    wait_until(browser, lambda d: status.text == said)
                    return in_view(browser, status)
                finally:
                    browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

            await run(scrolled_down)
            await answer_on_the_board(desk.board)
            assert await run(told), "the sentence is off screen"


async def test_hostile_agent_text_is_text_and_the_page_refuses_other_origins(
    tmp_path: Path, browser: Any
) -> None:
    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "<b>evil</b>") as evil:
            assert desk.web is not None
            url = desk.web.login_url()
            await run(lambda: sign_in(browser, url))
            payload = ask(
                single(
                    "q",
                    "Pick " + HOSTILE,
                    opt("a", "A " + HOSTILE, description="\x1b[31mred\x1b[0m " + HOSTILE),
                    opt("b", "B"),
                    prompt="Prompt \x1b]0;title\x07 " + HOSTILE,
                    context="Context " + HOSTILE,
                ),
                title="Title " + HOSTILE,
                background=True,
            )
            payload["questions"][0]["prompt"] = "Prompt \x1b]0;title\x07 " + HOSTILE
            await evil.call_tool("ask_user", payload)
            await run(lambda: wait_until(browser, form_shown))
            text = await run(lambda: browser.find_element("css selector", "#ask-form").text)
            assert "<script>window.__pwned=1</script>" in text
            assert "<b>evil</b>" in text
            assert "\x1b" not in browser.page_source and "\x07" not in browser.page_source
            assert await run(lambda: browser.execute_script("return window.__pwned")) is None
            assert not await run(lambda: browser.find_elements("css selector", "#slot img, b"))
            # A state-changing request from another origin, with the session cookie and even
            # the right CSRF token, is refused; so is one without the token.
            cookie = (await run(lambda: browser.get_cookie(COOKIE)))["value"]
            csrf = await run(
                lambda: browser.find_element(
                    "css selector", 'meta[name="csrf-token"]'
                ).get_attribute("content")
            )
            form_id = await run(
                lambda: browser.find_element("css selector", "#ask-form").get_attribute(
                    "data-form-id"
                )
            )
            base = url.split("/login")[0]
            body = {"form": form_id}
            async with httpx2.AsyncClient(cookies={COOKIE: cookie}) as http:
                cross = await http.post(
                    base + "/api/cancel",
                    json=body,
                    headers={"origin": "http://evil.example", "x-csrf-token": csrf},
                )
                tokenless = await http.post(
                    base + "/api/cancel", json=body, headers={"origin": base}
                )
            async with httpx2.AsyncClient() as http:
                cookieless = await http.post(
                    base + "/api/cancel", json=body, headers={"origin": base, "x-csrf-token": csrf}
                )
            assert cross.status_code == 403 and tokenless.status_code == 403
            assert cookieless.status_code == 401
            assert desk.board.current is not None  # nothing was cancelled


def no_horizontal_scroll(driver: Any) -> bool:
    return bool(
        driver.execute_script(
            "return document.documentElement.scrollWidth <= window.innerWidth"
            " && document.body.scrollWidth <= window.innerWidth"
        )
    )


def small_targets(driver: Any) -> list[str]:
    """Visible controls smaller than 44 px in either direction (links in text excepted)."""
    return list(
        driver.execute_script(
            """
            const out = [];
            for (const e of document.querySelectorAll('button, summary, select, textarea,'
                + ' .option > label, nav a, .agent-link')) {
              const r = e.getBoundingClientRect();
              if (r.width && r.height && (r.width < 44 || r.height < 44))
                out.push(e.tagName + ' ' + e.textContent.trim().slice(0, 30) + ' ' + r.width + 'x' + r.height);
            }
            return out;
            """
        )
    )


def contrast(one: str, two: str) -> float:
    """WCAG's contrast ratio of two CSS ``rgb(...)`` colours (as ``getComputedStyle`` gives)."""

    def luminance(colour: str) -> float:
        channels = [int(part) / 255 for part in colour.split("(")[1].split(")")[0].split(",")[:3]]
        linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted((luminance(one), luminance(two)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def axe_core(tmp: Path) -> str | None:
    """axe-core's script, installed with npm into ``tmp``; ``None`` when npm cannot get it."""
    npm = shutil.which("npm")
    if npm is None:
        return None
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--silent", "axe-core@4"],
        cwd=tmp,
        capture_output=True,
        timeout=180,
        check=False,
    )
    script = tmp / "node_modules" / "axe-core" / "axe.min.js"
    return script.read_text() if done.returncode == 0 and script.exists() else None


def axe_violations(driver: Any, script: str) -> list[dict[str, Any]]:
    driver.execute_script(script)
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document).then(r => done({violations: r.violations, passes: r.passes.length}),"
        " e => done({violations: [{id: String(e), impact: 'critical'}], passes: 0}));"
    )
    assert result["passes"] > 10, result  # the checks ran
    return [v for v in result["violations"] if v.get("impact") in ("serious", "critical")]


async def test_phone_and_desktop_layouts_are_accessible_and_screenshots_are_taken(
    tmp_path: Path, browser: Any, screenshots: Path
) -> None:
    with trio.fail_after(300):
        async with (
            open_desk(tmp_path) as desk,
            desk_client(desk.address, "build-agent") as build,
            desk_client(desk.address, "docs-agent") as docs,
        ):
            assert desk.web is not None
            url = desk.web.login_url()
            await run(lambda: sign_in(browser, url))
            await build.call_tool(
                "ask_user",
                ask(
                    single(
                        "db",
                        "Database",
                        opt("sqlite", "SQLite", description="One file, no server"),
                        opt("pg", "Postgres", recommended=True, description="Runs in a container"),
                        # Long enough to scroll in its box once opened (axe checks that
                        # the keyboard can reach it).
                        context="docker-compose.yml lists a postgres:16 service:\n"
                        + "".join(f"  line {n}: postgres:16\n" for n in range(40)),
                    ),
                    single(
                        "features",
                        "Features",
                        opt("auth", "Auth"),
                        opt("search", "Full-text search"),
                        opt("admin", "Admin pages"),
                        type="multi",
                    ),
                    title="Project set-up",
                    background=True,
                ),
            )
            await docs.call_tool(
                "ask_user",
                ask(
                    single("tone", "Tone", opt("plain", "Plain"), opt("warm", "Warm")),
                    background=True,
                ),
            )
            await run(lambda: wait_until(browser, form_shown))
            await run(
                lambda: wait_until(
                    browser, lambda d: "docs-agent" in d.find_element("id", "queue").text
                )
            )
            script = await trio.to_thread.run_sync(axe_core, tmp_path)
            for name, width, height, mobile in (
                ("web-desktop.png", 1280, 900, False),
                ("web-phone.png", 390, 844, True),
            ):

                def layout(
                    name: str = name,
                    width: int = width,
                    height: int = height,
                    mobile: bool = mobile,
                ) -> list[Any]:
                    set_viewport(browser, width, height, mobile=mobile)
                    browser.refresh()
                    wait_until(browser, form_shown)
                    assert no_horizontal_scroll(browser), name
                    assert small_targets(browser) == [], name
                    by_role(question(browser, "Database"), "radio", "SQLite", exact=False).click()
                    assert browser.save_screenshot(str(screenshots / name)), name
                    # The context opened: a box that scrolls, which every browser's keyboard
                    # must reach (axe's scrollable-region-focusable, for Safari).
                    question(browser, "Database").find_element("tag name", "summary").click()
                    return axe_violations(browser, script) if script is not None else []

                violations = await run(layout)
                assert violations == [], json.dumps(violations, indent=1)[:4000]
            # 360 px, the narrowest phone the page is made for: still no sideways scrolling.
            await run(lambda: set_viewport(browser, 360, 740, mobile=True))
            await run(browser.refresh)
            await run(lambda: wait_until(browser, form_shown))
            assert await run(lambda: no_horizontal_scroll(browser))

            def focus_ring() -> list[str]:
                from selenium.webdriver.common.action_chains import ActionChains
                from selenium.webdriver.common.keys import Keys

                browser.find_element("tag name", "body").click()
                ActionChains(browser).send_keys(Keys.TAB).perform()
                return list(
                    browser.execute_script(
                        "const s = getComputedStyle(document.activeElement);"
                        "return [s.outlineStyle, s.outlineColor,"
                        " getComputedStyle(document.body).backgroundColor];"
                    )
                )

            style, ring, page = await run(focus_ring)
            assert style == "solid"
            # WCAG 1.4.11: a focus indicator contrasts 3:1 with what is around it (the page).
            assert contrast(ring, page) >= 3.0, (ring, page)
            await run(lambda: browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {}))
            # Later: the agent's question goes back in the queue, the next agent's comes up.
            assert "build-agent" in await run(lambda: d_text(browser, ".from"))
            await run(lambda: by_role(browser, "button", "Later").click())
            await run(lambda: wait_until(browser, lambda d: "docs-agent" in d_text(d, ".from")))
            assert "Saved for later" in await run(lambda: d_text(browser, "#status"))
            await desk.board.wait_for(
                lambda b: [s.key for s in b.shown_forms()] == ["docs-agent", "build-agent"]
            )

            def history() -> list[Any]:
                by_role(browser, "link", "History").click()
                wait_until(browser, lambda d: d.find_elements("css selector", "#q"))
                by_role(browser, "searchbox", "Search").send_keys("Tone")
                by_role(browser, "button", "Search").click()
                # The search's own page (the first one had the export link too).
                wait_until(browser, lambda d: "q=Tone" in d.current_url)
                wait_until(browser, lambda d: "Export as Markdown" in d.page_source)
                assert no_horizontal_scroll(browser)
                # The Search button stands level with the search box beside it.
                box = by_role(browser, "searchbox", "Search").rect
                button = by_role(browser, "button", "Search").rect
                assert abs(box["y"] + box["height"] - button["y"] - button["height"]) < 1, (
                    box,
                    button,
                )
                return axe_violations(browser, script) if script is not None else []

            violations = await run(history)
            assert violations == [], json.dumps(violations, indent=1)[:4000]
            if script is None:
                pytest.skip("axe-core could not be installed from the npm registry")


async def test_in_dark_mode_every_control_is_drawn_dark(tmp_path: Path, browser: Any) -> None:
    """A browser set to dark shows the page dark, its native controls included: radio
    buttons, checkboxes, text boxes and the history's select are drawn by the browser in the
    page's scheme, not as white boxes on a dark page."""
    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "kappa") as kappa:
            payload = ask(
                single("q", "Colour", opt("red", "Red"), opt("blue", "Blue")),
                single("f", "Flavours", opt("a", "Apple"), opt("b", "Banana"), type="multi"),
                background=True,
            )
            await shown_on_page(browser, desk, kappa, payload)

            def drawn(scheme: str) -> dict[str, float]:
                emulate_scheme(browser, scheme)
                browser.refresh()
                wait_until(browser, form_shown)
                controls = {
                    "radio": by_role(question(browser, "Colour"), "radio", "Red"),
                    "checkbox": by_role(question(browser, "Flavours"), "checkbox", "Apple"),
                    "textbox": by_role(question(browser, "Colour"), "textbox", "Note"),
                }
                seen = {name: brightness(browser, control) for name, control in controls.items()}
                by_role(browser, "link", "History").click()
                wait_until(browser, lambda d: d.find_elements("css selector", "#q"))
                seen["combobox"] = brightness(browser, by_role(browser, "combobox", "Agent"))
                seen["searchbox"] = brightness(browser, by_role(browser, "searchbox", "Search"))
                browser.back()
                return seen

            try:
                dark = await run(lambda: drawn("dark"))
                light = await run(lambda: drawn("light"))
            finally:
                await run(lambda: emulate_scheme(browser, ""))
            for name, level in dark.items():
                assert level < 0.3, (name, dark)
                assert light[name] > 0.7, (name, light)


async def test_pages_load_with_an_icon_and_no_failed_request(tmp_path: Path, browser: Any) -> None:
    """Every page names the desk's icon, which the desk serves (no request of a page fails:
    a browser asks for /favicon.ico on its own when a page names none)."""
    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk:
            assert desk.web is not None
            url = desk.web.login_url()
            base = desk.web.base_url

            def failures() -> tuple[list[Any], list[str]]:
                browser.get_log("browser")  # what earlier tests left
                sign_in(browser, url)
                icons = []
                for path in ("/", "/history"):
                    browser.get(base + path)
                    named = browser.find_elements("css selector", 'link[rel="icon"]')
                    icons.extend(link.get_attribute("href") for link in named)
                browser.get(base + "/")  # a load that follows another finished
                logged = browser.get_log("browser")
                browser.delete_all_cookies()
                browser.get(base + "/")  # the sign-in message (a 401) names it too
                named = browser.find_elements("css selector", 'link[rel="icon"]')
                icons.extend(link.get_attribute("href") for link in named)
                return logged, icons

            logged, icons = await run(failures)
            assert [entry for entry in logged if entry["level"] == "SEVERE"] == [], logged
            assert len(icons) == 3, icons
            async with httpx2.AsyncClient() as http:
                for icon in {*icons, base + "/favicon.ico"}:
                    got = await http.get(icon)
                    assert got.status_code == 200, icon
                    assert got.headers["content-type"].startswith("image/svg+xml"), icon
                    assert got.text.startswith("<svg")


async def test_history_shows_times_in_the_persons_time_zone(tmp_path: Path, browser: Any) -> None:
    """A browser in Kolkata (UTC+5:30, a zone no clock shares by accident) reads each
    question's time in its own zone, as words, not as the journal's UTC stamp."""
    import datetime as dt

    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "lambda") as agent:
            assert desk.web is not None
            await agent.call_tool("ask_user", colour())
            await answer_on_the_board_when_shown(desk.board)
            url = desk.web.login_url()
            base = desk.web.base_url

            def shown() -> tuple[str, str, str]:
                browser.execute_cdp_cmd(
                    "Emulation.setTimezoneOverride", {"timezoneId": "Asia/Kolkata"}
                )
                try:
                    sign_in(browser, url)
                    browser.get(base + "/history")
                    time = browser.find_element("css selector", "li.record time")
                    wait_until(browser, lambda d: "UTC" not in time.text)
                    return (
                        str(time.get_attribute("datetime")),
                        str(time.text),
                        str(time.get_attribute("title")),
                    )
                finally:
                    browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": ""})

            stamp, text, title = await run(shown)
            local = dt.datetime.fromisoformat(stamp).astimezone(
                dt.timezone(dt.timedelta(hours=5, minutes=30))
            )
            assert local.strftime("%I:%M") in text or local.strftime("%H:%M") in text, (
                stamp,
                text,
            )
            assert stamp[:10] not in text and "Z" not in text, text  # not the ISO stamp
            assert str(local.year) in text and "GMT+5:30" in text, text
            assert title.endswith("UTC"), title  # the UTC time on hover


async def answer_on_the_board_when_shown(board: Board) -> None:
    await board.wait_for(lambda b: b.current is not None)
    await answer_on_the_board(board)


async def test_a_link_a_chat_app_previewed_still_signs_in_with_one_tap(
    tmp_path: Path, browser: Any
) -> None:
    """A chat app's preview bot fetched the link first; the person then taps it in the chat
    (a navigation from another site, here a page of its own origin) and lands signed in on
    the desk, with nothing more to press."""
    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "mu") as mu:
            assert desk.web is not None
            await mu.call_tool("ask_user", colour())
            url = desk.web.login_url()
            async with httpx2.AsyncClient(headers={"user-agent": "WhatsApp/2.23"}) as bot:
                for _ in range(2):
                    assert (await bot.get(url)).status_code == 200

            def tapped() -> None:
                browser.delete_all_cookies()
                browser.get("data:text/html,<a href='" + url + "'>Sign in link</a>")
                by_role(browser, "link", "Sign in link").click()
                wait_until(browser, form_shown)

            await run(tapped)
            assert await run(lambda: browser.current_url) == desk.web.base_url + "/"
            assert "Colour" in await run(lambda: d_text(browser, "#ask-form"))


async def test_a_browser_taken_for_a_previewer_signs_in_through_the_links_page(
    tmp_path: Path, browser: Any
) -> None:
    """A browser whose User-Agent reads like a preview robot's (an in-app browser) gets the
    page a preview gets; its script posts the sign-in at once, so the person lands on the
    desk all the same."""
    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "nu") as nu:
            assert desk.web is not None
            await nu.call_tool("ask_user", colour())
            url = desk.web.login_url()

            def opened() -> None:
                browser.delete_all_cookies()
                own = browser.execute_script("return navigator.userAgent")
                override = "Network.setUserAgentOverride"
                browser.execute_cdp_cmd(override, {"userAgent": "ExampleApp LinkPreview/1.0"})
                try:
                    browser.get(url)
                    wait_until(browser, form_shown)
                finally:
                    browser.execute_cdp_cmd(override, {"userAgent": own})

            await run(opened)
            assert await run(lambda: browser.current_url) == desk.web.base_url + "/"


@contextmanager
def writes_refused_past(size: int) -> Iterator[None]:
    """Every write of this process past ``size`` bytes into a file fails (``EFBIG``, as a full
    disk fails it with ``ENOSPC``): the journal of a desk in this process cannot grow."""
    ignored = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel ends the process
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, ignored)


def pictures(driver: Any, folder: Path, name: str) -> None:
    """The page as it is now, light and dark, on a desktop and a phone (no reload)."""
    for scheme in ("light", "dark"):
        for where, width, height, mobile in (
            ("desktop", 1280, 900, False),
            ("phone", 390, 844, True),
        ):
            emulate_scheme(driver, scheme)
            set_viewport(driver, width, height, mobile=mobile)
            assert driver.save_screenshot(str(folder / f"{name}-{scheme}-{where}.png"))
    emulate_scheme(driver, "")
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


async def test_an_answer_the_journal_could_not_record_comes_back_to_the_page_to_send_again(
    tmp_path: Path, browser: Any, screenshots: Path
) -> None:
    """The form takes the page's answer, then writing it to the agent's journal fails (the
    disk): nothing was recorded, and the form is shown again with the answer as its draft.
    The page says so in words, shows the form again with what the person entered, and its
    Submit works (it used to say "Sent to the agent." and leave the form out of sight, its
    Submit dead)."""
    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "nu") as nu:
            await shown_on_page(browser, desk, nu, colour())
            (journal,) = await trio.to_thread.run_sync(lambda: list(tmp_path.rglob("*.pias")))

            def answer_twice() -> None:
                submit = by_role(browser, "button", "Submit")
                submit.click()  # the review
                wait_until(browser, lambda d: by_role(d, "heading", "Review your answers"))
                submit.click()

            def answered() -> None:
                by_role(question(browser, "Colour"), "radio", "Blue").click()
                by_role(question(browser, "Colour"), "textbox", "Note").send_keys("navy")
                answer_twice()

            with writes_refused_past(journal.stat().st_size):
                await run(answered)
                told = await run(
                    lambda: wait_until(
                        browser,
                        lambda d: (
                            "not recorded" in d_text(d, "#form-errors")
                            and form_shown(d)
                            and d_text(d, "#form-errors")
                        ),
                    )
                )
            assert "send it again" in told, told
            await run(lambda: pictures(browser, screenshots, "web-not-recorded"))

            def kept() -> tuple[bool, str]:
                colour_now = question(browser, "Colour")
                return (
                    by_role(colour_now, "radio", "Blue").is_selected(),
                    str(by_role(colour_now, "textbox", "Note").get_attribute("value")),
                )

            assert await run(kept) == (True, "navy")
            await run(answer_twice)
            await run(lambda: wait_until(browser, lambda d: not form_shown(d)))
            waited = await nu.call_tool("wait_for_answers", {})
            (entry,) = waited.structured_content["results"]
            assert entry["result"]["answers"]["q"]["values"] == ["blue"]
            assert entry["result"]["answers"]["q"]["note"] == "navy"


async def test_past_the_sign_in_limit_try_again_signs_in_with_the_same_link(
    tmp_path: Path, browser: Any
) -> None:
    """Past the limit of failed sign-ins the page says when to try again, and its Try again
    button, pressed once the minute is over, signs in with the same link."""
    with trio.fail_after(120):
        async with open_desk(tmp_path) as desk:
            assert desk.web is not None
            web = desk.web
            for _ in range(ATTEMPT_LIMIT):
                web.auth.sign_in("guess")
            url = web.login_url()

            def limited() -> str:
                browser.delete_all_cookies()
                browser.get(url)
                return str(
                    wait_until(
                        browser,
                        lambda d: (
                            "try it again in" in (a := by_role(d, "alert", "", exact=False)).text
                            and a.text
                        ),
                    )
                )

            told = await run(limited)
            assert "not used up" in told and "new link" not in told, told
            wait = web.auth.retry_after()
            web.auth.clock = functools.partial(
                lambda now, later: now() + later, web.auth.clock, wait
            )

            def again() -> None:
                by_role(browser, "button", "Try again").click()
                wait_until(browser, lambda d: "No questions waiting" in d.page_source)

            await run(again)
            assert await run(lambda: browser.current_url) == web.base_url + "/"


# -- A long form on a phone, on one desk for the module ---------------------------------------

LONG_FORM = ask(
    single(
        "policy",
        "Failure policy",
        *(
            opt(f"o{n}", f"Option {n + 1}", description="what choosing it means " * (n % 3 * 3))
            for n in range(30)
        ),
        prompt="How should the nightly export behave when the warehouse is partly away? " * 6,
        context="".join(f"line {n} of the export's runbook\n" for n in range(40)),
    ),
    single(
        "notify",
        "Notify",
        *(opt(who, who.title()) for who in ("oncall", "data", "product", "support")),
        type="multi",
    ),
    single("why", "Reasoning", opt("none", "No reason needed")),
    title="The nightly export",
    background=True,
)
"""What a person answers on a phone: a long question with 30 options (some described at
length) and a long context, a multi-select, a question to explain in words."""


DRAFTS_ON_THE_DESK = """
const done = arguments[arguments.length - 1], form = document.getElementById('ask-form');
fetch('/fragment/form', {credentials: 'same-origin'}).then(r => r.text()).then(function (html) {
  const there = new DOMParser().parseFromString(html, 'text/html');
  done(Array.from(form.querySelectorAll('textarea, input.choice')).every(function (box) {
    const twin = there.getElementById(box.id);
    return twin && (box.tagName === 'TEXTAREA' ? twin.value === box.value
      : twin.checked === box.checked);
  }));
}, function () { done(false); });
"""
"""Whether the desk has the drafts the page shows (its form as the desk renders it now)."""


@attrs.frozen
class LongFormDesk:
    """The module's desk showing ``LONG_FORM`` (:func:`long_form`), and the session the
    shared browser signed in with there."""

    base_url: str
    cookie: str

    def open(self, driver: Any, width: int = 390, height: int = 844) -> None:
        """``driver`` at a phone's ``width`` x ``height``, showing the form (with the session
        given back: the module's other tests sign in to desks of their own, on this host).
        What the last test typed here is on the desk first: saved after it left, it reloaded
        the form in the next test (drafts changed elsewhere), under that test's feet."""
        if driver.current_url.startswith(self.base_url) and form_shown(driver):
            wait_until(driver, lambda d: d.execute_async_script(DRAFTS_ON_THE_DESK))
        set_viewport(driver, width, height, mobile=True)
        if not driver.current_url.startswith(self.base_url):
            driver.get(self.base_url + "/static/icon.svg")  # the desk's origin, for its cookie
        if (driver.get_cookie(COOKIE) or {}).get("value") != self.cookie:
            driver.add_cookie(
                {"name": COOKIE, "value": self.cookie, "httpOnly": True, "sameSite": "Strict"}
            )
        driver.get(self.base_url + "/")
        wait_until(driver, form_shown)


@pytest.fixture(scope="module")
def long_form_desk(
    browser: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LongFormDesk]:
    """A desk showing ``LONG_FORM``, running in a thread of its own for the whole module, the
    shared browser signed in to it once (a sign-in URL from the desk, as ``desk login-url``
    gets one): the layout tests on it open it in a fraction of a second instead of starting a
    desk each (about 2 s). A test that types restores what it changed."""
    base = tmp_path_factory.mktemp("long-form")
    started: queue.Queue[tuple[str, str]] = queue.Queue()
    stop = threading.Event()

    async def serve() -> None:
        async with open_desk(base) as desk, desk_client(desk.address, "export-agent") as agent:
            assert desk.web is not None
            await agent.call_tool("ask_user", LONG_FORM)
            await desk.board.wait_for(lambda board: board.current is not None)
            started.put((desk.web.base_url, desk.address.token))
            await trio.to_thread.run_sync(stop.wait)

    thread = threading.Thread(target=trio.run, args=(serve,), daemon=True)
    thread.start()
    try:
        base_url, token = started.get(timeout=60)
        got = httpx2.post(
            base_url + "/login-code", headers={"authorization": f"Bearer {token}"}, timeout=30
        )
        sign_in(browser, got.json()["url"])
        yield LongFormDesk(base_url, browser.get_cookie(COOKIE)["value"])
    finally:
        stop.set()
        thread.join(timeout=30)


@pytest.fixture
def long_form(browser: Any, long_form_desk: LongFormDesk) -> Iterator[LongFormDesk]:
    """The module's long form (:func:`long_form_desk`) for one test, the browser's viewport
    given back to the next test as it was (a test opens the form at a phone's size)."""
    try:
        yield long_form_desk
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def box_height(driver: Any, box: Any) -> tuple[int, int]:
    """A text box's drawn height and the height its text needs (``clientHeight``,
    ``scrollHeight``)."""
    heights = driver.execute_script(
        "return [arguments[0].clientHeight, arguments[0].scrollHeight]", box
    )
    return heights[0], heights[1]


def test_a_long_answer_typed_on_a_phone_is_shown_whole(
    browser: Any, long_form: LongFormDesk
) -> None:
    """A paragraph typed in a text box (`Type your own`, a note) is all in view as it grows:
    the box grows with its text, where it stayed two lines tall and scrolled inside itself, so
    on a phone the person could not read back what they wrote."""
    long_form.open(browser)
    box = by_role(question(browser, "Reasoning"), "textbox", "Type your own")
    empty = box.rect["height"]
    paragraph = (
        "Skip only the broken partition and keep the rest flowing; paging at night for a "
        "partial outage burned people out last quarter."
    )
    # Pasted (as a person on a phone often does), then typed on.
    paste = (
        "arguments[0].value = arguments[1];"
        "arguments[0].dispatchEvent(new InputEvent('input', {bubbles: true,"
        " inputType: 'insertFromPaste'}))"
    )
    browser.execute_script(paste, box, paragraph * 2)
    box.send_keys(" Thanks.")
    try:
        shown, needed = box_height(browser, box)
        assert shown >= needed, (shown, needed)
        assert box.rect["height"] > 1.5 * empty
        # A whole page of text stops growing at 60 % of the screen and scrolls inside the
        # box, the buttons below still a short way off.
        browser.execute_script(paste, box, paragraph * 40)
        shown, needed = box_height(browser, box)
        assert needed > shown and box.rect["height"] <= 0.6 * 844 + 1, (shown, needed)
    finally:
        browser.execute_script("arguments[0].value = ''", box)
        box.send_keys(" ", "\b")  # the empty box saved, as typed
    # Empty, it keeps its two lines: room to start typing.
    assert box.rect["height"] == empty >= 60


def unreachable_line(driver: Any, saying: str) -> Any:
    """The page's status line once it says ``saying`` (the long form's first question has a
    status line of its own: what a first digit waiting for a second does)."""
    return next((status for status in roles(driver, "status") if saying in status.text), None)


def test_at_200_percent_the_line_kept_in_view_leaves_room_for_the_form(
    browser: Any, long_form: LongFormDesk
) -> None:
    """A phone zoomed to 200 % (390 px of screen, 195 CSS px): the line saying the desk
    cannot be reached stays at the top as the person types, but takes at most a third of the
    screen (its text scrolls inside it), and the box the focus moves to comes into view below
    it, not under it, nor under the bar at the bottom. It took 290 px of 422 and hid the box
    being typed in."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    long_form.open(browser, 195, 422)
    reasoning = question(browser, "Reasoning")
    note = by_role(reasoning, "textbox", "Note")
    try:
        offline(browser, True)
        note.send_keys("x")
        status = wait_until(browser, lambda d: unreachable_line(d, "cannot be reached"))
        height = browser.execute_script("return innerHeight")
        assert status.rect["height"] <= height / 3, (status.rect, height)
        # Shift+Tab from a box at the top of the screen: the one before it, above the screen,
        # is brought into view.
        browser.execute_script("arguments[0].scrollIntoView({block: 'start'})", note)
        ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT).perform()
        custom = by_role(reasoning, "textbox", "Type your own")
        assert browser.switch_to.active_element == custom
        top = browser.execute_script("return arguments[0].getBoundingClientRect().top", custom)
        bottom = browser.execute_script(
            "return arguments[0].getBoundingClientRect().bottom", status
        )
        assert top >= bottom, (top, bottom)
        # And above the bar, which says the same beside the buttons: its first line at least
        # (the two and the buttons, wrapped in two rows, left no room between them).
        bar = browser.execute_script(
            "return document.querySelector('#ask-form .bar').getBoundingClientRect().top"
        )
        assert top + 30 <= bar, (top, bar)
    finally:
        offline(browser, False)
        note.send_keys("\b")  # saved once typed, or as the page is left (not waited for)


def test_at_200_percent_an_options_text_keeps_most_of_the_width(
    browser: Any, long_form: LongFormDesk
) -> None:
    """A phone zoomed to 200 % (195 CSS px wide): the page's margins, the question's box and
    the choice's column leave an option's text 60 % of the screen's width. They left it
    85 px of 195, and words broke in the middle ("consequenc-es")."""
    long_form.open(browser, 195, 422)
    # Found by its text (by role, among 30 radio buttons, took half a second).
    label = browser.find_element("xpath", "//label[contains(., 'Option 3 —')]")
    width = browser.execute_script("return innerWidth")
    assert label.rect["width"] >= 0.6 * width, (label.rect, width)
    assert no_horizontal_scroll(browser)


def test_with_text_enlarged_to_200_percent_an_options_text_keeps_most_of_the_width(
    browser: Any, long_form: LongFormDesk
) -> None:
    """A phone whose browser's text size is set to 200 % (32 px, the width 390 px): as when
    zoomed, an option's text keeps most of the width (it had 216 px of 390, the margins in
    rem doubled with the text)."""
    sizes = {"standard": 16, "fixed": 13}
    browser.execute_cdp_cmd("Page.setFontSizes", {"fontSizes": {"standard": 32, "fixed": 26}})
    try:
        long_form.open(browser, 390, 844)
        label = browser.find_element("xpath", "//label[contains(., 'Option 3 —')]")
        assert label.rect["width"] >= 0.6 * 390, label.rect
        assert no_horizontal_scroll(browser)
    finally:
        browser.execute_cdp_cmd("Page.setFontSizes", {"fontSizes": sizes})


def test_why_a_draft_was_not_kept_is_in_view_where_the_person_types(
    browser: Any, long_form: LongFormDesk
) -> None:
    """A phone, the first question's note far above the buttons: text the desk will not keep
    (past its limit) is said where the person is, at the bottom of the screen, while they
    type there; it was said only beside the buttons, a long scroll away, so the person typed
    on not knowing nothing was saved. Once the text is kept, the line is gone."""
    long_form.open(browser)
    note = by_role(question(browser, "Failure policy"), "textbox", "Note")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", note)
    note.click()
    browser.execute_cdp_cmd("Input.insertText", {"text": "y" * (MAX_TEXT + 5)})
    try:
        said = wait_until(
            browser,
            lambda d: "characters long" in (t := by_role(d, "alert", "", exact=False)).text and t,
        )
        assert in_view(browser, said), said.rect
        assert browser.switch_to.active_element == note
    finally:
        browser.execute_script(
            "arguments[0].value = '';"
            "arguments[0].dispatchEvent(new InputEvent('input', {bubbles: true}))",
            note,
        )
        wait_until(browser, lambda d: not any(alert.text for alert in roles(d, "alert")))


def tab_path(driver: Any, start: Any, until: Callable[[Any], bool], most: int = 80) -> list[str]:
    """What Tab from ``start`` moves the focus through until ``until(focused)``: each stop's
    role and accessible name (at most ``most`` presses)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    driver.execute_script("arguments[0].focus()", start)
    path: list[str] = []
    for _ in range(most):
        ActionChains(driver).send_keys(Keys.TAB).perform()
        focused = driver.switch_to.active_element
        path.append(f"{focused.aria_role} {focused.accessible_name}")
        if until(focused):
            break
    return path


def test_on_a_phone_tab_goes_past_thirty_options_and_their_notes_stay_in_reach(
    browser: Any, long_form: LongFormDesk
) -> None:
    """360x640, a question of 30 options: Tab goes from its options to the next question in a
    few presses (the options are one stop, then the note of the option in focus), where it
    went through 30 "Note on …" buttons first. Every note stays reachable: Tab from an option
    goes to its note, and each note button is still there for touch and screen readers."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    long_form.open(browser, 360, 640)
    policy = question(browser, "Failure policy")
    radios = policy.find_elements("css selector", "input.choice")
    in_notify = "return !!arguments[0].closest('fieldset[data-index=\"1\"]')"
    path = tab_path(browser, radios[0], lambda e: browser.execute_script(in_notify, e))
    assert len(path) <= 8, path
    assert path[0] == "button Note on Option 1", path
    # Option 7's note, from option 7 (focus alone chooses nothing), and back.
    seventh = tab_path(browser, radios[6], lambda e: True)
    assert seventh == ["button Note on Option 7"], seventh
    assert not any(radio.is_selected() for radio in radios)
    notes = policy.find_elements("css selector", "button.option-note-toggle")
    assert [note.accessible_name for note in notes[:2]] == ["Note on Option 1", "Note on Option 2"]
    assert len(notes) == 30
    # A multi-select question's checkboxes are one stop too: the arrow keys move between
    # them (choosing nothing), Tab goes on to the note of the one in focus.
    notify = question(browser, "Notify")
    boxes = notify.find_elements("css selector", "input.choice")
    browser.execute_script("arguments[0].focus()", boxes[0])
    ActionChains(browser).send_keys(Keys.ARROW_DOWN, Keys.ARROW_DOWN).perform()
    assert browser.switch_to.active_element == boxes[2]
    assert not any(box.is_selected() for box in boxes)
    path = tab_path(browser, boxes[2], lambda e: e.accessible_name == "Type your own")
    assert path == ["button Note on Product", "textbox Type your own"], path


def test_in_landscape_submit_stays_in_reach_of_a_tall_review(
    browser: Any, long_form: LongFormDesk
) -> None:
    """A phone held sideways (640x360): the review of a long answer is taller than the screen,
    and Submit, which sends it, stays in view below it (it was below the review, a long scroll
    away); the review starts at its heading, nothing of it under the buttons."""
    from selenium.webdriver.common.keys import Keys

    long_form.open(browser, 640, 360)
    note = by_role(question(browser, "Reasoning"), "textbox", "Note")
    typed = "Skip only the broken partition and keep the rest flowing. " * 12
    fill = (
        "arguments[0].value = arguments[1];"
        "arguments[0].dispatchEvent(new InputEvent('input', {bubbles: true}))"
    )
    browser.execute_script(fill, note, typed)
    try:
        submit = by_role(browser, "button", "Submit")
        browser.execute_script("window.scrollTo(0, 0)")
        assert in_view(browser, submit)  # from anywhere in the form
        submit.click()
        heading = by_role(browser, "heading", "Review your answers")
        wait_until(browser, lambda d: heading.is_displayed())
        bar = browser.find_element("css selector", "#ask-form .actions")
        assert in_view(browser, heading) and in_view(browser, submit)
        assert heading.rect["y"] + heading.rect["height"] <= bar.rect["y"]
        review = browser.find_element("css selector", "#review")
        assert review.rect["height"] > 360
        heading.send_keys(Keys.ESCAPE)
        wait_until(browser, lambda d: not heading.is_displayed())
    finally:
        browser.execute_script(fill, note, "")


# What a question's key hint and its status line read as each key is handled, and where the
# first option lies then (a MutationObserver: a first digit waits 0.6 s, too short to be sure
# of a round trip to the browser in between, so the keys go in one action).
RECORD_KEY_HINTS = """
const fs = arguments[0], first = fs.querySelector('div.option');
window.keyHints = [];
new MutationObserver(function () {
  const held = fs.querySelector('.held'), hint = fs.querySelector('.hint');
  window.keyHints.push({
    held: held ? held.textContent : null,
    live: held ? [held.getAttribute('role'), held.getAttribute('aria-live')] : null,
    hint: getComputedStyle(hint).visibility, top: first.getBoundingClientRect().top,
  });
}).observe(fs, {subtree: true, childList: true, characterData: true, attributes: true});
"""


def test_a_first_digit_waiting_for_a_second_says_what_the_next_key_does(
    browser: Any, long_form: LongFormDesk
) -> None:
    """A question of 31 rows on a phone: 3 waits for a second digit, and the question's key
    hint says what the next key does, in the terminal's words, to a screen reader as well
    (politely), nothing on the page moving; Esc drops it, choosing nothing. The page showed
    nothing while it waited. 3 then 5 chooses nothing either, and the page says so in the
    terminal's sentence, as it does of 7 on a question of five rows."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    long_form.open(browser, 360, 640)
    policy = browser.find_element("xpath", "//fieldset[1]")
    assert policy.accessible_name.strip() == "Failure policy"
    radios = policy.find_elements("css selector", "input.choice")
    browser.execute_script("arguments[0].focus()", radios[0])
    browser.execute_script(RECORD_KEY_HINTS, policy)
    ActionChains(browser).send_keys("3", Keys.ESCAPE, "3", "5").perform()
    said = no_such_row(35, 31)
    wait_until(browser, lambda d: d_text(d, "#form-note") == said)
    seen = browser.execute_script("return window.keyHints")
    held = "3 typed · 0-1 rows 30-31 · Enter row 3 · Esc clear"
    assert [s["held"] for s in seen if s["held"]] == [held, held], seen
    waiting = next(s for s in seen if s["held"])
    assert waiting["live"] == ["status", "polite"] and waiting["hint"] == "hidden", waiting
    assert {s["top"] for s in seen} == {seen[0]["top"]}, seen  # nothing moved
    assert seen[-1]["held"] == "" and seen[-1]["hint"] == "visible", seen
    assert not browser.execute_script("return arguments[0].querySelector(':checked')", policy)
    # One digit past the rows of a short question: said too (it did nothing, without a word).
    notify = browser.find_element("xpath", "//fieldset[2]")
    browser.execute_script("arguments[0].querySelector('input.choice').focus()", notify)
    ActionChains(browser).send_keys("7").perform()
    wait_until(browser, lambda d: d_text(d, "#form-note") == no_such_row(7, 5))
    assert not browser.execute_script("return arguments[0].querySelector(':checked')", notify)


# Safari's on-screen keyboard as the page sees it: the visual viewport ``arguments[0]`` px
# shorter, the layout viewport as it was. Headless Chromium shows no keyboard and has no means
# to shrink the visual viewport alone at scale 1 (neither device metrics, visible size nor
# window size do), so its height is stubbed and its resize event sent, as the keyboard's is.
KEYBOARD_OPEN = """
const height = innerHeight - arguments[0];
Object.defineProperty(visualViewport, 'height', {configurable: true, get: () => height});
visualViewport.dispatchEvent(new Event('resize'));
"""
KEYBOARD_CLOSED = "delete visualViewport.height; visualViewport.dispatchEvent(new Event('resize'))"
BOTTOM = "return arguments[0].getBoundingClientRect().bottom"


def test_on_a_phone_the_buttons_stay_above_the_on_screen_keyboard(
    browser: Any, long_form: LongFormDesk
) -> None:
    """360x640, typing a note far above the buttons: Submit, Cancel and Later (and the line
    kept beside them) stay above the on-screen keyboard. Chrome and Firefox on Android make
    room for it as the page's viewport asks (interactive-widget=resizes-content); where the
    keyboard covers the page's bottom instead (Safari: only the visual viewport shrinks), the
    page lifts the bar above it. It stayed under the keyboard. A pinch zoom, which shrinks the
    visual viewport too, leaves the bar where it is."""
    long_form.open(browser, 360, 640)
    meta = browser.find_element("css selector", 'meta[name="viewport"]')
    assert "interactive-widget=resizes-content" in meta.get_attribute("content")
    submit = browser.find_element("xpath", "//button[.='Submit']")  # by text: quicker
    # A pinch zoom (the page's resize listener ran before this one's).
    zoomed = "visualViewport.addEventListener('resize', () => { window.zoomed = true })"
    browser.execute_script(zoomed)
    browser.execute_cdp_cmd("Emulation.setPageScaleFactor", {"pageScaleFactor": 2})
    try:
        wait_until(browser, lambda d: d.execute_script("return window.zoomed"))
        assert browser.execute_script("return visualViewport.scale") == 2
        assert 600 < browser.execute_script(BOTTOM, submit) <= 640
    finally:
        browser.execute_cdp_cmd("Emulation.setPageScaleFactor", {"pageScaleFactor": 1})
    # Typing in the last question's note, near the end of the page.
    note = browser.find_element("xpath", "//fieldset[3]//label[.='Note']")
    browser.execute_script(
        "arguments[0].scrollIntoView({block: 'center'}); arguments[0].click()", note
    )
    assert browser.switch_to.active_element.accessible_name == "Note"
    browser.execute_script(KEYBOARD_OPEN, 300)
    try:
        assert browser.execute_script(BOTTOM, submit) <= 340
        # The box being typed in, under the bar once it is lifted, is brought above it (the
        # page had ended before it could be).
        box, bar = browser.execute_script(
            "return [document.activeElement.getBoundingClientRect(),"
            " document.querySelector('#ask-form .bar').getBoundingClientRect()]"
        )
        assert box["top"] >= 0 and box["bottom"] <= bar["top"], (box, bar)
    finally:
        browser.execute_script(KEYBOARD_CLOSED)
    lifted = "return getComputedStyle(document.documentElement).getPropertyValue('--keyboard')"
    assert browser.execute_script(lifted) == "0px"


def test_a_review_shown_with_a_note_beside_the_buttons_is_above_them(
    browser: Any, long_form: LongFormDesk
) -> None:
    """360x640: with a sentence beside Submit (here the page's "No row 35"), the bar at the
    bottom of the screen is taller than the room the page keeps for it, and the review shown
    by Submit is still above it, whole. Its last lines were under the bar."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    long_form.open(browser, 360, 640)
    policy = browser.find_element("xpath", "//fieldset[1]")
    browser.execute_script("arguments[0].querySelector('input.choice').focus()", policy)
    ActionChains(browser).send_keys("3", "5").perform()
    wait_until(browser, lambda d: d_text(d, "#form-note") == no_such_row(35, 31))
    browser.find_element("xpath", "//button[.='Submit']").click()
    heading = wait_until(
        browser, lambda d: (h := d.find_element("id", "review-heading")).is_displayed() and h
    )
    review, bar = (browser.find_element("css selector", s) for s in ("#review", "#ask-form .bar"))
    box = browser.execute_script(
        "return [arguments[0].getBoundingClientRect(), arguments[1].getBoundingClientRect()]",
        review,
        bar,
    )
    assert box[0]["top"] >= 0 and box[0]["bottom"] <= box[1]["top"], box
    heading.send_keys(Keys.ESCAPE)
    wait_until(browser, lambda d: not heading.is_displayed())


def test_the_line_typed_is_above_a_bar_with_a_sentence_in_it(
    browser: Any, long_form: LongFormDesk, screenshots: Path
) -> None:
    """360x640: with a sentence beside Submit (the page's "No row 35"), the bar at the bottom
    of the screen is taller than the buttons alone, and the line being typed in a box that
    grows down to the bar stays above it. The page kept a fixed room for the bar (the
    buttons' height): the lines typed went on under it."""
    from selenium.webdriver.common.action_chains import ActionChains

    long_form.open(browser, 360, 640)
    policy = browser.find_element("xpath", "//fieldset[1]")
    browser.execute_script("arguments[0].querySelector('input.choice').focus()", policy)
    ActionChains(browser).send_keys("3", "5").perform()
    wait_until(browser, lambda d: d_text(d, "#form-note") == no_such_row(35, 31))
    # The first question's note (far from the page's end: the bar stays at the screen's
    # bottom), typed in line after line.
    note = by_role(policy, "textbox", "Note")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", note)
    note.click()
    try:
        # As typed (one insertion: the browser brings its caret into view as for keys).
        text = "".join(f"line {n}\n" for n in range(16))
        browser.execute_cdp_cmd("Input.insertText", {"text": text})
        box, bar = browser.execute_script(
            "return [arguments[0].getBoundingClientRect(),"
            " document.querySelector('#ask-form .bar').getBoundingClientRect()]",
            note,
        )
        assert bar["height"] > 100, bar  # the sentence in it
        assert box["top"] >= 0 and box["bottom"] <= bar["top"], (box, bar)
        browser.save_screenshot(str(screenshots / "web-bar-with-a-sentence.png"))
    finally:
        browser.execute_script(
            "arguments[0].value = '';"
            "arguments[0].dispatchEvent(new InputEvent('input', {bubbles: true}))",
            note,
        )
