"""The queue actor: the I/O shell around the pure reducer in ``queue_state.py``.

The rules (the FIFO surface, delivery, waits, Herdr, epochs) live there, stated once. This
module only receives messages, runs ``reduce``, performs the effects in order and commits the
new state once they succeeded:

- a transition's journal write is its first effect; when it fails (``StaleBranch``: the branch
  was revoked by a session change under way, whose ``Restore`` rebuilds everything;
  ``PersistenceClosedError``: disposal; ``WriteRefused``; ``OSError``: the disk, which is also
  a notice for the person) the state stays as it was and ``Unrecorded`` tells
  the caller; the transitions it continues into still run (they never depend on it); a
  wake that failed on the disk is retried after the delay the reducer names
  (``ScheduleWakeRetry``: a task of the queue's nursery sleeps, then sends ``RetryWake``);
- delivery marks are written shielded: once a mark may be on the branch, its message must go
  out, and it does with no checkpoint in between (a wake's ``send_nowait``, the boundary's
  reply);
- ``Continue`` effects are reduced next, before any other message; only a host hook call
  the queue has not reduced yet goes first (``QueueActor._unseen_hook``).

A message for the queue while the queue task is parked (waiting for a message, none on its way)
is handled in its sender's task (``ask_now``, ``tell_now``; ``tell_last_now`` for the form
runner's ``FormStopped``), exactly as the queue task would
handle it next, when its transition can run to its commit without waiting: no write, or a write
the journal takes at once (``append_many_now``), and no ``Continue``. Nothing runs in between,
so nothing can tell it from the queue task's handling, less the two passes through the
scheduler of the round trip; any other message goes to the queue task.

The queue never sends into a form's inbox and never blocks on the host: replies go through
one-shot channels with a buffer of one, and wakeups through the runtime's wake channel whose
buffer is unbounded (the host may be busy for a long time; a wake must never stall the queue).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

import attrs
import trio

from pi_agent_ask import events as ev
from pi_agent_ask.actors.form import FormInput
from pi_agent_ask.actors.persistence import PersistenceClosedError, WriteRefused
from pi_agent_ask.actors.queue_state import (
    WRITES,
    AcquireSurface,
    AgentActivity,
    Append,
    CancelClaim,
    CancelForm,
    CloseReply,
    CommandSink,
    Continue,
    Defer,
    DraftChanged,
    Effect,
    EndWait,
    Enqueue,
    FindFlow,
    FlushDrafts,
    FollowUp,
    FormStopped,
    GiveBack,
    Grant,
    HerdrChanged,
    Inspect,
    JournalHandle,
    MarkDelivered,
    ModeChanged,
    QueueMessage,
    QueueState,
    QueueStats,
    Quiesce,
    Recording,
    ReleaseSurface,
    Reply,
    ReplyCommands,
    ReplyTo,
    Restore,
    RestoredItem,
    RetryDrafts,
    RetryWake,
    ScheduleDraftRetry,
    ScheduleFlush,
    ScheduleWakeRetry,
    Show,
    StartForm,
    StartWait,
    SurfaceReady,
    TurnBoundary,
    Unrecorded,
    UseJournal,
    WaitEnd,
    WaitReason,
    Wake,
    active_flow,
    initial_state,
    reduce,
    release_all_herdr,
    reply_of,
)
from pi_agent_ask.actors.records import AskRequest, StaleBranch
from pi_agent_ask.form import state as fs

__all__ = [
    "AcquireSurface",
    "AgentActivity",
    "Answer",
    "Defer",
    "DraftChanged",
    "EndWait",
    "Enqueue",
    "FindFlow",
    "FlushDrafts",
    "FollowUp",
    "FormStopped",
    "GiveBack",
    "Grant",
    "HookCalls",
    "Inspect",
    "ModeChanged",
    "QueueActor",
    "QueueMessage",
    "QueueStats",
    "Quiesce",
    "Recording",
    "ReleaseSurface",
    "Restore",
    "RestoredItem",
    "Show",
    "StartWait",
    "SurfaceReady",
    "TurnBoundary",
    "WaitEnd",
    "WaitReason",
]


class FormRunner(Protocol):
    """Runs a visible background form until it ends (the runtime's ``run_background_form``);
    it reports the end with ``FormStopped``. It runs in the queue's form runner, which shields
    it from the nursery's cancellation: ``scope`` is what cancels the form (defer, session
    change, and the queue's end), so the form must run inside it."""

    async def __call__(
        self,
        request: AskRequest,
        form: fs.FormState,
        epoch: int,
        scope: trio.CancelScope,
        commands: trio.MemorySendChannel[FormInput],
        inbox: trio.MemoryReceiveChannel[FormInput],
        /,
    ) -> None: ...


@attrs.define(eq=False)
class _FormJob:
    """A ``StartForm`` handed to the form runner, and the visible background form's live
    handles while it runs (the reducer knows it by request id). ``settle``: a foreground claim
    was cancelled since the last form started, so the runner passes through the scheduler
    first (the claim's form hides itself in that pass, before this one is shown)."""

    request: AskRequest
    form: fs.FormState
    epoch: int
    scope: trio.CancelScope
    commands: trio.MemorySendChannel[FormInput]
    inbox: trio.MemoryReceiveChannel[FormInput]
    settle: bool


# A refused write (an entry that cannot be stored) is as unrecorded as a revoked branch's, and
# so is a failed disk write (``OSError``: the persistence actor rolls the frame back).
_JOURNAL_ERRORS = (StaleBranch, PersistenceClosedError, WriteRefused, OSError)

WRITE_FAILED_TEXT = (
    "A write to the session file failed ({error}); nothing the person entered is lost "
    "(questions stay pending, answers wait for delivery) and later writes are retried."
)
"""The notice of the queue's first failed disk write after a success (one per failing run,
not one per coalesced draft write)."""


def _no_notice(_text: str) -> None:
    pass


@attrs.define(eq=False)
class HookCalls:
    """How many times the host called ``agent_started`` or ``agent_settled``, and what the
    last call said.

    What the hooks and the queue share: the hooks count up and note the call (plain calls,
    they never block); the queue reads it before every transition (``QueueActor._unseen_hook``)
    and when it hands out a wake. A hook call made while a wake's delivery mark was being
    written reaches the queue after that wake; its number says which came first
    (``AgentActivity.woken_after``).
    """

    count: int = 0
    idle: bool = True
    """What the last call said: ``agent_settled`` (idle) or ``agent_started``."""

    def next(self, *, idle: bool) -> int:
        self.count += 1
        self.idle = idle
        return self.count


@attrs.define(eq=False)
class QueueActor:
    """The queue's one task (``run``) and the live objects its effects need."""

    journal: JournalHandle
    events: ev.EventBus
    wakeups: trio.MemorySendChannel[dict[str, Any]]
    run_background_form: FormRunner
    tui: bool = True
    draft_delay: float = 0.25
    surface_ready: bool = True
    idle: bool = True
    """Whether the agent starts idle (``open_runtime(agent_idle=)``)."""
    notice: Callable[[str], None] = _no_notice
    """Tells the person of a failed disk write (the runtime's ``notice``); never blocks."""
    hook_calls: HookCalls = attrs.field(factory=HookCalls)
    _woken_at: int = attrs.field(default=0, init=False)
    """``hook_calls.count`` when the last wake went out."""
    _hooks_seen: int = attrs.field(default=0, init=False)
    """``hook_calls.count`` when the queue last reduced the host's latest hook call."""
    _disk_failing: bool = attrs.field(default=False, init=False)
    state: QueueState = attrs.field(init=False)
    _live: _FormJob | None = None
    _nursery: trio.Nursery | None = None
    _self_tx: trio.MemorySendChannel[QueueMessage] | None = None
    _jobs: trio.MemorySendChannel[_FormJob] | None = None
    _settle: bool = False
    """A foreground claim was cancelled since the last ``StartForm`` (see ``_FormJob``)."""
    _parking: list[trio.lowlevel.Task] = attrs.field(factory=list, init=False)
    """The askers waiting for the queue task to park (``ask_now(wait=True)``)."""
    _running: bool = attrs.field(default=False, init=False)
    """The queue task runs (from its start until its ``finally``): it will park or end."""

    def __attrs_post_init__(self) -> None:
        self.state = initial_state(tui=self.tui, surface_ready=self.surface_ready, idle=self.idle)

    async def run(
        self,
        rx: trio.MemoryReceiveChannel[QueueMessage],
        tx: trio.MemorySendChannel[QueueMessage],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        # Unbounded: the queue never waits for the runner (it holds at most the visible
        # form's job and, after a session change, the old epoch's form still ending).
        jobs, pending_jobs = trio.open_memory_channel[_FormJob](math.inf)
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._self_tx = tx
            self._jobs = jobs
            nursery.start_soon(self._run_forms, pending_jobs)
            self._running = True
            task_status.started()
            try:
                async with rx:
                    while True:
                        try:
                            message = await self._receive(rx)
                        except trio.EndOfChannel:
                            break
                        await self._handle(message)
            finally:
                self._running = False
                self._wake_parking()  # (they find the queue gone)
                for effect in release_all_herdr(self.state):
                    self._perform_now(effect)
                # The runner is shielded: the queue's end reaches the forms through their own
                # scopes. Only the visible form's can be live: a form is started only once
                # the one before it stopped, or was cancelled (a session change).
                jobs.close()
                if self._live is not None:
                    self._live.scope.cancel()
                nursery.cancel_scope.cancel()

    async def _run_forms(self, jobs: trio.MemoryReceiveChannel[_FormJob]) -> None:
        """The form runner: runs the background forms one after the other, each under its
        own cancel scope (``StartForm``'s), in one task for the queue's lifetime instead of a
        task per form. Shielded, so what a form does once its scope has ended (writing its
        outcome, telling the queue ``FormStopped``) is never cut off; the forms themselves are
        cancelled through their scopes, and the runner ends when the queue closes ``jobs``."""
        with trio.CancelScope(shield=True), jobs:
            while True:
                try:
                    # Usually the next form's job is waiting already (the form before it
                    # stopped in this task: ``tell_last_now``). Taking it is ``receive``
                    # without its cancellation check (nothing cancels the shielded runner),
                    # and its pass through the scheduler is the runner's one per form: a
                    # listener answering every form at once does not starve the loop.
                    job = jobs.receive_nowait()
                except trio.WouldBlock:
                    try:
                        job = await jobs.receive()
                    except trio.EndOfChannel:
                        return
                except trio.EndOfChannel:
                    return
                else:
                    await trio.lowlevel.cancel_shielded_checkpoint()
                if job.settle:
                    await trio.lowlevel.checkpoint()
                await self.run_background_form(
                    job.request, job.form, job.epoch, job.scope, job.commands, job.inbox
                )

    def _unseen_hook(self) -> AgentActivity | None:
        """The host's last hook call when the queue has not reduced it yet; it goes before
        the next transition. A hook reaches the queue through a forwarding task, which a
        message sent after the call can overtake (a wait aborted, a ``give_back`` made right
        after ``agent_started``): read here, every transition sees every hook call made
        before it began, and the forwarded message only wakes a parked queue. The last call
        is all that counts: the calls before it ended with it. The sender's-task path
        (``_handle_now``) needs no look: a hook call matters only to an idle wake, and a wake
        is a ``Continue`` (``TryWake``), which only the queue task reduces."""
        calls = self.hook_calls
        if calls.count == self._hooks_seen:
            return None
        self._hooks_seen = calls.count
        return AgentActivity(calls.idle, calls.count, woken_after=calls.count <= self._woken_at)

    async def _receive(self, rx: trio.MemoryReceiveChannel[QueueMessage]) -> QueueMessage:
        """``rx.receive()``; when it is about to park (no message waiting), the askers waiting
        for that (``ask_now(wait=True)``) go on first, and find it parked."""
        if not self._parking:
            return await rx.receive()
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            message = rx.receive_nowait()
        except trio.WouldBlock:
            self._wake_parking()
            return await rx.receive()
        await trio.lowlevel.cancel_shielded_checkpoint()
        return message

    def _wake_parking(self) -> None:
        waiting, self._parking = self._parking, []
        for task in waiting:
            trio.lowlevel.reschedule(task)

    async def _wait_parked(self, *, shielded: bool) -> None:
        """Wait until the queue task is about to park, having handled every message sent to
        it before (``_receive``), or has ended. ``shielded``: a cancellation does not stop it."""
        task = trio.lowlevel.current_task()
        self._parking.append(task)

        def abort(_raise_cancel: Any) -> trio.lowlevel.Abort:
            if shielded:
                return trio.lowlevel.Abort.FAILED  # woken when the queue parks or ends
            self._parking.remove(task)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    async def ask_now(
        self,
        make: Callable[[ReplyTo[Any]], QueueMessage],
        *,
        shielded: bool = False,
        wait: bool = False,
    ) -> tuple[bool, Any]:
        """Handle ``make(reply)`` in the caller's task when it can be (module docstring): then
        ``(True, the reply)``; ``(False, None)`` when the caller must send it to the queue
        task (nothing was done). ``EndOfChannel`` when the transition closed the reply
        without a value, as the reply channel's ``receive`` raises it. ``shielded``: as a
        caller asking under a shield, which a cancellation does not stop.

        ``wait``: a busy queue (not parked) is asked again once it is about to park, having
        handled every message sent to it before, instead of at once: as if the caller had
        asked a little later. So callers that keep coming while the queue is busy do not
        keep it so with a backlog of their messages, each costing the queue task a pass
        through the scheduler and its sender a channel wait and two more."""
        if not self._parked():
            if not wait or not self._running:
                return False, None
            await self._wait_parked(shielded=shielded)
            if not self._parked():
                return False, None
        if not shielded:
            await trio.lowlevel.checkpoint_if_cancelled()  # as ``send`` would, before it sends
        answer = Answer()
        if not self._handle_now(make(answer)):
            return False, None
        if not answer.answered:
            raise trio.EndOfChannel
        return True, answer.value

    async def tell_now(self, message: QueueMessage) -> bool:
        """``ask_now`` for a message without a reply: whether it was handled."""
        if not self._parked():
            return False
        await trio.lowlevel.checkpoint_if_cancelled()
        return self._handle_now(message)

    def tell_last_now(self, message: QueueMessage) -> bool:
        """``tell_now`` for the last message of a task under a shield (the form runner's
        ``FormStopped``): nothing can cancel it, so there is no cancellation check, and
        nothing awaits. Whether it was handled; if not, nothing was done."""
        return self._parked() and self._handle_now(message)

    def _parked(self) -> bool:
        """The queue task waits for a message and none is on its way to it (a message sent
        to it takes it out of the channel's waiting receivers at once)."""
        tx = self._self_tx
        return tx is not None and tx.statistics().tasks_waiting_receive > 0

    def _handle_now(self, message: QueueMessage) -> bool:
        """``_handle`` without a wait, or nothing at all (``False``): reduce, write at once if
        the transition writes (its first effect), perform the rest, commit."""
        candidate, effects = reduce(self.state, message)
        for effect in effects:
            if type(effect) is Continue:
                return False
        if effects and isinstance(effects[0], WRITES):  # the tuple: ``A | B`` is made per call
            write = effects[0]
            journal = (write.through if isinstance(write, Append) else None) or self.journal
            append_now = getattr(journal, "append_many_now", None)
            if append_now is None:
                return False
            try:
                if append_now(write.entries) is None:
                    return False
            except _JOURNAL_ERRORS as error:
                self._unrecorded(message, error)
                return True
            self._disk_failing = False
            effects = effects[1:]
        for effect in effects:
            self._perform_now(effect)
        self.state = candidate.commit()
        return True

    def _unrecorded(self, message: QueueMessage, error: Exception) -> None:
        # Nothing of this transition can be recorded, so none of it happened. The
        # transitions still to come do not depend on it (rule 2): they go on.
        if isinstance(error, OSError) and not self._disk_failing:
            self._disk_failing = True
            self.notice(WRITE_FAILED_TEXT.format(error=error))
        self._commit_effects(Unrecorded(message, error))

    async def _handle(self, first: QueueMessage) -> None:
        """Reduce ``first`` and the transitions it continues into, committing each one; a
        hook call the queue has not reduced yet goes before each (``_unseen_hook``)."""
        todo = [first]
        while todo:
            message: QueueMessage | None = self._unseen_hook()
            if message is None:
                message = todo.pop(0)
                if type(message) is AgentActivity and message.call:
                    continue  # a hook call's message: that call was reduced already
            candidate, effects = reduce(self.state, message)
            try:
                follow = await self._perform(effects)
            except _JOURNAL_ERRORS as error:
                self._unrecorded(message, error)
                continue
            except BaseException:
                # The queue is ending (a bug, or cancellation): a caller waiting for this
                # message's reply (shielded, for TurnBoundary) must not wait forever.
                reply = reply_of(message)
                if reply is not None:
                    reply.close()
                raise
            self.state = candidate.commit()
            todo[:0] = follow

    def _commit_effects(self, message: QueueMessage) -> None:
        """Reduce a message whose transition has no write, and commit it."""
        candidate, effects = reduce(self.state, message)
        for effect in effects:
            assert not isinstance(effect, (Append, MarkDelivered, Continue))
            self._perform_now(effect)
        self.state = candidate.commit()

    async def _perform(self, effects: list[Effect]) -> list[QueueMessage]:
        """Perform ``effects`` in order; the messages to reduce next."""
        follow: list[QueueMessage] = []
        for effect in effects:
            match effect:
                case Append(entries=entries, through=through):
                    await (through or self.journal).append_many(entries)
                    self._disk_failing = False
                case MarkDelivered(entries=entries):
                    # Shielded: a cancellation during the write (disposal, say) would leave a
                    # mark for a message nobody received, and the rebuild trusts the mark. Not
                    # bounded: the persistence actor replies to every request it takes or
                    # closes the reply channel when it ends.
                    with trio.CancelScope(shield=True):
                        await self.journal.append_many(entries)
                    self._disk_failing = False
                case Continue(message=message):
                    follow.append(message)
                case _:
                    self._perform_now(effect)
        return follow

    def _perform_now(self, effect: Effect) -> None:
        """The effects that never wait (the ones every form makes first)."""
        match effect:
            case Reply(channel=channel, value=value):
                _reply(channel, value)
            case HerdrChanged(active=active):
                # (``emit`` returns at once when nobody listens)
                self.events.emit(
                    ev.HERDR_BLOCKED,
                    {"active": True, "label": "Waiting for user response"}
                    if active
                    else {"active": False},
                )
            case StartForm(request=request, form=form, epoch=epoch):
                assert self._jobs is not None
                scope = trio.CancelScope()
                # 64: key handlers send without awaiting. Not subscripted: a generic alias's
                # call costs more than the channel's creation itself.
                send: trio.MemorySendChannel[FormInput]
                receive: trio.MemoryReceiveChannel[FormInput]
                send, receive = trio.open_memory_channel(64)
                self._live = job = _FormJob(
                    request, form, epoch, scope, send, receive, self._settle
                )
                self._jobs.send_nowait(job)
                self._settle = False
            case CloseReply(channel=channel):
                channel.close()
            case ReplyCommands(channel=channel, commands=commands, request_id=request_id):
                sink = self._sink(commands, request_id)
                _reply(channel, None if sink is None else sink.clone())
            case Wake(message=message):
                self.wakeups.send_nowait(message)
                self._woken_at = self.hook_calls.count
            case CancelForm(request_id=request_id):
                if self._live is not None and self._live.request.request_id == request_id:
                    self._live.scope.cancel()
            case CancelClaim(scope=scope):
                scope.cancel()
                self._settle = True
            case UseJournal(journal=journal):
                self.journal = journal
            case ScheduleFlush():
                assert self._nursery is not None
                self._nursery.start_soon(self._send_later, self.draft_delay, FlushDrafts())
            case ScheduleWakeRetry(delay=delay):
                assert self._nursery is not None
                self._nursery.start_soon(self._send_later, delay, RetryWake())
            case ScheduleDraftRetry(delay=delay):
                assert self._nursery is not None
                self._nursery.start_soon(self._send_later, delay, RetryDrafts())
            case _:
                raise AssertionError(f"not an immediate effect: {effect!r}")

    async def _send_later(self, delay: float, message: QueueMessage) -> None:
        # The queue's timers: the draft delay (coalesce draft writes: one journal entry per
        # form per `draft_delay`, not per key) and the retry of a wake that failed on the disk.
        await trio.sleep(delay)
        assert self._self_tx is not None
        await self._self_tx.send(message)

    def stats(self) -> QueueStats:
        return self.state.stats()

    def flow_commands(self, flow_id: str) -> CommandSink | None:
        """The command channel of the visible flow ``flow_id`` in the committed state (the
        queue's own channel, not a clone: the caller only ``send_nowait``s into it), or
        ``None``. ``FindFlow`` without the round trip, for a caller that must not wait (a
        ``submit`` event's handler): what it sees is what a ``FindFlow`` sent now would see
        before the messages already waiting for the queue; a form those would stop has
        closed its inbox already (``close_inbox`` comes before ``FormStopped``), so a send
        into it fails as it would have found no flow."""
        active = active_flow(self.state, flow_id)
        if active is None:
            return None
        claimed = active.claim.commands if active.claim is not None else None
        return self._sink(claimed, active.request_id)

    def _sink(self, claimed: CommandSink | None, request_id: str | None) -> CommandSink | None:
        """A visible flow's command channel: its foreground claim's own (``claimed``), else
        the live background form's when it is ``request_id``'s, else ``None``."""
        if claimed is not None:
            return claimed
        if self._live is not None and self._live.request.request_id == request_id:
            return self._live.commands
        return None


class Answer:
    """The reply to one message for the queue: a one-shot slot with the promise of the reply
    channel (a buffer of one) it stands for, without a channel pair per message. The queue
    answers it (``send_nowait``) or closes it unanswered (``close``), never blocking; a second
    value is refused (``WouldBlock``), as is a value after ``close`` (``ClosedResourceError``)
    or after its asker left (``BrokenResourceError``: the asker's end of the channel closed).

    Its asker reads it at once (``ask_now``: the message was handled in the asker's task) or
    waits for it (``wait``, as the channel's ``receive`` under ``with``)."""

    __slots__ = ("_task", "abandoned", "answered", "closed", "value")

    def __init__(self) -> None:
        self.answered = False
        self.closed = False
        self.abandoned = False
        self.value: Any = None
        self._task: trio.lowlevel.Task | None = None

    def send_nowait(self, value: Any) -> None:
        if self.closed or self.answered or self.abandoned:
            if self.closed:
                raise trio.ClosedResourceError
            raise trio.BrokenResourceError if self.abandoned else trio.WouldBlock
        self.answered, self.value = True, value
        self._wake()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._wake()

    def _wake(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            trio.lowlevel.reschedule(task)

    async def wait(self) -> Any:
        """The reply, as ``receive`` on the reply channel gives it: the cancellation check
        first, then the value (after a pass through the scheduler, as always), or
        ``EndOfChannel`` once it was closed unanswered; else it waits. A caller cancelled while
        it waits leaves, and a reply sent after that is refused, as into a closed channel."""
        await trio.lowlevel.checkpoint_if_cancelled()
        if self.answered:
            await trio.lowlevel.cancel_shielded_checkpoint()
        elif not self.closed:
            self._task = trio.lowlevel.current_task()

            def abort(_raise_cancel: Any) -> trio.lowlevel.Abort:
                self._task = None
                self.abandoned = True
                return trio.lowlevel.Abort.SUCCEEDED

            await trio.lowlevel.wait_task_rescheduled(abort)
        return self._taken()

    def _taken(self) -> Any:
        if not self.answered:
            raise trio.EndOfChannel
        return self.value


def _reply(channel: ReplyTo[Any], value: Any) -> None:
    """Answer a one-shot reply channel (buffer one: never blocks). A caller cancelled meanwhile
    has closed its end; the queue's state already holds what the answer would have told it (a
    grant it no longer wants is released by its ReleaseSurface, a wait it abandoned gives its
    results back with EndWait), so the queue goes on."""
    try:  # noqa: SIM105 (not ``suppress``: this runs for every reply)
        channel.send_nowait(value)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
