"""``open_runtime(mode="tui", input=..., output=...)`` draws forms on that terminal by itself;
a terminal that breaks ends its forms with an error, never with an answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing
from prompt_toolkit.input import create_pipe_input

from pi_agent_ask import open_runtime
from pi_agent_ask.ui.testing import VirtualTerminal

from .runtime_support import payload, settings_file


async def test_the_runtime_draws_forms_on_the_terminal_it_was_given(tmp_path: Path) -> None:
    term = VirtualTerminal(100, 30)
    with create_pipe_input() as keys, trio.fail_after(20):
        async with open_runtime(
            settings=settings_file(tmp_path), input=keys, output=term.output, cwd=tmp_path
        ) as rt:
            out: dict[str, Any] = {}
            async with trio.open_nursery() as nursery:

                async def ask() -> None:
                    out["result"] = await rt.call_tool("ask_user", payload("a"), "c1")

                nursery.start_soon(ask)
                await term.wait_for("Question a?")
                keys.send_text("2")
                await term.wait_for("Review your answers")
                keys.send_text("11")
    assert out["result"]["structuredContent"]["answers"]["a"]["values"] == ["a2"]


class BrokenOutput(VirtualTerminal):
    """A terminal whose writes fail once the form is drawn."""

    def flush(self) -> None:
        raise OSError("the terminal went away")


async def test_a_broken_terminal_ends_forms_with_an_error(tmp_path: Path) -> None:
    term = BrokenOutput(100, 30)
    with create_pipe_input() as keys, trio.fail_after(20):
        async with open_runtime(
            settings=settings_file(tmp_path), input=keys, output=term.output
        ) as rt:
            rt.agent_started()
            foreground = await rt.call_tool("ask_user", payload("a"), "c1")
            assert foreground["isError"] is True
            assert foreground["content"][0]["text"].startswith("Question form failed:")
            await rt.call_tool("ask_user", payload("b", background=True), "c2")
            await trio.testing.wait_all_tasks_blocked()
            [message] = await rt.turn_boundary()
            notices = []
            while True:
                try:
                    notices.append(rt.notices.receive_nowait())
                except trio.WouldBlock:
                    break
    assert "error" in message["details"] and "result" not in message["details"]
    assert "Question form failed:" in message["content"]
    assert "The question form could not be shown: the terminal went away" in notices
