"""The ``pi-agent-ask`` command line: ask, validate, demo, settings, history.

Exit statuses of ``ask``: 0 submitted, 1 cancelled or dismissed, 2 invalid input, 3 no
terminal (the non-TUI fallback result was printed), 4 internal error (message on stderr), 5 the
session file was refused (locked by another process, not a session file, a newer format, not a
regular file; ``ask``, ``demo`` and ``history``, message on stderr). ``docs/errors.md``.

Printed JSON escapes every character a terminal could act on (``_dump``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

EXIT_OK = 0
EXIT_CANCELLED = 1
EXIT_INVALID = 2
EXIT_NO_TERMINAL = 3
EXIT_INTERNAL = 4
EXIT_SESSION = 5


class PayloadError(Exception):
    """The payload could not be read or is not JSON."""


PAYLOAD_MAX_CHARS = 64 * 1024 * 1024
"""Largest payload read (characters): far past what the argument bound accepts (8 MiB of text,
``form/untrusted.py``), so only endless or absurd inputs (``/dev/zero``) are cut off here."""


BYTE_ORDER_MARK = "\ufeff"


def read_payload(source: str | None, stdin: TextIO) -> Any:
    """The JSON arguments from a file, or from standard input for ``-`` / no argument."""
    try:
        if source in (None, "-"):
            text = stdin.read(PAYLOAD_MAX_CHARS + 1)
        else:
            with open(source, encoding="utf-8") as file:
                text = file.read(PAYLOAD_MAX_CHARS + 1)
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise PayloadError(f"Cannot read payload {source!r}: {error}") from error
    if len(text) > PAYLOAD_MAX_CHARS:
        raise PayloadError(f"Payload is larger than {PAYLOAD_MAX_CHARS} characters")
    try:
        # A leading byte order mark (some editors and shells write one) is not part of the
        # JSON text (RFC 8259 lets a parser ignore it); one anywhere else is still refused.
        return json.loads(text.removeprefix(BYTE_ORDER_MARK))
    except json.JSONDecodeError as error:
        raise PayloadError(f"Payload is not valid JSON: {error}") from error
    except RecursionError:
        raise PayloadError("Payload is nested too deeply to read") from None


def terminal_safe_json(obj: Any, *, indent: int | None = 2) -> str:
    """``obj`` as JSON that is safe to print on a terminal: readable text stays as it is,
    every character a terminal could act on is a ``\\uXXXX`` escape (same JSON value)."""
    from pi_agent_ask.form.sanitize import escape_for_json

    return escape_for_json(json.dumps(obj, ensure_ascii=False, indent=indent))


def _dump(obj: Any, out: TextIO) -> None:
    out.write(terminal_safe_json(obj) + "\n")
    out.flush()


def _session_refusal(error: BaseException) -> Any:
    """The ``SessionFileError`` behind ``error`` (also inside exception groups), or ``None``."""
    from pi_agent_ask.persistence.session_file import SessionFileError

    for cause in _leaves(error):
        if isinstance(cause, SessionFileError):
            return cause
    return None


def _report_session_refusal(refusal: Any, stderr: TextIO) -> int:
    stderr.write(f"pi-agent-ask: session file refused ({refusal.reason}): {refusal}\n")
    return EXIT_SESSION


def _session_unopenable(error: BaseException) -> OSError | None:
    """The ``SessionOpenError`` behind ``error`` (also inside exception groups), or ``None``."""
    from pi_agent_ask.actors.session import SessionOpenError

    for cause in _leaves(error):
        if isinstance(cause, SessionOpenError):
            return cause
    return None


def _report_unopenable_session(path: Any, error: OSError, stderr: TextIO) -> None:
    reason = error.strerror or str(error)
    stderr.write(f"pi-agent-ask: cannot open session {str(path)!r}: {reason}\n")


EXIT_INTERRUPTED = 130
"""Ctrl+C before the form was on screen (or while the command shut down): nothing printed on
standard output, one line on standard error."""
INTERRUPTED_TEXT = "pi-agent-ask: interrupted\n"
SETTINGS_NO_TERMINAL_TEXT = (
    "pi-agent-ask settings requires interactive TUI mode: there is no terminal to show it on "
    "(edit {path} instead).\n"
)


def default_session_path(env: Any = None) -> Path:
    """The per-user session file ``ask`` journals into and ``history`` reads by default:
    ``<agent dir>/pi-agent-ask/history.pias``."""
    from pi_agent_ask.persistence.paths import agent_dir

    return agent_dir(os.environ if env is None else env) / "pi-agent-ask" / "history.pias"


class _Version(argparse.Action):
    """``--version``: the installed distribution's version (looked up only when asked)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any, **_kwargs: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("pi-agent-ask")
        except PackageNotFoundError:  # pragma: no cover - running from a source tree
            number = "unknown"
        sys.stdout.write(f"pi-agent-ask {number}\n")
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with ``command`` (a name of ``COMMANDS``), only that
    command's subparser is added: all its run needs (its arguments, its ``-h``, its errors),
    without building, or importing the modules of, every other command's (``main``)."""
    parser = argparse.ArgumentParser(
        prog="pi-agent-ask",
        description="Ask a person structured questions and get structured answers.",
    )
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    adders = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for add in adders:
        add(commands)
    return parser


