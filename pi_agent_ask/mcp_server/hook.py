"""Background answers for Claude Code's hooks: the server's endpoint.

A running ``pi-agent-ask mcp`` server listens on a private unix socket,
``<runtime dir>/pi-agent-ask/mcp/<slug>.sock`` (directory 0700, socket 0600; the runtime dir
is ``$XDG_RUNTIME_DIR``, else the agent directory, else, when a socket path there would be
too long, a private ``<temp dir>/pi-agent-ask-<uid>``: see ``hook_socket.runtime_dir``), with
``<slug>.json`` beside it: ``{"key", "base", "client", "cwd", "pid", "ancestors"}`` (``base``:
the key before its run number, ``journals.claim_default_key``). The protocol is
one JSON line each way: the hook sends ``{"op": "take"}``, the server answers
``{"messages": [...]}`` (the turn-boundary messages, marked delivered by the runtime's
boundary) and closes. Delivery stays exactly once because it is decided where the agent's
runtime is: the server's own (:func:`local_take`), or, while the server forwards to a desk,
the desk's runtime of this agent (``forward.desk_take``, the desk's ``/hook``). A reply that
cannot be written is given back to the next tool result, and so are answers with images (a
hook adds text only; a tool result carries the images).

Where the socket is: ``hook_socket.py``; the hook command that asks it: ``hook_command.py``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from pi_agent_ask.mcp_server.hook_socket import ancestors, runtime_dir, slug

MAX_LINE = 1 << 16
"""Bytes of a request line the endpoint reads; a longer line is refused."""
REQUEST_TIMEOUT = 5.0
HOOKS_OFF = (
    "pi-agent-ask: Claude Code hooks are off for this server ({why}); answers still reach "
    "the agent through wait_for_answers and with later tool results"
)


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
