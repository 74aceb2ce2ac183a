"""The ``pi-agent-ask`` command line: ask, validate, demo, settings, history.

Exit statuses of ``ask``: 0 submitted, 1 cancelled or dismissed, 2 invalid input, 3 no
terminal (the non-TUI fallback result was printed), 4 internal error (message on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

EXIT_OK = 0
EXIT_CANCELLED = 1
EXIT_INVALID = 2
EXIT_NO_TERMINAL = 3
EXIT_INTERNAL = 4


class PayloadError(Exception):
    """The payload could not be read or is not JSON."""


def read_payload(source: str | None, stdin: TextIO) -> Any:
    """The JSON arguments from a file, or from standard input for ``-`` / no argument."""
    try:
        text = stdin.read() if source in (None, "-") else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PayloadError(f"Cannot read payload {source!r}: {error}") from error
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise PayloadError(f"Payload is not valid JSON: {error}") from error


def _dump(obj: Any, out: TextIO) -> None:
    out.write(json.dumps(obj, ensure_ascii=False, indent=2) + "\n")
    out.flush()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pi-agent-ask",
        description="Ask a person structured questions and get structured answers.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    ask = commands.add_parser("ask", help="open the form for one ask_user call, print the result")
    ask.add_argument("payload", nargs="?", help="JSON file with the ask_user arguments (- : stdin)")
    ask.add_argument("--session", type=Path, help="journal the request into this session file")
    ask.add_argument("--settings", type=Path, help="settings file instead of the default")
    ask.add_argument("--output", type=Path, help="write the JSON result there")

    validate = commands.add_parser("validate", help="check ask_user arguments without asking")
    validate.add_argument("payload", nargs="?", help="JSON file (- or none: stdin)")

    demo = commands.add_parser("demo", help="run the demo host with a scripted agent")
    demo.add_argument("--session", type=Path, help="session file (default: in memory)")
    demo.add_argument("--settings", type=Path, help="settings file instead of the default")
    demo.add_argument(
        "--headless", action="store_true", help="no terminal: a scripted answerer plays the person"
    )

    settings = commands.add_parser("settings", help="open the ask settings overlay")
    settings.add_argument("--settings", type=Path, help="settings file instead of the default")

    history = commands.add_parser("history", help="list, read or export the question history")
    history_commands = history.add_subparsers(dest="history_command", required=True)
    listing = history_commands.add_parser("list", help="list recorded questions")
    listing.add_argument("--session", type=Path, required=True)
    listing.add_argument("--query")
    listing.add_argument("--answered-only", action="store_true")
    listing.add_argument("--offset", type=int, default=0)
    listing.add_argument("--limit", type=int, default=50)
    read = history_commands.add_parser("read", help="read one question's record")
    read.add_argument("--session", type=Path, required=True)
    read.add_argument("request_id")
    read.add_argument("question_id")
    export = history_commands.add_parser("export", help="export records to a Markdown file")
    export.add_argument("--session", type=Path, required=True)
    export.add_argument("path")
    export.add_argument("keys", nargs="*", metavar="REQUEST_ID:QUESTION_ID")
    return parser


# -- validate -----------------------------------------------------------------------------


def cmd_validate(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> int:
    from pi_agent_ask.form.validate import validate_ask_params

    try:
        arguments = read_payload(args.payload, stdin)
    except PayloadError as error:
        _dump(
            {"ok": False, "issues": [{"path": "", "message": str(error)}], "params": None}, stdout
        )
        return EXIT_INVALID
    validation = validate_ask_params(arguments, cwd=Path.cwd())
    _dump(
        {
            "ok": validation.ok,
            "issues": [issue.to_json() for issue in validation.issues],
            "params": validation.params.to_json() if validation.ok and validation.params else None,
        },
        stdout,
    )
    return EXIT_OK if validation.ok else EXIT_INVALID


# -- ask ----------------------------------------------------------------------------------


def _open_terminal() -> tuple[Any, Any, list[Any]] | None:
    """prompt_toolkit input/output on the controlling terminal, or None without one."""
    from prompt_toolkit.input import create_input
    from prompt_toolkit.output import create_output

    try:
        tty_in = open("/dev/tty", encoding="utf-8")  # noqa: SIM115 - closed by the caller
        tty_out = open("/dev/tty", "w", encoding="utf-8")  # noqa: SIM115
    except OSError:
        return None
    return create_input(stdin=tty_in), create_output(stdout=tty_out), [tty_in, tty_out]


def cmd_ask(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    import trio

    try:
        arguments = read_payload(args.payload, stdin)
    except PayloadError as error:
        stderr.write(f"pi-agent-ask: {error}\n")
        return EXIT_INVALID
    out = stdout
    try:
        terminal = _open_terminal()
        if terminal is None:
            code, result = trio.run(_ask_without_terminal, arguments, args)
        else:
            from pi_agent_ask.ui.commands import run_ask

            tty_input, tty_output, files = terminal
            try:
                code, result = trio.run(
                    lambda: run_ask(
                        arguments,
                        settings=args.settings,
                        session=args.session,
                        input=tty_input,
                        output=tty_output,
                    )
                )
            finally:
                for file in files:
                    file.close()
        if args.output is not None:
            with open(args.output, "w", encoding="utf-8") as out:
                _dump(result, out)
        else:
            _dump(result, out)
        return code
    except Exception as error:  # the documented exit 4: an internal error, said on stderr
        for cause in _leaves(error):
            stderr.write(f"pi-agent-ask: internal error: {type(cause).__name__}: {cause}\n")
        return EXIT_INTERNAL


def _leaves(error: BaseException) -> list[BaseException]:
    """The real causes inside (nested) exception groups, so the message says what failed."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


