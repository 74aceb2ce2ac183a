"""The interactive demo host: the demo agent with a person at the terminal.

When the terminal surface is available, forms open in the terminal and the person answers
them; the transcript is printed between forms. Without a terminal (or without the terminal
surface), the headless demo runs instead, and says so.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pi_agent_ask.host.demo import run_demo


async def run_interactive_demo(*, session: Path | None, settings: Path | None) -> int:
    try:
        from pi_agent_ask.ui.commands import run_demo_in_terminal
    except ImportError:
        run_demo_in_terminal = None
    if run_demo_in_terminal is None or not sys.stdin.isatty():
        print(
            "pi-agent-ask demo: no interactive terminal surface here; running the headless demo "
            "(a scripted answerer plays the person).",
            flush=True,
        )
        return await run_demo(session=session, settings=settings, headless=True)
    return await run_demo_in_terminal(session=session, settings=settings)
