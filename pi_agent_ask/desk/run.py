"""Running the desk: the board, the agents, the HTTP endpoint, the terminal, the connection file.

:func:`run_desk` starts, in this order: the display (the terminal, or nothing when headless),
the agent registry (every journal under the state directory is reopened, so forms queued
before a restart are on the board before any agent reconnects), the session manager and
hypercorn on Trio, and then writes the connection file (and leaves the heap it started with
out of later garbage collections, which keeps their pauses short). Leaving (cancellation,
Ctrl-Q) removes the connection file first, so no client finds a desk that is going away, then
stops the server and disposes every runtime (drafts saved).
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import attrs
import trio
from hypercorn.trio import serve
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.desk.agents import AgentRegistry
from pi_agent_ask.desk.board import Board
from pi_agent_ask.desk.http import (
    MCP_PATH,
    DeskApp,
    Listen,
    ListenError,
    is_loopback,
    mcp_server,
    parse_listen,
    server_config,
)
from pi_agent_ask.mcp_common import package_version
from pi_agent_ask.mcp_common.connection import (
    DeskAddress,
    desk_file_path,
    find_desk,
    new_token,
    remove_desk_file,
    write_desk_file,
)
from pi_agent_ask.mcp_common.journals import StateDirInUse, default_state_dir, lock_state_dir
from pi_agent_ask.web.app import WebDesk, web_base_url
from pi_agent_ask.web.history import RegistryHistories

__all__ = [
    "REMOTE_WARNING",
    "Desk",
    "DeskAlreadyRunning",
    "check_tls",
    "run_desk",
    "sign_in_text",
]

REMOTE_WARNING = (
    "warning: the desk listens on {host}, which is not a loopback address: anyone who can reach "
    "it and has the token in {file} can ask and read this desk's questions. Use a trusted "
    "network (an SSH tunnel to a loopback desk is safer)."
)


SESSION_IDLE_TIMEOUT = 4 * 3600.0
"""Seconds an MCP session may sit with no request in flight and no open stream before the desk
forgets it (a client that died without closing it). A call waiting for the person is in
flight, so a long wait never counts as idle; a client that comes back later opens a new
session, and its agent key (not the session) finds its questions."""


class DeskAlreadyRunning(Exception):
    """Another desk is running and answers at the connection file's URL, or holds the state
    directory."""


@attrs.frozen
class Desk:
    """A running desk (what ``run_desk`` hands its starter)."""

    address: DeskAddress
    desk_file: Path
    registry: AgentRegistry
    board: Board
    cancel: Callable[[], None]
    stopped: trio.Event
    """Set once the desk stopped (its connection file is gone)."""
    web: WebDesk | None = None
    """The web desk on the same listener (``login_url()`` makes a sign-in URL)."""


def check_tls(
    where: Listen, tls_cert: Path | None, tls_key: Path | None, tls_elsewhere: bool
) -> None:
    """The web page's rule: a non-loopback listen serves TLS (``--tls-cert``/``--tls-key``),
    unless the person says a tunnel or a proxy protects the traffic (``--tls-elsewhere``)."""
    if (tls_cert is None) != (tls_key is None):
        raise ListenError("--tls-cert and --tls-key go together")
    if not is_loopback(where.host) and tls_cert is None and not tls_elsewhere:
        raise ListenError(
            f"refusing to listen on {where.host} without TLS: pass --tls-cert and --tls-key, "
            "or --tls-elsewhere when a tunnel or a proxy protects the traffic (docs/web.md)"
        )


async def run_desk(
    *,
    listen: str | None = None,
    state_dir: Path | None = None,
    settings: Path | None = None,
    allow_remote: bool = False,
    tls_cert: Path | None = None,
    tls_key: Path | None = None,
    tls_elsewhere: bool = False,
    desk_file: Path | None = None,
    headless: bool = False,
    input: Any = None,
    output: Any = None,
    warn: Callable[[str], None] = lambda _text: None,
    progress_interval: float | None = None,
    task_status: trio.TaskStatus[Desk] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the desk until cancelled or until the person quits (Ctrl-Q).

    ``headless``: no terminal; forms are answered through ``pi-agent-ask:submit`` events on
    each agent's runtime only (tests, benchmarks, scripted answerers). ``input``/``output``
    are prompt_toolkit objects for the terminal (``None``: the process's terminal). ``warn``
    receives the non-loopback warning; ``progress_interval`` overrides the seconds between
    progress notifications of long waits. ``tls_cert``/``tls_key``: serve HTTPS; a
    non-loopback listen needs them, or ``tls_elsewhere`` (a tunnel or a proxy protects the
    traffic). Raises ``ListenError`` and :class:`DeskAlreadyRunning`.
    """
    where = parse_listen(listen)
    if not is_loopback(where.host) and not allow_remote:
        raise ListenError(
            f"refusing to listen on {where.host}, which is not a loopback address; "
            "pass --allow-remote to do it anyway (every request still needs the token)"
        )
    check_tls(where, tls_cert, tls_key, tls_elsewhere)
    file = desk_file if desk_file is not None else desk_file_path()
    running = await find_desk(path=file)
    if running is not None:
        raise DeskAlreadyRunning(
            f"a desk is already running at {running.url} (pid {running.pid}); its connection "
            f"file is {file}"
        )
    state = state_dir if state_dir is not None else default_state_dir()
    if not is_loopback(where.host):
        warn(REMOTE_WARNING.format(host=where.host, file=file))
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(lock_state_dir(state))
        except StateDirInUse as error:
            raise DeskAlreadyRunning(str(error)) from None
        await _run(
            where=where,
            file=file,
            state=state,
            settings=settings,
            headless=headless,
            input=input,
            output=output,
            progress_interval=progress_interval,
            tls_cert=tls_cert,
            tls_key=tls_key,
            task_status=task_status,
        )