def _add_ask(commands: Any) -> None:
    ask = commands.add_parser("ask", help="open the form for one ask_user call, print the result")
    ask.add_argument("payload", nargs="?", help="JSON file with the ask_user arguments (- : stdin)")
    journal = ask.add_mutually_exclusive_group()
    journal.add_argument(
        "--session",
        type=Path,
        help="journal the request into this session file "
        "(default: <agent dir>/pi-agent-ask/history.pias)",
    )
    journal.add_argument(
        "--no-session", action="store_true", help="journal nothing (no history of this ask)"
    )
    ask.add_argument("--settings", type=Path, help="settings file instead of the default")
    ask.add_argument("--output", type=Path, help="write the JSON result there")


def _add_validate(commands: Any) -> None:
    validate = commands.add_parser("validate", help="check ask_user arguments without asking")
    validate.add_argument("payload", nargs="?", help="JSON file (- or none: stdin)")


def _add_demo(commands: Any) -> None:
    demo = commands.add_parser("demo", help="run the demo host with a scripted agent")
    demo.add_argument("--session", type=Path, help="session file (default: in memory)")
    demo.add_argument("--settings", type=Path, help="settings file instead of the default")
    demo.add_argument(
        "--headless", action="store_true", help="no terminal: a scripted answerer plays the person"
    )


def _add_settings(commands: Any) -> None:
    settings = commands.add_parser("settings", help="open the ask settings overlay")
    settings.add_argument("--settings", type=Path, help="settings file instead of the default")


def _add_desk(commands: Any) -> None:
    from pi_agent_ask.commands.desk import add_desk_parser

    add_desk_parser(commands)


def _add_mcp_and_hook(commands: Any) -> None:
    from pi_agent_ask.commands.mcp import add_mcp_parsers

    add_mcp_parsers(commands)


def _add_store(commands: Any) -> None:
    from pi_agent_ask.commands.store import add_store_parser

    add_store_parser(commands)


def _add_history(commands: Any) -> None:
    history = commands.add_parser("history", help="list, read or export the question history")
    actions = history.add_subparsers(dest="history_command", required=True, metavar="ACTION")
    session_help = "session file (default: <agent dir>/pi-agent-ask/history.pias)"
    listing = actions.add_parser("list", help="list recorded questions")
    listing.add_argument("--session", type=Path, help=session_help)
    listing.add_argument(
        "--json", action="store_true", help="print JSON even on a terminal (always when piped)"
    )
    listing.add_argument("--query", help="only records holding this text (any case)")
    listing.add_argument(
        "--answered-only", action="store_true", help="only questions the person answered"
    )
    listing.add_argument(
        "--offset", type=int, default=0, help="records to skip first (default: %(default)s)"
    )
    listing.add_argument(
        "--limit", type=int, default=50, help="records to list, 1 to 200 (default: %(default)s)"
    )
    read = actions.add_parser("read", help="read one question's record")
    read.add_argument("--session", type=Path, help=session_help)
    read.add_argument("request_id", help="the request's id, as the list shows it")
    read.add_argument("question_id", help="the question's id within that request")
    export = actions.add_parser("export", help="export records to a Markdown file")
    export.add_argument("--session", type=Path, help=session_help)
    export.add_argument("path", help="the Markdown file to write")
    # A default makes argparse treat the keys as optional in its "required" message too.
    export.add_argument(
        "keys",
        nargs="*",
        default=[],
        metavar="REQUEST_ID:QUESTION_ID",
        help="the records to export (default: every record)",
    )


