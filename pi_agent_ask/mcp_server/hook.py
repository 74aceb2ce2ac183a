"""Background answers for Claude Code's hooks: the server's endpoint and the hook command.

A running ``pi-agent-ask mcp`` server listens on a private unix socket,
``<runtime dir>/pi-agent-ask/mcp/<slug>.sock`` (directory 0700, socket 0600; the runtime dir
is ``$XDG_RUNTIME_DIR``, else the agent directory, else, when a socket path there would be
too long, a private ``<temp dir>/pi-agent-ask-<uid>``: see :func:`runtime_dir`), with
``<slug>.json`` beside it: ``{"key", "base", "client", "cwd", "pid", "ancestors"}`` (``base``:
the key before its run number, ``journals.claim_default_key``). The protocol is
one JSON line each way: the hook sends ``{"op": "take"}``, the server answers
``{"messages": [...]}`` (the turn-boundary messages, marked delivered by the runtime's
boundary) and closes. Delivery stays exactly once because it is decided where the agent's
runtime is: the server's own (:func:`local_take`), or, while the server forwards to a desk,
the desk's runtime of this agent (``forward.desk_take``, the desk's ``/hook``). A reply that
cannot be written is given back to the next tool result, and so are answers with images (a
hook adds text only; a tool result carries the images).

``pi-agent-ask hook claude-code`` reads the hook's JSON on standard input
(``UserPromptSubmit`` or ``PostToolUse``), finds the server of this Claude Code session, takes
its waiting answers and prints ``{"hookSpecificOutput": {"hookEventName", "additionalContext"}}``.
It prints nothing and exits 0 when there is no server or nothing waits. Which server: the
ones whose key is ``--key`` (default ``claude-code@<cwd>``, the stdio server's default key for
Claude Code) or that key numbered (``claude-code #2@<cwd>``: a second session there), else
those started by a client named like Claude in the hook's directory; among them the one that
shares the nearest ancestor process with the hook (the Claude Code process that started both),
so two sessions in one directory keep their answers apart.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

import attrs
import trio

from pi_agent_ask.mcp_common.answers import answer_entry
from pi_agent_ask.mcp_common.journals import default_key

MAX_LINE = 1 << 16
"""Bytes of a request line the endpoint reads; a longer line is refused."""
MAX_REPLY = 64 << 20
HOOK_TIMEOUT = 10.0
"""Seconds the hook waits for a server's answer."""
REQUEST_TIMEOUT = 5.0
HOOK_EVENTS = ("UserPromptSubmit", "PostToolUse")
MAX_SOCKET_PATH = 107
"""Bytes of a unix socket path the kernel takes (``sun_path`` is 108 with its NUL on Linux;
104 on some systems, which the margin in ``MAX_SOCKET_NAME`` covers)."""
MAX_SOCKET_NAME = 24 + 1 + 16 + len(".sock") + 4
"""The longest socket file name ``slug`` makes, plus a margin."""
HOOKS_OFF = (
    "pi-agent-ask: Claude Code hooks are off for this server ({why}); answers still reach "
    "the agent through wait_for_answers and with later tool results"
)
CONTEXT_HEAD = "pi-agent-ask: answers to your background questions arrived:"


