"""``pi-agent-ask mcp``: the stdio MCP server.

Start-up reads the client's first message (``initialize``) before anything else, to learn the
client's name (the default agent key is ``<client name>@<working directory>``) and whether it
declared form elicitation; the message is then replayed to the MCP server unchanged. Where the
forms are shown, in order (``--desk auto``):

1. a running desk, found through its connection file and answering: the whole stdio session
   is forwarded to it (``pi_agent_ask.mcp_server.forward.serve_stdio_via_desk``);
2. the client's form elicitation, when declared (``elicitation.py``): the runtime runs in
   ``tui`` mode on an ``ElicitationSurface``, so background forms queue, ``wait_for_answers``
   works, and a cut call's form stays queued;
3. otherwise the contract's non-TUI fallback: the runtime in ``json`` mode (``ask_user``
   returns the fallback text, ``wait_for_answers`` is refused).

``--desk off`` skips the desk; ``--desk URL`` requires it (the token comes from
``$PI_AGENT_ASK_DESK_TOKEN`` or the connection file naming that URL). The session journal is
``--session FILE``, by default the journal the desk keeps for the agent key under its state
directory, so queued forms and undelivered answers outlive a restart of the client. Without
``--key`` the server claims its default key for as long as it runs
(``journals.claim_default_key``): a second server of the same client in the same directory
gets ``<client> #2@<cwd>``, its own journal and its own place on a desk. A second server
given the same ``--key`` finds the journal locked and keeps its questions in memory, saying so
on standard error. While it runs the server also serves Claude Code's hook (``hook.py``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import attrs
import mcp.types as types
import trio
from mcp.server.lowlevel.server import Server

from pi_agent_ask.mcp_common import PROGRESS_INTERVAL, package_version
from pi_agent_ask.mcp_common.asgi import progress_reporter
from pi_agent_ask.mcp_common.params import describing

if TYPE_CHECKING:
    from pi_agent_ask.actors.runtime import Mode
    from pi_agent_ask.mcp_common.tools import AgentTools
    from pi_agent_ask.mcp_server.elicitation import ElicitationSurface

SERVER_NAME = "pi-agent-ask"
DESK_TOKEN_ENV = "PI_AGENT_ASK_DESK_TOKEN"
UNKNOWN_CLIENT = "mcp-client"
INSTRUCTIONS = (
    "Ask the user structured questions with ask_user. Background answers arrive with "
    "wait_for_answers and appended to later results of these tools (backgroundAnswers)."
)


class DeskUnavailable(Exception):
    """``--desk URL`` was given but that desk cannot be used."""


@attrs.frozen
class ClientHello:
    """What the client's first message says about it."""

    name: str = UNKNOWN_CLIENT
    elicitation: bool = False


def parse_hello(line: str | None) -> ClientHello:
    """The client's name and form-elicitation capability from its first message."""
    try:
        message = json.loads(line) if line else None
    except ValueError:
        return ClientHello()
    if not isinstance(message, dict):
        return ClientHello()
    params = message.get("params")
    if not isinstance(params, dict):
        return ClientHello()
    if message.get("method") == "initialize":
        info = params.get("clientInfo")
        capabilities = params.get("capabilities")
    else:
        given_meta = params.get("_meta")
        meta = given_meta if isinstance(given_meta, dict) else {}
        info = meta.get(types.CLIENT_INFO_META_KEY)
        capabilities = None  # 2026 per-request era: no standalone elicitation requests
    name = info.get("name") if isinstance(info, dict) else None
    elicitation = isinstance(capabilities, dict) and _declares_form(capabilities)
    return ClientHello(
        name if isinstance(name, str) and name.strip() else UNKNOWN_CLIENT, elicitation
    )


def _declares_form(capabilities: dict[str, Any]) -> bool:
    elicitation = capabilities.get("elicitation")
    if not isinstance(elicitation, dict):
        return False
    # ``{}`` is form support (the spec's backwards-compatible spelling); else ``form`` must be in.
    return not elicitation or "form" in elicitation


def default_session(key: str, state_dir: Path | None = None) -> Path:
    """``key``'s journal under the desk's state directory (made, with its key file, so a desk
    that starts later finds it): the desk and this server keep an agent's forms in one file."""
    from pi_agent_ask.mcp_common.journals import default_state_dir, record_key

    return record_key(state_dir if state_dir is not None else default_state_dir(), key)


@attrs.define(eq=False)
class ReplayedStdin:
    """Standard input as the SDK's stdio transport reads it, with the peeked first line put
    back in front."""

    first: str | None
    rest: Any
    last: str = ""
    """The line handed out last (``unreadable.py``: the one the SDK could not read)."""

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    def last_line(self) -> str:
        return self.last

    async def _lines(self) -> AsyncIterator[str]:
        if self.first:
            self.last = self.first
            yield self.first
        async for line in self.rest:
            self.last = line
            yield line


