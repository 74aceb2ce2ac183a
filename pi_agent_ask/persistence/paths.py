"""Pi's agent directory, under which pi-agent-ask keeps its settings
(``<agent dir>/extensions``), its history (``<agent dir>/pi-agent-ask``) and, where no runtime
directory is set, its servers' hook sockets.

A module of its own, without the settings' records: the hook command finds sockets through it,
and imports nothing it does not need (``mcp_server/hook_command.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

__all__ = ["agent_dir"]


def agent_dir(env: Mapping[str, str]) -> Path:
    """Pi's agent directory: ``$PI_CODING_AGENT_DIR``, else ``~/.pi/agent``.

    ``env`` is the environment to read (pass ``os.environ`` in production). An empty variable
    counts as unset; a leading ``~`` is expanded against ``env["HOME"]`` when present.
    """
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    configured = env.get("PI_CODING_AGENT_DIR", "")
    if not configured:
        return home / ".pi" / "agent"
    if configured == "~" or configured.startswith("~/"):
        return home / configured[2:]
    return Path(configured)
