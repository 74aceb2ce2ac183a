"""An agent's answers through ``pi-agent-ask mcp`` forwarding to a desk, as agents run.

One agent: the SDK's stdio client drives a ``pi-agent-ask mcp --desk URL`` process, which
forwards to a headless desk on loopback (in this process). The agent asks one background form
and waits for it (``wait_for_answers``); the form is answered through a submit event once the
agent waits. Prints the time from the answer to the agent's result: for the first answer of
the session (when one-time costs of a session show: the forwarder's and the client's), and
p50/p99 of the ``ANSWERS`` after it. Asserts each answer arrives, exactly once; the timings
are printed, never asserted: machines here are shared and noisy.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from benchmarks.bench_desk import form
from pi_agent_ask.desk.testing import answer_displayed, open_desk

ANSWERS = 50


async def run() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        async with open_desk(base) as desk:
            env = {
                **os.environ,
                "PI_AGENT_ASK_DESK_FILE": str(base / "desk.json"),
                "PI_AGENT_ASK_DESK_TOKEN": desk.address.token,
                "HOME": str(base),
            }
            server = StdioServerParameters(
                command=sys.executable,
                args=["-m", "pi_agent_ask", "mcp", "--desk", desk.address.url, "--key", "agent"],
                env=env,
            )
            async with stdio_client(server) as (read, write), ClientSession(read, write) as agent:
                await agent.initialize()
                latencies: list[float] = []
                for n in range(ANSWERS + 1):
                    receipt = await agent.call_tool("ask_user", form(f"f{n}"))
                    own = receipt.structured_content["requestId"]
                    submitted: list[float] = []

                    async def answer(submitted: list[float]) -> None:
                        await desk.board.wait_for(
                            lambda board: (
                                board.current is not None and board.is_blocked(board.current)
                            )
                        )
                        submitted.append(time.perf_counter())
                        await answer_displayed(desk)

                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(answer, submitted)
                        result = await agent.call_tool("wait_for_answers", {})
                        arrived = time.perf_counter()
                    results = result.structured_content["results"]
                    assert [entry["requestId"] for entry in results] == [own], results
                    latencies.append(arrived - submitted[0])
        first, rest = latencies[0], sorted(latencies[1:])
        p99 = rest[min(len(rest) - 1, int(len(rest) * 0.99))]
        print(
            f"through pi-agent-ask mcp: answer -> wait_for_answers result, first of the session "
            f"{first * 1000:.1f} ms; the {len(rest)} after it p50 "
            f"{statistics.median(rest) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms"
        )


def main() -> None:
    import logging

    logging.getLogger("mcp").addHandler(logging.NullHandler())
    logging.getLogger("mcp").propagate = False
    trio.run(run)


if __name__ == "__main__":
    main()