def standard_input() -> Any:
    """Standard input as the stdio transport reads it: UTF-8 as MCP says, whatever the
    locale's encoding (``sys.stdin`` decodes with that); bytes that are not UTF-8 become lone
    surrogates, which the boundary check refuses in words (``unreadable.py``). The file
    descriptor stays open when this object goes."""
    text = open(  # noqa: SIM115 - the stdio transport reads it until the client ends
        sys.stdin.fileno(), encoding="utf-8", errors="surrogateescape", closefd=False
    )
    return anyio.wrap_file(text)


def mcp_server(tools: AgentTools, surface: ElicitationSurface | None, nursery: trio.Nursery) -> Any:
    """The low-level MCP server over one agent's tools."""
    attached = False

    def attach(ctx: Any) -> None:
        nonlocal attached
        if attached or surface is None:
            return
        attached = True
        session = ctx.session

        async def elicit(message: str, schema: dict[str, Any]) -> types.ElicitResult:
            result: types.ElicitResult = await session.elicit_form(message, schema)
            return result

        nursery.start_soon(surface.serve, elicit, session.protocol_version)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        attach(ctx)
        return types.ListToolsResult(tools=tools.list_tools())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        attach(ctx)
        return await tools.call_tool(
            params.name, params.arguments, report_progress=progress_reporter(ctx)
        )

    return ask_server(list_tools, call_tool)


async def _print_notices(runtime: Any) -> None:
    """The runtime's messages for the person (settings problems, a damaged journal, a form
    reopened) go to standard error: the client usually shows or logs it."""
    async for text in runtime.notices:
        print(f"pi-agent-ask: {text}", file=sys.stderr, flush=True)


def _desk_token(desk: str, desk_file: Path) -> str:
    """The token for ``--desk URL``: ``$PI_AGENT_ASK_DESK_TOKEN``, else the connection file's
    when it names that URL."""
    from pi_agent_ask.mcp_common.connection import read_desk_file

    token = os.environ.get(DESK_TOKEN_ENV)
    if token:
        return token
    try:
        address = read_desk_file(desk_file)
    except Exception as error:
        raise DeskUnavailable(f"cannot read the desk connection file: {error}") from error
    if address is None or address.url != desk:
        raise DeskUnavailable(
            f"no token for {desk}: set {DESK_TOKEN_ENV} or run the desk that wrote the "
            "connection file"
        )
    return address.token


async def serve(
    *,
    session: Path | None = None,
    settings: Path | None = None,
    desk: str = "auto",
    key: str | None = None,
    progress_interval: float = PROGRESS_INTERVAL,
    state_dir: Path | None = None,
    cwd: Path | None = None,
    stdin: Any = None,
    stdout: Any = None,
    hook_dir: Path | None = None,
) -> None:
    """Serve MCP on standard input and output until the client closes its side (or a
    ``SIGTERM``, ``SIGHUP`` or ``SIGINT`` comes: ``end_on_signal``; call it in the main
    thread)."""
    from pi_agent_ask.mcp_common.connection import desk_file_path
    from pi_agent_ask.mcp_common.journals import default_state_dir
    from pi_agent_ask.mcp_server.hook import serve_hook_endpoint
    from pi_agent_ask.mcp_server.router import Router

    desk_file = desk_file_path()
    token = _desk_token(desk, desk_file) if desk not in ("auto", "off") else None
    work_dir = cwd if cwd is not None else Path.cwd()
    source = stdin if stdin is not None else standard_input()
    first = await source.readline()
    if not first:
        return  # the client closed before saying anything
    hello = parse_hello(first)
    replay = ReplayedStdin(first, source)
    state = state_dir if state_dir is not None else default_state_dir()
    async with agent_keys(key, hello.name, work_dir, state) as (agent_key, base_key):

        def local(keep: bool, elicit: bool, on_failure: Any, if_unusable: str) -> Any:
            return open_local(
                attrs.evolve(hello, elicitation=hello.elicitation and elicit),
                key=agent_key,
                base_key=base_key,
                session=session,
                state_dir=state,
                settings=settings,
                cwd=work_dir,
                progress_interval=progress_interval,
                hook_dir=hook_dir,
                keep=keep,
                on_elicitation_failure=on_failure,
                if_unusable=if_unusable,
                end_unusable=desk == "off",
            )

        router = Router(
            key=agent_key,
            desk=desk,
            desk_file=desk_file,
            open_local=local,
            elicitation=hello.elicitation,
            progress_interval=progress_interval,
            token=token,
            state_dir=state if session is None else None,
            session_given=session is not None,
            cwd=work_dir,
            serve_hooks=functools.partial(
                serve_hook_endpoint,
                key=agent_key,
                client=hello.name,
                cwd=work_dir,
                directory=hook_dir,
                base_key=base_key,
            ),
        )
        async with trio.open_nursery() as nursery:
            left = trio.Event()

            async def route(task_status: trio.TaskStatus[None]) -> None:
                try:
                    await router.run(task_status=task_status)
                finally:
                    left.set()

            nursery.start_soon(end_on_signal, nursery.cancel_scope, left)
            await nursery.start(route)
            server = routed_server(router)
            await serve_lines(server, replay, stdout, on_end=router.input_closed)
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def agent_keys(
    key: str | None, client: str, cwd: Path, state_dir: Path
) -> AsyncIterator[tuple[str, str]]:
    """The agent's key and its base key (the key before a run number, which the hook command
    looks for) while the block runs. A given ``key`` is shared on purpose by every server given
    it. Without one, two agents of one client in one directory running at once get two keys,
    never one (the second would take the first's answers): the first free default key is
    claimed until the block ends (``journals.claim_default_key``). A state directory that
    cannot hold the claim cannot hold the journal either: the default key goes unclaimed, and
    the journal says so on each call."""
    from pi_agent_ask.mcp_common.journals import claim_default_key, default_key

    base = key or default_key(client, cwd)
    if key is not None:
        yield key, base
        return
    try:
        claimed, claim = await trio.to_thread.run_sync(claim_default_key, state_dir, client, cwd)
    except OSError:
        yield base, base
        return
    try:
        yield claimed, base
    finally:
        os.close(claim)  # the key is free for the next server of this agent


