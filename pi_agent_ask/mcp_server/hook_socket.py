"""Where a running ``pi-agent-ask mcp`` server's hook socket is, for the server that listens
there (``hook.py``) and the hook command that looks for it (``hook_command.py``): the
directory both compute from the same environment, the socket's file name for an agent key,
and the chain of parent processes that tells two sessions of one directory apart.

Imports neither Trio nor attrs: the hook command runs on every prompt and tool call of a Claude
Code session, and the agent waits for it.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

from pi_agent_ask.persistence.paths import agent_dir
from pi_agent_ask.proc_stat import FIRST, PARENT, stat_fields

__all__ = ["MAX_SOCKET_NAME", "MAX_SOCKET_PATH", "ancestors", "runtime_dir", "slug"]

MAX_SOCKET_PATH = 107
"""Bytes of a unix socket path the kernel takes (``sun_path`` is 108 with its NUL on Linux;
104 on some systems, which the margin in ``MAX_SOCKET_NAME`` covers)."""
MAX_SOCKET_NAME = 24 + 1 + 16 + len(".sock") + 4
"""The longest socket file name ``slug`` makes, plus a margin."""


def runtime_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where servers put their hook sockets (the hook command computes the same from the same
    environment): ``$XDG_RUNTIME_DIR/pi-agent-ask/mcp``, else ``<agent dir>/pi-agent-ask/mcp``
    when a socket path there fits the system's limit, else the short
    ``<temp dir>/pi-agent-ask-<uid>/mcp`` (checked to be this user's own, mode 0700)."""
    environment = os.environ if env is None else env
    base = environment.get("XDG_RUNTIME_DIR")
    if base:
        return Path(base) / "pi-agent-ask" / "mcp"
    folder = agent_dir(environment) / "pi-agent-ask" / "mcp"
    if len(os.fsencode(folder)) + 1 + MAX_SOCKET_NAME <= MAX_SOCKET_PATH:
        return folder
    return Path(tempfile.gettempdir()) / f"pi-agent-ask-{os.getuid()}" / "mcp"


def slug(key: str) -> str:
    """A file-name-safe, bounded, collision-resistant name for an agent key."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", key).strip("-")[:24]
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    return f"{readable}-{digest}" if readable else digest


def ancestors(pid: int | None = None) -> list[int]:
    """The chain of parent process ids (nearest first), from ``/proc``; empty elsewhere."""
    chain: list[int] = []
    current = os.getpid() if pid is None else pid
    for _ in range(64):
        try:
            fields = stat_fields(current)
        except OSError:
            break
        parent = int(fields[PARENT - FIRST]) if len(fields) > PARENT - FIRST else 0
        if parent <= 1:
            break
        chain.append(parent)
        current = parent
    return chain
