"""A stand-in for one Claude Code session, as a process of its own (``python -m
tests.claude_stand_in LABEL [SERVER ARGUMENTS...]``): it starts ``pi-agent-ask mcp`` as its child, named
``claude-code`` and showing forms itself (form elicitation), and later runs ``pi-agent-ask hook
claude-code`` as its child too, as Claude Code runs its hooks. Its server and its hook share it
as their nearest ancestor, which is how the hook tells this session's server from another's.

It asks two background questions labelled ``LABEL`` and prints ``{"event": "asked"}``. Shown
in the client (no desk runs), the first is answered in the form once both calls returned (so no
tool result carries the answer); the second form arriving means the first answer is recorded
(forms are shown one at a time), and the process prints ``{"event": "answered"}``. With a desk,
the person answers there. On a line on standard input it runs the hook and prints
``{"event": "hook", "context": ...}`` (``null`` when the hook printed nothing), then ends.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def say(event: str, **data: Any) -> None:
    print(json.dumps({"event": event, **data}), flush=True)


def question(label: str, number: int) -> dict[str, Any]:
    return {
        "questions": [
            {
                "id": "q",
                "label": f"{label} {number}",
                "prompt": f"{label}, question {number}?",
                "options": [{"value": "yes", "label": "Yes"}, {"value": "no", "label": "No"}],
            }
        ],
        "background": True,
    }


async def main(label: str, *arguments: str) -> None:
    asked, second_shown = trio.Event(), trio.Event()

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if "question 1" in params.message:
            # After both calls returned: a tool result would carry the answer otherwise.
            await asked.wait()
            return types.ElicitResult(action="accept", content={"q": "yes"})
        second_shown.set()
        await trio.sleep_forever()
        raise AssertionError

    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pi_agent_ask", "mcp", *arguments],
        env=dict(os.environ),
    )
    info = types.Implementation(name="claude-code", version="1")
    async with (
        stdio_client(server) as (read, write),
        ClientSession(read, write, elicitation_callback=elicit, client_info=info) as session,
    ):
        await session.initialize()
        await session.list_tools()
        for number in (1, 2):
            await session.call_tool("ask_user", question(label, number))
        asked.set()
        say("asked")
        async with trio.open_nursery() as nursery:

            async def answered() -> None:
                await second_shown.wait()
                say("answered")

            nursery.start_soon(answered)
            await anyio.wrap_file(sys.stdin).readline()
            nursery.cancel_scope.cancel()
        payload = {"hook_event_name": "UserPromptSubmit", "cwd": str(Path.cwd()), "prompt": "go on"}
        hook = await trio.run_process(
            [sys.executable, "-m", "pi_agent_ask", "hook", "claude-code"],
            stdin=json.dumps(payload).encode(),
            capture_stdout=True,
        )
        output = hook.stdout.decode().strip()
        context = json.loads(output)["hookSpecificOutput"]["additionalContext"] if output else None
        say("hook", context=context)


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:])