async def end_on_signal(scope: trio.CancelScope, left: trio.Event) -> None:
    """``SIGTERM``, ``SIGHUP`` or ``SIGINT`` ends the server as the end of its input does,
    then by the signal: ``scope`` is cancelled, and once the router has let go of what it
    holds (``left``: a session on a desk ended, the journal closed, the hook socket removed),
    the signal is raised again with its default action. Only that ends the process: the SDK
    reads standard input in a thread that no cancellation reaches. A client may end its
    server so: the TypeScript SDK sends ``SIGTERM`` to a server still running 2 s after it
    closed its input; Ctrl-C in the terminal of a client sends ``SIGINT`` to the client's
    whole process group, its servers too (as a ``KeyboardInterrupt`` it printed a traceback,
    and the server waited for its input to end)."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP, signal.SIGINT) as signals:
        signum = await anext(signals)
        scope.cancel()
        with trio.CancelScope(shield=True):
            await left.wait()
    # The receiver is closed; Python's own SIGINT handler would be back: the default action.
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)


async def serve_lines(
    server: Server[Any],
    replay: ReplayedStdin,
    stdout: Any,
    on_end: Callable[[], None] | None = None,
) -> None:
    """Run ``server`` on the stdio transport over ``replay``'s lines until the client ends.

    A line the SDK cannot read is answered (``unreadable.AnsweredReads``). With ``on_end``,
    the end of the input calls it (the calls waiting for the person return) and the server
    ends once every request read is answered (``input_end.py``); without, the SDK answers the
    requests still running ``Connection closed``. A client that died (or closed its end of
    standard output) with a call in flight ends the server as closing standard input does:
    the write fails on the broken pipe; nothing can reach that client any more, so there is
    nothing to report."""
    from mcp.server.stdio import stdio_server

    from pi_agent_ask.mcp_server.input_end import CountedWrites, HeldReads, Outstanding
    from pi_agent_ask.mcp_server.unreadable import AnsweredReads

    try:
        # ReplayedStdin reads as the SDK's AsyncFile does; the SDK names only that type.
        async with stdio_server(replay, stdout) as (read, write):  # type: ignore[arg-type]
            reads: Any = AnsweredReads(read, write, replay.last_line)
            writes: Any = write
            if on_end is not None:
                outstanding = Outstanding()
                reads = HeldReads(reads, outstanding, on_end)
                writes = CountedWrites(write, outstanding)
            await server.run(reads, writes, server.create_initialization_options())
    except* (BrokenPipeError, ConnectionResetError):
        pass


def ask_server(list_tools: Any, call_tool: Any) -> Server[Any]:
    """The MCP server agents see (its name, version and instructions; refused params
    described), answering ``tools/list`` and ``tools/call`` with the two handlers."""
    return describing(
        Server(
            SERVER_NAME,
            version=package_version(),
            instructions=INSTRUCTIONS,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
        )
    )


def routed_server(router: Any) -> Any:
    """The stdio MCP server: every call goes where the router says forms are shown now."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        result: types.ListToolsResult = await router.list_tools(ctx)
        return result

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        result: types.CallToolResult = await router.call_tool(ctx, params.name, params.arguments)
        return result

    return ask_server(list_tools, call_tool)


