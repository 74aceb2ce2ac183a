"""What the queue hears and answers: its messages (a closed set), the replies it sends, and
the live objects of the shell (channels, cancel scopes, the journal) as opaque handles the
reducer (``queue_state.py``) passes back in its effects without using them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeVar

import attrs

from pi_agent_ask.actors.records import AskRequest, Outcome
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.fieldless import Fieldless

Json = dict[str, Any]
WaitReason = Literal["hidden", "user_message", "mode_changed"]
Entry = tuple[str, Mapping[str, Any]]

T_contra = TypeVar("T_contra", contravariant=True)


# ------------------------------------------------------------------------------------------
# Opaque handles (the shell's live objects, as the reducer sees them)
# ------------------------------------------------------------------------------------------


class ReplyTo(Protocol[T_contra]):
    """A one-shot reply channel (a ``trio.MemorySendChannel`` with a buffer of one)."""

    def send_nowait(self, value: T_contra, /) -> None: ...

    def close(self) -> None: ...


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class CommandSink(Protocol):
    """A form's command channel; ``FindFlow`` hands out a clone of it."""

    def clone(self) -> CommandSink: ...


class JournalHandle(Protocol):
    """The branch writer the shell writes through (swapped by ``Restore``)."""

    async def append(self, type_: str, data: Json) -> object: ...

    async def append_many(self, entries: Sequence[Entry]) -> object: ...


# ------------------------------------------------------------------------------------------
# Messages (a closed set; each reply channel is one-shot with a buffer of one)
# ------------------------------------------------------------------------------------------


@attrs.frozen(eq=False, repr=False)
class Recording:
    """A request's entries that the queue writes itself, in the transition that enqueues it,
    followed by the call's tool result: the receipt, which names the pending count that only
    this transition knows. One write instead of two, and no window in which the request is on
    the branch without its result. ``writer`` is the calling branch's (revoked when the session
    changes: then nothing is written or enqueued)."""

    entries: tuple[Entry, ...]
    result_entry: Callable[[int], Entry]
    """The call's tool-result entry for a pending count (pure: the caller returns the result
    it holds for the count it is told)."""
    writer: JournalHandle


@attrs.frozen(eq=False, repr=False)
class Enqueue:
    """Queue a background request. The reply is the pending count after it; with a
    ``recording`` whose write failed, the error instead (nothing was enqueued)."""

    request: AskRequest
    form: fs.FormState | fs.FormSettings
    """Its form, or the settings of the fresh form it is shown with (``Item.form``)."""
    reply: ReplyTo[int | Exception]
    recording: Recording | None = None


@attrs.frozen(repr=False)
class Grant:
    claim_id: int
    epoch: int


@attrs.frozen(eq=False, repr=False)
class AcquireSurface:
    """A foreground form asks for the surface; the reply is its grant, in FIFO order."""

    claim_id: int
    flow_id: str
    commands: CommandSink
    scope: Cancellable
    reply: ReplyTo[Grant]


@attrs.frozen(repr=False)
class ReleaseSurface:
    claim_id: int


@attrs.frozen(eq=False, repr=False)
class DraftChanged:
    """A background form's state changed. ``saved``: its sender waits for the draft to be
    written (``None``), or for why it was not; closed when it never will be."""

    request_id: str
    epoch: int
    form: fs.FormState
    saved: ReplyTo[str | None] | None = None


@attrs.frozen(repr=False)
class FormStopped:
    """A background form task ended: with an outcome (journaled already) or interrupted."""

    request_id: str
    epoch: int
    form: fs.FormState
    outcome: Outcome | None


@attrs.frozen(eq=False, repr=False)
class Defer:
    """Hide the panel and put every question back. ``reply`` hears ``None``, or, when the
    journal write failed (nothing was put back: the form stays on display), the sentence
    that says so (``DEFER_NOT_RECORDED_TEXT``)."""

    reason: Literal["hidden", "user_message"]
    reply: ReplyTo[str | None]


@attrs.frozen(eq=False, repr=False)
class Show:
    reply: ReplyTo[None]


@attrs.frozen(eq=False, repr=False)
class TurnBoundary:
    reply: ReplyTo[list[Json]]
    text_only: bool = False
    """Hand out only messages without image blocks; the others stay for a later boundary
    (a caller that can pass on text only, such as a hook)."""


@attrs.frozen(repr=False)
class AgentActivity:
    """The host called ``agent_started`` (``idle=False``) or ``agent_settled``."""

    idle: bool
    call: int = 0
    """On the message a hook call forwards: the call's number among the host's hook calls
    (``queue.HookCalls``). The shell reads each call before the next transition, so it skips
    a numbered message; it reduces the call it read as an activity without a number."""
    woken_after: bool = False
    """A wake went out after the host made this call (the shell knows, ``queue.HookCalls``): a
    settle that reached the queue late, while a wake's delivery mark was being written, starts
    the idle period that wake belongs to, so the period has had its one wake."""


@attrs.frozen(eq=False, repr=False)
class StartWait:
    wait_id: int
    reply: ReplyTo[WaitEnd]


@attrs.frozen(repr=False)
class EndWait:
    """The waiter is done: ``acknowledged`` when its result was journaled and returned."""

    wait_id: int
    acknowledged: bool


@attrs.frozen(eq=False, repr=False)
class FindFlow:
    flow_id: str
    reply: ReplyTo[CommandSink | None]


