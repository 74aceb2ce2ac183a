"""Running a team desk: the store's pool, its listener, the board, the MCP endpoint, the page.

:func:`run_team_desk` is ``pi-agent-ask desk --store URL``: the same HTTP endpoint as a desk
of files (hypercorn on Trio, the SDK's session manager, the Origin and Host checks), with the
agents' state in the store, and the same web page beside ``/mcp`` (``store/web.py``), with the
same TLS rule. It writes no connection file: a team desk admits agents by their own tokens
(``pi-agent-ask store token``), which a connection file cannot hand out. Its page's one-time
sign-in URLs come from the desk's own output (``TeamDesk.web.login_url()``) and, given a
``login_file`` (the command line's is ``web.login.team_login_file``), from ``pi-agent-ask desk
login-url``, which reads the page's address and sign-in token there.
"""

from __future__ import annotations

import functools
import getpass
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import trio
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from pi_agent_ask.desk.board import Board
from pi_agent_ask.desk.run import checked_listen, desk_settings, serving, show_terminal
from pi_agent_ask.desk.terminal import Brief
from pi_agent_ask.desk.web.app import WebDesk
from pi_agent_ask.mcp_common.connection import new_token
from pi_agent_ask.store.board import WRITES_AGAIN, TeamBoard, desk_name
from pi_agent_ask.store.db import Store
from pi_agent_ask.store.http import TeamDeskApp, team_hook, team_mcp_server
from pi_agent_ask.store.terminal import (
    STORE_REFUSED_SHORT,
    WRITES_AGAIN_SHORT,
    say_the_store_s_reach,
)
from pi_agent_ask.store.wakes import AsyncStore, Wakes, listen
from pi_agent_ask.store.web import TeamPage, team_web_desk

__all__ = ["TeamDesk", "default_person", "run_team_desk"]


def default_person() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "someone"


@attrs.frozen
class TeamDesk:
    url: str
    board: TeamBoard
    store: AsyncStore
    cancel: Callable[[], None]
    web: WebDesk
    """The desk's web page (``login_url()`` makes a one-time sign-in URL)."""


async def run_team_desk(
    store_url: str,
    *,
    listen_on: str | None = None,
    person: str | None = None,
    allow_remote: bool = False,
    tls_cert: Path | None = None,
    tls_key: Path | None = None,
    tls_elsewhere: bool = False,
    warn: Callable[[str], None] = lambda _text: None,
    progress_interval: float | None = None,
    lease: float | None = None,
    heartbeat: float | None = None,
    on_change: Callable[[], None] = lambda: None,
    headless: bool = True,
    settings: Path | None = None,
    login_file: Path | None = None,
    input: Any = None,
    output: Any = None,
    task_status: trio.TaskStatus[TeamDesk] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve a team desk on the store at ``store_url`` until cancelled, or until the person
    quits (Ctrl-Q) the terminal view (``headless=False``; ``input``/``output``: prompt_toolkit
    objects, ``None`` for the process's terminal). ``login_file``: where ``desk login-url``
    finds the page (written once the desk listens, removed when it stops)."""
    where = checked_listen(
        listen_on,
        allow_remote=allow_remote,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_elsewhere=tls_elsewhere,
        guard="an agent token",
        secrets_in="the store's token table",
        warn=warn,
    )
    _settings_file, loaded = await desk_settings(settings)
    store = Store(store_url)
    await trio.to_thread.run_sync(store.open)
    try:
        shared = AsyncStore.of(store)
        wakes = Wakes()
        timing: dict[str, Any] = {}
        if lease is not None:
            timing["lease"] = lease
        if heartbeat is not None:
            timing["heartbeat"] = heartbeat
        board = TeamBoard(
            shared,
            wakes,
            person or default_person(),
            desk=desk_name(),
            on_change=on_change,
            **timing,
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(listen, store_url, wakes, store.renew)
            await wakes.connected.wait()
            await nursery.start(board.run)
            page = TeamPage(board)
            await nursery.start(page.run)
            web = team_web_desk(page, shared, token=new_token(), secure=tls_cert is not None)
            display = None
            if not headless:
                display = await _terminal(board, nursery, loaded, input, output)
            told = functools.partial(_told, page.board, display)
            board.notice = lambda text: told(
                Brief(text, WRITES_AGAIN_SHORT if text == WRITES_AGAIN else STORE_REFUSED_SHORT)
            )
            nursery.start_soon(say_the_store_s_reach, wakes, told)
            server = team_mcp_server(
                shared,
                wakes,
                progress_interval=progress_interval,
                history_tools=loaded.config.behaviour.history_tools,
            )

            def app_of(manager: StreamableHTTPSessionManager) -> TeamDeskApp:
                return TeamDeskApp(
                    manager=manager,
                    token="",
                    listen=where,
                    pid=os.getpid(),
                    store=shared,
                    web=web,
                    hooks=team_hook(shared, wakes),
                )

            async with serving(
                nursery,
                server,
                app_of,
                web,
                where,
                tls_cert=tls_cert,
                tls_key=tls_key,
                token=web.token,
                address_file=login_file,
                display=display,
            ) as address:
                task_status.started(
                    TeamDesk(address.url, board, shared, nursery.cancel_scope.cancel, web)
                )
                await trio.sleep_forever()
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(store.close)


def _told(page: Board, display: Any, text: Brief | str) -> None:
    """A notice of the desk: on its page, above the form (``Board.note``, as a desk of files
    shows its notices), and on its terminal's status line (``display``; ``None``: headless),
    which a short screen may say briefly."""
    page.note(text if isinstance(text, str) else text.text)
    if display is not None:
        display.notice(text)


async def _terminal(
    team: TeamBoard, nursery: trio.Nursery, loaded: Any, input: Any, output: Any
) -> Any:
    """The desk's screen on the team board; Ctrl-Q cancels ``nursery`` (the desk stops)."""
    from pi_agent_ask.actors.config import config_from_settings
    from pi_agent_ask.desk.terminal import DeskSurface
    from pi_agent_ask.store.terminal import answer_on_terminal

    display = DeskSurface(loaded, quit=nursery.cancel_scope.cancel)
    board = Board(display=display)
    await show_terminal(nursery, display, board, loaded, input, output)
    form_settings = config_from_settings(loaded).form_settings
    nursery.start_soon(
        functools.partial(answer_on_terminal, hint=display.hint, busy=display.busy),
        team,
        board,
        display.notice,
        form_settings,
    )
    return display
