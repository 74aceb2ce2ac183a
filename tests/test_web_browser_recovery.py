"""The web desk in a real browser when things go wrong around a person's answer: a slow
network while the board keeps changing, a session that ended while text was typed, text past
the desk's limit. Chromium driven by Selenium, agents on the official MCP SDK client, a real
desk (see ``tests/test_web_browser.py``, whose helpers these tests use)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import trio

from pi_agent_ask.actors.form import UserCommand
from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS, desk_client, open_desk
from pi_agent_ask.desk.web.app import MAX_BODY
from pi_agent_ask.desk.web.testing import browser_missing, by_role, set_viewport
from pi_agent_ask.desk.web.view import MAX_TEXT
from pi_agent_ask.form import state as fs
from tests.test_web_browser import (  # noqa: F401
    answer_on_the_board,
    ask,
    browser,
    colour,
    d_text,
    form_shown,
    in_view,
    opt,
    question,
    run,
    screenshots,
    shown_on_page,
    single,
    wait_until,
    writes_refused_past,
)

MISSING = browser_missing()
pytestmark = [
    *(pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS),
    pytest.mark.skipif(MISSING is not None, reason=MISSING or ""),
    pytest.mark.e2e,
]


def slow_network(driver: Any, latency_ms: int) -> None:
    """Every request of the page takes ``latency_ms`` longer (a phone on a slow link); 0 gives
    the network back."""
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": latency_ms, "downloadThroughput": -1, "uploadThroughput": -1},
    )


def record_status(driver: Any) -> None:
    """From now on, every sentence the page's status line says is kept in ``window.said``
    (what a screen reader announces: the line is ``aria-live``)."""
    driver.execute_script(
        "window.said = [];"
        "const box = document.getElementById('status');"
        "new MutationObserver(() => { if (box.textContent) window.said.push(box.textContent); })"
        ".observe(box, {childList: true, characterData: true, subtree: true});"
    )


async def test_the_page_that_sent_an_answer_never_says_it_was_answered_elsewhere(
    tmp_path: Path,
    browser: Any,  # noqa: F811
) -> None:
    """On a slow link the board changes again (another agent asks) while the page is still
    loading what follows its own answer: the page says its answer was sent, and never that
    the form was answered elsewhere (it used to, once the second change came in)."""
    with trio.fail_after(120):
        async with (
            open_desk(tmp_path) as desk,
            desk_client(desk.address, "alpha") as alpha,
            desk_client(desk.address, "beta") as beta,
        ):
            await shown_on_page(browser, desk, alpha, colour())

            def send() -> None:
                by_role(question(browser, "Colour"), "radio", "Blue").click()
                submit = by_role(browser, "button", "Submit")
                submit.click()  # the review
                wait_until(browser, lambda d: by_role(d, "heading", "Review your answers"))
                record_status(browser)
                slow_network(browser, 700)
                submit.click()

            try:
                await run(send)
                await desk.board.wait_for(lambda b: not b.shown_forms())
                await beta.call_tool(
                    "ask_user",
                    ask(single("t", "Tone", opt("plain", "Plain")), background=True, title="Tone"),
                )
                await run(lambda: wait_until(browser, lambda d: by_role(d, "heading", "Tone"), 20))
            finally:
                await run(lambda: slow_network(browser, 0))
            said = await run(lambda: browser.execute_script("return window.said"))
            assert not [s for s in said if "answered elsewhere" in s], said
            assert said and said[-1] == "Sent to the agent.", said
            waited = await alpha.call_tool("wait_for_answers", {})
            (entry,) = waited.structured_content["results"]
            assert entry["result"]["answers"]["q"]["values"] == ["blue"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def note_box(driver: Any) -> Any:
    return by_role(question(driver, "Colour"), "textbox", "Note")


async def test_text_typed_across_a_desk_restart_is_saved_once_the_person_signs_in_again(
    tmp_path: Path,
    browser: Any,  # noqa: F811
) -> None:
    """A desk restart signs everyone out. The page left open keeps what was typed while the
    desk was down and after it came back; the person signs in again in another tab (a new
    link) and comes back: the page takes the new session up, its live stream comes back, and
    the text is saved and sent (it used to refuse every request for good: "reload the page",
    which drops the text)."""
    listen = f"127.0.0.1:{free_port()}"
    with trio.fail_after(110):
        async with (
            open_desk(tmp_path, listen=listen) as desk,
            desk_client(desk.address, "alpha") as alpha,
        ):
            await shown_on_page(browser, desk, alpha, colour())
            await run(lambda: note_box(browser).send_keys("teal"))
            await desk.board.wait_for(
                lambda b: b.current is not None and b.current.state.drafts[0].note == "teal"
            )
        await run(lambda: note_box(browser).send_keys(", navy"))  # the desk is down
        await run(
            lambda: wait_until(
                browser, lambda d: "could not be reached" in d_text(d, "#form-errors")
            )
        )
        async with open_desk(tmp_path, listen=listen) as desk:
            assert desk.web is not None
            # Back, and this page's session gone: said where the person read "could not be
            # reached", next to the buttons, before anything more is typed.
            said = await run(
                lambda: wait_until(
                    browser, lambda d: "signed out" in (t := d_text(d, "#form-errors")) and t
                )
            )
            assert "keeps what you typed" in said

            def signed_out() -> str:
                note_box(browser).send_keys(", sky")
                return str(
                    wait_until(
                        browser,
                        lambda d: "Not signed in" in (text := d_text(d, "#form-errors")) and text,
                    )
                )

            assert "keeps what you typed" in await run(signed_out)
            url = desk.web.login_url()

            def sign_in_elsewhere() -> None:
                """A new link opened in another tab (which shows the form as the journal
                has it: the first page may have saved its text already, a save of its
                retried with the new session), then back to the first page."""
                first = browser.current_window_handle
                browser.switch_to.new_window("tab")
                browser.get(url)
                wait_until(browser, lambda d: note_box(d).get_attribute("value").startswith("teal"))
                browser.close()
                browser.switch_to.window(first)

            await run(sign_in_elsewhere)
            with trio.fail_after(20):  # what the first page kept, saved by itself
                await desk.board.wait_for(
                    lambda b: (
                        b.current is not None
                        and b.current.state.drafts[0].note == "teal, navy, sky"
                    )
                )

            def send() -> None:
                by_role(question(browser, "Colour"), "radio", "Blue").click()
                submit = by_role(browser, "button", "Submit")
                submit.click()  # the review
                wait_until(browser, lambda d: by_role(d, "heading", "Review your answers"))
                submit.click()
                wait_until(browser, lambda d: not form_shown(d))

            await run(send)
            async with desk_client(desk.address, "alpha") as alpha:
                waited = await alpha.call_tool("wait_for_answers", {})
            (entry,) = waited.structured_content["results"]
            assert entry["result"]["answers"]["q"]["values"] == ["blue"]
            assert entry["result"]["answers"]["q"]["note"] == "teal, navy, sky"


def leaving_asks(driver: Any) -> bool:
    """Whether leaving the page would ask first (chromedriver answers a real dialog itself)."""
    return bool(
        driver.execute_script(
            "const e = new Event('beforeunload', {cancelable: true});"
            "window.dispatchEvent(e); return e.defaultPrevented;"
        )
    )


@pytest.mark.parametrize("size", [MAX_TEXT + 5, MAX_BODY + 5], ids=["text", "body"])
async def test_text_past_the_limit_is_named_in_words_and_nothing_typed_is_lost(
    tmp_path: Path,
    browser: Any,  # noqa: F811
    size: int,
) -> None:
    """A paste longer than the desk takes: the page says which box and by how much, in words;
    what is typed meanwhile elsewhere on the form stays on the page (leaving asks first), and
    once the text is short enough all of it is saved (it used to read ``drafts[0].custom is
    longer than 100000 characters.``, and a reload then dropped the note typed after it).
    ``body``: a paste past the desk's limit for a whole request (its 413, refused before the
    body is read), which used to read "The request is too large." and keep nothing back."""
    with trio.fail_after(110):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            await shown_on_page(browser, desk, alpha, colour())

            def pasted() -> str:
                own = by_role(question(browser, "Colour"), "textbox", "Type your own")
                own.click()
                # A real paste (of four million characters: the page must not freeze).
                browser.execute_cdp_cmd("Input.insertText", {"text": "y" * size})
                said = wait_until(browser, lambda d: (text := d_text(d, "#form-errors")) and text)
                note_box(browser).send_keys("keep me")
                return str(said)

            said = await run(pasted)
            assert "Type your own" in said and f"{size:,}" in said, said
            assert "drafts[0]" not in said.split("(")[0], said
            assert await run(lambda: leaving_asks(browser)), "leaving the page would not ask"
            assert desk.board.current is not None
            assert desk.board.current.state.drafts[0].note == ""

            def shortened() -> None:
                own = by_role(question(browser, "Colour"), "textbox", "Type your own")
                browser.execute_script("arguments[0].select()", own)
                own.send_keys("short")

            await run(shortened)
            with trio.fail_after(20):
                await desk.board.wait_for(
                    lambda b: (
                        b.current is not None
                        and b.current.state.drafts[0].note == "keep me"
                        and b.current.state.drafts[0].custom_text == "short"
                    )
                )
            # The desk kept the draft before the page read the desk's reply: once it has,
            # leaving no longer asks.
            await run(lambda: wait_until(browser, lambda d: not leaving_asks(d)))


async def test_typing_on_a_second_device_keeps_what_the_first_one_typed(
    tmp_path: Path,
    browser: Any,  # noqa: F811
) -> None:
    """A phone left with its keyboard up in one box (its page does not redraw the form under
    the person's fingers), the person types a note on the laptop, then goes on typing on the
    phone: the phone's draft carries the laptop's note along, it does not wipe it (it used to
    save the note as the phone last saw it, empty, and the laptop's page then lost it too)."""
    with trio.fail_after(110):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            await shown_on_page(browser, desk, alpha, colour())

            def own_text(driver: Any) -> Any:
                return by_role(question(driver, "Colour"), "textbox", "Type your own")

            def phone_types() -> tuple[str, str]:
                laptop = browser.current_window_handle
                page = browser.current_url
                browser.switch_to.new_window("tab")
                phone = browser.current_window_handle
                browser.get(page)
                wait_until(browser, lambda d: own_text(d))
                own_text(browser).send_keys("teal")  # the focus stays in the box
                return laptop, phone

            laptop, phone = await run(phone_types)
            await desk.board.wait_for(
                lambda b: b.current is not None and b.current.state.drafts[0].custom_text == "teal"
            )

            def laptop_types() -> None:
                browser.switch_to.window(laptop)
                wait_until(browser, lambda d: own_text(d).get_attribute("value") == "teal")
                note_box(browser).send_keys("for the hall")

            await run(laptop_types)
            await desk.board.wait_for(
                lambda b: (
                    b.current is not None
                    and b.current.state.drafts[0].note == "for the hall"
                    and b.current.state.drafts[0].custom_text == "teal"
                )
            )

            def phone_again() -> None:
                browser.switch_to.window(phone)
                browser.switch_to.active_element.send_keys(" and navy")

            await run(phone_again)
            with trio.fail_after(20):
                await desk.board.wait_for(
                    lambda b: (
                        b.current is not None
                        and b.current.state.drafts[0].custom_text == "teal and navy"
                    )
                )
            await trio.sleep(1)  # the phone's saves after the last keystroke, if any
            assert desk.board.current is not None
            assert desk.board.current.state.drafts[0].note == "for the hall"

            def on_both() -> list[str]:
                notes = []
                for tab in (phone, laptop):
                    browser.switch_to.window(tab)
                    browser.find_element("tag name", "h1").click()  # the focus leaves the box
                    wait_until(
                        browser,
                        lambda d: own_text(d).get_attribute("value") == "teal and navy",
                    )
                    notes.append(str(note_box(browser).get_attribute("value")))
                browser.switch_to.window(phone)
                browser.close()
                browser.switch_to.window(laptop)
                return notes

            assert await run(on_both) == ["for the hall", "for the hall"]


async def test_a_form_put_back_with_later_then_answered_elsewhere_is_told(
    tmp_path: Path,
    browser: Any,  # noqa: F811
) -> None:
    """Later on the only waiting form: it comes back on the page; answered on the terminal
    then, the page says it was answered elsewhere (the page's own Later is not its answer)."""
    with trio.fail_after(110):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            await shown_on_page(browser, desk, alpha, colour())
            shown = desk.board.current
            assert shown is not None
            await run(lambda: by_role(browser, "button", "Later").click())
            await desk.board.wait_for(
                lambda b: b.current is not None and b.current.seq != shown.seq
            )
            await run(
                lambda: wait_until(browser, lambda d: "Saved for later" in d_text(d, "#status"))
            )
            await run(lambda: wait_until(browser, form_shown))
            await answer_on_the_board(desk.board)
            told = await run(
                lambda: wait_until(browser, lambda d: not form_shown(d) and d_text(d, "#status"))
            )
            assert "answered elsewhere" in told, told


async def test_a_form_cancelled_on_another_page_is_told_as_cancelled(
    tmp_path: Path,
    browser: Any,  # noqa: F811
) -> None:
    """The page says what became of the form it shows: cancelled on another page, the agent
    told "User cancelled the ask flow" (it used to say "answered elsewhere"). The board's
    other endings (put back, withdrawn) come the same way: ``test_form_runner``."""
    with trio.fail_after(110):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            await shown_on_page(browser, desk, alpha, colour())
            assert desk.web is not None
            base = desk.web.base_url

            def cancel_in_another_tab() -> str:
                first = browser.current_window_handle
                browser.switch_to.new_window("tab")
                browser.get(base + "/")
                wait_until(browser, form_shown)
                by_role(browser, "button", "Cancel").click()
                wait_until(browser, lambda d: not form_shown(d))
                browser.close()
                browser.switch_to.window(first)
                return str(
                    wait_until(browser, lambda d: not form_shown(d) and d_text(d, "#status"))
                )

            told = await run(cancel_in_another_tab)
            assert "cancelled elsewhere" in told and "User cancelled the ask flow" in told, told
            assert "answered" not in told, told


async def test_a_page_open_in_another_tab_hears_it_was_signed_out(
    tmp_path: Path,
    browser: Any,  # noqa: F811
) -> None:
    """Sign out in one tab: the page open in the other tab stops following the board (its
    live stream ends with the session) and says it is signed out, naming Sign out as a cause
    (it used to name only a desk restart), keeping what was typed there."""
    with trio.fail_after(110):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            await shown_on_page(browser, desk, alpha, colour())
            assert desk.web is not None
            base = desk.web.base_url

            def sign_out_in_another_tab() -> None:
                note_box(browser).send_keys("teal")
                first = browser.current_window_handle
                browser.switch_to.new_window("tab")
                browser.get(base + "/")
                by_role(browser, "button", "Sign out").click()
                wait_until(browser, lambda d: by_role(d, "heading", "Sign in to the desk"))
                browser.close()
                browser.switch_to.window(first)

            await run(sign_out_in_another_tab)
            await alpha.call_tool(  # a change on the board: the old stream tells it nothing
                "ask_user",
                ask(single("t", "Tone", opt("plain", "Plain")), background=True, title="Tone"),
            )
            said = await run(
                lambda: wait_until(
                    browser, lambda d: "signed out" in (t := d_text(d, "#status")) and t
                )
            )
            assert "Sign out in another tab" in said and "keeps what you typed" in said, said
            assert await run(lambda: note_box(browser).get_attribute("value")) == "teal"


async def test_a_cancel_the_journal_could_not_record_brings_the_form_back_on_the_page(
    tmp_path: Path,
    browser: Any,  # noqa: F811
) -> None:
    """Cancel pressed (twice: the form holds answers) while the agent's journal cannot be
    written: the cancellation did not happen and the desk shows the form again. The page
    says so in words and shows the form again with what was typed, and it can be answered
    (it used to say "Cancelled." over "No questions waiting" while the form waited on the
    board out of the page's sight until a reload). On a phone the sentence is read where
    Cancel was pressed, beside the buttons, not at the top of the page out of sight."""
    with trio.fail_after(110):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            await shown_on_page(browser, desk, alpha, colour())
            (journal,) = await trio.to_thread.run_sync(lambda: list(tmp_path.rglob("*.pias")))

            def typed() -> None:
                set_viewport(browser, 390, 844, mobile=True)
                by_role(question(browser, "Colour"), "radio", "Blue").click()
                note_box(browser).send_keys("navy")

            await run(typed)
            await desk.board.wait_for(
                lambda b: b.current is not None and b.current.state.drafts[0].note == "navy"
            )

            def cancelled_twice() -> str:
                cancel = by_role(browser, "button", "Cancel")
                cancel.click()
                wait_until(browser, lambda d: "Press Cancel again" in d_text(d, "#form-errors"))
                cancel.click()
                return str(
                    wait_until(
                        browser,
                        lambda d: (
                            "not recorded"
                            in (t := (said := by_role(d, "alert", "", exact=False)).text)
                            and in_view(d, said)
                            and form_shown(d)
                            and t
                        ),
                    )
                )

            try:
                with writes_refused_past(journal.stat().st_size):
                    told = await run(cancelled_twice)
            finally:
                await run(
                    lambda: browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
                )
            assert "cancel" in told.lower() and "form is back" in told, told

            def kept() -> tuple[bool, str]:
                return (
                    by_role(question(browser, "Colour"), "radio", "Blue").is_selected(),
                    str(note_box(browser).get_attribute("value")),
                )

            assert await run(kept) == (True, "navy")

            def answered() -> None:
                submit = by_role(browser, "button", "Submit")
                submit.click()  # the review
                wait_until(browser, lambda d: by_role(d, "heading", "Review your answers"))
                submit.click()
                wait_until(browser, lambda d: not form_shown(d))

            await run(answered)
            waited = await alpha.call_tool("wait_for_answers", {})
            (entry,) = waited.structured_content["results"]
            assert entry["result"]["answers"]["q"]["values"] == ["blue"]
            assert entry["result"]["answers"]["q"]["note"] == "navy"


async def test_later_keeps_the_form_while_the_desk_refuses_what_was_typed(
    tmp_path: Path,
    browser: Any,  # noqa: F811
) -> None:
    """Later on a form whose text the desk refused to keep (past its limit): the form would
    leave the page with that text, which the desk never had. So Later waits: the page says
    why in words, keeps the form and the text; once the text is short enough, Later puts the
    form back with it (it used to put the form back at once, and the text was gone)."""
    with trio.fail_after(110):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            await shown_on_page(browser, desk, alpha, colour())

            def refused_then_later() -> tuple[str, bool, int]:
                own = by_role(question(browser, "Colour"), "textbox", "Type your own")
                own.click()
                browser.execute_cdp_cmd("Input.insertText", {"text": "y" * (MAX_TEXT + 5)})
                wait_until(browser, lambda d: "characters long" in d_text(d, "#form-errors"))
                by_role(browser, "button", "Later").click()
                said = wait_until(
                    browser, lambda d: "Not put back" in (t := d_text(d, "#form-errors")) and t
                )
                box = by_role(question(browser, "Colour"), "textbox", "Type your own")
                return str(said), form_shown(browser), len(box.get_attribute("value"))

            said, shown, length = await run(refused_then_later)
            assert shown and length == MAX_TEXT + 5, (shown, length)
            assert "would be lost" in said, said
            assert desk.board.current is not None  # still waiting on the desk

            def shortened() -> None:
                own = by_role(question(browser, "Colour"), "textbox", "Type your own")
                browser.execute_script("arguments[0].select()", own)
                own.send_keys("short")

            await run(shortened)
            with trio.fail_after(20):
                await desk.board.wait_for(
                    lambda b: (
                        b.current is not None and b.current.state.drafts[0].custom_text == "short"
                    )
                )

            def later() -> None:
                by_role(browser, "button", "Later").click()
                wait_until(browser, lambda d: "Saved for later" in d_text(d, "#status"))

            await run(later)


async def test_text_still_on_its_way_when_the_form_is_answered_elsewhere_is_named(
    tmp_path: Path,
    browser: Any,  # noqa: F811
) -> None:
    """A note typed on a page on a slow link, and the form answered on the terminal before
    the page's draft reached the desk: the page says the form was answered elsewhere and
    what it held that was not sent, in words (it used to drop the note without a word). Only
    what was typed or chosen on the page: the terminal's choice, which the page showed, is
    not the page's to have sent (it was listed as if typed there)."""
    with trio.fail_after(110):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            await shown_on_page(browser, desk, alpha, colour())
            shown = desk.board.current
            assert shown is not None
            await shown.commands.send(UserCommand(fs.Number(1)))  # Red, on the terminal

            def typed_on_a_slow_link() -> None:
                # Shown on the page (its form loaded again with the terminal's draft).
                wait_until(
                    browser, lambda d: by_role(question(d, "Colour"), "radio", "Red").is_selected()
                )
                slow_network(browser, 1500)
                note_box(browser).send_keys("navy, please")

            try:
                await run(typed_on_a_slow_link)
                await shown.commands.send(UserCommand(fs.Confirm()))
                said = await run(
                    lambda: wait_until(
                        browser,
                        lambda d: (
                            not form_shown(d) and "not sent" in (t := d_text(d, "#status")) and t
                        ),
                        20,
                    )
                )
            finally:
                await run(lambda: slow_network(browser, 0))
            assert said == (
                "“Set-up” was answered elsewhere (on the terminal or another page). What you "
                "typed here was not sent: Colour: note “navy, please”"
            ), said
            waited = await alpha.call_tool("wait_for_answers", {})
            (entry,) = waited.structured_content["results"]
            assert entry["result"]["answers"]["q"]["values"] == ["red"]


async def test_a_journal_that_cannot_be_written_is_told_on_the_page_and_nothing_is_lost(
    tmp_path: Path,
    browser: Any,  # noqa: F811
) -> None:
    """A draft typed on the page while the agent's journal cannot be written (a full disk):
    the page took it and said nothing, the desk's notice going to a terminal a headless desk
    does not have. Now the page shows the desk's notice in words, with its time; the text
    stays on the page and with the desk, the form stays usable, and once writes work again
    the page's sentence that the draft is not saved yet goes by itself (it stayed until the
    next change) and the answer reaches the agent."""
    with trio.fail_after(110):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            await shown_on_page(browser, desk, alpha, colour())
            (journal,) = await trio.to_thread.run_sync(lambda: list(tmp_path.rglob("*.pias")))
            with writes_refused_past(journal.stat().st_size):
                await run(lambda: note_box(browser).send_keys("navy"))
                said = await run(
                    lambda: wait_until(
                        browser,
                        lambda d: (
                            "session file failed" in (t := d_text(d, "#desk-notice"))
                            and in_view(d, d.find_element("css selector", "#desk-notice"))
                            and t
                        ),
                    )
                )
                await run(
                    lambda: wait_until(
                        browser, lambda d: "not saved yet" in d_text(d, "#form-errors")
                    )
                )
            # Writes work again: the page hears the draft is written, with no change made.
            await run(
                lambda: wait_until(
                    browser,
                    lambda d: (
                        d_text(d, "#form-errors") == ""
                        and d_text(d, "#status") == "Your draft is saved."
                    ),
                )
            )
            assert "alpha" in said and "nothing the person entered is lost" in said, said
            assert await run(lambda: note_box(browser).get_attribute("value")) == "navy"

            def hidden_by_keyboard() -> tuple[bool, str]:
                from selenium.webdriver.common.keys import Keys

                by_role(browser, "button", "Hide notice").send_keys(Keys.ENTER)
                return (
                    browser.find_element("css selector", "#desk-notice").is_displayed(),
                    str(browser.switch_to.active_element.text),
                )

            # By keyboard: the focus goes on to the form's heading, not back to the top.
            assert await run(hidden_by_keyboard) == (False, "Set-up")

            # Hidden, it stays hidden across a reload of the tab, once the page has read the
            # live stream (the board changes: another agent asks; the page lists it).
            await run(browser.refresh)
            async with desk_client(desk.address, "beta") as beta:
                await beta.call_tool("ask_user", colour())

                def read() -> bool:
                    wait_until(browser, lambda d: "beta" in d_text(d, "#queue"))
                    return bool(browser.find_element("css selector", "#desk-notice").is_displayed())

                assert not await run(read), "the hidden notice came back on a reload"

            def answered() -> None:
                by_role(question(browser, "Colour"), "radio", "Blue").click()
                submit = by_role(browser, "button", "Submit")
                submit.click()  # the review
                wait_until(browser, lambda d: by_role(d, "heading", "Review your answers"))
                submit.click()
                # Alpha's form leaves (beta's may take its place).
                wait_until(
                    browser, lambda d: not form_shown(d) or d_text(d, ".agent-key") == "beta"
                )

            await run(answered)
            waited = await alpha.call_tool("wait_for_answers", {})
            (entry,) = waited.structured_content["results"]
            assert entry["result"]["answers"]["q"]["note"] == "navy"


async def test_later_the_journal_could_not_record_says_so_and_keeps_the_form(
    tmp_path: Path,
    browser: Any,  # noqa: F811
) -> None:
    """Later pressed while the agent's journal cannot be written (a full disk): nothing is put
    back, and the page says so and why, beside the buttons, keeping the form with its answers
    (it used to say "Saved for later" beside the desk's notice of the failed write, the form
    still there). A note typed meanwhile, which the desk took but could not write, is no
    reason to hold Later back (it used to say "change it so the desk keeps it"). Once writes
    work again, Later puts the form back, the note with it."""
    with trio.fail_after(110):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            await shown_on_page(browser, desk, alpha, colour())
            (journal,) = await trio.to_thread.run_sync(lambda: list(tmp_path.rglob("*.pias")))
            await run(lambda: by_role(question(browser, "Colour"), "radio", "Blue").click())
            await desk.board.wait_for(
                lambda b: b.current is not None and b.current.state.drafts[0].selected == (1,)
            )

            def later_refused() -> tuple[str, str]:
                note_box(browser).send_keys("navy")
                wait_until(browser, lambda d: "could not be written" in d_text(d, "#form-errors"))
                by_role(browser, "button", "Later").click()
                said = wait_until(
                    browser,
                    lambda d: (
                        "Not saved for later" in (t := by_role(d, "alert", "", exact=False).text)
                        and in_view(d, d.find_element("css selector", "#form-errors"))
                        and t
                    ),
                )
                return str(said), d_text(browser, "#status")

            with writes_refused_past(journal.stat().st_size):
                said, status = await run(later_refused)
            assert "File too large" in said and "stays here with your answers" in said, said
            assert "Change it" not in said, said
            assert "Saved for later" not in status, status
            assert desk.board.current is not None  # still waiting, on the page too

            def kept() -> tuple[bool, bool, str]:
                return (
                    form_shown(browser),
                    by_role(question(browser, "Colour"), "radio", "Blue").is_selected(),
                    str(note_box(browser).get_attribute("value")),
                )

            assert await run(kept) == (True, True, "navy")

            def later_again() -> None:
                by_role(browser, "button", "Later").click()
                wait_until(browser, lambda d: "Saved for later" in d_text(d, "#status"))

            shown = desk.board.current
            assert shown is not None
            await run(later_again)
            # Put back: the only waiting form comes back in its turn, with what was typed.
            await desk.board.wait_for(
                lambda b: b.current is not None and b.current.seq != shown.seq
            )
            assert desk.board.current is not None
            assert desk.board.current.state.drafts[0].note == "navy"


async def test_later_by_keyboard_keeps_the_focus_on_the_page(
    tmp_path: Path,
    browser: Any,  # noqa: F811
) -> None:
    """Later pressed with the keyboard (Enter) on the only waiting form: the form is put back
    and comes back at once (the board drops it, then shows it again, while the page loads
    it); the focus goes to the form's heading, where a keyboard or screen reader user goes
    on (it used to be left on the page itself: Tab started again from the header)."""
    from selenium.webdriver.common.keys import Keys

    with trio.fail_after(110):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            await shown_on_page(browser, desk, alpha, colour())

            def later_by_keyboard() -> tuple[str, str]:
                by_role(browser, "button", "Later").send_keys(Keys.ENTER)
                wait_until(browser, lambda d: "Saved for later" in d_text(d, "#status"))
                wait_until(browser, form_shown)
                # Until the form is loaded again (its Later button, still focused, may be the
                # one pressed: the desk's answer can come before the page's reload).
                focused = wait_until(
                    browser,
                    lambda d: (
                        (a := d.switch_to.active_element).tag_name not in ("body", "button")
                        and d.find_element("css selector", "#slot").find_elements(
                            "css selector", "h1"
                        )
                        and a
                    ),
                )
                return str(focused.tag_name), str(focused.text)

            assert await run(later_by_keyboard) == ("h1", "Set-up")