@attrs.frozen(repr=False)
class ModeChanged:
    background_only: bool


class FlushDrafts(Fieldless):
    """The draft debounce elapsed: write the drafts changed since the last write."""


@attrs.frozen(repr=False)
class RestoredItem:
    request: AskRequest
    form: fs.FormState
    outcome: Outcome | None
    delivered: bool


@attrs.frozen(repr=False)
class FollowUp:
    """A message for the agent that is not a background answer (a recovered form's answer).

    It wakes an idle agent at once, or goes out at the next turn boundary; journaled as
    ``entry_type`` before either, exactly once.
    """

    entry_type: str
    message: Json
    wake: bool


@attrs.frozen(eq=False, repr=False)
class GiveBack:
    """Messages a turn boundary handed out that never reached the agent (the call that took
    them was cut): journaled as given back (``ask:returned``), then they go out again first,
    each marked again when it does. ``reply`` hears ``None``, or the write's error (nothing
    was given back)."""

    follow_ups: tuple[FollowUp, ...]
    reply: ReplyTo[Exception | None]


@attrs.frozen(eq=False, repr=False)
class Restore:
    """Replace everything with the state rebuilt from a new branch (session change).

    ``follow_ups`` are the branch's recorded but undelivered follow-up messages (a recovered
    form answered before the session changed); they go out as if just sent.
    """

    epoch: int
    items: tuple[RestoredItem, ...]
    panel_visible: bool
    journal: JournalHandle
    reply: ReplyTo[None]
    follow_ups: tuple[FollowUp, ...] = ()


@attrs.frozen(eq=False, repr=False)
class Inspect:
    """A snapshot of the queue; ``params_of``: requests whose params it names besides the
    pending ones (a wait's answered requests)."""

    reply: ReplyTo[QueueStats]
    params_of: tuple[str, ...] = ()


@attrs.frozen(eq=False, repr=False)
class Quiesce:
    """Close the visible background form and save every draft; reply once all is saved.

    Sent before a session change (so the old branch keeps what the person typed) and at
    disposal. Nothing new is shown until the next ``Restore``.
    """

    reply: ReplyTo[None]


class SurfaceReady(Fieldless):
    """The host's input surface is up: forms, recovered ones first, may be shown now."""


# Internal messages: the second half of a transition that must not depend on the first
# half's write, or whose first half must be committed even if the second half's write fails.


@attrs.frozen(repr=False)
class TryWake:
    """Wake an idle agent if something is ready; then answer ``reply`` (a ``Restore``'s)."""

    reply: ReplyTo[None] | None = None


class SaveDrafts(Fieldless):
    """Write the dirty drafts; then answer the ``Quiesce`` callers if nothing is open."""


class RetryWake(Fieldless):
    """The wake retry timer (``ScheduleWakeRetry``) ran out: try the idle wake again."""


class RetryDrafts(Fieldless):
    """The draft retry timer (``ScheduleDraftRetry``) ran out: write the dirty drafts again."""


@attrs.frozen(repr=False)
class Unrecorded:
    """The write of ``message``'s transition failed (the branch was revoked, the journal
    ended, the entry was refused, or the disk failed): none of it happened. Its caller hears
    so (``Enqueue`` with a recording: ``error`` itself). A disk failure (``OSError``) may pass,
    so a failed wake or draft write is retried; the other failures are final for this branch."""

    message: QueueMessage
    error: Exception | None = None


QueueMessage = (
    Enqueue
    | AcquireSurface
    | ReleaseSurface
    | DraftChanged
    | FormStopped
    | Defer
    | Show
    | TurnBoundary
    | AgentActivity
    | StartWait
    | EndWait
    | FindFlow
    | ModeChanged
    | FlushDrafts
    | Restore
    | Inspect
    | FollowUp
    | GiveBack
    | Quiesce
    | SurfaceReady
    | TryWake
    | SaveDrafts
    | RetryWake
    | RetryDrafts
    | Unrecorded
)


# ------------------------------------------------------------------------------------------
# Replies and snapshots
# ------------------------------------------------------------------------------------------


@attrs.frozen(repr=False)
class WaitEnd:
    """How a wait ended. ``status`` is ``complete``, ``deferred``, ``busy`` or ``aborted``."""

    status: Literal["complete", "deferred", "busy", "aborted"]
    request_ids: tuple[str, ...] = ()
    pending_request_ids: tuple[str, ...] = ()
    results: tuple[Outcome, ...] = ()
    reason: WaitReason | None = None


@attrs.frozen(repr=False)
class QueueStats:
    """A snapshot for the desk, the status line and tests. It costs what is pending, never
    what the epoch answered: ``completed`` and ``delivered`` are counts (the queue keeps them
    as it goes, ``Step.put``), and ``params`` names the pending requests and those asked for
    (``Inspect.params_of``)."""

    epoch: int
    pending: tuple[str, ...]
    """The requests without an outcome, oldest first."""
    completed: int
    """Requests of the epoch with an outcome (delivered or not)."""
    delivered: int
    """Requests of the epoch whose outcome was delivered."""
    visible: str | None
    panel_visible: bool
    herdr_owners: frozenset[str]
    waiting: bool
    params: tuple[tuple[str, Any], ...] = ()


def reply_of(message: QueueMessage) -> ReplyTo[Any] | None:
    """The reply channel a message carries, if any."""
    reply: ReplyTo[Any] | None = getattr(message, "reply", None)
    return reply
