"""A draft or answer the desk's store refuses after the page's own checks passed, in a real
browser (Chromium, Selenium) on a team desk over a real PostgreSQL.

The page's checks take any valid Unicode text, NUL included (the agent's journal keeps it);
PostgreSQL cannot hold NUL in text or JSON, so the store refuses a draft or an answer that
holds one (say, pasted from a binary file). The person reads why under the form, keeps what
they typed, and the form stays usable: once the text is changed, the draft is saved and the
answer reaches the agent. (It used to take the whole desk down.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS
from pi_agent_ask.desk.web.testing import (
    browser_missing,
    by_role,
    emulate_scheme,
    set_viewport,
)
from pi_agent_ask.store.db import FormRow, Store
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
    question,
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

PASTED = "build log:\x00\x00 end"


def paste(driver: Any, box: Any, text: str) -> None:
    """What a paste does to a text box: its whole value at once, then an ``input`` event
    (a key press cannot type NUL)."""
    driver.execute_script(
        "arguments[0].focus(); arguments[0].value = arguments[1];"
        "arguments[0].dispatchEvent(new Event('input', {bubbles: true}));",
        box,
        text,
    )


def stored_note(rows: list[FormRow], request_id: str) -> str | None:
    row = next((r for r in rows if r.request_id == request_id), None)
    drafts = ((row.draft if row is not None else None) or {}).get("drafts") or [{}]
    note = drafts[0].get("note")
    return note if isinstance(note, str) else None


async def test_a_draft_and_an_answer_the_store_refuses_are_told_kept_and_can_be_fixed(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
    browser: Any,  # noqa: F811
    screenshots: Path,  # noqa: F811
) -> None:
    token = Store.new_token(pg_cluster.url(store_db), "alpha")
    with trio.fail_after(180):
        async with team_desk(desk_url, "ann") as ann, agent([ann.url], token) as alpha:
            url = ann.web.login_url()
            await run(lambda: sign_in(browser, url))
            await alpha.call_tool("ask_user", ask("Ship it", background=True))
            rows = await ann.board.wait_for(lambda rows: len(rows) == 1)
            request_id = rows[0].request_id
            await run(lambda: browser.get(url.split("/login")[0] + "/"))
            await run(lambda: wait_until(browser, form_shown))

            def pasted() -> tuple[str, str, bool]:
                box = by_role(question(browser, "Ship it"), "textbox", "Note")
                paste(browser, box, PASTED)
                told = wait_until(
                    browser,
                    lambda d: (
                        "cannot keep" in d_text(d, "#form-errors") and d_text(d, "#form-errors")
                    ),
                )
                leaving_asks = browser.execute_script(
                    "const e = new Event('beforeunload', {cancelable: true});"
                    "window.dispatchEvent(e); return e.defaultPrevented;"
                )
                return str(told), str(box.get_attribute("value")), bool(leaving_asks)

            told, kept, leaving_asks = await run(pasted)
            assert "NUL" in told and "stays on this page" in told, told
            assert kept == PASTED  # what the person pasted is still in the box
            assert leaving_asks  # and leaving the page would ask first
            assert stored_note(ann.board.snapshot(), request_id) is None

            def pictures() -> None:
                """The refusal as the person sees it: light and dark, desktop and phone."""
                for scheme in ("light", "dark"):
                    for name, width, height, mobile in (
                        ("desktop", 1280, 900, False),
                        ("phone", 390, 844, True),
                    ):
                        emulate_scheme(browser, scheme)
                        set_viewport(browser, width, height, mobile=mobile)
                        errors = browser.find_element("css selector", "#form-errors")
                        browser.execute_script("arguments[0].scrollIntoView()", errors)
                        path = screenshots / f"web-refused-{scheme}-{name}.png"
                        assert browser.save_screenshot(str(path))
                emulate_scheme(browser, "")
                browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

            await run(pictures)

            def submitted_anyway() -> str:
                submit = by_role(browser, "button", "Submit")
                submit.click()  # the review
                wait_until(browser, lambda d: by_role(d, "heading", "Review your answers"))
                submit.click()
                return str(
                    wait_until(
                        browser,
                        lambda d: (
                            "cannot keep" in d_text(d, "#form-errors") and d_text(d, "#form-errors")
                        ),
                    )
                )

            assert "NUL" in await run(submitted_anyway)
            assert await run(lambda: form_shown(browser))

            def fixed() -> None:
                box = by_role(question(browser, "Ship it"), "textbox", "Note")
                assert box.get_attribute("value") == PASTED
                paste(browser, box, "build log: end")
                wait_until(browser, lambda d: "Your draft is saved" in d_text(d, "#status"))
                assert d_text(browser, "#form-errors") == ""

            await run(fixed)
            await ann.board.wait_for(lambda rows: stored_note(rows, request_id) == "build log: end")

            def answered() -> None:
                by_role(question(browser, "Ship it"), "radio", "Yes").click()
                submit = by_role(browser, "button", "Submit")
                submit.click()
                wait_until(browser, lambda d: by_role(d, "heading", "Review your answers"))
                submit.click()
                wait_until(browser, lambda d: not form_shown(d))

            await run(answered)
            waited = await alpha.call_tool("wait_for_answers", {})
            (entry,) = waited.structured_content["results"]
            assert entry["result"]["answers"]["q"]["values"] == ["yes"]
            assert entry["result"]["answers"]["q"]["note"] == "build log: end"
