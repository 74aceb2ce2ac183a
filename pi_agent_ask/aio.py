"""The runtime for asyncio programs: ``async with pi_agent_ask.aio.open_runtime(...) as rt``.

The actors stay on Trio. ``open_runtime`` starts a Trio run on the host's asyncio loop in
Trio's *guest mode* (``trio.lowlevel.start_guest_run``): Trio's scheduler runs as callbacks of
the asyncio loop, on the same thread, and its I/O waits happen in a helper thread. When the host
loop is itself a trio-asyncio loop (``asyncio.run`` makes one once ``trio_asyncio`` has been
imported), there already is a Trio run underneath it, and the Trio side runs as a task of that
run instead. Either way, leaving the block disposes the runtime and ends the Trio side: nothing
is left running.

How the two sides talk (one thread, so no locks; the Trio run context is reachable from asyncio
callbacks, which makes Trio's synchronous operations — ``send_nowait``, ``Event.set``,
``CancelScope.cancel`` — safe to call from the asyncio side):

- a hook coroutine (``call_tool``, ``turn_boundary``, ...) puts a ``_Call`` into an unbounded
  Trio channel; a dispatcher task starts one Trio task per call, under its own cancel scope,
  and settles the call's asyncio future with the value or the exception, unchanged;
- cancelling the awaiting asyncio task cancels that scope and waits for the Trio task to finish,
  exactly as cancelling a Trio caller does (a foreground form closes and is journaled as
  cancelled, a wait releases, queued forms stay queued);
- a result the Trio side could not refuse (``turn_boundary`` takes its reply even when
  cancelled) is returned, and the asyncio task is cancelled again at its next ``await``, as
  Trio delivers a cancellation at the next checkpoint: an answer handed out is never dropped;
- the terminal form (``mode="tui"``) runs its prompt_toolkit application on the host loop
  itself (``docs/asyncio.md`` says why): the Trio runtime runs it as its terminal
  (``open_runtime(terminal=...)``, the ``Terminal`` of ``actors/form.py``: ``_HostScreen``).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Generic, TypeVar

import attrs
import outcome
import trio

from pi_agent_ask import events as ev
from pi_agent_ask.actors import runtime as trio_runtime

__all__ = [
    "Channel",
    "Runtime",
    "RuntimeClosedError",
    "open_runtime",
    "run_on_wakeups",
    "wake_text",
]

T = TypeVar("T")

HOST_TEARDOWN_TIMEOUT = trio_runtime.TEARDOWN_TIMEOUT
"""Seconds the Trio side waits for an asyncio task it cancelled (the terminal application)."""


class RuntimeClosedError(RuntimeError):
    """The asyncio runtime is closed (or closed while the call was running)."""


@attrs.define(eq=False)
class _Call:
    """One hook call crossing from asyncio to Trio."""

    fn: Callable[..., Awaitable[Any]]
    args: tuple[Any, ...]
    future: asyncio.Future[outcome.Outcome[Any] | None]
    """Settled with the outcome, or with ``None`` when the call's own scope cancelled it."""
    scope: trio.CancelScope | None = None
    cancel_requested: bool = False

    def cancel(self) -> None:
        self.cancel_requested = True
        if self.scope is not None:
            self.scope.cancel()

    def settle(self, result: outcome.Outcome[Any] | None) -> None:
        if not self.future.done():
            self.future.set_result(result)


