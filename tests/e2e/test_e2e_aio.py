"""End to end: an asyncio program (``examples/asyncio_loop.py``) showing its forms in a real
terminal (a tmux pane): the prompt_toolkit application runs on the program's own asyncio loop,
the runtime on Trio in guest mode beside it."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import trio

from .test_e2e_ask import pane

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "asyncio_loop.py"


async def answer_first_option(term: object, prompt: str) -> None:
    await term.wait_for(prompt)  # type: ignore[attr-defined]
    await term.keys("1")  # type: ignore[attr-defined]
    await term.wait_for("Review your answers")  # type: ignore[attr-defined]
    await term.keys("1")  # type: ignore[attr-defined]
    await term.wait_for("Press 1 again")  # type: ignore[attr-defined]
    await term.keys("1")  # type: ignore[attr-defined]


async def test_an_asyncio_program_shows_its_forms_in_a_real_terminal(tmp_path: Path) -> None:
    status = tmp_path / "status"
    # The report goes to the terminal too, after the forms: the process's terminal is stdout.
    command = (
        f"{sys.executable} {EXAMPLE} --session {tmp_path / 's.pas'}; "
        f"echo $? > {status}; tmux -S {tmp_path / 'tmux.sock'} wait-for -S finished; "
        "sleep 60"  # the pane stays for the screen to be read; the server is killed after
    )
    with trio.fail_after(90):
        async with pane(tmp_path, command, 100, 30) as term, trio.open_nursery() as nursery:
            finished = trio.Event()

            async def wait_finished() -> None:
                await term.tmux("wait-for", "finished")
                finished.set()

            nursery.start_soon(wait_finished)
            await answer_first_option(term, "Which test runner?")
            await answer_first_option(term, "Which tone for the docs?")
            await answer_first_option(term, "How much to cover?")
            await finished.wait()
            report = [line for line in (await term.screen()).splitlines() if line.strip()]

    assert status.read_text().strip() == "0"
    assert "tools: ask_user, wait_for_answers" in report
    assert any(line.startswith('wait_for_answers -> {"status": "complete"') for line in report)
    assert report[-1].startswith("done; answers picked up at boundaries:")
