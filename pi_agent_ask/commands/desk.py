"""The ``pi-agent-ask desk`` command (its parser and its body; ``cli.py`` wires them in)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

from pi_agent_ask.commands.store import STORE_ENV

__all__ = ["add_desk_parser", "cmd_desk", "early_refusal"]

EXIT_OK = 0
EXIT_INVALID = 2
EXIT_INTERNAL = 4


def add_desk_parser(commands: Any) -> None:
    desk = commands.add_parser(
        "desk",
        help="answer every agent's questions in one terminal (an MCP server over HTTP)",
        description=(
            "The question desk: a full-screen terminal app and an MCP server over Streamable "
            "HTTP at http://HOST:PORT/mcp. Agents connect to it directly or through "
            "'pi-agent-ask mcp'; see docs/desk.md."
        ),
    )
    desk.add_argument(
        "action",
        nargs="?",
        choices=["login-url"],
        help="login-url: print a one-time sign-in URL for the running desk's web page",
    )
    desk.add_argument(
        "--qr", action="store_true", help="with login-url: also draw the URL as a QR code"
    )
    desk.add_argument(
        "--listen", metavar="HOST:PORT", help="address to listen on (default 127.0.0.1, free port)"
    )
    desk.add_argument("--state", type=Path, help="directory of the agents' session journals")
    desk.add_argument("--settings", type=Path, help="settings file instead of the default")
    desk.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --listen address (the token is still required)",
    )
    desk.add_argument("--tls-cert", type=Path, help="serve HTTPS with this certificate (PEM)")
    desk.add_argument("--tls-key", type=Path, help="the certificate's private key (PEM)")
    desk.add_argument(
        "--tls-elsewhere",
        action="store_true",
        help="a non-loopback listen without --tls-cert: a tunnel or proxy protects the traffic",
    )
    desk.add_argument(
        "--store",
        metavar="URL",
        help="keep every agent's state in this PostgreSQL team store (docs/team.md; "
        "default $PI_AGENT_ASK_STORE, else files under --state)",
    )
    desk.add_argument(
        "--as",
        dest="answerer",
        metavar="NAME",
        help="your name, recorded with every answer given on this desk (default: login user)",
    )
    desk.add_argument(
        "--headless",
        action="store_true",
        help="no terminal: keep and journal the agents' questions for a later desk",
    )


def cmd_login_url(args: argparse.Namespace, stderr: TextIO) -> int:
    """``pi-agent-ask desk login-url``: 0 and the URL; 2 when no desk runs."""
    import trio

    from pi_agent_ask.desk.web.login import NoDesk, fetch_login_url, print_qr

    try:
        url = trio.run(fetch_login_url)
    except NoDesk as error:
        stderr.write(f"pi-agent-ask: {error}\n")
        return EXIT_INVALID
    except Exception as error:  # the desk answered wrongly or went away
        stderr.write(f"pi-agent-ask: cannot get a sign-in URL: {error}\n")
        return EXIT_INVALID
    sys.stdout.write(url + "\n")
    if args.qr:
        print_qr(url, sys.stdout)
    sys.stdout.flush()
    return EXIT_OK


def early_refusal(args: argparse.Namespace) -> str:
    """The line refusing ``args`` that start-up tells before it imports the desk (seconds of
    CPU: ``cli.prepare``), else ``""``: a store address that is no connection string. What
    only the desk's start can tell (the address reaches no server, the port is taken) comes
    later, in the same words (``_refusal``)."""
    store_url = _store_url(args)
    if not store_url:
        return ""
    from pi_agent_ask.store import StoreUnavailable
    from pi_agent_ask.store.address import check_syntax

    try:
        check_syntax(store_url)
    except StoreUnavailable as error:
        return _refusal(error)
    return ""


def _store_url(args: argparse.Namespace) -> str | None:
    return args.store or os.environ.get(STORE_ENV)


def cmd_desk(args: argparse.Namespace, stderr: TextIO) -> int:
    if args.action == "login-url":
        return cmd_login_url(args, stderr)
    refused = early_refusal(args)
    if refused:
        stderr.write(refused)
        return EXIT_INVALID

    import trio

    from pi_agent_ask.desk.http import ListenError
    from pi_agent_ask.desk.run import DeskAlreadyRunning, run_desk
    from pi_agent_ask.mcp_common import quiet_library_logs

    if not args.headless and not (sys.stdin.isatty() and sys.stdout.isatty()):
        stderr.write("pi-agent-ask: the desk needs a terminal (or --headless)\n")
        return EXIT_INVALID
    quiet_library_logs()  # stderr is the desk's screen

    def warn(text: str) -> None:
        stderr.write(text + "\n")
        stderr.flush()

    async def main() -> None:
        async with trio.open_nursery() as nursery:

            async def serve(task_status: trio.TaskStatus[Any]) -> None:
                await run_desk(
                    listen=args.listen,
                    state_dir=args.state,
                    settings=args.settings,
                    allow_remote=args.allow_remote,
                    tls_cert=args.tls_cert,
                    tls_key=args.tls_key,
                    tls_elsewhere=args.tls_elsewhere,
                    headless=args.headless,
                    warn=warn,
                    task_status=task_status,
                )
                nursery.cancel_scope.cancel()  # the person quit

            nursery.start_soon(_stop_on_signal, nursery.cancel_scope)
            store_url = _store_url(args)
            if store_url:  # a team desk (pi_agent_ask/store)
                from pi_agent_ask.commands.store import run_desk_on_store

                desk = await nursery.start(
                    run_desk_on_store(args, store_url, warn, nursery.cancel_scope.cancel)
                )
                url = desk.url
            else:
                desk = await nursery.start(serve)
                url = desk.address.url
            if args.headless:
                # Headless, the desk has no screen to show where it listens: say it once.
                sys.stdout.write(f"pi-agent-ask desk: listening at {url}\n")
                if getattr(desk, "web", None) is not None:
                    _show_login(desk, args)
                sys.stdout.flush()

    try:
        trio.run(main)
    except Exception as error:
        from pi_agent_ask.store import StoreUnavailable

        causes = _leaves(error)
        refusals = ListenError | DeskAlreadyRunning | OSError | StoreUnavailable
        if all(isinstance(cause, refusals) for cause in causes):
            for cause in causes:
                stderr.write(_refusal(cause))
            return EXIT_INVALID
        for cause in causes:
            stderr.write(f"pi-agent-ask: internal error: {type(cause).__name__}: {cause}\n")
        return EXIT_INTERNAL
    return EXIT_OK


def _refusal(cause: BaseException) -> str:
    """The line of a desk that cannot start (``cause``: a refusal, never a bug)."""
    from pi_agent_ask.store import StoreUnavailable

    said = isinstance(cause, OSError | StoreUnavailable)
    prefix = "cannot start the desk: " if said else ""
    return f"pi-agent-ask: {prefix}{cause}\n"


def _show_login(desk: Any, args: argparse.Namespace) -> None:
    """The web desk's first sign-in URL (and its QR code for a listen other machines reach)."""
    from pi_agent_ask.desk.http import is_loopback, parse_listen
    from pi_agent_ask.desk.web.login import print_qr

    url = desk.web.login_url()
    sys.stdout.write(f"pi-agent-ask desk: sign in from a browser (once, 10 min): {url}\n")
    if not is_loopback(parse_listen(args.listen).host):
        print_qr(url, sys.stdout)


async def _stop_on_signal(scope: Any) -> None:
    import trio

    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for _signum in signals:
            scope.cancel()
            return


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]
