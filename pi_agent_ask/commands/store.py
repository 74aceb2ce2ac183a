"""``pi-agent-ask store init|token|revoke URL`` and the team paths of ``desk`` and ``mcp``."""

from __future__ import annotations

import argparse
import os
from typing import Any, TextIO

__all__ = [
    "STORE_ENV",
    "TOKEN_ENV",
    "add_store_parser",
    "cmd_store",
    "run_desk_on_store",
    "team_desk_urls",
]

STORE_ENV = "PI_AGENT_ASK_STORE"
TOKEN_ENV = "PI_AGENT_ASK_TOKEN"
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def add_store_parser(commands: Any) -> None:
    store = commands.add_parser(
        "store",
        help="set up a team store on PostgreSQL (schema, roles, agent tokens)",
        description="The team desk's store on PostgreSQL; see docs/team.md.",
    )
    actions = store.add_subparsers(dest="store_command", required=True, metavar="ACTION")
    init = actions.add_parser("init", help="create or migrate the schema and roles (idempotent)")
    init.add_argument("url", metavar="URL", help="a PostgreSQL URL of a role that may create them")
    token = actions.add_parser("token", help="print a new token for an agent")
    tokens_help = "a PostgreSQL URL of a member of pi_agent_ask_tokens"
    token.add_argument("url", metavar="URL", help=tokens_help)
    token.add_argument("--agent", required=True, metavar="KEY", help="the agent's key")
    revoke = actions.add_parser("revoke", help="revoke every token of an agent")
    revoke.add_argument("url", metavar="URL", help=tokens_help)
    revoke.add_argument("--agent", required=True, metavar="KEY", help="the agent's key")


def cmd_store(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    import psycopg

    from pi_agent_ask.mcp_common.journals import InvalidKey, check_key
    from pi_agent_ask.store import StoreUnavailable
    from pi_agent_ask.store.db import Store

    try:
        if args.store_command == "init":
            applied = Store.init(args.url)
            done = ", ".join(str(v) for v in applied) if applied else "none (already current)"
            stdout.write(f"pi-agent-ask store: schema ready; migrations applied: {done}\n")
        elif args.store_command == "token":
            stdout.write(Store.new_token(args.url, check_key(args.agent)) + "\n")
        else:
            count = Store.revoke(args.url, check_key(args.agent))
            stdout.write(f"pi-agent-ask store: {count} token(s) of {args.agent!r} revoked\n")
    except InvalidKey as error:
        stderr.write(f"pi-agent-ask store: {error}\n")
        return EXIT_USAGE
    except StoreUnavailable as error:
        stderr.write(f"pi-agent-ask store: {error}\n")
        return EXIT_FAILED
    except psycopg.Error as error:
        stderr.write(f"pi-agent-ask store: {type(error).__name__}: {error}".rstrip() + "\n")
        return EXIT_FAILED
    return EXIT_OK


def run_desk_on_store(
    args: argparse.Namespace, store_url: str, warn: Any, on_exit: Any = None
) -> Any:
    """The ``desk --store`` body for ``cmd_desk``'s nursery: an awaitable factory. ``on_exit``
    is called when the desk ends by itself (the person quit)."""
    from pi_agent_ask.desk.web.login import team_login_file
    from pi_agent_ask.mcp_common.connection import desk_file_path
    from pi_agent_ask.store.run import run_team_desk

    async def serve(task_status: Any) -> None:
        await run_team_desk(
            store_url,
            listen_on=args.listen,
            person=getattr(args, "answerer", None),
            allow_remote=args.allow_remote,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            tls_elsewhere=args.tls_elsewhere,
            warn=warn,
            headless=args.headless,
            settings=args.settings,
            login_file=team_login_file(desk_file_path()),
            task_status=task_status,
        )
        if on_exit is not None:
            on_exit()

    return serve


def team_desk_urls(
    desk: str, env: os._Environ[str] | dict[str, str]
) -> tuple[list[str], str] | None:
    """``mcp --desk URL[,URL...]`` with ``PI_AGENT_ASK_TOKEN`` set: the team desks and the
    token; ``None`` for every other ``--desk`` (auto, off, one desk of files)."""
    token = env.get(TOKEN_ENV)
    if not token or desk in ("auto", "off"):
        return None
    from pi_agent_ask.mcp_common.connection import parse_desk_urls

    return parse_desk_urls(desk), token
