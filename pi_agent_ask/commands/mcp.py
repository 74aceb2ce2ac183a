"""The ``mcp`` and ``hook`` subcommands of ``pi-agent-ask`` (``docs/mcp.md``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from pi_agent_ask.mcp_common import PROGRESS_INTERVAL, quiet_library_logs

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_INTERNAL = 4
EXIT_SESSION = 5
LEAST_PROGRESS_INTERVAL = 0.1
"""Seconds: a shorter interval (``1e-9``) sent the client hundreds of notifications a second,
each one's "seconds waited" behind the clock, while a call waited for the person."""


def add_mcp_parsers(commands: Any) -> None:
    mcp = commands.add_parser("mcp", help="serve the tools to an MCP client over stdio")
    mcp.add_argument("--session", type=Path, help="session journal (default: one per agent key)")
    mcp.add_argument("--settings", type=Path, help="settings file instead of the default")
    mcp.add_argument(
        "--state",
        type=Path,
        metavar="DIR",
        help="the desk's state directory, where this agent's journal is kept for a desk "
        "(default: the desk's default)",
    )
    mcp.add_argument(
        "--desk",
        default="auto",
        metavar="auto|off|URL[,URL...]",
        help="show forms on a desk (auto: whenever one runs, also one started later; "
        "URLs: the first that answers, the next when it goes away; default auto)",
    )
    mcp.add_argument(
        "--key",
        help="the agent's name on the desk, shared by every server given it (default: "
        "client@cwd, or client #2@cwd while another server of the client runs there)",
    )
    mcp.add_argument(
        "--progress-interval",
        type=float,
        default=PROGRESS_INTERVAL,
        metavar="SECONDS",
        help="seconds between progress notifications while a call waits (default %(default)s)",
    )
    hook = commands.add_parser("hook", help="agent hooks that deliver waiting answers")
    clients = hook.add_subparsers(dest="hook_client", required=True, metavar="CLIENT")
    claude = clients.add_parser("claude-code", help="Claude Code (UserPromptSubmit, PostToolUse)")
    claude.add_argument("--key", help="the server's agent key (default: claude-code@<cwd>)")


TEAM_OPTIONS_TEXT = (
    "pi-agent-ask mcp: a team's desks take no {options}: the store keeps the agent's "
    "questions and answers, and each desk its own settings (docs/team.md)\n"
)


def cmd_mcp(args: argparse.Namespace, stderr: TextIO) -> int:
    if not args.progress_interval >= LEAST_PROGRESS_INTERVAL:  # also NaN: compares false
        stderr.write(
            "pi-agent-ask mcp: --progress-interval must be a number of seconds, at least "
            f"{LEAST_PROGRESS_INTERVAL}\n"
        )
        return EXIT_USAGE
    if args.key is not None:
        from pi_agent_ask.mcp_common.journals import InvalidKey, check_key

        try:
            check_key(args.key)
        except InvalidKey as error:
            # A key a desk would refuse on every call: say so now, not at the first call.
            stderr.write(f"pi-agent-ask mcp: --key {args.key!r}: {error}\n")
            return EXIT_USAGE
    from pi_agent_ask.commands.store import TOKEN_ENV, team_desk_urls

    try:
        team = team_desk_urls(args.desk, os.environ)
        if team is None and args.desk not in ("auto", "off"):
            from pi_agent_ask.mcp_common.connection import parse_desk_urls

            # Checked now: a --desk that is no URL ("Off", "localhost:8080") would make every
            # call say that the desk did not answer.
            if len(parse_desk_urls(args.desk)) > 1:
                raise ValueError(
                    f"several desk URLs are the desks of a team store: set {TOKEN_ENV} to the "
                    "agent's token (docs/team.md)"
                )
    except ValueError as error:
        stderr.write(f"pi-agent-ask mcp: {error}\n")
        return EXIT_USAGE
    if team is not None:
        # The store keeps a team agent's questions, the desks their settings: an option for
        # a journal or a settings file would be ignored without a word.
        given = [
            name
            for name, value in (
                ("--session", args.session),
                ("--settings", args.settings),
                ("--state", args.state),
            )
            if value is not None
        ]
        if given:
            stderr.write(TEAM_OPTIONS_TEXT.format(options=", ".join(given)))
            return EXIT_USAGE
    if args.session is not None:
        refusal = _session_refusal(args.session)
        if refusal:
            stderr.write(f"pi-agent-ask mcp: {refusal}\n")
            return EXIT_SESSION
    # The options are checked before the server is imported: the MCP SDK's import is a second
    # or more of CPU, and a refused option is told at once.
    import trio

    from pi_agent_ask.mcp_server.stdio import DeskUnavailable, serve

    quiet_library_logs()
    if team is not None:  # desks of a team store, with this agent's token (docs/team.md)
        from pi_agent_ask.store.forward import serve_stdio_via_team

        urls, token = team
        trio.run(
            lambda: serve_stdio_via_team(
                urls, token, key=args.key, progress_interval=args.progress_interval
            )
        )
        return EXIT_OK
    try:
        trio.run(
            lambda: serve(
                session=args.session,
                settings=args.settings,
                desk=args.desk,
                key=args.key,
                progress_interval=args.progress_interval,
                state_dir=args.state,
            )
        )
    except DeskUnavailable as error:
        stderr.write(f"pi-agent-ask mcp: {error}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_OK
    except Exception:
        import traceback  # here only: the hook command, which shares this module, never needs it

        stderr.write("pi-agent-ask mcp: internal error\n")
        traceback.print_exc(file=stderr)
        return EXIT_INTERNAL
    return EXIT_OK


def _session_refusal(path: Path) -> str:
    """What start-up can tell is wrong with ``--session`` without reading it (a directory, a
    FIFO, a device: never a session file), else ``""``; what only opening the journal tells
    is the JSON-RPC error of the first request that needs it (``router.py``)."""
    from pi_agent_ask.persistence.frames import refuse_odd_file
    from pi_agent_ask.persistence.session_values import SessionFileError

    try:
        refuse_odd_file(path)
    except SessionFileError as error:
        return f"session file refused ({error.reason}): {error}"
    return ""


def cmd_hook(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> int:
    from pi_agent_ask.mcp_server.hook_command import run_claude_code_hook

    try:
        return run_claude_code_hook(stdin, stdout, key=args.key)
    except Exception as error:  # a hook never blocks the session: report and go on
        print(f"pi-agent-ask hook: {type(error).__name__}: {error}", file=sys.stderr)
        return EXIT_OK