@attrs.define(eq=False)
class _Bridge:
    """Both ends of the asyncio/Trio crossing for one runtime."""

    loop: asyncio.AbstractEventLoop
    context: contextvars.Context
    """The host's context, for asyncio tasks the Trio side starts (the terminal application)."""
    closing: trio.Event = attrs.field(factory=trio.Event)
    closed: bool = False
    _requests: trio.MemorySendChannel[_Call] | None = None
    _pending: set[_Call] = attrs.field(factory=set)

    # -- the asyncio side ---------------------------------------------------------------------

    async def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``await fn(*args)`` on the Trio side; see the module docstring for cancelling."""
        if self.closed or self._requests is None:
            raise RuntimeClosedError("the pi-agent-ask runtime is closed")
        future: asyncio.Future[outcome.Outcome[T] | None] = self.loop.create_future()
        call = _Call(fn, args, future)
        try:
            self._requests.send_nowait(call)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            # The Trio side is ending (a crash is reported when the block exits).
            raise RuntimeClosedError("the pi-agent-ask runtime is closed") from None
        self._pending.add(call)
        cancelled: asyncio.CancelledError | None = None
        while True:
            try:
                result = await asyncio.shield(future)
                break
            except asyncio.CancelledError as error:
                # Abort the Trio task and wait for it: its cleanup (a form journaled as
                # cancelled, a wait handing its answers back) is bounded by the runtime.
                cancelled = cancelled or error
                call.cancel()
        if cancelled is not None:
            if result is None:  # the Trio task ended by this cancellation
                raise cancelled
            # The Trio side finished anyway; deliver what it produced and cancel this task
            # again at its next await, as Trio would at the next checkpoint.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
                task.cancel()
        assert result is not None  # a call's own scope is cancelled only through call.cancel()
        return result.unwrap()

    def close(self) -> None:
        """No new calls; the Trio side ends the pending ones and disposes the runtime."""
        self.closed = True
        self.closing.set()

    # -- the Trio side ------------------------------------------------------------------------

    def open_requests(self) -> trio.MemoryReceiveChannel[_Call]:
        # Unbounded: the asyncio side sends with send_nowait and must never block.
        self._requests, incoming = trio.open_memory_channel[_Call](float("inf"))
        return incoming

    async def serve(
        self, incoming: trio.MemoryReceiveChannel[_Call], nursery: trio.Nursery
    ) -> None:
        """Start a Trio task for each call until the runtime closes."""
        async with incoming:
            async for call in incoming:
                nursery.start_soon(self._run_call, call)

    async def _run_call(self, call: _Call) -> None:
        try:
            with trio.CancelScope() as scope:
                call.scope = scope
                if call.cancel_requested:
                    scope.cancel()
                try:
                    value = await call.fn(*call.args)
                except trio.Cancelled:
                    raise
                except Exception as error:
                    call.settle(outcome.Error(error))
                else:
                    call.settle(outcome.Value(value))
            call.settle(None)  # only reached when this call's own scope caught the cancel
        finally:
            self._pending.discard(call)
            call.settle(outcome.Error(RuntimeClosedError("the pi-agent-ask runtime closed")))

    def fail_pending(self) -> None:
        self.closed = True
        if self._requests is not None:
            self._requests.close()
        for call in tuple(self._pending):
            call.settle(outcome.Error(RuntimeClosedError("the pi-agent-ask runtime closed")))
        self._pending.clear()

    async def run_on_host(self, start: Callable[[], Awaitable[T]]) -> T:
        """From Trio: run ``start()`` as a task on the host loop and return its result.

        Cancelling this cancels the asyncio task and waits (bounded) until it finished."""
        task = self.loop.create_task(_awaited(start), context=self.context.copy())
        finished = trio.Event()
        task.add_done_callback(lambda _task: finished.set())
        try:
            await finished.wait()
        finally:
            if not task.done():
                task.cancel()
                with trio.CancelScope(shield=True), trio.move_on_after(HOST_TEARDOWN_TIMEOUT):
                    await finished.wait()
        return task.result()

    def host_coroutine(
        self, fn: Callable[..., Awaitable[T]] | None
    ) -> Callable[..., Awaitable[T]] | None:
        """An asyncio coroutine function made callable from Trio (``confirm=`` callbacks)."""
        if fn is None:
            return None

        async def on_host(*args: Any) -> T:
            return await self.run_on_host(functools.partial(fn, *args))

        return on_host


async def _awaited(start: Callable[[], Awaitable[T]]) -> T:
    return await start()


@attrs.define(eq=False)
class Channel(Generic[T]):
    """A Trio receive channel of the runtime, read from asyncio: ``await receive()`` or
    ``async for``. Iteration ends when the runtime closes; ``receive`` raises
    ``trio.EndOfChannel`` then (as the Trio channel does) or ``RuntimeClosedError``."""

    _bridge: _Bridge
    _channel: trio.MemoryReceiveChannel[T]

    async def receive(self) -> T:
        """The next item; cancelling loses nothing (an item taken is returned first)."""
        return await self._bridge.call(self._channel.receive)

    def receive_nowait(self) -> T:
        """The next item if there is one now; else ``trio.WouldBlock``."""
        if self._bridge.closed:
            raise RuntimeClosedError("the pi-agent-ask runtime is closed")
        return self._channel.receive_nowait()

    def __aiter__(self) -> Channel[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError, RuntimeClosedError):
            raise StopAsyncIteration from None


@attrs.define(eq=False)
class Runtime:
    """A running runtime seen from asyncio: the Trio ``Runtime``'s hooks as coroutines.

    Created by ``open_runtime``. ``events`` is the runtime's own ``EventBus``.
    """

    _trio: trio_runtime.Runtime
    _bridge: _Bridge
    wakeups: Channel[dict[str, Any]]
    """While the agent is idle, each message that should start a new turn."""
    notices: Channel[str]
    """Messages for the person: settings problems, a damaged session file, a reopened form."""
    aborts: Channel[str]
    """A foreground form the person cancelled asks the host to stop the current operation."""

    @property
    def events(self) -> ev.EventBus:
        return self._trio.events

    @property
    def mode(self) -> trio_runtime.Mode:
        return self._trio.mode

    @property
    def cwd(self) -> Path:
        return self._trio.cwd

    @property
    def settings(self) -> Any:
        return self._trio.settings

    @property
    def trio_side(self) -> trio_runtime.Runtime:
        """The Trio runtime underneath: call its coroutines through ``run_trio``."""
        return self._trio

    async def run_trio(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run a Trio async function on the runtime's Trio side, with the hooks' cancellation
        rules (``trio_side``'s other methods, ``trio.testing.wait_all_tasks_blocked``)."""
        return await self._bridge.call(fn, *args)

    def _check_open(self) -> None:
        if self._bridge.closed:
            raise RuntimeClosedError("the pi-agent-ask runtime is closed")

    # -- tools ----------------------------------------------------------------------------

    async def call_tool(
        self,
        name: str,
        arguments: Any,
        tool_call_id: str | None = None,
        parent_tool_call_id: str | None = None,
    ) -> dict[str, Any]:
        """Run one tool call and return its result dict; cancelling the awaiting task aborts it
        (a foreground form closes, a wait releases, queued forms stay queued)."""
        return await self._bridge.call(
            self._trio.call_tool, name, arguments, tool_call_id, parent_tool_call_id
        )

    def tool_definitions(self, format: str = "generic") -> list[dict[str, Any]]:
        """The tools this runtime exposes now, in ``format`` (``docs/tools.md``)."""
        from pi_agent_ask.form.tools import in_format

        return in_format(self._trio.tool_definitions(), format)

    # -- host hooks -----------------------------------------------------------------------

    def agent_started(self) -> None:
        """An agent turn started: idle wakes stop until the agent settles again."""
        self._check_open()
        self._trio.agent_started()

    def agent_settled(self) -> None:
        """The agent is idle: a ready answer may now wake it (``wakeups``)."""
        self._check_open()
        self._trio.agent_settled()

    async def turn_boundary(self, *, text_only: bool = False) -> list[dict[str, Any]]:
        """The background-answer messages to add to the context now (each exactly once);
        ``text_only`` leaves those with image blocks for a later boundary."""
        return await self._bridge.call(
            functools.partial(self._trio.turn_boundary, text_only=text_only)
        )

    async def give_back(self, messages: list[dict[str, Any]]) -> None:
        """Messages ``turn_boundary`` handed out that never reached the agent: journaled as
        given back, they go out again first (``Runtime.give_back``)."""
        await self._bridge.call(self._trio.give_back, messages)

    async def user_message(self, text: str) -> None:
        """Ordinary input: releases an active wait as ``deferred`` and hides the panel."""
        await self._bridge.call(self._trio.user_message, text)

    async def defer_queue(self) -> None:
        """Hide the panel and defer every question (``Esc`` in the panel, ``/ask-defer``)."""
        await self._bridge.call(self._trio.defer_queue)

    async def show_queue(self) -> None:
        """Reopen the panel on the pending questionnaire (``/ask-queue``)."""
        await self._bridge.call(self._trio.show_queue)

    async def change_session(self, reason: str, session: Any = None) -> None:
        """Dispose what belongs to the old branch and rebuild from the new one."""
        await self._bridge.call(self._trio.change_session, reason, session)

    async def statistics(self) -> Any:
        """A snapshot of the queue (``actors.queue.QueueStats``)."""
        return await self._bridge.call(self._trio.statistics)

    async def send_command(self, flow_id: str, command: Any) -> bool:
        """Send a form command to a visible flow (the UI seam)."""
        return await self._bridge.call(self._trio.send_command, flow_id, command)

    async def set_question_mode(
        self, mode: str, *, confirm: Callable[[str], Awaitable[bool]] | None = None
    ) -> bool:
        """``/ask-mode``; ``confirm`` is an asyncio coroutine function (see the Trio hook)."""
        on_host = self._bridge.host_coroutine(confirm)
        return await self._bridge.call(
            functools.partial(self._trio.set_question_mode, mode, confirm=on_host)
        )

    def apply_settings(self, loaded: Any) -> None:
        """Settings saved elsewhere apply live."""
        self._check_open()
        self._trio.apply_settings(loaded)

    def notice(self, text: str) -> None:
        """A message for the person (``notices``); never blocks."""
        self._check_open()
        self._trio.notice(text)


