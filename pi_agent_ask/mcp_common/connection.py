"""The desk's connection file, its agent-key header, and finding a running desk through them.

A running desk writes ``{"url", "token", "pid"}`` (mode 0600) to ``$PI_AGENT_ASK_DESK_FILE``,
default ``$XDG_RUNTIME_DIR/pi-agent-ask/desk.json`` (or ``~/.pi/agent/pi-agent-ask/desk.json``
without ``XDG_RUNTIME_DIR``), and removes it on exit. A file left behind by a desk that died is
recognised as stale: its pid is gone, or its URL does not answer as that desk.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

import attrs

__all__ = [
    "CALL_KEY_META",
    "DESK_FILE_ENV",
    "HOOK_PATH",
    "KEY_HEADER",
    "KEY_UTF8_HEADER",
    "STATUS_PATH",
    "DeskAddress",
    "DeskFileError",
    "desk_file_path",
    "desk_url",
    "find_desk",
    "key_from_headers",
    "key_headers",
    "new_token",
    "parse_desk_urls",
    "pid_alive",
    "read_desk_file",
    "remove_desk_file",
    "write_desk_file",
]

DESK_FILE_ENV = "PI_AGENT_ASK_DESK_FILE"
KEY_HEADER = "x-pi-agent-ask-key"
"""The request header naming the agent a desk request is for (else its MCP session id)."""
KEY_UTF8_HEADER = "x-pi-agent-ask-key-utf8"
"""The same, percent-encoded UTF-8 (``caf%C3%A9``): header values are ASCII, and a key holds
any printable text (the stdio server's default key holds the working directory)."""


def key_headers(key: str) -> dict[str, str]:
    """The header that sends ``key``: as it is when it is ASCII, else percent-encoded."""
    if key.isascii():
        return {KEY_HEADER: key}
    return {KEY_UTF8_HEADER: urllib.parse.quote(key, safe="")}


def key_from_headers(headers: Mapping[str, str]) -> str | None:
    """The agent key a request's headers send (the encoded header first), or ``None``.
    ``ValueError`` for an encoded key that is not UTF-8."""
    encoded = headers.get(KEY_UTF8_HEADER)
    if encoded is not None:
        return urllib.parse.unquote(encoded, errors="strict")
    return headers.get(KEY_HEADER)


STATUS_PATH = "/desk"
"""An authenticated ``GET`` there answers ``{"service": "pi-agent-ask desk", "pid": ...}``."""
HOOK_PATH = "/hook"
"""An authenticated ``POST`` there, with an agent key, serves that agent's Claude Code hook
through its stdio server: ``?op=take`` answers ``{"messages": [...], "receipt": R}`` (the
waiting text answers, marked delivered), ``?op=give-back&receipt=R`` gives those back."""
SERVICE = "pi-agent-ask desk"
PROBE_TIMEOUT = 3.0
CALL_KEY_META = "pi-agent-ask/callKey"
"""The ``_meta`` key of a team tool call's key, the same for every attempt of one call (the
forwarder sets it, the team desk reads it)."""


class DeskFileError(Exception):
    """The connection file exists but cannot be read as one."""


@attrs.frozen
class DeskAddress:
    """Where a desk listens and the token its every request needs."""

    url: str
    token: str
    pid: int

    def to_json(self) -> dict[str, object]:
        return {"url": self.url, "token": self.token, "pid": self.pid}

    @classmethod
    def from_json(cls, data: object) -> DeskAddress:
        if not isinstance(data, Mapping):
            raise DeskFileError("the connection file is not a JSON object")
        url, token, pid = data.get("url"), data.get("token"), data.get("pid")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise DeskFileError("the connection file has no http(s) url")
        if not isinstance(token, str) or not token:
            raise DeskFileError("the connection file has no token")
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            raise DeskFileError("the connection file has no pid")
        return cls(url=url, token=token, pid=pid)

    @property
    def status_url(self) -> str:
        return desk_url(self.url, STATUS_PATH)


def desk_url(mcp_url: str, path: str) -> str:
    """The URL of the desk's endpoint ``path`` beside its MCP endpoint ``mcp_url``."""
    base = mcp_url.rsplit("/", 1)[0] if mcp_url.endswith("/mcp") else mcp_url.rstrip("/")
    return base + path


def parse_desk_urls(text: str) -> list[str]:
    """``URL[,URL...]``: the desks to use, in order; ``ValueError`` for an empty or non-HTTP one."""
    urls = [part.strip() for part in text.split(",")]
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"a desk URL must start with http:// or https://, not {url!r}")
    return urls


def new_token() -> str:
    return secrets.token_urlsafe(32)


def desk_file_path(env: Mapping[str, str] | None = None) -> Path:
    environment = os.environ if env is None else env
    explicit = environment.get(DESK_FILE_ENV)
    if explicit:
        return Path(explicit)
    runtime_dir = environment.get("XDG_RUNTIME_DIR")
    if runtime_dir:
        return Path(runtime_dir) / "pi-agent-ask" / "desk.json"
    home = environment.get("HOME")
    base = Path(home) if home else Path.home()
    return base / ".pi" / "agent" / "pi-agent-ask" / "desk.json"


def write_desk_file(path: Path, address: DeskAddress) -> None:
    """Write the connection file atomically with mode 0600 (its directory 0700 if created).

    The file is created with its final mode (never readable by others, not even briefly)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        partial.unlink()
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(address.to_json(), handle)
            handle.flush()
            os.fsync(handle.fileno())
        partial.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise


def read_desk_file(path: Path) -> DeskAddress | None:
    """The address in the connection file; ``None`` when there is none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise DeskFileError(f"cannot read {path}: {error}") from error
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise DeskFileError(f"{path} is not JSON: {error}") from error
    return DeskAddress.from_json(data)


def remove_desk_file(path: Path, address: DeskAddress) -> None:
    """Remove the connection file if it is still this desk's (a later desk may own it)."""
    try:
        current = read_desk_file(path)
    except DeskFileError:
        return
    if current is not None and current.token == address.token:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


async def probe(address: DeskAddress) -> bool:
    """Whether ``address`` answers as the desk with its pid (an authenticated status request)."""
    import httpx2

    try:
        async with httpx2.AsyncClient(timeout=PROBE_TIMEOUT) as client:
            response = await client.get(
                address.status_url, headers={"Authorization": f"Bearer {address.token}"}
            )
    except httpx2.HTTPError:
        return False
    if response.status_code != 200:
        return False
    try:
        data = response.json()
    except ValueError:
        return False
    return (
        isinstance(data, dict) and data.get("service") == SERVICE and data.get("pid") == address.pid
    )


async def find_desk(
    env: Mapping[str, str] | None = None, *, path: Path | None = None
) -> DeskAddress | None:
    """The running desk named by the connection file, or ``None``.

    ``None`` when there is no file, the file is damaged, its pid is gone, or its URL does not
    answer as that desk (a stale file from a desk that was killed)."""
    file = path if path is not None else desk_file_path(env)
    try:
        address = read_desk_file(file)
    except DeskFileError:
        return None
    if address is None or not pid_alive(address.pid):
        return None
    return address if await probe(address) else None
