"""``pi-agent-ask desk login-url``: a one-time sign-in URL from the running desk.

The running desk is found through its connection file (``find_desk``); the URL is asked for
with the desk's bearer token (``POST /login-code``), so only someone who can read the
connection file (mode 0600) can make one. A QR code of it, for a phone, is drawn with
``segno`` (pure Python, no image libraries) in the terminal.
"""

from __future__ import annotations

from typing import TextIO

from pi_agent_ask.mcp_common.connection import DeskAddress, find_desk

__all__ = ["NoDesk", "fetch_login_url", "print_qr"]

LOGIN_CODE_PATH = "/login-code"


class NoDesk(Exception):
    """No desk runs (no connection file, or a stale one)."""


def _base(address: DeskAddress) -> str:
    return address.url.rsplit("/", 1)[0] if address.url.endswith("/mcp") else address.url


async def fetch_login_url() -> str:
    import httpx2

    address = await find_desk()
    if address is None:
        raise NoDesk("no desk is running (start one with 'pi-agent-ask desk')")
    async with httpx2.AsyncClient(timeout=10.0) as client:
        response = await client.post(
            _base(address) + LOGIN_CODE_PATH,
            headers={"Authorization": f"Bearer {address.token}"},
        )
    response.raise_for_status()
    url = response.json()["url"]
    assert isinstance(url, str)
    return url


def print_qr(url: str, out: TextIO) -> None:
    """The URL as a QR code drawn with block characters (a phone's camera reads it)."""
    import segno

    segno.make(url, error="m").terminal(out=out, compact=True)
