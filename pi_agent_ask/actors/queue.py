"""The queue actor: the I/O shell around the pure reducer in ``queue_state.py``.

The rules (the FIFO surface, delivery, waits, Herdr, epochs) live there, stated once. This
module is the queue's one task: it owns the queue's state, receives messages on its channel,
runs ``reduce``, performs the effects in order and commits the new state once they succeeded.

On each wake the task takes every message waiting (``receive_nowait`` until ``WouldBlock``, at
most ``BATCH_LIMIT``) and reduces them one after the other, each on the state the one before
it left, with the transitions they continue into (``Continue``) right after each; the journal
writes of those transitions go to the journal as one chain (one frame, one write), and only
then are the effects performed and the last state committed. A host hook call the queue has
not reduced yet goes before each transition (``QueueActor._unseen_hook``). A run of
transitions ends early where a write goes through another branch writer than the run's.

- a transition's journal write is its first effect; when the run's write fails (``StaleBranch``:
  the branch was revoked by a session change under way, whose ``Restore`` rebuilds
  everything; ``PersistenceClosedError``: disposal; ``WriteRefused``; ``OSError``: the disk,
  which is also a notice for the person) nothing of it is on the branch: the state goes back
  to the one before the run, and its messages are handled again one write at a time, so the
  transition whose write fails is the only one that did not happen (``Unrecorded`` tells its
  caller); a wake that failed on the disk is retried after the delay the reducer names
  (``ScheduleWakeRetry``: a task of the queue's nursery sleeps, then sends ``RetryWake``);
- delivery marks are written shielded: once a mark may be on the branch, its message must go
  out, and it does with no checkpoint in between (a wake's ``send_nowait``, the boundary's
  reply).

The queue never sends into a form's inbox and never blocks on the host: replies go through
one-shot channels with a buffer of one, and wakeups through the runtime's wake channel whose
buffer is unbounded (the host may be busy for a long time; a wake must never stall the queue).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any, Protocol

import attrs
import trio

from pi_agent_ask import events as ev
from pi_agent_ask.actors.form import FormInput
from pi_agent_ask.actors.owner import Owner, owned
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
    Entry,
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


@attrs.define(eq=False, repr=False)
class _FormJob:
    """A ``StartForm`` handed to the form runner, and the visible background form's live
    handles while it runs (the reducer knows it by request id)."""

    request: AskRequest
    form: fs.FormState
    epoch: int
    scope: trio.CancelScope
    commands: trio.MemorySendChannel[FormInput]
    inbox: trio.MemoryReceiveChannel[FormInput]


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


@attrs.define(eq=False, repr=False)
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


BATCH_LIMIT = 64
"""At most this many waiting messages are taken on one wake (the reducer's layered tables
copy a transition's changes into the next candidate, so a run is kept short)."""


@attrs.define(eq=False, repr=False)
class _Run:
    """Transitions reduced one on top of the other and not committed yet: the state the last
    one left, their journal entries (one chain), and the effects each performs after the
    write. ``before_write``: the state and effects before the run's first write."""

    state: QueueState
    journal: JournalHandle
    """The queue's own branch writer as the run leaves it (``UseJournal``)."""
    writer: JournalHandle | None = None
    entries: list[Entry] = attrs.Factory(list)
    writes: int = 0
    marks: bool = False
    """A delivery mark is among the entries: the write is shielded."""
    effects: list[Effect] = attrs.Factory(list)
    messages: list[QueueMessage] = attrs.Factory(list)
    """The messages reduced in the run (a reply each waits for if the queue ends)."""
    first_write: tuple[QueueState, int, int, list[QueueMessage], int] | None = None
    """Where the run stands at its first write's transition, for when that write fails alone:
    the state before it, how many effects came before it, its message's place in
    ``messages``, the messages to come after it (without the transitions it continues into)
    and ``hook_calls`` seen."""


@attrs.define(eq=False, repr=False, on_setattr=owned)
class QueueActor:
    """The queue's one task (``run``), its state, and the live objects its effects need.

    Every attribute is set in the queue's task only (``owner`` checks it in checked mode)."""

    journal: JournalHandle
    events: ev.EventBus
    wakeups: trio.MemorySendChannel[dict[str, Any]]
    run_background_form: FormRunner
    tui: bool = True
    draft_delay: float = 0.25
    surface_ready: bool = True
    idle: bool = True
    """Whether the agent starts idle (``open_runtime(agent_idle=)``)."""
    background_shown: bool = True
    """Whether background forms are shown (not in ``open_runtime(one_call=True)``)."""
    notice: Callable[[str], None] = _no_notice
    """Tells the person of a failed disk write (the runtime's ``notice``); never blocks."""
    hook_calls: HookCalls = attrs.field(factory=HookCalls)
    owner: Owner = attrs.field(factory=lambda: Owner("queue"))
    _woken_at: int = attrs.field(default=0, init=False)
    """``hook_calls.count`` when the last wake went out."""
    _hooks_seen: int = attrs.field(default=0, init=False)
    """``hook_calls.count`` when the queue last reduced the host's latest hook call."""
    _disk_failing: bool = attrs.field(default=False, init=False)
    state: QueueState = attrs.field(
        init=False,
        default=attrs.Factory(
            lambda self: initial_state(
                tui=self.tui,
                surface_ready=self.surface_ready,
                idle=self.idle,
                background_shown=self.background_shown,
            ),
            takes_self=True,
        ),
    )
    _live: _FormJob | None = None
    _nursery: trio.Nursery | None = None
    _self_tx: trio.MemorySendChannel[QueueMessage] | None = None
    _jobs: trio.MemorySendChannel[_FormJob] | None = None

    async def run(
        self,
        rx: trio.MemoryReceiveChannel[QueueMessage],
        tx: trio.MemorySendChannel[QueueMessage],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        self.owner.enter()
        # Unbounded: the queue never waits for the runner (it holds at most the visible
        # form's job and, after a session change, the old epoch's form still ending).
        jobs, pending_jobs = trio.open_memory_channel[_FormJob](math.inf)
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._self_tx = tx
            self._jobs = jobs
            nursery.start_soon(self.owner.detached(self._run_forms), pending_jobs)
            task_status.started()
            try:
                async with rx:
                    while batch := await _take_waiting(rx):
                        await self._handle(batch)
            finally:
                for effect in release_all_herdr(self.state):
                    self._perform_now(effect)
                for saved in self.state.draft_waiters:  # no draft is written any more
                    saved.close()
                # The runner is shielded: the queue's end reaches the forms through their own
                # scopes. Only the visible form's can be live: a form is started only once
                # the one before it stopped, or was cancelled (a session change).
                jobs.close()
                if self._live is not None:
                    self._live.scope.cancel()
                nursery.cancel_scope.cancel()

    async def _run_forms(self, jobs: trio.MemoryReceiveChannel[_FormJob]) -> None:
        """The form runner: runs the background forms one after the other, each under its
        own cancel scope (``StartForm``'s), in one task for the queue's lifetime. Shielded, so
        what a form does once its scope has ended (writing its outcome, telling the queue
        ``FormStopped``) is never cut off; the forms themselves are cancelled through their
        scopes, and the runner ends when the queue closes ``jobs``."""
        with trio.CancelScope(shield=True), jobs:
            async for job in jobs:
                # A pass through the scheduler first: a foreground claim's form cancelled in
                # the same transition (a session change) hides itself before this one shows.
                await trio.sleep(0)  # noqa: ASYNC115 (a pass through the scheduler)
                await self.run_background_form(
                    job.request, job.form, job.epoch, job.scope, job.commands, job.inbox
                )

    def _unseen_hook(self) -> AgentActivity | None:
        """The host's last hook call when the queue has not reduced it yet; it goes before
        the next transition. A hook reaches the queue through a forwarding task, which a
        message sent after the call can overtake (a wait aborted, a ``give_back`` made right
        after ``agent_started``): read here, every transition sees every hook call made
        before it began, and the forwarded message only wakes the queue. The last call is
        all that counts: the calls before it ended with it."""
        calls = self.hook_calls
        if calls.count == self._hooks_seen:
            return None
        self._hooks_seen = calls.count
        return AgentActivity(calls.idle, woken_after=calls.count <= self._woken_at)

    async def _handle(self, messages: list[QueueMessage]) -> None:
        """Handle ``messages`` in order, with the transitions they continue into: in runs
        that each write one chain (the module docstring). After a run whose write failed,
        the messages left are handled one write at a time, so only the transition whose own
        write fails is void."""
        todo = list(messages)
        single = False
        try:
            while todo or self.hook_calls.count != self._hooks_seen:
                if not await self._handle_run(todo, single=single):
                    single = True
        except BaseException:
            # The queue is ending (a bug, or cancellation): a caller waiting for a reply
            # (shielded, for TurnBoundary) must not wait forever.
            for message in todo:
                reply = reply_of(message)
                if reply is not None:
                    reply.close()
            raise

    async def _handle_run(self, todo: list[QueueMessage], *, single: bool) -> bool:
        """Reduce messages from the front of ``todo`` (continuations go back to its front)
        into one run, write its chain, perform its effects and commit. ``single``: the run
        holds at most one write. ``False`` when a write of several transitions failed:
        nothing happened, ``todo`` is as it was, and the caller goes on one write at a time."""
        todo_before, hooks_before = list(todo), self._hooks_seen
        run = _Run(self.state, self.journal)
        while todo or self.hook_calls.count != self._hooks_seen:
            message: QueueMessage | None = self._unseen_hook()
            if message is None:
                message = todo.pop(0)
                if type(message) is AgentActivity and message.call:
                    continue  # a hook call's message: that call was reduced already
            candidate, effects = reduce(run.state, message)
            write = effects[0] if effects and isinstance(effects[0], WRITES) else None
            if write is not None:
                through = write.through if isinstance(write, Append) else None
                writer = through or run.journal
                if run.writes and (single or writer is not run.writer):
                    # This write goes in a run of its own: reduced again after this one. (A
                    # hook call's transition never writes: the message came from ``todo``.)
                    todo.insert(0, message)
                    break
                if run.first_write is None:
                    run.first_write = (
                        run.state,
                        len(run.effects),
                        len(run.messages),
                        list(todo),
                        self._hooks_seen,
                    )
                run.writer = writer
                run.writes += 1
                run.entries.extend(write.entries)
                run.marks = run.marks or isinstance(write, MarkDelivered)
                effects = effects[1:]
            run.messages.append(message)
            run.state = candidate
            follow = [effect.message for effect in effects if isinstance(effect, Continue)]
            for effect in effects:
                if isinstance(effect, UseJournal):
                    run.journal = effect.journal
                if not isinstance(effect, Continue):
                    run.effects.append(effect)
            todo[:0] = follow  # reduced next, before any other message
            if len(run.messages) >= BATCH_LIMIT:
                break
        try:
            await self._write(run)
        except _JOURNAL_ERRORS as error:
            if run.writes > 1:
                todo[:] = todo_before
                self._hooks_seen = hooks_before
                return False
            # The write's transition is void, and so are the transitions it would continue
            # into; the ones before it stand, and the ones after it are reduced again.
            assert run.first_write is not None
            state, performed, failed, todo[:], self._hooks_seen = run.first_write
            self._commit(state, run.effects[:performed])
            self._unrecorded(run.messages[failed], error)
            return True
        except BaseException:
            # The queue is ending (a bug, or cancellation): a caller waiting for a reply to
            # one of these messages (shielded, for TurnBoundary) must not wait forever.
            for message in run.messages:
                reply = reply_of(message)
                if reply is not None:
                    reply.close()
            raise
        self._commit(run.state, run.effects)
        return True

    async def _write(self, run: _Run) -> None:
        """Write the run's chain (none: nothing to do). Shielded when it holds a delivery
        mark: a cancellation during the write (disposal, say) would leave a mark for a
        message nobody received, and the rebuild trusts the mark. Not bounded: the
        persistence actor replies to every request it takes, or ends."""
        if run.writer is None:
            return
        if run.marks:
            with trio.CancelScope(shield=True):
                await run.writer.append_many(run.entries)
        else:
            await run.writer.append_many(run.entries)
        self._disk_failing = False

    def _commit(self, state: QueueState, effects: list[Effect]) -> None:
        for effect in effects:
            self._perform_now(effect)
        self.state = state.commit()

    def _unrecorded(self, message: QueueMessage, error: Exception) -> None:
        # Nothing of this transition can be recorded, so none of it happened. The
        # transitions still to come do not depend on it (rule 2): they go on.
        if isinstance(error, OSError) and not self._disk_failing:
            self._disk_failing = True
            self.notice(WRITE_FAILED_TEXT.format(error=error))
        candidate, effects = reduce(self.state, Unrecorded(message, error))
        assert not any(isinstance(effect, (*WRITES, Continue)) for effect in effects)
        self._commit(candidate, effects)

    def _perform_now(self, effect: Effect) -> None:
        """Perform an effect that never waits (every effect but the write)."""
        match effect:
            case Reply(channel=channel, value=value):
                _reply(channel, value)
            case HerdrChanged(active=active):
                self.events.emit(
                    ev.HERDR_BLOCKED,
                    {"active": True, "label": "Waiting for user response"}
                    if active
                    else {"active": False},
                )
            case StartForm(request=request, form=form, epoch=epoch):
                assert self._jobs is not None
                scope = trio.CancelScope()
                # 64: key handlers send without awaiting.
                send, receive = trio.open_memory_channel[FormInput](64)
                self._live = job = _FormJob(request, form, epoch, scope, send, receive)
                self._jobs.send_nowait(job)
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
            case UseJournal(journal=journal):
                self.journal = journal
            case ScheduleFlush():
                self._send_later(self.draft_delay, FlushDrafts())
            case ScheduleWakeRetry(delay=delay):
                self._send_later(delay, RetryWake())
            case ScheduleDraftRetry(delay=delay):
                self._send_later(delay, RetryDrafts())
            case _:
                raise AssertionError(f"not an immediate effect: {effect!r}")

    def _send_later(self, delay: float, message: QueueMessage) -> None:
        """The queue's timers: the draft delay (coalesce draft writes: one journal entry per
        form per ``draft_delay``, not per key) and the retries after a failed disk write."""
        assert self._nursery is not None and self._self_tx is not None
        self._nursery.start_soon(self.owner.detached(_send_after), delay, self._self_tx, message)

    def stats(self) -> QueueStats:
        return self.state.stats()

    def flow_commands(self, flow_id: str) -> CommandSink | None:
        """The command channel of the visible flow ``flow_id`` in the committed state (the
        queue's own channel, not a clone: the caller only ``send_nowait``s into it), or
        ``None``. ``FindFlow`` without the round trip, for a caller that must not wait (a
        ``submit`` event's handler): it only reads the committed state. What it sees is what a
        ``FindFlow`` sent now would see before the messages already waiting for the queue; a
        form those would stop has closed its inbox already (``close_inbox`` comes before
        ``FormStopped``), so a send into it fails as it would have found no flow."""
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


async def _take_waiting(rx: trio.MemoryReceiveChannel[QueueMessage]) -> list[QueueMessage]:
    """The next message and every one waiting behind it (at most ``BATCH_LIMIT``); none once
    the channel has ended (an ended channel keeps saying so). Waits only for the first."""
    try:
        batch = [await rx.receive()]
    except trio.EndOfChannel:
        return []
    while len(batch) < BATCH_LIMIT:
        try:
            batch.append(rx.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            break
    return batch


async def _send_after(
    delay: float, tx: trio.MemorySendChannel[QueueMessage], message: QueueMessage
) -> None:
    await trio.sleep(delay)
    await tx.send(message)


def _reply(channel: ReplyTo[Any], value: Any) -> None:
    """Answer a one-shot reply channel (buffer one: never blocks). A caller cancelled meanwhile
    has closed its end; the queue's state already holds what the answer would have told it (a
    grant it no longer wants is released by its ReleaseSurface, a wait it abandoned gives its
    results back with EndWait), so the queue goes on."""
    with contextlib.suppress(trio.BrokenResourceError):
        channel.send_nowait(value)
