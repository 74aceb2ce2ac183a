"""The web desk in a real browser when things go wrong around a person's answer: a slow
network while the board keeps changing, a session that ended while text was typed, text past
the desk's limit. Chromium driven by Selenium, agents on the official MCP SDK client, a real
desk (see ``tests/test_web_browser.py``, whose helpers these tests use)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS, desk_client, open_desk
from pi_agent_ask.web.testing import browser_missing, by_role
from tests.test_web_browser import (  # noqa: F401
    ask,
    browser,
    colour,
    form_shown,
    opt,
    question,
    run,
    shown_on_page,
    single,
    wait_until,
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
