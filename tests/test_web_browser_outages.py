"""The web desk in a real browser while the desk is out of reach: down, behind a proxy
answering for it, or on a link that holds requests without an answer. Sign out and Submit
say so in words, nothing typed is lost, and the page goes on once the desk is back.
Chromium driven by Selenium, agents on the official MCP SDK client, a real desk (see
``tests/test_web_browser.py``, whose helpers these tests use)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS, desk_client, open_desk
from pi_agent_ask.desk.web.security import COOKIE
from pi_agent_ask.desk.web.testing import browser_missing, by_role, set_viewport
from tests.test_web_browser import (  # noqa: F401
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
)
from tests.test_web_browser_recovery import (
    free_port,
    leaving_asks,
    note_box,
    record_status,
    slow_network,
)

MISSING = browser_missing()
pytestmark = [
    *(pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS),
    pytest.mark.skipif(MISSING is not None, reason=MISSING or ""),
    pytest.mark.e2e,
]


@pytest.mark.parametrize(
    ("where", "width"), [("desk", 1280), ("history", 390)], ids=["desk-desktop", "history-phone"]
)
async def test_sign_out_while_the_desk_is_down_says_so_keeps_the_page_and_signs_out_later(
    tmp_path: Path,
    browser: Any,  # noqa: F811
    screenshots: Path,  # noqa: F811
    where: str,
    width: int,
) -> None:
    """Sign out pressed while the desk is down: the page stays (it used to leave for the
    browser's own error page, and what was typed with it), says in words that the desk
    cannot be reached and that it signs out once the desk is back, keeps everything typed;
    once the desk is back the browser is signed out and shows the sign-in page."""
    listen = f"127.0.0.1:{free_port()}"
    with trio.fail_after(110):
        async with (
            open_desk(tmp_path, listen=listen) as desk,
            desk_client(desk.address, "alpha") as alpha,
        ):
            await shown_on_page(browser, desk, alpha, colour())
            assert desk.web is not None
            page = desk.web.base_url + ("/" if where == "desk" else "/history?agent=alpha")

            def typed() -> None:
                set_viewport(browser, width, 844, mobile=width < 900)
                if where == "history":
                    browser.get(page)
                    by_role(browser, "searchbox", "Search").send_keys("colour")
                else:
                    note_box(browser).send_keys("teal")

            await run(typed)
            if where == "desk":
                await desk.board.wait_for(
                    lambda b: b.current is not None and b.current.state.drafts[0].note == "teal"
                )

        def pressed() -> tuple[str, str]:
            by_role(browser, "button", "Sign out").click()
            said = wait_until(
                browser,
                lambda d: "cannot be reached" in (t := d_text(d, "#sign-out-status")) and t,
            )
            browser.save_screenshot(str(screenshots / f"web-sign-out-unreachable-{where}.png"))
            box = (
                by_role(browser, "searchbox", "Search") if where == "history" else note_box(browser)
            )
            return str(said), str(box.get_attribute("value"))

        try:
            said, kept = await run(pressed)
            assert "not signed out yet" in said and "as soon as the desk is back" in said, said
            assert kept == ("colour" if where == "history" else "teal")
            assert await run(lambda: browser.current_url) == page
            async with open_desk(tmp_path, listen=listen):
                told = await run(
                    lambda: wait_until(
                        browser,
                        lambda d: (
                            by_role(d, "heading", "Sign in to the desk")
                            and "You signed out" in (t := d_text(d, "main"))
                            and t
                        ),
                        30,
                    )
                )
            assert "You signed out" in told
            assert await run(lambda: browser.get_cookie(COOKIE)) is None
        finally:
            await run(lambda: browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {}))


async def test_sign_out_on_a_link_that_holds_it_says_so_and_signs_out_once_it_can(
    tmp_path: Path,
    browser: Any,  # noqa: F811
) -> None:
    """Sign out on a link that holds requests without an answer (a phone in a tunnel): the
    page says at once that it is signing out, then, rather than nothing for as long as the
    network holds the request, that the desk cannot be reached; with the link back it signs
    out by itself."""
    with trio.fail_after(110):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            await shown_on_page(browser, desk, alpha, colour())

            def pressed() -> tuple[str, str]:
                slow_network(browser, 30_000)
                by_role(browser, "button", "Sign out").click()
                first = wait_until(browser, lambda d: (t := d_text(d, "#sign-out-status")) and t, 3)
                later = wait_until(
                    browser,
                    lambda d: "cannot be reached" in (t := d_text(d, "#sign-out-status")) and t,
                    20,
                )
                return str(first), str(later)

            try:
                first, later = await run(pressed)
            finally:
                await run(lambda: slow_network(browser, 0))
            assert first == "Signing out…", first
            assert "not signed out yet" in later, later
            await run(
                lambda: wait_until(
                    browser, lambda d: by_role(d, "heading", "Sign in to the desk"), 30
                )
            )
            assert await run(lambda: browser.get_cookie(COOKIE)) is None


async def test_a_submit_the_network_holds_is_told_while_it_waits(
    tmp_path: Path,
    browser: Any,  # noqa: F811
) -> None:
    """Submit on a link that holds the request for long: the page says, beside the buttons,
    that the desk has not answered yet and that it waits (it used to show nothing, and take
    no second click, for as long as the network held it); once the answer comes (the link
    given back, as a phone leaving a tunnel), it is sent."""
    with trio.fail_after(110):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            await shown_on_page(browser, desk, alpha, colour())

            def sent_slowly() -> str:
                by_role(question(browser, "Colour"), "radio", "Blue").click()
                submit = by_role(browser, "button", "Submit")
                submit.click()  # the review
                wait_until(browser, lambda d: by_role(d, "heading", "Review your answers"))
                # Longer than the page waits before it says so (5 s). The link comes back as
                # soon as the page has said it: held on, it held every request after the
                # answer 8 s too (10 of the test's 20 s).
                slow_network(browser, 8_000)
                submit.click()
                said = str(
                    wait_until(
                        browser,
                        lambda d: (
                            "not answered yet" in (t := by_role(d, "alert", "", exact=False).text)
                            and t
                        ),
                        9,
                    )
                )
                slow_network(browser, 0)
                return said

            try:
                said = await run(sent_slowly)
                assert "everything you entered stays" in said, said
                await run(lambda: wait_until(browser, lambda d: not form_shown(d), 40))
            finally:
                await run(lambda: slow_network(browser, 0))
            waited = await alpha.call_tool("wait_for_answers", {})
            (entry,) = waited.structured_content["results"]
            assert entry["result"]["answers"]["q"]["values"] == ["blue"]


@attrs.define
class BadGateway:
    """What a proxy in front of the desk (TLS, a tunnel's end) answers while the desk behind
    it is down: ``502 Bad Gateway``, a page of its own. ``streams``: the live streams asked
    for so far."""

    streams: int = 0
    asked: trio.Event = attrs.field(factory=trio.Event)

    async def __call__(self, stream: trio.SocketStream) -> None:
        async with stream:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return
                request += chunk
            if request.startswith(b"GET /events "):
                self.streams += 1
                self.asked.set()
                self.asked = trio.Event()
            await bad_gateway(stream)


async def bad_gateway(stream: trio.SocketStream) -> None:
    """The proxy's answer: 502, and the connection closed."""
    page = b"<html><body>502 Bad Gateway</body></html>"
    await stream.send_all(
        b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\nConnection: close\r\n"
        b"Content-Length: " + str(len(page)).encode() + b"\r\n\r\n" + page
    )


async def test_a_proxy_answering_for_a_desk_that_is_down_reads_as_out_of_reach(
    tmp_path: Path,
    browser: Any,  # noqa: F811
) -> None:
    """Behind a proxy (TLS, a tunnel), a desk that is down answers 502 through it: the page
    reads that as the desk out of reach, as it reads a refused connection: a draft typed then
    is kept and said not sent, Sign out stays on the page and signs out once the desk is
    back (a 502 used to read "The draft was not saved." with the text left to be replaced,
    and Sign out as a refusal to try again by hand)."""
    port = free_port()
    listen = f"127.0.0.1:{port}"
    with trio.fail_after(110):
        async with (
            open_desk(tmp_path, listen=listen) as desk,
            desk_client(desk.address, "alpha") as alpha,
        ):
            await shown_on_page(browser, desk, alpha, colour())
        gateway = BadGateway()
        async with trio.open_nursery() as proxy:
            await proxy.start(functools.partial(trio.serve_tcp, gateway, port, host="127.0.0.1"))

            def typed_then_signed_out() -> tuple[str, str]:
                note_box(browser).send_keys("navy")
                draft = wait_until(
                    browser,
                    lambda d: "could not be reached" in (t := d_text(d, "#form-errors")) and t,
                )
                by_role(browser, "button", "Sign out").click()
                said = wait_until(
                    browser,
                    lambda d: "cannot be reached" in (t := d_text(d, "#sign-out-status")) and t,
                )
                return str(draft), str(said)

            draft, said = await run(typed_then_signed_out)
            # The live stream's 502 is the desk away, not the page signed out: the page says
            # so and asks for the stream again, as after a dropped connection.
            while gateway.streams < 2:
                await gateway.asked.wait()
            # The stream's sentence, once the draft's own one (which may come after it, as
            # the draft's post fails) gives way to the stream's next try, 2 s on.
            status = await run(
                lambda: wait_until(
                    browser,
                    lambda d: "connection to the desk is lost" in (t := d_text(d, "#status")) and t,
                )
            )
            assert "signed out" not in status, status
            assert "nothing was sent" in draft, draft
            assert "not signed out yet" in said, said
            assert await run(lambda: note_box(browser).get_attribute("value")) == "navy"
            assert await run(lambda: leaving_asks(browser)), "leaving the page would not ask"
            proxy.cancel_scope.cancel()
        async with open_desk(tmp_path, listen=listen):
            await run(
                lambda: wait_until(
                    browser, lambda d: by_role(d, "heading", "Sign in to the desk"), 30
                )
            )


def offline(driver: Any, down: bool) -> None:
    """The browser's network is down (``True``: every request fails at once) or back."""
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd(
        "Network.emulateNetworkConditions",
        {"offline": down, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
    )


@pytest.mark.parametrize(
    ("where", "width"), [("desk", 1280), ("history", 390)], ids=["desk-desktop", "history-phone"]
)
async def test_a_link_while_the_desk_is_out_of_reach_keeps_the_page_and_works_once_it_is_back(
    tmp_path: Path,
    browser: Any,  # noqa: F811
    screenshots: Path,  # noqa: F811
    where: str,
    width: int,
) -> None:
    """A link to another of the desk's pages (History in the header, the history's Search)
    pressed while the desk is down, or the network is: the page stays where it was (it used to
    leave for the browser's own error page, and what was typed with it), says so in words in
    the banner under the header, keeps everything typed; once the desk answers again the
    banner says so, and the link works. On the desk's page the desk itself stops and starts
    again; on the history, on a phone, the network drops and comes back."""
    listen = f"127.0.0.1:{free_port()}"

    def typed_box() -> Any:
        if where == "history":
            return by_role(browser, "searchbox", "Search")
        return note_box(browser)

    def press() -> None:
        if where == "history":
            by_role(browser, "button", "Search").click()
        else:
            by_role(browser, "link", "History").click()

    def pressed() -> tuple[str, str]:
        press()
        said = wait_until(
            browser, lambda d: "cannot be reached" in (t := d_text(d, "#sign-out-status")) and t
        )
        browser.save_screenshot(str(screenshots / f"web-link-unreachable-{where}.png"))
        return str(said), str(typed_box().get_attribute("value"))

    def works_again(target: str) -> None:
        wait_until(browser, lambda d: "can be reached again" in d_text(d, "#sign-out-status"), 30)
        press()
        wait_until(browser, lambda d: d.current_url == target)

    with trio.fail_after(110):
        async with (
            open_desk(tmp_path, listen=listen) as desk,
            desk_client(desk.address, "alpha") as alpha,
        ):
            await shown_on_page(browser, desk, alpha, colour())
            assert desk.web is not None
            base = desk.web.base_url
            page = base + ("/" if where == "desk" else "/history?agent=alpha")

            def typed() -> None:
                set_viewport(browser, width, 844, mobile=width < 900)
                if where == "history":
                    browser.get(page)
                    by_role(browser, "searchbox", "Search").send_keys("colour")
                else:
                    note_box(browser).send_keys("teal")

            await run(typed)
            if where == "desk":
                await desk.board.wait_for(
                    lambda b: b.current is not None and b.current.state.drafts[0].note == "teal"
                )
            else:
                await run(lambda: offline(browser, True))
                try:
                    said, kept = await run(pressed)
                finally:
                    await run(lambda: offline(browser, False))
        try:
            if where == "desk":
                said, kept = await run(pressed)
            assert "did not go through" in said and "everything you typed" in said, said
            assert kept == ("colour" if where == "history" else "teal")
            assert await run(lambda: browser.current_url) == page
            async with open_desk(tmp_path, listen=listen):
                # The desk is back (a restarted desk signed everyone out: its History is the
                # sign-in page, under /history).
                target = base + ("/history" if where == "desk" else "/history?agent=alpha&q=colour")
                await run(lambda: works_again(target))
        finally:
            await run(lambda: browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {}))


async def test_the_markdown_export_while_the_desk_is_out_of_reach_says_so_on_the_page(
    tmp_path: Path,
    browser: Any,  # noqa: F811
) -> None:
    """ "Export as Markdown" pressed while the network is down: the page says in its banner
    that the desk cannot be reached, as a link does (the download used to fail in the
    browser's download bar, with no word on the page); once the desk answers, the same
    button saves the file, and the page stays."""
    downloads = tmp_path / "downloads"
    downloads.mkdir()

    def pressed_offline() -> str:
        browser.execute_cdp_cmd(
            "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
        )
        browser.get(page)
        offline(browser, True)
        try:
            by_role(browser, "link", "Export as Markdown").click()
            return str(
                wait_until(
                    browser,
                    lambda d: "cannot be reached" in (t := d_text(d, "#sign-out-status")) and t,
                )
            )
        finally:
            offline(browser, False)

    def pressed_again() -> list[Path]:
        wait_until(browser, lambda d: "can be reached again" in d_text(d, "#sign-out-status"), 30)
        by_role(browser, "link", "Export as Markdown").click()
        wait_until(browser, lambda d: any(downloads.glob("*.md")))
        assert browser.current_url == page
        return list(downloads.glob("*.md"))

    with trio.fail_after(90):
        async with (
            open_desk(tmp_path / "desk") as desk,
            desk_client(desk.address, "alpha") as alpha,
        ):
            await shown_on_page(browser, desk, alpha, colour())
            assert desk.web is not None
            page = desk.web.base_url + "/history?agent=alpha"
            said = await run(pressed_offline)
            assert "“Export as Markdown” did not go through" in said, said
            assert await run(lambda: browser.current_url) == page
            (saved,) = await run(pressed_again)
            assert saved.name == "ask-history-alpha.md"
            assert "Colour" in saved.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("button", "sending", "done"),
    [("Cancel", "Cancelling…", "Cancelled."), ("Later", "Saving for later…", "Saved for later")],
)
async def test_a_button_pressed_twice_on_a_slow_link_is_one_press(
    tmp_path: Path,
    browser: Any,  # noqa: F811
    button: str,
    sending: str,
    done: str,
) -> None:
    """Cancel (or Later) pressed twice on a slow link, as an impatient tap does: the first
    press says at once, beside the buttons, that it is on its way (Later said nothing until
    the desk answered); the second press waits for the first, saying so, and the page says
    what the first did (a second Cancel used to reach the desk after the first, and the page
    then said the form was cancelled elsewhere)."""
    with trio.fail_after(110):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            await shown_on_page(browser, desk, alpha, colour())
            shown = desk.board.current
            assert shown is not None

            def pressed_twice() -> int:
                record_status(browser)
                # Every request the page makes for a button, counted as it is made (the
                # page makes it at once, in the click's own handler).
                browser.execute_script(
                    "window.asked = 0; const send = window.fetch; const path = '/api/' + arguments[0];"
                    "window.fetch = function (url) {"
                    "  if (String(url) === path) window.asked += 1;"
                    "  return send.apply(this, arguments); };",
                    button.lower(),
                )
                slow_network(browser, 1500)
                press = by_role(browser, "button", button)
                press.click()
                assert d_text(browser, "#form-errors") == sending
                press.click()
                # The second press says it waits for the first, where it was pressed.
                assert "not answered your last press" in d_text(browser, "#form-errors")
                return int(browser.execute_script("return window.asked"))

            try:
                asked = await run(pressed_twice)
                await desk.board.wait_for(lambda b: b.current is None or b.current.seq != shown.seq)

                def told(d: Any) -> list[str] | None:
                    said = list(d.execute_script("return window.said"))
                    return said if any(done in s for s in said) else None

                said = await run(lambda: wait_until(browser, told, 20))
            finally:
                await run(lambda: slow_network(browser, 0))
            assert asked == 1, f"{button} pressed twice sent {asked} requests"
            assert not [s for s in said if "elsewhere" in s], said


@pytest.mark.parametrize("cut", ["desk-stopped", "network-down"])
async def test_on_a_long_form_a_desk_out_of_reach_is_said_where_the_person_types(
    tmp_path: Path,
    browser: Any,  # noqa: F811
    screenshots: Path,  # noqa: F811
    cut: str,
) -> None:
    """On a phone, far down a long form, the desk stops while the person types: the line
    saying the desk is out of reach (so what is typed is not saved yet) stays in view at the
    top of the screen, beside the box being typed in (it was only at the top of the page, a
    long scroll away, and the person typed on with no word); once the desk is back it
    goes. The same when the network drops and leaves the live stream open and silent: the
    draft that did not go through says so there (it said so only beside the buttons)."""
    listen = f"127.0.0.1:{free_port()}"
    many = ask(
        *(
            single(f"q{n}", f"Topic {n}", *(opt(f"o{k}", f"Choice {k}") for k in range(6)))
            for n in range(1, 9)
        ),
        background=True,
        title="Many questions",
    )

    def box() -> Any:
        return by_role(question(browser, "Topic 7"), "textbox", "Note")

    def typed_far_down() -> None:
        set_viewport(browser, 390, 844, mobile=True)
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", box())
        box().send_keys("teal")

    def told_in_view(what: str, name: str) -> str:
        box().send_keys(", please")
        status = browser.find_element("css selector", "#status")
        said = wait_until(
            browser,
            lambda d: what in (t := status.text) and in_view(d, status) and in_view(d, box()) and t,
        )
        browser.save_screenshot(str(screenshots / f"{name}-phone.png"))
        return str(said)

    try:
        with trio.fail_after(110):
            async with (
                open_desk(tmp_path, listen=listen) as desk,
                desk_client(desk.address, "alpha") as alpha,
            ):
                await shown_on_page(browser, desk, alpha, many)
                await run(typed_far_down)
                await desk.board.wait_for(
                    lambda b: b.current is not None and b.current.state.drafts[6].note == "teal"
                )
                if cut == "network-down":
                    await run(lambda: offline(browser, True))
                    try:
                        said = await run(
                            lambda: told_in_view("not saved yet", "web-unreachable-long-form")
                        )
                    finally:
                        await run(lambda: offline(browser, False))
                    assert "saved once the desk answers" in said, said
                    await run(lambda: box().send_keys("!"))
                    await desk.board.wait_for(
                        lambda b: (
                            b.current is not None
                            and b.current.state.drafts[6].note == "teal, please!"
                        )
                    )
                    # Saved: the line says so, and no longer sticks to the top.
                    await run(
                        lambda: wait_until(
                            browser, lambda d: d_text(d, "#status") == "Your draft is saved."
                        )
                    )
                    return

            said = await run(
                lambda: told_in_view("connection to the desk is lost", "web-lost-long-form")
            )
            assert "not be up to date" in said, said
            async with open_desk(tmp_path, listen=listen):
                # The desk is back (signed everyone out: it says so, in view too).
                said = await run(
                    lambda: wait_until(
                        browser,
                        lambda d: (
                            "signed out" in (t := d_text(d, "#status"))
                            and in_view(d, d.find_element("css selector", "#status"))
                            and t
                        ),
                        30,
                    )
                )
            assert await run(lambda: box().get_attribute("value")) == "teal, please"
    finally:
        await run(lambda: browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {}))
