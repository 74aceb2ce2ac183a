"""The stdio MCP server as a client sees it: start-up, call latency, the hook command.

``pi-agent-ask mcp`` runs as a process driven by the SDK's stdio client, whose elicitation
callback answers every form at once (so the figures are the server's own cost, not a
person's). Prints figures; asserts nothing.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import mcp.types as types
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ASK = {
    "questions": [
        {
            "id": "q",
            "prompt": "Which one?",
            "options": [{"label": "A", "value": "a"}, {"label": "B", "value": "b"}],
        }
    ]
}
CALLS = 100


async def _elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"q": "b"})


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"median {statistics.median(values) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms"


async def _run(base: Path, quiet: Any) -> None:
    env = {
        "HOME": str(base),
        "PI_CODING_AGENT_DIR": str(base / "agent"),
        "XDG_RUNTIME_DIR": str(base),
        "PI_AGENT_ASK_DESK_FILE": str(base / "no-desk.json"),
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "pi_agent_ask", "mcp"], env=env, cwd=base
    )
    started = time.perf_counter()
    async with (
        stdio_client(params, errlog=quiet) as (read, write),
        ClientSession(read, write, elicitation_callback=_elicit) as client,
    ):
        await client.initialize()
        await client.list_tools()
        ready = time.perf_counter() - started
        foreground = []
        for _ in range(CALLS):
            begin = time.perf_counter()
            await client.call_tool("ask_user", ASK)
            foreground.append(time.perf_counter() - begin)
        background = []
        for _ in range(CALLS):
            begin = time.perf_counter()
            await client.call_tool("ask_user", {**ASK, "background": True})
            background.append(time.perf_counter() - begin)
        begin = time.perf_counter()
        await client.call_tool("wait_for_answers", {})
        waited = time.perf_counter() - begin
    print(f"start-up to the first tools/list: {ready:.2f} s")
    print(f"foreground ask_user, answered by elicitation: {_ms(foreground)} ({CALLS} calls)")
    print(f"background ask_user (receipt, earlier answers appended): {_ms(background)}")
    print(f"wait_for_answers after them: {waited * 1000:.1f} ms")
    hook = []
    for _ in range(5):
        begin = time.perf_counter()
        await trio.run_process(
            [sys.executable, "-m", "pi_agent_ask", "hook", "claude-code"],
            stdin=b"{}",
            capture_stdout=True,
            env={**env, "PATH": os.environ.get("PATH", "")},
        )
        hook.append(time.perf_counter() - begin)
    print(f"hook command with no server: median {statistics.median(hook) * 1000:.0f} ms")


def main() -> None:
    with (
        tempfile.TemporaryDirectory(prefix="pia-bench-") as base,
        Path(os.devnull).open("w") as quiet,
    ):
        trio.run(_run, Path(base), quiet)


if __name__ == "__main__":
    main()