async def _run(
    *,
    where: Listen,
    file: Path,
    state: Path,
    settings: Path | None,
    headless: bool,
    input: Any,
    output: Any,
    progress_interval: float | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    task_status: trio.TaskStatus[Desk],
) -> None:

    from pi_agent_ask.persistence.settings import load_settings, settings_path

    settings_file = settings if settings is not None else settings_path(os.environ)
    loaded = await trio.to_thread.run_sync(
        lambda: load_settings(settings_file, project_dir=Path.cwd())
    )
    stopped = trio.Event()
    async with trio.open_nursery() as nursery:
        display: Any
        if headless:
            display = NullSurface()
            notice = _ignore
        else:
            from pi_agent_ask.desk.terminal import DeskSurface

            display = DeskSurface(loaded, quit=nursery.cancel_scope.cancel)
            notice = display.notice
        board = Board(display=display)
        registry = AgentRegistry(
            state_dir=state,
            board=board,
            settings=settings_file,
            cwd=Path.cwd(),
            notice=notice,
            progress_interval=progress_interval,
            write_terminal=None if headless else display.write_terminal,
        )
        board.blocked_on = registry.blocked_on
        token = new_token()
        web = WebDesk(
            board=board,
            histories=RegistryHistories(registry),
            token=token,
            secure=tls_cert is not None,
        )
        registry.form_url = web.form_url
        if not headless:
            from pi_agent_ask.ui.surface import run_terminal_surface

            board.on_change = display.invalidate
            display.board = board
            display.on_settings_saved = registry.apply_settings
            for text in loaded.notices:
                display.notice(text)
            await nursery.start(
                lambda task_status: run_terminal_surface(
                    display, input=input, output=output, task_status=task_status
                )
            )
        await nursery.start(registry.run)
        manager = StreamableHTTPSessionManager(
            mcp_server(registry, version=package_version()),
            session_idle_timeout=SESSION_IDLE_TIMEOUT,
        )
        app = DeskApp(manager=manager, token=token, listen=where, pid=os.getpid(), web=web)
        config = server_config(where, tls_cert, tls_key)
        async with manager.run():
            binds: list[str] = await nursery.start(serve, app, config)
            port = int(binds[0].rsplit(":", 1)[1])
            app.port = port
            scheme = "https" if tls_cert is not None else "http"
            web.base_url = web_base_url(scheme, where.host, port)
            address = DeskAddress(
                url=f"{scheme}://{where.bind.rsplit(':', 1)[0]}:{port}{MCP_PATH}",
                token=token,
                pid=os.getpid(),
            )
            try:
                # Inside the try: a cancellation while the file is written still removes it.
                await trio.to_thread.run_sync(write_desk_file, file, address)
                if not headless:  # shown once the file is written: a client can read it then
                    display.url = address.url
                    display.sign_in = sign_in_text(web.login_url(), is_loopback(where.host))
                    display.invalidate()
                _freeze_heap()
                task_status.started(
                    Desk(
                        address=address,
                        desk_file=file,
                        registry=registry,
                        board=board,
                        cancel=nursery.cancel_scope.cancel,
                        stopped=stopped,
                        web=web,
                    )
                )
                await trio.sleep_forever()
            finally:
                with suppress(OSError):
                    remove_desk_file(file, address)
                gc.unfreeze()
                stopped.set()
                nursery.cancel_scope.cancel()


def sign_in_text(
    url: str, loopback: bool, *, another: str = "'pi-agent-ask desk login-url' makes another"
) -> str:
    """The terminal desk's sign-in lines for its web page (with a QR code for a phone when
    other machines can reach the listen); ``another`` says how to get a new URL."""
    lines = [
        "",
        " Answer in a browser too: open this link once (it lasts 10 minutes;",
        f" {another}):",
        f" {url}",
    ]
    if not loopback:
        import io

        from pi_agent_ask.web.login import print_qr

        drawn = io.StringIO()
        print_qr(url, drawn)
        lines.extend(" " + line for line in drawn.getvalue().splitlines())
    return "\n".join(lines) + "\n"


def _freeze_heap() -> None:
    """Leave the heap the desk started with (modules, the SDK, the agents reopened) out of
    every later garbage collection: a full collection then walks only what the desk made
    since, so its pause, which delays whatever answer it lands on, stays short (measured: 30
    ms at most instead of 90, 20 agents on the desk). What is garbage already is collected
    first, so nothing dead is kept; leaving the desk thaws it again."""
    gc.collect()
    gc.freeze()


def _ignore(_text: str) -> None:
    pass