def _trio_asyncio_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` is a trio-asyncio loop (which already runs on a Trio run)."""
    module = sys.modules.get("trio_asyncio")
    return module is not None and isinstance(loop, module.BaseTrioEventLoop)


def _start_trio(
    loop: asyncio.AbstractEventLoop, main: Callable[[], Awaitable[None]]
) -> asyncio.Future[outcome.Outcome[None]]:
    """Start ``main`` on a Trio run beside ``loop``; the future gets its outcome when it ends."""
    done: asyncio.Future[outcome.Outcome[None]] = loop.create_future()

    def finished(result: outcome.Outcome[None]) -> None:
        if not done.done():
            done.set_result(result)

    if _trio_asyncio_loop(loop):
        task = loop.trio_as_future(main)  # type: ignore[attr-defined]

        def settled(future: asyncio.Future[None]) -> None:
            if future.cancelled():
                finished(outcome.Error(RuntimeClosedError("the Trio side was cancelled")))
            elif future.exception() is not None:
                finished(outcome.Error(future.exception()))  # type: ignore[arg-type]
            else:
                finished(outcome.Value(None))

        task.add_done_callback(settled)
        return done
    # Guest mode exists only in trio.lowlevel; one Trio run per thread, so look first.
    if trio.lowlevel.in_trio_run():
        raise RuntimeError(
            "pi_agent_ask.aio.open_runtime: this thread already runs Trio (another "
            "pi_agent_ask.aio runtime, or a Trio program): one asyncio runtime per loop, "
            "or use pi_agent_ask.open_runtime from Trio"
        )
    # Trio as the asyncio loop's guest: the one way to run Trio inside a running asyncio loop.
    trio.lowlevel.start_guest_run(
        main,
        run_sync_soon_threadsafe=loop.call_soon_threadsafe,
        run_sync_soon_not_threadsafe=loop.call_soon,
        done_callback=finished,
        host_uses_signal_set_wakeup_fd=True,
    )
    return done


async def _wait_uncancellable(future: asyncio.Future[T]) -> T:
    """Await ``future`` to the end even if this task is cancelled meanwhile; a cancellation
    is raised afterwards."""
    cancelled: asyncio.CancelledError | None = None
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError as error:
            if future.done():
                break
            cancelled = cancelled or error
    if cancelled is not None:
        raise cancelled
    return future.result()


@attrs.define(eq=False)
class _HostScreen:
    """The runtime's ``Terminal`` (``actors/form.py``) for asyncio hosts: the terminal surface
    with its application on the host loop itself. The Trio runtime attaches, runs and
    supervises it as it does its own terminal (a failure ends the forms with an error, never
    an answer)."""

    surface: Any
    """The ``ui.surface.TerminalSurface``."""
    bridge: _Bridge

    def attach(self, apply_settings: Callable[[Any], None], cwd: Path) -> None:
        self.surface.on_settings_saved = apply_settings
        self.surface.controller.cwd = cwd

    async def run(self, input: Any, output: Any, *, task_status: Any) -> None:
        from pi_agent_ask.ui.surface import run_terminal_surface

        await run_terminal_surface(
            self.surface,
            input=input,
            output=output,
            run_asyncio=self.bridge.run_on_host,
            task_status=task_status,
        )


@asynccontextmanager
async def open_runtime(
    session: str | Path | None = None,
    mode: trio_runtime.Mode = "tui",
    settings: str | Path | None = None,
    input: Any = None,
    output: Any = None,
    cwd: str | Path | None = None,
    *,
    surface: Any = None,
    write_terminal: Any = None,
) -> AsyncIterator[Runtime]:
    """Open a runtime inside a running asyncio loop; the keywords are ``open_runtime``'s.

    ``mode="tui"`` without ``surface`` draws forms on the terminal (``input``/``output``:
    prompt_toolkit objects, ``None``: the process's terminal), with the application on this
    loop. ``surface=pi_agent_ask.NullSurface()`` runs headless (answers through
    ``pi-agent-ask:submit`` events). Leaving the block disposes the runtime and ends its Trio
    side; pending hook calls of other tasks end with ``RuntimeClosedError``.
    """
    loop = asyncio.get_running_loop()
    bridge = _Bridge(loop, contextvars.copy_context())
    ready: asyncio.Future[Runtime] = loop.create_future()
    keywords: dict[str, Any] = {
        "session": session,
        "mode": mode,
        "settings": settings,
        "input": input,
        "output": output,
        "cwd": cwd,
        "surface": surface,
        "write_terminal": write_terminal,
    }

    async def main() -> None:
        if surface is None and mode == "tui":
            from pi_agent_ask.ui.surface import TerminalSurface

            def screen(loaded: Any) -> _HostScreen:
                return _HostScreen(TerminalSurface(loaded), bridge)

            keywords["terminal"] = screen
        try:
            async with (
                trio_runtime.open_runtime(**keywords) as rt,
                trio.open_nursery() as calls,
            ):
                calls.start_soon(bridge.serve, bridge.open_requests(), calls)
                if not ready.done():  # done: the opener was cancelled, and closes at once
                    ready.set_result(
                        Runtime(
                            rt,
                            bridge,
                            wakeups=Channel(bridge, rt.wakeups),
                            notices=Channel(bridge, rt.notices),
                            aborts=Channel(bridge, rt.aborts),
                        )
                    )
                # The first checkpoint of this body: the asyncio body resumes (its wakeup
                # was queued on the loop before the next Trio tick) before forms recovered
                # at open are shown, so handlers it registers at once see every event.
                await bridge.closing.wait()
                # Calls still running are aborted while the runtime is still there to
                # record them, exactly as a cancelled Trio caller's would be.
                calls.cancel_scope.cancel()
        except Exception as error:
            if not ready.done():
                ready.set_exception(error)  # the open failed: its error, unchanged
            raise
        finally:
            bridge.fail_pending()
            if not ready.done():
                ready.set_exception(RuntimeClosedError("the runtime ended while opening"))

    done = _start_trio(loop, main)
    try:
        # Awaited directly (one wakeup, no helper futures): see the ordering note in main.
        opened = await ready
    except BaseException:
        # Cancelled while opening, or the open failed: end the Trio side, then raise.
        bridge.close()
        await _wait_uncancellable(done)
        raise
    try:
        yield opened
    finally:
        bridge.close()
        result = await _wait_uncancellable(done)
        result.unwrap()


async def run_on_wakeups(
    rt: Runtime, run_agent: Callable[[dict[str, Any]], Awaitable[Any]]
) -> None:
    """The idle-wake loop: settle the agent, then for each wake message run the agent again.

    ``run_agent(message)`` gets the message that should start the new turn (a background
    answer or a reopened form's answer; ``wake_text(message)`` is its text, the new input); the
    agent counts as working (``agent_started``) until it returns. Returns when the runtime
    closes; cancel it to stop waiting.
    """
    rt.agent_settled()
    async for message in rt.wakeups:
        rt.agent_started()
        try:
            await run_agent(message)
        finally:
            if not rt._bridge.closed:
                rt.agent_settled()


def wake_text(message: dict[str, Any]) -> str:
    """The text of a wake or boundary message (its ``content``), as new input for a model."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n\n".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and part.get("type") == "text" and "text" in part
        )
    return ""
