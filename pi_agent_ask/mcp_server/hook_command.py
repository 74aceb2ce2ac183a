"""``pi-agent-ask hook claude-code``: the background answers waiting for a Claude Code session,
as its hook's output.

It reads the hook's JSON on standard input (``UserPromptSubmit`` or ``PostToolUse``), finds the
server of this Claude Code session, takes its waiting answers and prints
``{"hookSpecificOutput": {"hookEventName", "additionalContext"}}``. It prints nothing and exits
0 when there is no server or nothing waits. Which server: the ones whose key is ``--key``
(default ``claude-code@<cwd>``, the stdio server's default key for Claude Code) or that key
numbered (``claude-code #2@<cwd>``: a second session there), else those started by a client
named like Claude in the hook's directory; among them the one that shares the nearest ancestor
process with the hook (the Claude Code process that started both), so two sessions in one
directory keep their answers apart. The exchange with the server is ``hook.py``'s protocol.

Claude Code runs the command on every prompt and after every tool call, and the agent waits
for it: it asks the server over a blocking socket with a deadline, one request and one reply,
and imports neither Trio nor attrs (Trio's import alone was most of the command's time).
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from pi_agent_ask.mcp_common.answers import answer_entry
from pi_agent_ask.mcp_common.journals import default_key
from pi_agent_ask.mcp_server.hook_socket import ancestors, runtime_dir

__all__ = ["CONTEXT_HEAD", "choose_server", "hook_output", "run_claude_code_hook", "take_from"]

MAX_REPLY = 64 << 20
"""Bytes of the server's reply the command reads; a longer reply counts as none."""
HOOK_TIMEOUT = 10.0
"""Seconds the hook waits for a server's answer."""
HOOK_EVENTS = ("UserPromptSubmit", "PostToolUse")
CONTEXT_HEAD = "pi-agent-ask: answers to your background questions arrived:"


def _candidates(folder: Path, key: str | None, cwd: str) -> list[tuple[Path, dict[str, Any]]]:
    found: list[tuple[Path, dict[str, Any]]] = []
    try:
        entries = sorted(folder.glob("*.json"))
    except OSError:
        return []
    for meta in entries:
        try:
            info = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(info, dict):
            found.append((meta.with_suffix(".sock"), info))
    # The key, or a key numbered after it (a second server of the client in the directory).
    exact = [(p, i) for p, i in found if key in (i.get("key"), i.get("base"))]
    if exact:
        return exact
    return [
        (p, i)
        for p, i in found
        if i.get("cwd") == cwd and "claude" in str(i.get("client", "")).lower()
    ]


def choose_server(candidates: list[tuple[Path, dict[str, Any]]], chain: list[int]) -> Path | None:
    """The server that shares the nearest ancestor with the hook (``chain``: nearest first)."""
    best: tuple[int, Path] | None = None
    for path, info in candidates:
        theirs = set(info.get("ancestors") or [])
        rank = next((i for i, pid in enumerate(chain) if pid in theirs), len(chain))
        if best is None or rank < best[0]:
            best = (rank, path)
    return best[1] if best is not None else None


def take_from(path: Path, timeout: float = HOOK_TIMEOUT) -> list[dict[str, Any]]:
    """Take the waiting messages from the server at ``path``: empty when it is gone, or has not
    answered within ``timeout`` seconds (the whole exchange; the server gives back a take whose
    reply it could not write)."""
    deadline = time.monotonic() + timeout
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(path))
            sock.sendall(b'{"op": "take"}\n')
            line = _read_line(sock, deadline)
    except OSError:  # no server there, or a timeout (``TimeoutError`` is one)
        return []
    if line is None:
        return []
    try:
        data = json.loads(line)
    except ValueError:
        return []
    messages = data.get("messages") if isinstance(data, dict) else None
    return [m for m in messages or () if isinstance(m, dict)]


def _read_line(sock: socket.socket, deadline: float) -> bytes | None:
    """The server's reply line, read until ``deadline``; ``None`` when the server closed
    without one or it is longer than ``MAX_REPLY``."""
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(65536)
        if not chunk:
            return data or None
        data += chunk
        if len(data) > MAX_REPLY:
            return None
    return data.split(b"\n", 1)[0]


def hook_output(event: str, messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not messages:
        return None
    texts = [answer_entry(message)["text"] for message in messages]
    context = "\n\n".join([CONTEXT_HEAD, *texts])
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}


def run_claude_code_hook(
    stdin: TextIO, stdout: TextIO, *, key: str | None = None, env: Mapping[str, str] | None = None
) -> int:
    """The ``pi-agent-ask hook claude-code`` command; always exits 0 (a hook must not block
    the session: a problem prints nothing)."""
    try:
        payload = json.loads(stdin.read() or "{}")
    except ValueError:
        payload = {}
    if not isinstance(payload, dict):
        payload = {}
    event = payload.get("hook_event_name")
    if event not in HOOK_EVENTS:
        event = "UserPromptSubmit" if "prompt" in payload else "PostToolUse"
    given_cwd = payload.get("cwd")
    cwd = given_cwd if isinstance(given_cwd, str) else str(Path.cwd())
    wanted = key if key is not None else default_key("claude-code", cwd)
    candidates = _candidates(runtime_dir(env), wanted, cwd)
    server = choose_server(candidates, ancestors())
    if server is None:
        return 0

    output = hook_output(str(event), take_from(server))
    if output is not None:
        stdout.write(json.dumps(output, ensure_ascii=False) + "\n")
        stdout.flush()
    return 0
