"""The question desk: one terminal where a person answers the questions of every agent.

``pi-agent-ask desk`` is a full-screen terminal app and an MCP server over Streamable HTTP
(``docs/desk.md``). Agents connect directly, or through ``pi-agent-ask mcp --desk``
(:func:`pi_agent_ask.desk.forward.serve_stdio_via_desk`).
"""

from __future__ import annotations
