"""``pi-agent-ask mcp`` ends at once when its client closes standard input, and loses nothing.

The installed command ends its process with ``os._exit`` once the server's Trio run is over
(``cli.end_at_once``): the interpreter's own shutdown (tearing down modules and the heap) is
skipped, so an ``atexit`` hook in that process never runs. Everything the server wrote is
complete by then: every answer is on standard output, the journal re-opens with every entry,
and the hook socket and the agent's connection file are gone.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import trio

from pi_agent_ask.mcp_common.journals import journal_path
from pi_agent_ask.persistence.session_file import SessionFile
from tests.test_mcp import ASK
from tests.test_mcp_stdio import Home, home, opening, read_lines

__all__ = ["home"]  # the fixture, used by name

ASKS = 25
SCRIPT = """
import atexit, sys
from pathlib import Path

marker = Path(sys.argv.pop(1))
atexit.register(marker.write_text, "the interpreter shut down")
from pi_agent_ask.cli import entry

entry()
"""


def files_in(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if not path.is_dir())


def call(number: int) -> str:
    arguments = {**ASK, "background": True, "title": f"Form {number}"}
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": number,
            "method": "tools/call",
            "params": {"name": "ask_user", "arguments": arguments},
        }
    )


async def test_the_server_ends_without_the_interpreter_s_shutdown_and_keeps_every_entry(
    home: Home,
) -> None:
    marker = home.root / "shut-down"
    lines = [*opening("exit-client"), *(call(n) for n in range(1, ASKS + 1))]
    with trio.fail_after(60), (home.root / "server.log").open("w") as log:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-c", SCRIPT, str(marker), "mcp"],
            stdin=-1,
            stdout=-1,
            stderr=log,
            env=home.env(),
            cwd=home.work,
        )
        assert process.stdin is not None and process.stdout is not None
        await process.stdin.send_all("".join(line + "\n" for line in lines).encode())
        received = await read_lines(process.stdout, ASKS + 1)
        assert [path.suffix for path in files_in(home.runtime)] == [".json", ".sock"]
        await process.stdin.aclose()  # every call answered: the client closes, the server ends
        assert await process.stdout.receive_some(65536) == b""
        status = await process.wait()
    assert status == 0, (home.root / "server.log").read_text()
    assert not marker.exists()  # os._exit: no interpreter shutdown after the orderly close
    answers = [json.loads(line) for line in received.splitlines()]
    assert sorted(answer["id"] for answer in answers) == list(range(ASKS + 1))
    receipts = [answer["result"]["structuredContent"]["requestId"] for answer in answers[1:]]
    key = f"exit-client@{home.work}"
    with SessionFile.open(journal_path(home.state, key), readonly=True) as journal:
        entries = list(journal.branch())
    asked = [entry for entry in entries if entry.type == "ask:queued"]
    assert sorted(entry.data["requestId"] for entry in asked) == sorted(receipts)
    titles = {entry.data["params"]["title"] for entry in asked}
    assert titles == {f"Form {n}" for n in range(1, ASKS + 1)}
    # The hook socket and the agent's file beside it are removed before the process ends.
    assert files_in(home.runtime) == []


async def test_ctrl_c_ends_the_server_quietly(home: Home) -> None:
    """Ctrl-C in the terminal of a client that runs the server (the signal goes to the whole
    process group): the server ends as on ``SIGTERM``, by the signal once its orderly close is
    done, with nothing on standard error. As a ``KeyboardInterrupt`` it waited for its input
    to end (its reading thread), then printed a traceback and exited 1."""
    with trio.fail_after(60), (home.root / "server.log").open("w") as log:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "pi_agent_ask", "mcp"],
            stdin=-1,
            stdout=-1,
            stderr=log,
            env=home.env(),
            cwd=home.work,
        )
        assert process.stdin is not None and process.stdout is not None
        await process.stdin.send_all("".join(line + "\n" for line in opening()).encode())
        assert b'"id":0' in await process.stdout.receive_some(65536)
        process.send_signal(signal.SIGINT)
        status = await process.wait()
    assert (status, (home.root / "server.log").read_text()) == (-signal.SIGINT, "")
    assert files_in(home.runtime) == []  # the hook socket and the agent's file are gone
