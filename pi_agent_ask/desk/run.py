"""Running the desk: the board, the agents, the HTTP endpoint, the terminal, the connection file.

:func:`run_desk` starts, in this order: the display (the terminal, or nothing when headless),
the agent registry (every journal under the state directory is reopened, so forms queued
before a restart are on the board before any agent reconnects), the session manager and
hypercorn on Trio, and then writes the connection file. Leaving (cancellation, Ctrl-Q) removes
the connection file first, so no client finds a desk that is going away, then stops the
server and disposes every runtime (drafts saved).

The start-up shape both desks share (a desk of files here, a team desk in ``store/run.py``)
is one implementation: :func:`checked_listen` (the listen rules: loopback unless
``--allow-remote``, TLS off loopback, the warning) and :func:`serving` (the session manager,
hypercorn, the page's address, the address file written and removed, the terminal's sign-in
lines).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import attrs
import trio
from hypercorn.trio import serve
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.desk.agents import AgentRegistry
from pi_agent_ask.desk.board import Board
from pi_agent_ask.desk.http import (
    MAX_REQUEST_BODY,
    MCP_PATH,
    DeskApp,
    Listen,
    ListenError,
    agent_hook,
    is_loopback,
    mcp_server,
    parse_listen,
    server_config,
)
from pi_agent_ask.desk.web.app import WebDesk, web_base_url
from pi_agent_ask.desk.web.history import RegistryHistories
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

__all__ = [
    "REMOTE_WARNING",
    "Desk",
    "DeskAlreadyRunning",
    "check_tls",
    "checked_listen",
    "desk_settings",
    "run_desk",
    "serving",
    "show_terminal",
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
    if tls_cert is not None and tls_key is not None:
        _check_tls_files(tls_cert, tls_key)
    if not is_loopback(where.host) and tls_cert is None and not tls_elsewhere:
        raise ListenError(
            f"refusing to listen on {where.host} without TLS: pass --tls-cert and --tls-key, "
            "or --tls-elsewhere when a tunnel or a proxy protects the traffic (docs/web.md)"
        )


def _check_tls_files(cert: Path, key: Path) -> None:
    """Both files load as a PEM certificate and its key, or the refusal names them (the TLS
    library's own words name neither: ``[SSL] PEM lib``)."""
    import ssl

    for option, path in (("--tls-cert", cert), ("--tls-key", key)):
        if not path.exists():
            raise ListenError(f"{option} {path}: no such file")
        if not path.is_file():
            raise ListenError(f"{option} {path}: not a file")
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except ssl.SSLError as error:
        detail = f" ({error.reason})" if error.reason else ""
        raise ListenError(
            f"--tls-cert {cert} and --tls-key {key}: not a PEM certificate and its private "
            f"key{detail}"
        ) from None
    except OSError as error:
        raise ListenError(f"--tls-cert {cert} and --tls-key {key}: {error.strerror}") from None


def checked_listen(
    listen: str | None,
    *,
    allow_remote: bool,
    tls_cert: Path | None,
    tls_key: Path | None,
    tls_elsewhere: bool,
    guard: str,
    secrets_in: str,
    warn: Callable[[str], None],
) -> Listen:
    """The ``--listen`` address, under the listen rules: a non-loopback one needs
    ``allow_remote`` and TLS (:func:`check_tls`), and is warned about (``secrets_in``: where
    whoever reaches it finds what lets them in; ``guard``: what every request still needs).
    Raises ``ListenError``."""
    where = parse_listen(listen)
    if not is_loopback(where.host) and not allow_remote:
        # Said whole: a person fixing one refusal should not meet the next (TLS) after it.
        tls = not (tls_elsewhere or (tls_cert is not None and tls_key is not None))
        needed = (
            "pass --allow-remote, and --tls-cert and --tls-key or --tls-elsewhere (docs/web.md),"
            if tls
            else "pass --allow-remote"
        )
        raise ListenError(
            f"refusing to listen on {where.host}, which is not a loopback address; "
            f"{needed} to do it anyway (every request still needs {guard})"
        )
    check_tls(where, tls_cert, tls_key, tls_elsewhere)
    if not is_loopback(where.host):
        warn(REMOTE_WARNING.format(host=where.host, file=secrets_in))
    return where


async def desk_settings(settings: Path | None) -> tuple[Path, Any]:
    """The settings file (``None``: the default one) and what loading it gave
    (``LoadedSettings``), read in a worker thread."""
    from pi_agent_ask.persistence.settings import load_settings, settings_path

    settings_file = settings if settings is not None else settings_path(os.environ)
    loaded = await trio.to_thread.run_sync(
        lambda: load_settings(settings_file, project_dir=Path.cwd())
    )
    return settings_file, loaded


async def show_terminal(
    nursery: trio.Nursery, display: Any, board: Board, loaded: Any, input: Any, output: Any
) -> None:
    """Start the desk's terminal ``display`` (a ``DeskSurface``) on ``board`` in ``nursery``,
    with the settings' notices."""
    from pi_agent_ask.ui.surface import run_terminal_surface

    board.on_change = display.invalidate
    display.board = board
    for text in loaded.notices:
        display.notice(text)
    await nursery.start(
        lambda task_status: run_terminal_surface(
            display, input=input, output=output, task_status=task_status
        )
    )


@asynccontextmanager
async def serving(
    nursery: trio.Nursery,
    server: Server[Any],
    app_of: Callable[[StreamableHTTPSessionManager], DeskApp],
    web: WebDesk,
    where: Listen,
    *,
    tls_cert: Path | None,
    tls_key: Path | None,
    token: str,
    address_file: Path | None,
    display: Any = None,
) -> AsyncIterator[DeskAddress]:
    """Serve ``server`` at ``/mcp`` and ``web`` beside it (the ASGI app ``app_of`` makes) on
    hypercorn in ``nursery`` for the block; yields the desk's address (its ``/mcp`` URL, with
    ``token``). Once it listens: the page's base URL is set, ``address_file`` written (mode
    0600) and the terminal ``display`` shows the URL and the page's sign-in lines. Leaving
    removes ``address_file`` first (if still this desk's), then stops the server."""
    manager = StreamableHTTPSessionManager(
        server, session_idle_timeout=SESSION_IDLE_TIMEOUT, max_request_body_size=MAX_REQUEST_BODY
    )
    app = app_of(manager)
    async with manager.run():
        binds: list[str] = await nursery.start(serve, app, server_config(where, tls_cert, tls_key))
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
            if address_file is not None:
                await trio.to_thread.run_sync(write_desk_file, address_file, address)
            if display is not None:  # shown once the file is written: a client can read it then
                display.url = address.url
                loopback = is_loopback(where.host)
                web.auth.used = display.link_used
                display.show_sign_in(web.login_url, lambda url: sign_in_text(url, loopback))
            yield address
        finally:
            if address_file is not None:
                with suppress(OSError):
                    remove_desk_file(address_file, address)


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
    file = desk_file if desk_file is not None else desk_file_path()
    where = checked_listen(
        listen,
        allow_remote=allow_remote,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_elsewhere=tls_elsewhere,
        guard="the token",
        secrets_in=str(file),
        warn=warn,
    )
    running = await find_desk(path=file)
    if running is not None:
        raise DeskAlreadyRunning(
            f"a desk is already running at {running.url} (pid {running.pid}); its connection "
            f"file is {file}"
        )
    state = state_dir if state_dir is not None else default_state_dir()
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
    settings_file, loaded = await desk_settings(settings)
    stopped = trio.Event()
    async with trio.open_nursery() as nursery:
        display: Any
        if headless:
            display = NullSurface()
            notice = hint = _ignore
        else:
            from pi_agent_ask.desk.terminal import DeskSurface

            display = DeskSurface(loaded, quit=nursery.cancel_scope.cancel)
            notice, hint = display.notice, display.hint
        board = Board(display=display)

        def told(text: str) -> None:
            """A notice on the terminal (if any) and on the web page, which a headless desk's
            person reads only there."""
            board.note(text)
            notice(text)

        registry = AgentRegistry(
            state_dir=state,
            board=board,
            settings=settings_file,
            cwd=Path.cwd(),
            notice=told,
            hint=hint,
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
            display.on_settings_saved = registry.apply_settings
            await show_terminal(nursery, display, board, loaded, input, output)
        await nursery.start(registry.run)

        def app_of(manager: StreamableHTTPSessionManager) -> DeskApp:
            return DeskApp(
                manager=manager,
                token=token,
                listen=where,
                pid=os.getpid(),
                web=web,
                hooks=functools.partial(agent_hook, registry),
            )

        try:
            async with serving(
                nursery,
                mcp_server(registry, version=package_version()),
                app_of,
                web,
                where,
                tls_cert=tls_cert,
                tls_key=tls_key,
                token=token,
                address_file=file,
                display=None if headless else display,
            ) as address:
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
            stopped.set()  # the connection file is gone (``serving`` removed it)
            nursery.cancel_scope.cancel()


def sign_in_text(url: str, loopback: bool) -> str:
    """The terminal desk's sign-in lines for its web page (with a QR code for a phone when
    other machines can reach the listen)."""
    lines = [
        "",
        " Answer in a browser too: open this link once (it lasts 10 minutes; Ctrl-O or"
        " 'pi-agent-ask desk login-url' makes another):",
        f" {url}",
    ]
    if not loopback:
        import io

        from pi_agent_ask.desk.web.login import print_qr

        drawn = io.StringIO()
        print_qr(url, drawn)
        lines.extend(" " + line for line in drawn.getvalue().splitlines())
    return "\n".join(lines) + "\n"


def _ignore(_text: str) -> None:
    pass