@attrs.frozen
class LocalServer:
    """A local (desk-less) server: its runtime, the agent's tools, the MCP server object, the
    hook socket (``None`` when it could not be made), the elicitation surface (``None``
    without elicitation), the nursery its forms run in, whether its forms are kept for a
    desk (no surface shows them), and whether its journal is in memory only (another server
    of the same key holds the file, so no desk would ever see a form kept here)."""

    runtime: Any
    tools: AgentTools
    server: Any
    hook_path: Path | None
    surface: ElicitationSurface | None = None
    nursery: Any = None
    keep: bool = False
    in_memory: bool = False
    journal: Path | None = None
    """The session journal's file (``None`` when ``in_memory``)."""


@asynccontextmanager
async def open_local(
    hello: ClientHello,
    *,
    key: str,
    base_key: str | None = None,
    session: Path | None = None,
    settings: Path | None = None,
    cwd: Path,
    progress_interval: float = PROGRESS_INTERVAL,
    hook_dir: Path | None = None,
    state_dir: Path | None = None,
    keep: bool = False,
    on_elicitation_failure: Callable[[str], None] | None = None,
    if_unusable: str | None = None,
    end_unusable: bool = False,
) -> AsyncIterator[LocalServer]:
    """The runtime, tools, hook endpoint and MCP server for one client, until the block ends
    (run ``server.run(read, write, ...)`` on any transport inside it).

    The journal is ``session``, else this key's journal under the desk's ``state_dir``
    (default ``~/.pi/agent/pi-agent-ask/desk/``), so a desk started later shows its forms.
    ``keep``: show no forms (no elicitation either), run in ``tui`` mode anyway, forms queued
    for a desk (``router.py``); without elicitation and ``keep``, the contract's non-TUI
    fallback. ``on_elicitation_failure``, ``if_unusable``, ``end_unusable``: the elicitation
    surface's ``on_failure``, ``if_unusable`` and ``end_unusable``."""
    from pi_agent_ask.actors.form import NullSurface
    from pi_agent_ask.actors.runtime import open_runtime
    from pi_agent_ask.mcp_common.tools import AgentTools
    from pi_agent_ask.mcp_server.elicitation import UNUSABLE_KEPT, ElicitationSurface, log_failure
    from pi_agent_ask.mcp_server.hook import local_take, serve_hook_endpoint
    from pi_agent_ask.persistence.session_file import SessionFileError

    surface: ElicitationSurface | None = None
    if hello.elicitation and not keep:
        surface = ElicitationSurface(
            on_failure=on_elicitation_failure or log_failure,
            if_unusable=if_unusable or UNUSABLE_KEPT,
            end_unusable=end_unusable,
        )
    runtime_surface = surface if surface is not None else NullSurface()
    mode: Mode = "tui" if surface is not None or keep else "json"
    if session is not None:
        journal = session
        journal.parent.mkdir(parents=True, exist_ok=True)
    else:
        journal = await trio.to_thread.run_sync(default_session, key, state_dir)
    in_memory = False
    async with contextlib.AsyncExitStack() as stack:
        try:
            runtime = await stack.enter_async_context(
                open_runtime(
                    session=journal,
                    mode=mode,
                    settings=settings,
                    cwd=cwd,
                    surface=runtime_surface,
                    # Nothing reads wakeups over MCP: an answer recovered at open waits for the
                    # agent's next call instead of going to an idle wake nobody receives.
                    agent_idle=False,
                )
            )
        except SessionFileError as error:
            if session is not None or error.reason != "locked":
                raise
            print(
                f"pi-agent-ask: {journal} is in use by another server; this one keeps its "
                "questions in memory only.",
                file=sys.stderr,
            )
            runtime = await stack.enter_async_context(
                open_runtime(
                    mode=mode, settings=settings, cwd=cwd, surface=runtime_surface, agent_idle=False
                )
            )
            in_memory = True
        tools = stack.enter_context(AgentTools(runtime, progress_interval=progress_interval))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_print_notices, runtime)
            hook_path = await nursery.start(
                functools.partial(
                    serve_hook_endpoint,
                    local_take(tools),
                    key,
                    hello.name,
                    cwd,
                    directory=hook_dir,
                    base_key=base_key or key,
                )
            )
            server = mcp_server(tools, surface, nursery)
            try:
                yield LocalServer(
                    runtime,
                    tools,
                    server,
                    hook_path,
                    surface=surface,
                    nursery=nursery,
                    keep=keep,
                    in_memory=in_memory,
                    journal=None if in_memory else journal,
                )
            finally:
                nursery.cancel_scope.cancel()