async def _ask_without_terminal(arguments: Any, args: argparse.Namespace) -> tuple[int, Any]:
    from pi_agent_ask.actors.runtime import open_runtime

    async with open_runtime(session=args.session, mode="print", settings=args.settings) as rt:
        result = await rt.call_tool("ask_user", arguments, tool_call_id="cli")
    if result.get("isError") or result.get("details", {}).get("error"):
        return EXIT_INVALID, result
    return EXIT_NO_TERMINAL, result


# -- demo and settings ----------------------------------------------------------------------


def cmd_demo(args: argparse.Namespace, stdout: TextIO) -> int:
    import trio

    from pi_agent_ask.host.demo import run_demo

    if args.headless:
        return trio.run(
            lambda: run_demo(session=args.session, settings=args.settings, headless=True)
        )
    from pi_agent_ask.host.shell import run_interactive_demo

    return trio.run(lambda: run_interactive_demo(session=args.session, settings=args.settings))


def cmd_settings(args: argparse.Namespace) -> int:
    import trio

    from pi_agent_ask.ui.commands import run_settings

    return trio.run(lambda: run_settings(args.settings))


# -- history --------------------------------------------------------------------------------


def cmd_history(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from pi_agent_ask.persistence import history
    from pi_agent_ask.persistence.projection import JOURNAL
    from pi_agent_ask.persistence.session_file import SessionFile, SessionFileError

    try:
        session = SessionFile.open(args.session, readonly=True, create=False, projection=JOURNAL)
    except (OSError, SessionFileError) as error:
        stderr.write(f"pi-agent-ask: cannot open session {str(args.session)!r}: {error}\n")
        return EXIT_INVALID
    with session:
        # The history index comes from the journal's checkpoints: a page or a read decodes
        # only its own requests' entries.
        source = history.source_of_session(session)
        try:
            if args.history_command == "list":
                data = history.list_history(
                    source,
                    query=args.query,
                    answered_only=args.answered_only,
                    offset=args.offset,
                    limit=args.limit,
                )
            elif args.history_command == "read":
                data = history.read_history(source, args.request_id, args.question_id)
            else:
                keys = [_parse_key(key) for key in args.keys] or None
                data = history.export_history(source, args.path, keys, cwd=Path.cwd())
        except (history.HistoryError, ValueError) as error:
            stderr.write(f"pi-agent-ask: {error}\n")
            return EXIT_INVALID
    _dump(data, stdout)
    return EXIT_OK


def _parse_key(text: str) -> dict[str, str]:
    request_id, sep, question_id = text.partition(":")
    if not sep or not request_id or not question_id:
        raise ValueError(f"Question keys are REQUEST_ID:QUESTION_ID, not {text!r}.")
    return {"requestId": request_id, "questionId": question_id}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(argv) if argv is not None else sys.argv[1:])
    stdin, stdout, stderr = sys.stdin, sys.stdout, sys.stderr
    match args.command:
        case "validate":
            return cmd_validate(args, stdin, stdout)
        case "ask":
            return cmd_ask(args, stdin, stdout, stderr)
        case "demo":
            return cmd_demo(args, stdout)
        case "settings":
            return cmd_settings(args)
        case "history":
            return cmd_history(args, stdout, stderr)
    return EXIT_INTERNAL  # pragma: no cover - argparse rejects other commands


if __name__ == "__main__":  # pragma: no cover
    os._exit(main())