COMMANDS: dict[str, Callable[[Any], None]] = {
    "ask": _add_ask,
    "validate": _add_validate,
    "demo": _add_demo,
    "settings": _add_settings,
    "desk": _add_desk,
    "mcp": _add_mcp_and_hook,
    "hook": _add_mcp_and_hook,
    "history": _add_history,
    "store": lambda commands: _add_store(commands),
}
"""Each command's name and what adds its subparser, in the order ``--help`` lists them."""


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


# -- the terminal on SIGTERM and SIGHUP -------------------------------------------------------

_TERMINAL_RESET = (
    "\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l"  # mouse reporting off
    "\x1b[?2004l"  # bracketed paste off
    "\x1b[?1049l"  # back to the normal screen
    "\x1b[?25h"  # cursor shown
    "\x1b[0m\r\n"
)


@contextlib.contextmanager
def terminal_restored_on_signals(tty: Any) -> Iterator[None]:
    """While a form may hold the terminal ``tty`` (a file on ``/dev/tty``): on ``SIGTERM`` or
    ``SIGHUP`` put the terminal back as it was (modes, screen, cursor, mouse) and exit at once
    with ``128 + signal``, as the default action would, but with a usable terminal.

    Exiting at once leaves the session file as a kill does: every acknowledged entry is in the
    file, an open form is recorded as waiting and reopens on the next start (nothing is
    journaled as aborted)."""
    import signal
    import termios

    fd = tty.fileno()
    try:
        saved = termios.tcgetattr(fd)
    except (OSError, termios.error):
        saved = None

    def restore_and_exit(signum: int, _frame: Any) -> None:
        with contextlib.suppress(OSError, termios.error):  # SIGHUP: the terminal may be gone
            if saved is not None:
                termios.tcsetattr(fd, termios.TCSANOW, saved)
            os.write(fd, _TERMINAL_RESET.encode())
        os._exit(128 + signum)

    previous = {
        sig: signal.signal(sig, restore_and_exit) for sig in (signal.SIGTERM, signal.SIGHUP)
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


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


def _ask_session(args: argparse.Namespace) -> Path | None:
    """The session ``ask`` journals into: ``--session``, none with ``--no-session``, else the
    default per-user file (its directory is created)."""
    if getattr(args, "no_session", False):
        return None
    if args.session is not None:
        return Path(args.session)
    from pi_agent_ask.actors.session import SessionOpenError

    path = default_session_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # said as the session's own refusal: why it cannot be made
        raise SessionOpenError(error.errno, error.strerror, str(path)) from error
    return path


def cmd_ask(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    try:
        return _cmd_ask(args, stdin, stdout, stderr)
    except KeyboardInterrupt:
        # Ctrl+C before the form took the terminal (while starting): no traceback.
        stderr.write(INTERRUPTED_TEXT)
        return EXIT_INTERRUPTED


def _cmd_ask(args: argparse.Namespace, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    import trio

    try:
        arguments = read_payload(args.payload, stdin)
    except PayloadError as error:
        stderr.write(f"pi-agent-ask: {error}\n")
        return EXIT_INVALID
    if args.output == Path("-"):  # standard output, as ``-`` is standard input for the payload
        args.output = None
    if args.output is not None:
        try:  # before the form: the answers must have somewhere to go
            existed = os.path.lexists(args.output)
            with open(args.output, "a", encoding="utf-8"):
                pass
            if not existed:  # made only by this check: the result makes it again
                Path(args.output).unlink()
        except OSError as error:
            _report_unwritable_output(args.output, error, stderr)
            return EXIT_INVALID
    out = stdout
    try:
        args.session = _ask_session(args)
        terminal = _open_terminal()
        if terminal is None:
            code, result = trio.run(_ask_without_terminal, arguments, args)
        else:
            from pi_agent_ask.ui.commands import run_ask

            tty_input, tty_output, files = terminal
            try:
                with terminal_restored_on_signals(files[1]):
                    code, result = trio.run(
                        lambda: run_ask(
                            arguments,
                            settings=args.settings,
                            session=args.session,
                            input=tty_input,
                            output=tty_output,
                            on_notices=lambda notices: _print_notices(notices, stderr),
                        )
                    )
            finally:
                for file in files:
                    file.close()
        if args.output is not None:
            try:
                with open(args.output, "w", encoding="utf-8") as out:
                    _dump(result, out)
            except OSError as error:  # it went away meanwhile: the result still reaches stdout
                _report_unwritable_output(args.output, error, stderr)
                _dump(result, stdout)
                return EXIT_INTERNAL
        else:
            _dump(result, out)
        return code
    except Exception as error:  # the documented exit 4: an internal error, said on stderr
        refusal = _session_refusal(error)
        if refusal is not None:
            return _report_session_refusal(refusal, stderr)
        unopenable = _session_unopenable(error)
        if unopenable is not None:
            _report_unopenable_session(unopenable.filename, unopenable, stderr)
            return EXIT_SESSION
        for cause in _leaves(error):
            stderr.write(f"pi-agent-ask: internal error: {type(cause).__name__}: {cause}\n")
        return EXIT_INTERNAL


def _report_unwritable_output(path: Path, error: OSError, stderr: TextIO) -> None:
    reason = error.strerror or str(error)
    stderr.write(f"pi-agent-ask: cannot write the result to {str(path)!r}: {reason}\n")


def _print_notices(notices: Sequence[str], stderr: TextIO) -> None:
    """Settings problems, on standard error before the form takes the terminal (they are
    in the scrollback when it leaves)."""
    for notice in notices:
        stderr.write(f"pi-agent-ask: settings: {notice}\n")
    stderr.flush()


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


def cmd_demo(args: argparse.Namespace, stdout: TextIO, stderr: TextIO = sys.stderr) -> int:
    try:
        return _run_demo(args)
    except KeyboardInterrupt:
        stderr.write(INTERRUPTED_TEXT)
        return EXIT_INTERRUPTED
    except Exception as error:
        refusal = _session_refusal(error)
        if refusal is not None:
            return _report_session_refusal(refusal, stderr)
        unopenable = _session_unopenable(error)
        if unopenable is None:
            raise
        _report_unopenable_session(unopenable.filename, unopenable, stderr)
        return EXIT_SESSION


def _run_demo(args: argparse.Namespace) -> int:
    import trio

    from pi_agent_ask.host.demo import run_demo

    if args.headless:
        return trio.run(
            lambda: run_demo(session=args.session, settings=args.settings, headless=True)
        )
    from pi_agent_ask.host.shell import run_interactive_demo

    with _standard_terminal_restored():
        return trio.run(lambda: run_interactive_demo(session=args.session, settings=args.settings))


def _standard_terminal_restored() -> contextlib.AbstractContextManager[None]:
    """``terminal_restored_on_signals`` for commands that run on standard input's terminal."""
    if sys.stdin.isatty():
        return terminal_restored_on_signals(sys.stdin)
    return contextlib.nullcontext()


def cmd_settings(args: argparse.Namespace, stderr: TextIO | None = None) -> int:
    """The settings overlay on the controlling terminal; without one, the contract's "requires
    interactive TUI mode" message and exit ``3``."""
    stderr = stderr if stderr is not None else sys.stderr
    try:
        terminal = _open_terminal()
        if terminal is None:
            from pi_agent_ask.persistence.settings import settings_path

            path = args.settings if args.settings is not None else settings_path(os.environ)
            stderr.write(SETTINGS_NO_TERMINAL_TEXT.format(path=path))
            return EXIT_NO_TERMINAL
        import trio

        from pi_agent_ask.ui.commands import run_settings

        tty_input, tty_output, files = terminal
        try:
            with terminal_restored_on_signals(files[1]):
                return trio.run(lambda: run_settings(args.settings, tty_input, tty_output))
        finally:
            for file in files:
                file.close()
    except KeyboardInterrupt:
        stderr.write(INTERRUPTED_TEXT)
        return EXIT_INTERRUPTED


# -- history --------------------------------------------------------------------------------


def cmd_history(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from pi_agent_ask.persistence import history
    from pi_agent_ask.persistence.projection import JOURNAL
    from pi_agent_ask.persistence.session_file import SessionFile, SessionFileError

    path = args.session if args.session is not None else default_session_path()
    with contextlib.ExitStack() as stack:
        source: Any = []
        if args.session is not None or path.exists():
            try:
                session = SessionFile.open(path, readonly=True, create=False, projection=JOURNAL)
            except SessionFileError as error:
                return _report_session_refusal(error, stderr)
            except OSError as error:
                _report_unopenable_session(path, error, stderr)
                return EXIT_INVALID
            stack.enter_context(session)
            # The history index comes from the journal's checkpoints: a page or a read decodes
            # only its own requests' entries.
            source = history.source_of_session(session)
        # else: the default file does not exist yet: nothing was asked, the history is empty.
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
    if args.history_command == "list" and not args.json and _isatty(stdout):
        from pi_agent_ask.history_table import history_table

        stdout.write(history_table(data, path))
        stdout.flush()
        return EXIT_OK
    _dump(data, stdout)
    return EXIT_OK


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _parse_key(text: str) -> dict[str, str]:
    request_id, sep, question_id = text.partition(":")
    if not sep or not request_id or not question_id:
        raise ValueError(f"Question keys are REQUEST_ID:QUESTION_ID, not {text!r}.")
    return {"requestId": request_id, "questionId": question_id}


RUNS: dict[str, str] = {
    "ask": "pi_agent_ask.ui.commands",
    "validate": "pi_agent_ask.form.validate",
    "demo": "pi_agent_ask.host.demo",
    "settings": "pi_agent_ask.ui.commands",
    "history": "pi_agent_ask.persistence.history",
    "desk": "pi_agent_ask.desk.run",
    "mcp": "pi_agent_ask.commands.mcp",
    "hook": "pi_agent_ask.commands.mcp",
    "store": "pi_agent_ask.commands.store",
}
"""The module each command runs, imported by ``prepare``: the bulk of a command's start-up
(``ask`` imports the form's; without a terminal it prints the fallback with a part of them).
The desk imports its server (the MCP SDK, hypercorn, the runtime) here, so the heap frozen at
start-up holds them and a full collection while it serves walks only what it made since: such
a pause lands on an answer on its way to an agent."""

LIGHT_ACTIONS: dict[tuple[str, str], str] = {
    ("desk", "login-url"): "pi_agent_ask.commands.desk",
}
"""Actions of a command that need less than the command's module (``desk login-url`` only
asks the running desk for a link)."""


def prepare(arguments: Sequence[str]) -> Callable[[], int]:
    """Start-up: parse ``arguments`` and import what the command runs; the function returned
    runs the command and returns its exit status."""
    return functools.partial(_run, _parsed(arguments))


def _parsed(arguments: Sequence[str]) -> argparse.Namespace:
    args = build_parser(arguments[0] if arguments else None).parse_args(arguments)
    importlib.import_module(_module_of(args))
    return args


def _module_of(args: argparse.Namespace) -> str:
    """The module start-up imports for ``args``: the command's (``RUNS``), or a lighter one
    when the command needs less (``LIGHT_ACTIONS``, or a desk that refuses its options at
    once: ``commands.desk.early_refusal``)."""
    action = (args.command, getattr(args, "action", None) or "")
    if action in LIGHT_ACTIONS:
        return LIGHT_ACTIONS[action]
    if args.command == "desk":
        from pi_agent_ask.commands.desk import early_refusal

        if early_refusal(args):
            return "pi_agent_ask.commands.desk"
    return RUNS[args.command]


def _run(args: argparse.Namespace) -> int:
    stdin, stdout, stderr = sys.stdin, sys.stdout, sys.stderr
    match args.command:
        case "validate":
            return cmd_validate(args, stdin, stdout)
        case "ask":
            return cmd_ask(args, stdin, stdout, stderr)
        case "demo":
            return cmd_demo(args, stdout, stderr)
        case "settings":
            return cmd_settings(args, stderr)
        case "history":
            return cmd_history(args, stdout, stderr)
        case "desk":
            from pi_agent_ask.commands.desk import cmd_desk

            return cmd_desk(args, stderr)
        case "mcp":
            from pi_agent_ask.commands.mcp import cmd_mcp

            return cmd_mcp(args, stderr)
        case "hook":
            from pi_agent_ask.commands.mcp import cmd_hook

            return cmd_hook(args, stdin, stdout)
        case "store":
            from pi_agent_ask.commands.store import cmd_store

            return cmd_store(args, stdout, stderr)
    return EXIT_INTERNAL  # pragma: no cover - argparse rejects other commands


def main(argv: Sequence[str] | None = None) -> int:
    """The command line as a function (``argv``: its arguments, default ``sys.argv[1:]``), for
    programs and tests: it leaves the heap of the process that calls it as that process set
    it. The installed command is ``entry``."""
    return prepare(list(argv) if argv is not None else sys.argv[1:])()


@contextlib.contextmanager
def settled_heap() -> Iterator[None]:
    """Start-up of a process that is the command's own (``entry``, never the library): the
    cyclic collector is off while start-up imports modules and builds the parser, then what
    start-up made is frozen and the collector is on again.

    Start-up makes hundreds of thousands of long-lived objects (modules, classes, functions)
    and next to no garbage, so each collection during it would walk the growing heap for
    nothing. Frozen, those objects are left out of every later collection: a full collection
    while the person types walks only what the command made since it started, not the
    interpreter and every imported library as well."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


ENDS_AT_ONCE = frozenset({"mcp"})
"""Commands whose process ends at once when the command returned (``end_at_once``): an MCP
client that restarts its servers waits for the old one to exit."""


def end_at_once(status: int) -> NoReturn:
    """End the command's own process with ``status`` without the interpreter's shutdown.

    Called by ``entry`` only, after the command returned: its Trio run has ended, so every
    task finished and every ``finally`` ran (the journal flushed, synced and closed, the hook
    socket and the agent's files removed, the desk told). What is left to the interpreter is
    tearing down the modules and the heap that start-up built, 0.2-0.6 s for ``mcp``, which
    writes nothing; the standard streams' buffers are all it could still lose, so they are
    flushed first. Never called from the library: a program that calls ``main`` keeps its
    process."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a stream the reader closed or gone
            stream.flush()
    os._exit(status)


def entry() -> NoReturn:
    """The ``pi-agent-ask`` command (and ``python -m pi_agent_ask``): start-up with the heap
    settled (``settled_heap``), then the command; exits with its status (a reader of its
    output that went away ends it quietly: ``closed_pipe``; ``ENDS_AT_ONCE``)."""
    from pi_agent_ask.closed_pipe import unless_pipe_closed

    commands: list[str] = []

    def command() -> int:
        with settled_heap():
            args = _parsed(sys.argv[1:])
        commands.append(args.command)
        return _run(args)

    status = unless_pipe_closed(command)
    if commands and commands[0] in ENDS_AT_ONCE:
        end_at_once(status)
    raise SystemExit(status)


if __name__ == "__main__":  # pragma: no cover
    entry()