def runtime_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where servers put their hook sockets (the hook command computes the same from the same
    environment): ``$XDG_RUNTIME_DIR/pi-agent-ask/mcp``, else ``<agent dir>/pi-agent-ask/mcp``
    when a socket path there fits the system's limit, else the short
    ``<temp dir>/pi-agent-ask-<uid>/mcp`` (checked to be this user's own, mode 0700)."""
    environment = os.environ if env is None else env
    base = environment.get("XDG_RUNTIME_DIR")
    if base:
        return Path(base) / "pi-agent-ask" / "mcp"
    from pi_agent_ask.persistence.settings import agent_dir

    folder = agent_dir(environment) / "pi-agent-ask" / "mcp"
    if len(os.fsencode(folder)) + 1 + MAX_SOCKET_NAME <= MAX_SOCKET_PATH:
        return folder
    return Path(tempfile.gettempdir()) / f"pi-agent-ask-{os.getuid()}" / "mcp"


def _private_dir(folder: Path) -> None:
    """Make ``folder`` (and its parent, for the short fallback) mode 0700 and refuse one that
    is not this user's own or that others may write: a socket there would be theirs to take."""
    if folder.parent.parent != Path(tempfile.gettempdir()):
        # Under the user's own runtime or agent directory.
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        return
    for checked in (folder.parent, folder):
        checked.mkdir(exist_ok=True, mode=0o700)
        info = checked.lstat()
        if info.st_uid != os.getuid() or not checked.is_dir() or checked.is_symlink():
            raise PermissionError(f"{checked} is not this user's own directory")
        if info.st_mode & 0o077:
            checked.chmod(0o700)  # ours, made by an older umask: close it


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
            stat = Path(f"/proc/{current}/stat").read_text(encoding="utf-8")
        except OSError:
            break
        fields = stat.rsplit(")", 1)[-1].split()
        parent = int(fields[1]) if len(fields) > 1 else 0
        if parent <= 1:
            break
        chain.append(parent)
        current = parent
    return chain


# -- the server's endpoint ---------------------------------------------------------------


@attrs.frozen
class Taken:
    """What one take handed out (marked delivered), and how to give it back when the hook's
    reply cannot be written (called only when something was handed out, under a shield)."""

    messages: list[dict[str, Any]]
    give_back: Callable[[], Awaitable[None]]


TakeForHook = Callable[[], Awaitable[Taken]]
"""A take of the agent's waiting text answers, for one hook request."""


async def _no_give_back() -> None:
    """Giving back a take that handed out nothing."""


NOTHING_TAKEN = Taken([], _no_give_back)
"""A take that handed out nothing (a desk that did not answer)."""


def local_take(tools: Any) -> TakeForHook:
    """Takes from the server's own runtime (``AgentTools``)."""

    async def take() -> Taken:
        # A hook adds text only: answers with images wait for the next tool result instead.
        messages = await tools.take_background_messages(text_only=True)
        return Taken(messages, functools.partial(tools.give_back, messages))

    return take


async def serve_hook_endpoint(
    take: TakeForHook,
    key: str,
    client: str,
    cwd: Path,
    *,
    directory: Path | None = None,
    base_key: str | None = None,
    task_status: trio.TaskStatus[Path | None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen for hooks until cancelled; ``task_status`` gets the socket path (``None`` when
    it could not be made: the server goes on without hooks). ``base_key``: the default key
    ``key`` numbers (``<client> #2@<cwd>``), which the hook command looks for."""
    folder = directory if directory is not None else runtime_dir()
    path = folder / f"{slug(key)}.sock"
    meta = folder / f"{slug(key)}.json"
    try:
        _private_dir(folder)
        if await _answers(path):
            # A live server already owns this key: this one goes on without hooks.
            why = f"another server serves hooks for {key!r}"
            print(HOOKS_OFF.format(why=why), file=sys.stderr)
            task_status.started(None)
            return
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        await sock.bind(str(path))
        path.chmod(0o600)
        sock.listen(16)
        info = {
            "key": key,
            "base": base_key or key,
            "client": client,
            "cwd": str(cwd),
            "pid": os.getpid(),
            "ancestors": ancestors(),
        }
        tmp = meta.with_name(f".{meta.name}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(info, handle)
        tmp.replace(meta)
    except OSError as error:
        why = f"cannot listen on {path}: {error.strerror or error}"
        print(HOOKS_OFF.format(why=why), file=sys.stderr)
        task_status.started(None)
        return
    listener = trio.SocketListener(sock)
    task_status.started(path)
    try:
        async with listener:

            async def serve(stream: trio.SocketStream) -> None:
                await _serve_one(take, stream)

            await trio.serve_listeners(serve, [listener])
    finally:
        for leftover in (path, meta):
            with contextlib.suppress(OSError):
                leftover.unlink()


async def _serve_one(take: TakeForHook, stream: trio.abc.Stream) -> None:
    try:
        await _answer_one(take, stream)
    except Exception as error:  # one hook connection's trouble never ends the server
        print(f"pi-agent-ask: hook request failed: {error!r}", file=sys.stderr)


async def _answer_one(take: TakeForHook, stream: trio.abc.Stream) -> None:
    async with stream:
        with trio.move_on_after(REQUEST_TIMEOUT):
            request = await _read_line(stream, MAX_LINE)
        if request is None:
            return
        try:
            op = json.loads(request).get("op")
        except (ValueError, AttributeError):
            op = None
        if op != "take":
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.send_all(b'{"error": "unknown request"}\n')
            return
        taken = await take()
        try:
            reply = json.dumps({"messages": taken.messages}, ensure_ascii=False).encode() + b"\n"
            with trio.CancelScope(shield=True), trio.fail_after(REQUEST_TIMEOUT):
                await stream.send_all(reply)
        except BaseException:
            if taken.messages:
                # Shielded: the reply failed, maybe under a cancellation; what the take handed
                # out goes back whatever ends this request.
                with trio.CancelScope(shield=True):
                    await taken.give_back()
            raise


async def _read_line(stream: trio.abc.Stream, limit: int) -> bytes | None:
    data = b""
    while b"\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return data or None
        data += chunk
        if len(data) > limit:
            return None
    return data.split(b"\n", 1)[0]


async def _answers(path: Path) -> bool:
    """Whether a live server listens on ``path``."""
    try:
        stream = await trio.open_unix_socket(str(path))
    except OSError:
        return False
    await stream.aclose()
    return True


# -- the hook command ---------------------------------------------------------------------


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


async def take_from(path: Path) -> list[dict[str, Any]]:
    """Take the waiting messages from the server at ``path`` (empty when it is gone)."""
    try:
        stream = await trio.open_unix_socket(str(path))
    except OSError:
        return []
    async with stream:
        try:
            await stream.send_all(b'{"op": "take"}\n')
            line = await _read_line(stream, MAX_REPLY)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return []
    if line is None:
        return []
    try:
        data = json.loads(line)
    except ValueError:
        return []
    messages = data.get("messages") if isinstance(data, dict) else None
    return [m for m in messages or () if isinstance(m, dict)]


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

    async def take() -> list[dict[str, Any]]:
        with trio.move_on_after(HOOK_TIMEOUT):
            return await take_from(server)
        return []

    output = hook_output(str(event), trio.run(take))
    if output is not None:
        stdout.write(json.dumps(output, ensure_ascii=False) + "\n")
        stdout.flush()
    return 0
