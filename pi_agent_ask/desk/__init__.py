"""The question desk: one terminal where a person answers the questions of every agent.

``pi-agent-ask desk`` is a full-screen terminal app and an MCP server over Streamable HTTP
(``docs/desk.md``). Agents connect directly, or through ``pi-agent-ask mcp``
(``pi_agent_ask.mcp_server.forward``).

The public names are imported on first use, so the command line (which imports
``pi_agent_ask.commands.desk`` to build its parser) does not load the HTTP server and the MCP
SDK for commands that never use them.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "Desk",
    "DeskAddress",
    "DeskAlreadyRunning",
    "ListenError",
    "desk_file_path",
    "find_desk",
    "run_desk",
]

_HOMES = {
    "Desk": "pi_agent_ask.desk.run",
    "DeskAlreadyRunning": "pi_agent_ask.desk.run",
    "run_desk": "pi_agent_ask.desk.run",
    "DeskAddress": "pi_agent_ask.mcp_common.connection",
    "desk_file_path": "pi_agent_ask.mcp_common.connection",
    "find_desk": "pi_agent_ask.mcp_common.connection",
    "ListenError": "pi_agent_ask.desk.http",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'pi_agent_ask.desk' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
