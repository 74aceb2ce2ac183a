"""The form actor: one visible form's state, driven by its inbox until it has an outcome.

A form actor lives in the task of whoever owns the form: the tool call (foreground) or the
queue's nursery (background). It owns the ``FormState`` and is the only place it changes. Its
inbox receives commands from the terminal surface, remote answers, and settings changes; it
answers remote submissions through their one-shot reply channels. It never sends to its owner
while it runs except through the awaited ``on_change`` callback, so no
cycle of blocking sends can form: the owner never sends into a form's inbox from the task that
receives ``on_change`` (remote answers reach the inbox from their own tasks).

Cancelling the actor's scope (hide, defer, session change, aborted call) leaves the last state
with its owner through ``on_change``; nothing the person typed is lost.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol

import attrs
import trio

from pi_agent_ask.form import state as fs
from pi_agent_ask.form.result import answers_from_remote
from pi_agent_ask.form.untrusted import scrub_text

Saved = trio.MemorySendChannel[str | None]
"""Where the owner of a form says that a change is on disk (``None``) or why it is not (a
sentence); closed unanswered when it never will be (the form is gone). A one-shot channel with
a buffer of one: answering never blocks."""


@attrs.frozen(repr=False)
class UserCommand:
    """A command from the terminal surface (a key press or a click, already mapped), or from
    the desk's page. ``saved``: the sender waits until the change the command makes is on
    disk (the page's drafts: it tells the person "saved" only then); the form hands it to its
    owner with the change (``on_change``). A command that puts the form back for later hears
    ``None`` once it is, or why nothing was put back (``on_defer``'s sentence); closed
    unanswered, the form ended meanwhile."""

    command: fs.Command
    saved: Saved | None = None


def answer_saved(saved: Saved | None, value: str | None) -> None:
    """Answer ``saved`` once (its sender may have stopped waiting) and close it."""
    if saved is not None:
        with (
            saved,
            contextlib.suppress(
                trio.BrokenResourceError, trio.ClosedResourceError, trio.WouldBlock
            ),
        ):
            saved.send_nowait(value)


OnChange = Callable[[fs.FormState, Saved | None], Awaitable[None]]
"""A form's owner hears each state before the final one (the drafts), with the ``saved`` of
the command that made it (answered by the owner: ``answer_saved``)."""
OnDefer = Callable[[], Awaitable[str | None]]
"""Puts the form's questions back for later: ``None``, or why nothing was put back."""


class ResponseReply(Protocol):
    """Where a form answers a remote response, once: a one-shot channel (a
    ``trio.MemorySendChannel`` with a buffer of one), or ``remote.SubmitReply``, which turns
    the answer into the ``submit-result`` event. Used as a context manager that closes it;
    closed unanswered, its submitter hears ``flow_not_found``."""

    def send_nowait(self, value: tuple[str, str] | None, /) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
        /,
    ) -> Any: ...


@attrs.frozen(eq=False, repr=False)
class RemoteResponse:
    """A validated-envelope ``pi-agent-ask:submit`` response for this flow.

    The reply carries ``None`` on success or ``(error, message)`` when the answer is invalid.
    """

    response: dict[str, object]
    reply: ResponseReply


@attrs.frozen(repr=False)
class SettingsUpdate:
    settings: fs.FormSettings


@attrs.frozen(repr=False)
class SurfaceFailed:
    """The terminal surface showing this form broke: the form ends with an error."""

    message: str


FormInput = UserCommand | RemoteResponse | SettingsUpdate | SurfaceFailed


class FormFailed(Exception):
    """A form could not go on (its surface failed). Its owner records an error outcome: a
    UI failure is reported as an error, never turned into an answer or a cancellation."""


FLOW_NOT_ACTIVE: tuple[str, str] = ("flow_not_found", "Ask flow is not active.")


def close_inbox(inbox: trio.MemoryReceiveChannel[FormInput]) -> None:
    """The owner of a form that ended closes its inbox: a remote answer already in it, or
    sent later, is told ``flow_not_found`` instead of waiting for a reply that never comes,
    and a command waiting to hear that its change is saved hears that it never will be."""
    while True:
        try:
            message = inbox.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            break
        if isinstance(message, RemoteResponse):
            with message.reply, contextlib.suppress(trio.BrokenResourceError):
                message.reply.send_nowait(FLOW_NOT_ACTIVE)
        elif isinstance(message, UserCommand) and message.saved is not None:
            message.saved.close()  # its change never happens: nothing is written
    inbox.close()


def failure_text(error: BaseException) -> str:
    """What a UI failure says: the message of its real cause (``UI failed``), never the
    exception group a nursery wrapped it in; the cause's type name when it has no message."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return str(error) or type(error).__name__


Ended = Literal["submitted", "cancelled", "deferred", "withdrawn", "failed"]
"""Why a form left its surface: answered; cancelled (a person cancelled or dismissed it);
put back for later (Esc or Later on a background form: it comes back); withdrawn (it ended
with no outcome: its call was cancelled, its session changed, its owner went away); failed
(its surface broke)."""


class Surface(Protocol):
    """What a terminal UI offers the runtime: show, update and hide form views.

    Calls are synchronous and must not block: the UI copies the snapshot and redraws later.
    ``hide``'s ``ended`` says why the form left (``run_form`` always says); ``None`` when it
    only left the display (the desk's board shows another).
    """

    def show(
        self, flow_id: str, state: fs.FormState, commands: trio.MemorySendChannel[FormInput]
    ) -> None: ...

    def update(self, flow_id: str, state: fs.FormState) -> None: ...

    def hide(self, flow_id: str, ended: Ended | None = None) -> None: ...


class Terminal(Protocol):
    """A surface that runs its own full-screen application (the UI layer makes it: the
    actors never import the UI). ``attach`` hands it the settings callback and the working
    directory; ``run`` runs it until the runtime ends, marking ``task_status`` started once
    it shows forms."""

    @property
    def surface(self) -> Surface: ...

    def attach(self, apply_settings: Callable[[Any], None], cwd: Path) -> None: ...

    async def run(self, input: Any, output: Any, *, task_status: Any) -> None: ...


TerminalFactory = Callable[[Any], Terminal]
"""Makes the terminal for the loaded settings (``persistence.settings.LoadedSettings``)."""


@attrs.define(eq=False, repr=False)
class FailedSurface:
    """Stands in for a surface that broke: every form shown on it fails at once."""

    message: str

    def show(
        self, flow_id: str, state: fs.FormState, commands: trio.MemorySendChannel[FormInput]
    ) -> None:
        commands.send_nowait(SurfaceFailed(self.message))

    def update(self, flow_id: str, state: fs.FormState) -> None:
        pass

    def hide(self, flow_id: str, ended: Ended | None = None) -> None:
        pass


@attrs.define(eq=False, repr=False)
class NullSurface:
    """The surface of a headless runtime: forms are answered through remote events only."""

    shown: list[str] = attrs.field(factory=list)

    def show(
        self, flow_id: str, state: fs.FormState, commands: trio.MemorySendChannel[FormInput]
    ) -> None:
        self.shown.append(flow_id)

    def update(self, flow_id: str, state: fs.FormState) -> None:
        pass

    def hide(self, flow_id: str, ended: Ended | None = None) -> None:
        pass


def remote_apply(
    state: fs.FormState, response: dict[str, object]
) -> tuple[fs.FormState, tuple[str, str] | None]:
    """Apply a remote ``answer``/``cancel`` response to a form, or say why it is invalid."""
    kind = response.get("kind")
    if kind == "cancel":
        return fs.cancel_now(state), None
    answers = response.get("answers")
    mode = response.get("mode", "submit")
    checked = answers_from_remote(state.params, state.types, answers, mode=mode)
    if isinstance(checked, str):
        return state, ("invalid_answer", checked)
    return fs.submit_with(state, checked), None


async def run_form(
    *,
    flow_id: str,
    state: fs.FormState,
    inbox: trio.MemoryReceiveChannel[FormInput],
    commands: trio.MemorySendChannel[FormInput],
    surface: Surface,
    on_change: OnChange,
    on_defer: OnDefer | None = None,
    scope: trio.CancelScope | None = None,
) -> fs.FormState | None:
    """Run one form until it has an outcome; returns the final state.

    ``on_change`` hears every state before that one (the drafts); the final state is only
    returned, so a background form's answer costs no draft message to the queue.

    The surface is shown before the first message is read and hidden on every exit path.

    ``scope``: the form's cancel scope, when the caller is outside it (the queue's form
    runner). An input already waiting is read before the scope is entered: until the form
    must wait (for an input, for ``on_change`` or ``on_defer``) nothing yields, so it runs
    as it would inside, and a form whose answer is waiting ends with it without entering its
    scope. ``None`` when the scope cancelled the form.
    """
    _on_surface(surface.show, flow_id, state, commands)
    ended: Ended = "withdrawn"  # until the form has an outcome, or is put back

    async def defer() -> str | None:
        nonlocal ended
        ended = "deferred"
        assert on_defer is not None
        refused = await on_defer()
        if refused is not None:
            ended = "withdrawn"  # nothing was put back: the form goes on
        return refused

    deferring = defer if on_defer is not None else None
    try:
        final = await _run(flow_id, state, inbox, surface, on_change, deferring, scope)
        if final is not None and final.outcome is not None:
            ended = "submitted" if final.outcome.kind == "submitted" else "cancelled"
        return final
    except FormFailed:
        ended = "failed"
        raise
    finally:
        with contextlib.suppress(Exception):  # a broken surface already failed the form
            surface.hide(flow_id, ended)


async def _run(
    flow_id: str,
    state: fs.FormState,
    inbox: trio.MemoryReceiveChannel[FormInput],
    surface: Surface,
    on_change: OnChange,
    on_defer: OnDefer | None,
    scope: trio.CancelScope | None,
) -> fs.FormState | None:
    """``run_form``'s form, shown already, until it has an outcome (see there)."""
    if scope is None:
        return await _serve(flow_id, state, "read", inbox, surface, on_change, on_defer)
    step: _Step = "read"
    saved: Saved | None = None
    if not scope.cancel_called:  # else the scope's first check ends it, reading nothing
        try:
            message = inbox.receive_nowait()
        except trio.WouldBlock:
            pass
        except trio.EndOfChannel:
            return state
        else:
            state, step = _take(state, message, on_defer is not None)
            if step == "done":
                return state
            saved = _saved_of(message)
    with scope:
        return await _serve(flow_id, state, step, inbox, surface, on_change, on_defer, saved)
    return None


_Step = Literal["read", "changed", "defer", "done"]
"""What a form does next: read an input, report a change (then read), defer, or end."""


async def _serve(
    flow_id: str,
    state: fs.FormState,
    step: _Step,
    inbox: trio.MemoryReceiveChannel[FormInput],
    surface: Surface,
    on_change: OnChange,
    on_defer: OnDefer | None,
    saved: Saved | None = None,
) -> fs.FormState:
    """The form's loop from ``step`` on, until it has an outcome or its inbox closes."""
    while True:
        if step == "changed":
            await on_change(state, saved)
            _on_surface(surface.update, flow_id, state)
        elif step == "defer":
            assert on_defer is not None
            # Hiding the panel cancels this form's scope (the sender hears of it: ``saved`` is
            # closed on the way out); the owner keeps its draft. A put-back that was not
            # recorded leaves the form as it was, and its sender hears why; so does the
            # surface, whose command (Esc) is answered with the form's snapshot: it parks the
            # keys typed while the put-back was on its way until then.
            try:
                why = await on_defer()
                answer_saved(saved, why)
            finally:
                if saved is not None:
                    saved.close()
            if why is not None:
                _on_surface(surface.update, flow_id, state)
        try:
            message = await next_input(inbox)
        except trio.EndOfChannel:
            # The inbox closed without an outcome: the owner is tearing the form down.
            return state
        state, step = _take(state, message, on_defer is not None)
        if step == "done":
            # The final state is the return value, not a draft: the owner records it.
            return state
        saved = _saved_of(message)


def _saved_of(message: FormInput) -> Saved | None:
    """The ``saved`` of a command that changed the form (the owner answers it)."""
    return message.saved if isinstance(message, UserCommand) else None


def _take(state: fs.FormState, message: FormInput, deferrable: bool) -> tuple[fs.FormState, _Step]:
    """Apply one input (a remote response is answered here); what the form does next."""
    match message:
        case UserCommand(command=command, saved=saved):
            if isinstance(command, fs.EditorChanged):
                # Terminal bytes that are not UTF-8 arrive as lone surrogates.
                command = fs.EditorChanged(scrub_text(command.text))
            state, effects = fs.reduce(state, command)
            defer = deferrable and fs.DeferRequested() in effects
            if saved is not None and state.outcome is not None:
                saved.close()  # ended: no draft is written for this command
            if defer:
                return state, "defer"
        case SettingsUpdate(settings=settings):
            state, _effects = fs.reduce(state, fs.SettingsChanged(settings))
        case RemoteResponse(response=response, reply=reply):
            state, problem = remote_apply(state, response)
            with reply:
                reply.send_nowait(problem)
        case SurfaceFailed(message=text):
            raise FormFailed(text)
    return state, ("done" if state.outcome is not None else "changed")


async def next_input(inbox: trio.MemoryReceiveChannel[FormInput]) -> FormInput:
    """The form's next input; ``EndOfChannel`` once the inbox is closed and empty."""
    return await inbox.receive()


def _on_surface(call: Callable[..., None], *args: object) -> None:
    """Call the surface; a surface that raises fails the form with the cause's message."""
    try:
        call(*args)
    except Exception as error:
        raise FormFailed(failure_text(error)) from error
