"""The demo's story as a person follows it: every answer in the summary, a reply to a message
typed mid-script, unknown commands said to be unknown, a rerun on the same session resumes."""

from __future__ import annotations

from pathlib import Path

import trio
from prompt_toolkit.input import create_pipe_input

from pi_agent_ask.form.transcript import line_text
from pi_agent_ask.host.demo import run_demo
from pi_agent_ask.host.local import Line
from pi_agent_ask.host.shell import BUSY_REPLY, RESUMED_TEXT, open_shell_host, run_demo_agent
from pi_agent_ask.ui.testing import VirtualTerminal
from tests.test_shell import ALT_Q, ENTER, PAUSE, REGION_PROMPT, demo

from .runtime_support import settings_file


async def test_the_summary_lists_every_answer(tmp_path: Path, autojump_clock: object) -> None:
    lines: list[str] = []

    def emit(line: Line) -> None:
        lines.append(line_text(line))

    await run_demo(session=None, settings=settings_file(tmp_path), headless=True, emit=emit)
    summary = lines[next(i for i, t in enumerate(lines) if "Summary of what I received" in t) :]
    text = "\n".join(summary)
    assert "Deployment plan · Region: EU West" in text
    assert "Release checks · Checks: Unit tests" in text
    assert "Rollout window · Window: Tonight" in text  # the one the wait collected


async def test_a_message_mid_script_gets_a_reply_and_unknown_commands_are_said(
    tmp_path: Path,
) -> None:
    async with demo(tmp_path) as sh:
        await sh.wait(REGION_PROMPT)
        sh.send(ALT_Q)
        await sh.wait("Alt+Q to answer")
        await sh.type_line("/frobnicate now")
        await sh.wait("Unknown command /frobnicate.")
        assert REGION_PROMPT in sh.term.text()  # not sent as chat: the panel stays
        assert "> /frobnicate" not in "\n".join(sh.term.rows()[:-1])
        await sh.type_line("please prefer EU")
        await sh.wait(BUSY_REPLY)


async def test_a_rerun_on_the_same_session_resumes(tmp_path: Path) -> None:
    session = tmp_path / "demo.pias"
    settings = settings_file(tmp_path)
    for run in range(2):
        term = VirtualTerminal(100, 34)
        with trio.fail_after(30), create_pipe_input() as pipe:
            async with (
                open_shell_host(
                    session=session, settings=settings, input=pipe, output=term.output
                ) as shell,
                trio.open_nursery() as nursery,
            ):
                nursery.start_soon(run_demo_agent, shell, PAUSE)
                if run == 0:
                    await term.wait_for("Draft ready")
                    await term.wait_for(REGION_PROMPT)
                else:
                    await term.wait_for(RESUMED_TEXT.split(":")[0])
                    await term.wait_for(REGION_PROMPT)  # the restored form, with its panel
                    assert "Planning the deployment" not in term.text()
                    pipe.send_text(ALT_Q)
                    await term.wait_for("Alt+Q to answer")
                    pipe.send_text("hi" + ENTER)
                    await term.wait_for("The demo script is over")
                nursery.cancel_scope.cancel()
