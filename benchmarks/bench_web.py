"""The web desk in a real browser (headless Chromium through Selenium), 20 agents on loopback.

Prints p50/p99 of:

- sign-in to first form drawn: from opening a one-time sign-in URL (a fresh browser session
  each time) to the page showing a form, with 20 agents' forms waiting;
- Submit to result: from the click on Submit (on the review step; the page's clock,
  the click dispatched in the page) to the agent's ``ask_user`` call returning its result over
  MCP (the same wall clock); 20 agents each keep one foreground question
  waiting (each asks again once answered), so the board always holds 20 forms;
- terminal to page: from an answer given through the board's command path (the terminal's)
  to the page no longer showing that form.

Targets (issue 27): first form within 300 ms, the result within 100 ms p99. The times include
Selenium's own round trips to the browser (a few milliseconds each). Assert nothing: machines
here are shared and noisy.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import trio

from pi_agent_ask.actors.form import UserCommand
from pi_agent_ask.desk.testing import desk_client, open_desk
from pi_agent_ask.desk.web.testing import browser_missing, start_browser
from pi_agent_ask.form import state as fs

AGENTS = 20
SIGN_INS = 20
ANSWERS = 60
TERMINAL = 20
T = TypeVar("T")
CLICK_SUBMIT = (
    "const at = performance.timeOrigin + performance.now();"
    " document.getElementById('submit').click(); return at;"
)
"""Click Submit from inside the page; returns the click's time in ms since the epoch."""


def form(label: str) -> dict[str, Any]:
    return {
        "questions": [
            {
                "id": "q",
                "label": label,
                "prompt": f"{label}?",
                "options": [{"value": "a", "label": "A"}, {"value": "b", "label": "B"}],
            }
        ],
    }


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p50 = statistics.median(ordered) * 1000
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))] * 1000
    return f"p50 {p50:7.1f} ms   p99 {p99:7.1f} ms   ({len(ordered)} samples)"


def poll(predicate: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Ask the browser until ``predicate`` holds (each check is one WebDriver round trip)."""
    from selenium.common.exceptions import StaleElementReferenceException

    end = time.perf_counter() + timeout
    while time.perf_counter() < end:
        try:
            value = predicate()
        except StaleElementReferenceException:
            continue  # the page swapped that part out: ask again
        if value:
            return value
    raise TimeoutError("the page did not get there")


def form_id(driver: Any) -> str | None:
    return driver.execute_script(  # type: ignore[no-any-return]
        "const f = document.getElementById('ask-form'); return f ? f.dataset.formId : null"
    )


async def run(driver: Any) -> None:
    async def thread(fn: Callable[[], T]) -> T:
        return await trio.to_thread.run_sync(fn)

    with tempfile.TemporaryDirectory() as tmp:
        async with open_desk(Path(tmp)) as desk, trio.open_nursery() as nursery:
            assert desk.web is not None
            answered: dict[str, trio.MemorySendChannel[float]] = {}
            inbox: dict[str, trio.MemoryReceiveChannel[float]] = {}

            async def agent(key: str, task_status: trio.TaskStatus[None]) -> None:
                async with desk_client(desk.address, key) as client:
                    task_status.started()
                    while True:
                        await client.call_tool("ask_user", form(f"Question of {key}"))
                        answered[key].send_nowait(time.time())

            for i in range(AGENTS):
                key = f"agent-{i:02d}"
                answered[key], inbox[key] = trio.open_memory_channel[float](16)
                await nursery.start(agent, key)
            await desk.board.wait_for(lambda board: len(board.shown_forms()) == AGENTS)

            first: list[float] = []
            for _ in range(SIGN_INS):
                url = desk.web.login_url()

                def sign_in(url: str = url) -> float:
                    driver.delete_all_cookies()
                    start = time.perf_counter()
                    driver.get(url)
                    poll(lambda: form_id(driver))
                    return time.perf_counter() - start

                first.append(await thread(sign_in))
            print(f"sign-in to first form drawn   {percentiles(first)}")

            results: list[float] = []
            last: str | None = None
            for _ in range(ANSWERS):

                def click_submit(last: str | None = last) -> tuple[str, float]:
                    shown = poll(lambda: (form_id(driver) or last) != last and form_id(driver))
                    poll(lambda: driver.find_element("id", "submit").click() or True)  # review
                    poll(lambda: driver.find_element("id", "review").is_displayed())
                    # The page stamps its own click (wall clock, as the agents' stamps): a
                    # WebDriver click would add chromedriver's pointer actions, tens of ms
                    # here, that no person's click goes through.
                    start = driver.execute_script(CLICK_SUBMIT)
                    return str(shown), start / 1000

                shown, start = await thread(click_submit)
                key = shown.split("/", 1)[0]
                done = await inbox[key].receive()
                results.append(done - start)
                last = shown
            print(f"Submit to the agent's result  {percentiles(results)}")

            leaving: list[float] = []
            for _ in range(TERMINAL):
                await thread(lambda: poll(lambda: form_id(driver)))
                current = desk.board.current
                assert current is not None
                wanted = f"{current.key}/{current.flow_id}"
                await thread(lambda wanted=wanted: poll(lambda: form_id(driver) == wanted))
                start = time.perf_counter()
                await current.commands.send(UserCommand(fs.Number(1)))
                await current.commands.send(UserCommand(fs.Confirm()))
                await thread(lambda wanted=wanted: poll(lambda: form_id(driver) != wanted))
                leaving.append(time.perf_counter() - start)
                await inbox[current.key].receive()
            print(f"terminal answer to page       {percentiles(leaving)}")
            nursery.cancel_scope.cancel()


def main() -> None:
    import logging

    missing = browser_missing()
    if missing is not None:
        print(f"skipped: {missing}")
        return
    logging.getLogger("mcp").addHandler(logging.NullHandler())
    logging.getLogger("mcp").propagate = False
    driver = start_browser()
    try:
        trio.run(run, driver)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
