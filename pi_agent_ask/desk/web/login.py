"""``pi-agent-ask desk login-url``: a one-time sign-in URL from the running desk.

The running desk is found through its connection file (``find_desk``), else a team desk
through its sign-in file (:func:`team_login_file`, beside the connection file: a team desk
writes no connection file, since its agents come with their own tokens); the URL is asked for
with the desk's bearer token (``POST /login-code``), so only someone who can read one of those
files (mode 0600) can make one. A QR code of it, for a phone, is drawn with
``segno`` (pure Python, no image libraries) in the terminal.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from pi_agent_ask.mcp_common.connection import (
    DeskAddress,
    DeskFileError,
    desk_file_path,
    find_desk,
    pid_alive,
    read_desk_file,
)

__all__ = ["NoDesk", "fetch_login_url", "print_qr", "team_login_file"]

LOGIN_CODE_PATH = "/login-code"


class NoDesk(Exception):
    """No desk runs (no connection file, or a stale one)."""


def _base(address: DeskAddress) -> str:
    return address.url.rsplit("/", 1)[0] if address.url.endswith("/mcp") else address.url


def team_login_file(desk_file: Path) -> Path:
    """Where a team desk writes its page's address and sign-in token (``{"url", "token",
    "pid"}``, mode 0600): beside the connection file ``desk_file``, ``desk.team.json`` for
    ``desk.json``. The token opens ``/login-code`` only, never ``/mcp``."""
    return desk_file.with_name(f"{desk_file.stem}.team{desk_file.suffix}")


def _team_desk(env: Mapping[str, str] | None) -> DeskAddress | None:
    try:
        address = read_desk_file(team_login_file(desk_file_path(env)))
    except DeskFileError:
        return None
    return address if address is not None and pid_alive(address.pid) else None


NO_DESK = "no desk is running (start one with 'pi-agent-ask desk')"


async def fetch_login_url(env: Mapping[str, str] | None = None) -> str:
    """A new sign-in URL from the desk of this machine's connection file, else from the team
    desk of its sign-in file. Raises :class:`NoDesk` when neither runs."""
    import httpx2

    found = await find_desk(env)
    address = found if found is not None else _team_desk(env)
    if address is None:
        raise NoDesk(NO_DESK)
    async with httpx2.AsyncClient(timeout=10.0) as client:
        try:
            response = await client.post(
                _base(address) + LOGIN_CODE_PATH,
                headers={"Authorization": f"Bearer {address.token}"},
            )
        except httpx2.TransportError:
            if found is not None:
                raise
            raise NoDesk(NO_DESK) from None  # a sign-in file left by a team desk that was killed
    response.raise_for_status()
    url = response.json()["url"]
    assert isinstance(url, str)
    return url


def print_qr(url: str, out: TextIO) -> None:
    """The URL as a QR code drawn with block characters (a phone's camera reads it)."""
    import segno

    segno.make(url, error="m").terminal(out=out, compact=True)
