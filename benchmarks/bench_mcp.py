"""The stdio MCP server as a client sees it: start-up, call latency, the hook command.

Start-up is measured side by side with the floor: a minimal stdio server written with the
same SDK (``FLOOR``: one ``Server``, ``stdio_server``, nothing else), both launched the same
way, alternately, ``STARTS`` times each; the time from the launch to the ``initialize``
response, and the process's CPU time to then, and the time from closing its standard input
to its exit (the wall time is noisy on a shared machine;
the CPU time much less). The target: ours at most 0.1 s above the floor.

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
STARTS = 5
FLOOR = """
import anyio
import mcp.types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[])


async def main():
    server = Server("floor", on_list_tools=list_tools)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main, backend="trio")
"""
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}


def _start(command: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """Seconds from launch to the ``initialize`` response, the CPU seconds the process used
    until it exited (stdin is closed right after the response), and the seconds from that
    close to the exit (what a client that restarts its servers waits for)."""
    import json
    import subprocess

    began = time.perf_counter()
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
    process.stdin.flush()
    line = process.stdout.readline()
    elapsed = time.perf_counter() - began
    assert b'"result"' in line, line
    closed = time.perf_counter()
    process.stdin.close()
    _pid, _status, usage = os.wait4(process.pid, 0)
    ended = time.perf_counter() - closed
    process.returncode = 0
    return elapsed, usage.ru_utime + usage.ru_stime, ended


def start_up(base: Path) -> None:
    """``pi-agent-ask mcp`` and the floor, alternately, ``STARTS`` times each."""
    floor_file = base / "floor.py"
    floor_file.write_text(FLOOR)
    env = {
        **os.environ,
        "HOME": str(base),
        "PI_CODING_AGENT_DIR": str(base / "agent"),
        "XDG_RUNTIME_DIR": str(base),
        "PI_AGENT_ASK_DESK_FILE": str(base / "no-desk.json"),
    }
    commands = {
        "floor (same SDK, minimal server)": [sys.executable, str(floor_file)],
        "pi-agent-ask mcp": [sys.executable, "-m", "pi_agent_ask", "mcp"],
    }
    figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in commands}
    for _ in range(STARTS):
        for name, command in commands.items():
            figures[name].append(_start(command, env))
    medians = {}
    for name, runs in figures.items():
        wall = statistics.median(w for w, _c, _e in runs)
        cpu = statistics.median(c for _w, c, _e in runs)
        ended = statistics.median(e for _w, _c, e in runs)
        medians[name] = (wall, cpu)
        print(f"start to initialize, {name}: median {wall:.3f} s wall, {cpu:.3f} s CPU")
        print(f"standard input closed to exit, {name}: median {ended * 1000:.0f} ms")
    (floor_wall, floor_cpu), (ours_wall, ours_cpu) = medians.values()
    print(
        f"start to initialize, ours above the floor: {ours_wall - floor_wall:+.3f} s wall, "
        f"{ours_cpu - floor_cpu:+.3f} s CPU (target: at most +0.1 s)"
    )


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
        start_up(Path(base))
        trio.run(_run, Path(base), quiet)


if __name__ == "__main__":
    main()
