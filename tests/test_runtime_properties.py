"""Property tests: random programs of interleaved operations against the real runtime.

Hypothesis generates a program: a short list of steps, each one operation (an attrs value)
and a flag saying whether the program waits for quiescence afterwards. Each example opens one
real runtime (``open_runtime`` on a session file in a fresh directory, a recording surface,
every actor's state checked to change in its own task only: ``check_actors``),
runs the program in one ``trio.run`` with real Trio scheduling (pytest-trio lets Hypothesis
seed Trio's run-queue shuffle, so a failing interleaving replays), then drains it: every form
still open is answered and every wait ends. Foreground asks and waits run as tasks that later
steps may cancel; everything else runs in the program's task.

The clock is a ``MockClock`` that moves only when an ``Elapse`` step jumps it: the queue's
coalesced draft writes happen then, so the steps, not the machine's load, decide when. It
never jumps by itself: when every task has been blocked for ``DEADLOCK_SECONDS`` of real time
the example fails (a deadlock, or a wait that only one of the runtime's timeouts would end).

The journal sits behind a gate (``runtime_support.WriteGate``): ``MidWrite`` holds writes
before or after the persistence actor performs them and cancels a call, a wait, a
``turn_boundary`` or a ``change_session`` while one waits; ``FailNextWrite`` makes the next
write fail. The second test adds those, session changes (fork, new, resume, tree), question
modes, history reads, an outer cancellation of the whole runtime and a torn tail before the
restart. The third runs short programs made mostly of host hooks, waits and their aborts, and
``HookWhileMarking``, a hook called while a wake's delivery mark is being written.

Invariants (``docs/architecture.md``, contract 000 §Background queue):

- every request has at most one terminal outcome in the journal, exactly one after draining
  (a foreground call interrupted by a session reload may end with none: it belonged to the
  old branch, whose journal view is revoked, so it records neither an outcome nor a tool
  result, and the next startup or resume reopens it);
- every background outcome is delivered exactly once across turn-boundary messages, idle
  wakes and wait results (the ones of one boundary or one wait in enqueue order), and a wait returns every outcome it awaited; a cancellation never
  wakes; while the agent is idle a ready answer wakes it, once per idle period, never while
  the agent is busy; a hook call (``agent_started``, ``agent_settled``) counts before
  everything the program does after it; only a wake whose delivery mark was already being
  written then may still go out as if before it: to a busy agent after ``agent_started``, as
  the new period's one wake after ``agent_settled`` (architecture invariant 11);
- nothing is delivered before its completion is in the journal, and at the moment a message
  is handed out its delivery mark (a background-answer entry, a follow-up entry or the wait's
  tool result) is on the branch already;
- ``list_ask_history``, which reads through the writer's own index, agrees with an
  independent reader of the file;
- background forms are first shown in enqueue order and only while the panel is open;
  foreground calls are shown in the order they asked; no two forms are shown at once; a waiting foreground call or an open panel with pending forms
  always has a form shown; a form hidden by a defer or a reload comes back with its draft;
- ``herdr:blocked`` alternates true/false starting with true, and at quiescence it is active
  exactly when a form is visible or a wait is active;
- disposal leaves no task running.
"""

from __future__ import annotations

import errno
import functools
import tempfile
import typing
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal
from unittest import mock

import attrs
import pytest
import trio
import trio.lowlevel
import trio.testing
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from pi_agent_ask import events as ev
from pi_agent_ask.actors.form import Ended
from pi_agent_ask.actors.persistence import WriteRefused
from pi_agent_ask.actors.runtime import (
    FORM_INTERRUPTED_TEXT,
    WAIT_BUSY_TEXT,
    WAIT_INTERRUPTED_TEXT,
    Runtime,
    open_runtime,
)
from pi_agent_ask.actors.session import SessionJournal
from pi_agent_ask.form import state as fs
from pi_agent_ask.persistence.journal import RESUME_ANSWER
from pi_agent_ask.persistence.session_file import Entry, SessionFile, encode_frame

from .runtime_support import (
    GatePosition,
    InjectedDiskError,
    RecordingSurface,
    WriteGate,
    answer,
    gated_journal,
    payload,
    settings_file,
    submit,
)

DRAFT_DELAY = 0.25
"""The queue's draft coalescing delay (``QueueActor.draft_delay``); ``Elapse`` jumps past it."""

DEADLOCK_SECONDS = 5.0
"""Real seconds with every task blocked after which the example fails (``watch_for_deadlock``):
only a deadlock, or a wait that a timeout would end, does that."""

DRAIN_ROUNDS = 60
"""Rounds of 'answer what is visible' before a program that does not drain is a failure."""

# ------------------------------------------------------------------------------------------
# Operations
# ------------------------------------------------------------------------------------------


@attrs.frozen
class AskForeground:
    """Start a foreground ``ask_user`` call as a task."""

    questions: int


@attrs.frozen
class AskBackground:
    """Call ``ask_user`` with ``background: true`` (returns a receipt at once)."""

    questions: int


@attrs.frozen
class AnswerVisible:
    """Answer the visible flow through a ``pi-agent-ask:submit`` event."""

    option: int


@attrs.frozen
class CancelVisible:
    """Cancel the visible flow through a ``pi-agent-ask:submit`` event."""


@attrs.frozen
class Command:
    """Send a form command (a key press) to the visible flow."""

    command: fs.Command


@attrs.frozen
class Defer:
    """``Esc`` in the panel / ``/ask-defer``."""


@attrs.frozen
class Reopen:
    """``/ask-queue``."""


@attrs.frozen
class StartWait:
    """Start a ``wait_for_answers`` call as a task."""


@attrs.frozen
class CancelWait:
    """Cancel the newest running wait (the agent aborted the call)."""


@attrs.frozen
class CancelForeground:
    """Cancel a running foreground call (the agent aborted it)."""

    index: int


@attrs.frozen
class UserMessage:
    """Ordinary input from the person."""


@attrs.frozen
class TurnBoundary:
    """The agent reached a turn boundary: collect the background answers."""


@attrs.frozen
class AgentBusy:
    """``agent_started()``."""


@attrs.frozen
class AgentIdle:
    """``agent_settled()``."""


@attrs.frozen
class Reload:
    """``change_session("reload")``: rebuild everything from the session file."""


@attrs.frozen
class Elapse:
    """Let the draft coalescing delay pass."""


@attrs.frozen
class SwitchSession:
    """``change_session`` to another branch: ``fork`` into a new file, ``new`` (a fresh
    file), ``resume`` of the file the runtime is on, ``tree`` to the current leaf."""

    reason: Literal["fork", "new", "resume", "tree"]


@attrs.frozen
class SetMode:
    """``/ask-mode``: switch the question mode; ``confirm`` answers the cache-impact question."""

    background_only: bool
    confirm: bool


@attrs.frozen
class ListHistory:
    """``list_ask_history`` (reads through the writer's own session index), compared with
    what an independent reader of the file sees."""


@attrs.frozen
class FailNextWrite:
    """The next journal write of an ``entry`` type fails: refused (``WriteRefused``) or the
    disk (``OSError``). ``tool-call`` is the first write of every ``call_tool``: the call
    ends as a tool error with nothing queued; ``user-message`` is the ``user_message``
    hook's: it raises ``WriteRefused`` to the host and changes nothing."""

    error: Literal["refused", "disk"]
    entry: Literal["tool-call", "user-message", "ask:history-completed", "ask:draft"]


Trigger = Literal[
    "answer", "cancel form", "boundary", "reload", "fork", "user message", "ask", "elapse"
]
"""What starts the write ``MidWrite`` holds."""


@attrs.frozen
class MidWrite:
    """Hold the journal's writes at the gate (``before`` the actor performs them or
    ``after``), do ``trigger``, and once a write waits at the gate cancel ``target``: a
    running foreground call, the newest running wait, or the trigger itself (a
    ``turn_boundary``, a ``change_session``, a ``user_message``, an ``ask_user`` call);
    then open the gate."""

    trigger: Trigger
    target: Literal["foreground", "wait", "trigger", "nothing"]
    position: GatePosition


@attrs.frozen
class HookWhileMarking:
    """Answer the visible form with the journal's writes held at the gate (``before`` or
    ``after`` the actor performs them), letting them through one by one until a delivery
    mark's write waits there (a wake's), then call ``agent_settled`` (``idle``) or
    ``agent_started`` and open the gate: the wake goes out after the call, as the settled
    period's one wake or to the busy agent (architecture invariant 11)."""

    idle: bool
    position: GatePosition


Operation = (
    AskForeground
    | AskBackground
    | AnswerVisible
    | CancelVisible
    | Command
    | Defer
    | Reopen
    | StartWait
    | CancelWait
    | CancelForeground
    | UserMessage
    | TurnBoundary
    | AgentBusy
    | AgentIdle
    | Reload
    | Elapse
    | SwitchSession
    | SetMode
    | ListHistory
    | FailNextWrite
    | MidWrite
    | HookWhileMarking
)


@attrs.frozen
class Step:
    operation: Operation
    settle: bool
    """Wait for quiescence after the operation and check the invariants there."""


FORM_COMMANDS = st.sampled_from(
    [
        fs.Number(1),
        fs.Number(2),
        fs.Number(3),
        fs.Skip(),
        fs.NextTab(),
        fs.Confirm(),
        fs.Cancel(),
        fs.Dismiss(),
        fs.Toggle(),
        fs.EditorChanged("typed"),
        fs.EditorSubmit(),
        fs.EditorClose(),
    ]
)

_WEIGHTED: list[tuple[int, st.SearchStrategy[Operation]]] = [
    (4, st.builds(AskBackground, st.integers(1, 2))),
    (4, st.builds(AnswerVisible, st.integers(1, 2))),
    (2, st.builds(AskForeground, st.integers(1, 2))),
    (2, st.builds(Command, FORM_COMMANDS)),
    (3, st.just(StartWait())),
    (1, st.just(Defer())),
    (1, st.just(Reopen())),
    (1, st.just(TurnBoundary())),
    (1, st.just(AgentIdle())),
    (2, st.just(AgentBusy())),
    (1, st.just(CancelVisible())),
    (1, st.just(Reload())),
    (1, st.just(UserMessage())),
    (2, st.just(CancelWait())),
    (1, st.builds(CancelForeground, st.integers(0, 3))),
    (1, st.just(Elapse())),
]
_WEIGHTED_MORE: list[tuple[int, st.SearchStrategy[Operation]]] = [
    (1, st.builds(SwitchSession, st.sampled_from(["fork", "new", "resume", "tree"]))),
    (1, st.builds(SetMode, st.booleans(), st.booleans())),
    (1, st.just(ListHistory())),
    # Failures of the writes whose callers handle them: a call's first write, the hook's, and
    # disk failures behind the boundary (an outcome, a draft). Not generated: a failed delivery
    # mark of an idle wake (``ask:background-answer``) keeps the answer, but nothing retries
    # the wake until the next event (a boundary, a wait, another answer), which the checks
    # here count as a missed wake; test_runtime_write_faults.py covers a failed boundary mark.
    (1, st.builds(FailNextWrite, st.sampled_from(["refused", "disk"]), st.just("tool-call"))),
    (
        1,
        st.builds(
            FailNextWrite,
            st.just("disk"),
            st.sampled_from(["ask:history-completed", "ask:draft"]),
        ),
    ),
    (1, st.builds(FailNextWrite, st.just("refused"), st.just("user-message"))),
    (
        4,
        st.builds(
            MidWrite,
            st.sampled_from(typing.get_args(Trigger)),
            st.sampled_from(["foreground", "wait", "trigger", "nothing"]),
            st.sampled_from(["before", "after"]),
        ),
    ),
]
# A branch listed ``weight`` times is drawn that much more often.
OPERATIONS: st.SearchStrategy[Operation] = st.sampled_from(
    [strategy for weight, strategy in _WEIGHTED for _ in range(weight)]
).flatmap(lambda strategy: strategy)


OPERATIONS_MORE: st.SearchStrategy[Operation] = st.sampled_from(
    [strategy for weight, strategy in _WEIGHTED + _WEIGHTED_MORE for _ in range(weight)]
).flatmap(lambda strategy: strategy)
"""Every operation: also session changes, question modes, history reads, write faults and
cancellations that land while a write is held."""


Ending = Literal[
    "drain",
    "abort calls, then drain",
    "dispose",
    "cancel the runtime",
    "cancel the runtime mid-write",
]
"""How a program ends: answer everything left; abort every running call (the agent gave up)
and then answer everything; abort every call and dispose the runtime with forms open; or
cancel the task that holds the runtime (its host went away), at a quiet moment or while an
answer's write is held at the gate."""

ENDINGS: tuple[Ending, ...] = ("drain", "abort calls, then drain", "dispose")


@attrs.frozen
class Program:
    steps: tuple[Step, ...]
    ending: Ending
    damage: bool = False
    """Append a torn frame to the session file before the restart."""


# Half the programs start with a busy agent, where answers wait for a boundary or a wait
# instead of waking the agent at once.
PROGRAMS = st.builds(
    lambda busy, steps, ending: Program((Step(AgentBusy(), True),) * busy + steps, ending),
    st.booleans(),
    st.lists(st.builds(Step, OPERATIONS, st.booleans()), min_size=6, max_size=24).map(tuple),
    st.sampled_from(ENDINGS),
)

PROGRAMS_MORE = st.builds(
    lambda busy, steps, ending, damage: Program(
        (Step(AgentBusy(), True),) * busy + steps, ending, damage
    ),
    st.booleans(),
    st.lists(st.builds(Step, OPERATIONS_MORE, st.booleans()), min_size=6, max_size=24).map(tuple),
    st.sampled_from(typing.get_args(Ending)),
    st.booleans(),
)

_WEIGHTED_HOOKS: list[tuple[int, st.SearchStrategy[Operation]]] = [
    (4, st.just(AgentBusy())),
    (4, st.just(AgentIdle())),
    (3, st.just(StartWait())),
    (3, st.just(CancelWait())),
    (4, st.builds(AskBackground, st.integers(1, 2))),
    (4, st.builds(AnswerVisible, st.integers(1, 2))),
    (1, st.just(CancelVisible())),
    (1, st.just(TurnBoundary())),
    (1, st.just(Elapse())),
    (1, st.just(Defer())),
    (1, st.just(Reopen())),
    (1, st.builds(AskForeground, st.integers(1, 2))),
    (1, st.builds(CancelForeground, st.integers(0, 3))),
    (1, st.builds(HookWhileMarking, st.booleans(), st.sampled_from(["before", "after"]))),
]
OPERATIONS_HOOKS: st.SearchStrategy[Operation] = st.sampled_from(
    [strategy for weight, strategy in _WEIGHTED_HOOKS for _ in range(weight)]
).flatmap(lambda strategy: strategy)
"""Mostly host hooks, waits and their aborts, between answers: a message sent right after a
hook call (a wait aborted, a form stopped, an answer) must find the call reduced."""

PROGRAMS_HOOKS = st.builds(
    Program,
    st.lists(st.builds(Step, OPERATIONS_HOOKS, st.booleans()), min_size=4, max_size=14).map(tuple),
    st.sampled_from(ENDINGS),
)


# ------------------------------------------------------------------------------------------
# Observation
# ------------------------------------------------------------------------------------------


def count_tasks(task: trio.lowlevel.Task) -> int:
    return 1 + sum(count_tasks(child) for n in task.child_nurseries for child in n.child_tasks)


def read_branch(path: Path) -> tuple[Entry, ...]:
    with SessionFile.open(path, readonly=True) as session:
        return session.branch()


@attrs.define(eq=False)
class CheckingSurface(RecordingSurface):
    """A recording surface that also notices overlapping forms and lost drafts.

    ``expected`` holds, per flow, the snapshot (``state_to_json``) the flow must come back with
    the next time it is shown; the world sets it when it hides a form it knows the state of.
    """

    open_forms: int = 0
    first_shown: dict[str, tuple[int, int]] = attrs.field(factory=dict)
    """Per flow: (its position among the shows, the session switches before it)."""
    switches: int = 0
    overlaps: list[tuple[str, str | None]] = attrs.field(factory=list)
    expected: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    lost_drafts: list[tuple[str, dict[str, Any], dict[str, Any]]] = attrs.field(factory=list)

    def show(
        self, flow_id: str, state: fs.FormState, commands: trio.MemorySendChannel[Any]
    ) -> None:
        if self.open_forms:
            self.overlaps.append((flow_id, self.visible))
        self.first_shown.setdefault(flow_id, (len(self.shown), self.switches))
        self.open_forms += 1
        want = self.expected.pop(flow_id, None)
        if want is not None and fs.state_to_json(state) != want:
            self.lost_drafts.append((flow_id, want, fs.state_to_json(state)))
        super().show(flow_id, state, commands)

    def hide(self, flow_id: str, ended: Ended | None = None) -> None:
        self.open_forms -= 1
        super().hide(flow_id, ended)


@attrs.define(eq=False)
class Call:
    """A tool call running as a task of the program."""

    call_id: str
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: bool = False
    result: dict[str, Any] | None = None
    error: BaseException | None = None
    reloads_at_start: int = 0
    reloads_at_end: int = 0
    settled_at_start: int = 0
    ended: trio.Event = attrs.field(factory=trio.Event)
    """How often the program had settled when the call started: calls started between two
    different settles reached the queue in that order."""


@attrs.define(eq=False)
class Delivery:
    channel: str  # "boundary", "wake" or "wait:<call id>"
    message: dict[str, Any]


MARK_TYPES = ("ask:background-answer", RESUME_ANSWER)
"""The entries that mark a wake's message delivered (a background answer, a follow-up)."""


def _mark_of(message: dict[str, Any]) -> str:
    """The delivery mark of a handed-out message, as ``<entry type>:<request id>``."""
    return f"{message.get('customType', 'ask:background-answer')}:{_request_id(message)}"


def _request_id(message: dict[str, Any]) -> str:
    request_id: str = message.get("details", message)["requestId"]
    return request_id


@attrs.define(eq=False)
class HookLog:
    """The host's hook calls as the program made them, and when each delivery mark's write
    began (``noting_mark_writes``), for the one exception to 'a hook call counts before
    everything after it': a wake whose mark was already being written goes out after it."""

    calls: int = 0
    mark_began: dict[str, int] = attrs.field(factory=dict)
    """Per delivery mark (``_mark_of``): ``calls`` when its latest write began."""

    def began_before_last_call(self, message: dict[str, Any]) -> bool:
        # A wake written without the journal's ``append_many`` has no window: it counts as
        # begun now.
        return self.mark_began.get(_mark_of(message), self.calls) < self.calls


@contextmanager
def noting_mark_writes(log: HookLog) -> Iterator[None]:
    """Note in ``log`` when each delivery mark's write begins: the queue writes a wake's mark
    through the session journal's ``append_many`` (inside ``gated_journal``, this wraps the
    gate's), reaching it with no checkpoint after the transition that decided the wake."""
    append_many = SessionJournal.append_many

    async def noted(self: Any, items: Any) -> Any:
        items = list(items)
        for type_, data in items:
            if type_ in MARK_TYPES:
                log.mark_began[f"{type_}:{data['details']['requestId']}"] = log.calls
        return await append_many(self, items)

    with mock.patch.object(SessionJournal, "append_many", noted):
        yield


@attrs.define(eq=False)
class World:
    """The program's view of the runtime: what it started, saw and was handed."""

    rt: Runtime
    surface: CheckingSurface
    nursery: trio.Nursery
    clock: trio.testing.MockClock
    session: Path
    gate: WriteGate = attrs.field(factory=WriteGate)
    sessions: list[Path] = attrs.field(factory=list)
    """Every session file this program used (deliveries are checked against all of them)."""
    abandoned: set[str] = attrs.field(factory=set)
    """Background requests of a session the program left for a new one: never delivered."""
    background_only: bool = False
    faults: int = 0
    """Writes the program made fail."""
    settles: int = 0
    inbox: list[dict[str, Any]] = attrs.field(factory=list)
    late_asks: list[tuple[str, dict[str, Any] | None]] = attrs.field(factory=list)
    """``ask_user`` calls of ``MidWrite`` triggers, registered at the next quiescence."""
    """Wakes the reader task took from ``wakeups`` (their delivery marks checked then)."""
    herdr: list[bool] = attrs.field(factory=list)
    flows: dict[str, tuple[str, ...]] = attrs.field(factory=dict)
    background: list[tuple[str, str]] = attrs.field(factory=list)  # (flow id, request id)
    fifo: list[str] = attrs.field(factory=list)
    """The background flows in the order this runtime must first show them."""
    foreground: list[Call] = attrs.field(factory=list)
    waits: list[Call] = attrs.field(factory=list)
    deliveries: dict[str, list[Delivery]] = attrs.field(factory=dict)
    follow_ups: dict[str, list[Delivery]] = attrs.field(factory=dict)
    """Answers of recovered foreground forms, by request id."""
    problems: list[str] = attrs.field(factory=list)
    hooks: HookLog = attrs.field(factory=HookLog)
    outside_done: list[trio.Event] = attrs.field(factory=list)
    """Set by the program's own tasks outside the runtime as they end (the count of tasks
    left after disposal is taken once they have: they are not the runtime's)."""
    idle: bool = True
    """What the host's last hook call said; no wake may find the agent busy unless its
    delivery mark's write began before that call (``HookLog``)."""
    woken: bool = False
    reloads: int = 0
    panel_visible: bool = True
    """What the person last did with the panel (hide, reopen); it follows reloads."""
    panel_known: bool = True
    """False after an Esc whose effect (defer, or closing an editor) the world cannot tell."""
    escape_pending: bool = False
    """An Esc was sent since the last quiescence: the form may read it after later steps."""
    counted: bool = True
    """The wakes since the last hook call are counted against its period (at most one per
    idle period). A session change stops the count until the next hook call: the new branch's
    queue starts unwoken, and a wake of the old branch may still be on its way."""
    wakes_in_period: int = 0
    trusted: bool = True
    """No command or answer was sent since the last quiescence: the surface's states are
    the forms' states."""
    _ids: Iterator[int] = attrs.field(factory=lambda: iter(range(1, 10_000)))

    # -- operations -------------------------------------------------------------------------

    async def perform(self, operation: Operation) -> None:
        rt = self.rt
        match operation:
            case AskForeground(questions=n) if self.background_only:
                # Background-only mode queues every ask_user call.
                await self._ask_background(n, background=False)
            case AskForeground(questions=n):
                call = Call(
                    f"f{next(self._ids)}",
                    reloads_at_start=self.reloads,
                    settled_at_start=self.settles,
                )
                self.flows[f"tool:{call.call_id}"] = _qids(n)
                self.foreground.append(call)
                self.nursery.start_soon(self._run_call, call, "ask_user", payload(*_qids(n)))
            case AskBackground(questions=n):
                await self._ask_background(n, background=True)
            case AnswerVisible(option=option):
                flow = self.surface.visible
                if flow is not None:
                    self.changing(flow)
                    submit(
                        rt.events,
                        flow,
                        answer({qid: [f"{qid}{option}"] for qid in self.flows[flow]}),
                    )
            case CancelVisible():
                if self.surface.visible is not None:
                    self.changing(self.surface.visible)
                    submit(rt.events, self.surface.visible, {"kind": "cancel"})
            case Command(command=command):
                flow = self.surface.visible
                if flow is not None:
                    if isinstance(command, fs.Cancel) and flow.startswith("tool:b"):
                        self._escape_in_panel(flow)
                    self.changing(flow)
                    await rt.send_command(flow, command)
            case Defer():
                self.expect_reshow()
                self.panel_visible, self.panel_known = False, not self.escape_pending
                await rt.defer_queue()
            case Reopen():
                self.panel_visible, self.panel_known = True, not self.escape_pending
                await rt.show_queue()
            case StartWait():
                call = Call(f"w{next(self._ids)}", reloads_at_start=self.reloads)
                self.waits.append(call)
                self.nursery.start_soon(self._run_call, call, "wait_for_answers", {})
            case CancelWait():
                running = [call for call in self.waits if not call.done]
                if running:
                    running[-1].scope.cancel()
            case CancelForeground(index=index):
                running = [call for call in self.foreground if not call.done]
                if running:
                    running[index % len(running)].scope.cancel()
            case UserMessage():
                self.expect_reshow()
                self.panel_visible, self.panel_known = False, not self.escape_pending
                await self.user_message()
            case TurnBoundary():
                messages = await rt.turn_boundary()
                self.check_batch_order("boundary", messages)
                for message in messages:
                    self._delivered("boundary", message)
            case AgentBusy():
                self._hook()
                self.idle = False
                rt.agent_started()
            case AgentIdle():
                self._hook()
                self.idle = True
                self.woken = False
                rt.agent_settled()
            case Reload():
                self.expect_reshow()
                self.reloads += 1
                self.surface.switches += 1
                self.woken = False
                self.counted = False
                await rt.change_session("reload")
            case Elapse():
                self.clock.jump(DRAFT_DELAY * 1.5)
            case SwitchSession(reason=reason):
                await self.switch_session(reason)
            case SetMode(background_only=background_only, confirm=confirm):

                async def answer_confirm(_message: str) -> bool:
                    return confirm

                mode = "background-only" if background_only else "standard"
                if await rt.set_question_mode(mode, confirm=answer_confirm):
                    self.background_only = background_only
            case ListHistory():
                await self.check_history()
            case FailNextWrite(error=error, entry=entry):
                self.faults += 1
                self.gate.fail_next(
                    entry,
                    WriteRefused(entry, ValueError("refused by the test"))
                    if error == "refused"
                    else InjectedDiskError(errno.EIO, "injected disk failure"),
                )
            case MidWrite(trigger=trigger, target=target, position=position):
                await self.mid_write(trigger, target, position)
            case HookWhileMarking(idle=idle, position=position):
                await self.hook_while_marking(idle, position)

    async def user_message(self) -> None:
        """The hook journals the text first; a refused write reaches the host as
        ``WriteRefused`` and nothing else happens (the panel stays as it was)."""
        try:
            await self.rt.user_message("something else")
        except WriteRefused:
            assert self.faults, "user_message refused without a fault"
            self.panel_known = False

    async def _ask_background(self, n: int, *, background: bool) -> None:
        call_id = f"b{next(self._ids)}"
        receipt = await self.rt.call_tool(
            "ask_user", payload(*_qids(n), background=background), tool_call_id=call_id
        )
        self._took_receipt(call_id, n, receipt)

    def _took_receipt(self, call_id: str, n: int, receipt: dict[str, Any] | None) -> None:
        """Register a queued background request from its receipt; a call that ended without
        one (a write failed, the call was cancelled) is looked up in the journal."""
        flow = f"tool:{call_id}"
        self.flows[flow] = _qids(n)
        if receipt is not None and not receipt.get("isError"):
            content = receipt["structuredContent"]
            assert content["status"] == "queued", receipt
            request_id = content["requestId"]
        else:
            if receipt is not None and not self.faults:
                self.problems.append(f"ask_user {call_id} failed without a fault: {receipt}")
            queued = [
                e.data["requestId"]
                for e in self.branch()
                if e.type == "ask:history-request" and e.data.get("toolCallId") == call_id
            ]
            if not queued:
                return
            [request_id] = queued
        self.background.append((flow, request_id))
        self.fifo.append(flow)

    def branch(self) -> tuple[Entry, ...]:
        return read_branch(self.session)

    async def settle(self) -> None:
        await trio.testing.wait_all_tasks_blocked()
        self.settles += 1

    async def switch_session(self, reason: str) -> None:
        """``change_session`` to another branch; the bookkeeping of a reload, plus the file."""
        self.expect_reshow()
        self.reloads += 1
        self.surface.switches += 1
        self.woken = False
        self.counted = False
        target: Any = None
        match reason:
            case "fork" | "new":
                target = self.session.with_name(f"session-{next(self._ids)}.pas")
            case "resume":
                target = self.session
            case "tree":
                # The leaf as an independent reader sees it, at quiescence: drafts the switch
                # saves land after it and leave the branch, so no draft is expected back.
                await self.settle()
                branch = self.branch()
                if not branch:
                    return
                target = branch[-1].id
                self.surface.expected.clear()
        if reason == "new":
            # The old session's forms stay with it: none of them is shown or delivered here.
            self.abandoned |= {rid for _flow, rid in self.background}
            self.fifo = self.first_shown_fifo()
            self.surface.expected.clear()
            self.panel_visible = True  # a fresh session's panel is open
        if reason in ("fork", "new"):
            # Wakes of the new branch may go out before the switch returns.
            self.sessions.append(target)
        try:
            await self.rt.change_session(reason, target)
        finally:
            # A fork cancelled half-way: the runtime follows the branch the journal is on.
            if reason in ("fork", "new") and target.exists():
                self.session = target

    def first_shown_fifo(self) -> list[str]:
        first_shown: list[str] = []
        for flow in self.surface.shown:
            if flow in self.fifo and flow not in first_shown:
                first_shown.append(flow)
        return first_shown

    async def check_history(self) -> None:
        """``list_ask_history`` reads through the writer's own index and fold; at quiescence
        it must agree with an independent reader of the file."""
        await self.settle()
        branch = self.branch()
        result = await self.rt.call_tool("list_ask_history", {"limit": 100})
        if result.get("isError"):
            assert self.faults, result
            return
        listed = {
            (r["requestId"], r["questionId"]): r["status"] for r in result["details"]["records"]
        }
        outcomes = journal_outcomes(branch)
        expected = {}
        for entry in branch:
            if entry.type == "ask:history-request":
                for item in entry.data["questions"]:
                    expected[(entry.data["requestId"], item["id"])] = (
                        entry.data["requestId"] in outcomes
                    )
        assert set(listed) == set(expected), (sorted(listed), sorted(expected))
        for key, done in expected.items():
            assert (listed[key] != "waiting") == done, (key, listed[key], done)

    def _hook(self) -> None:
        """A hook call counts before everything that happens after it: the wakes sent before
        it belong to the period it ends, every later one to the period it starts."""
        self.collect_wakeups()
        self.hooks.calls += 1
        self.counted = True
        self.wakes_in_period = 0

    def _escape_in_panel(self, flow: str) -> None:
        """Esc in a background form's navigation defers the queue; in an editor it does not.

        Whether it does is known only once the form has read the key: a session change or
        another command may come first. Esc never changes the draft.
        """
        self.panel_known = False
        self.escape_pending = True
        if not self.trusted:
            self.surface.expected.pop(flow, None)
        elif self.surface.states[flow].editor is None:
            self.expect_reshow()

    def changing(self, flow: str) -> None:
        """An answer, cancel or command is on its way to ``flow``: until the next quiescence the
        surface's states are not the forms' states, and an expectation recorded for it before
        (a hide that did not happen, say a user message whose write was refused) is stale:
        the form may come back with the change (an answer whose write failed reopens with it)."""
        self.trusted = False
        self.surface.expected.pop(flow, None)

    def expect_reshow(self) -> None:
        """A background form about to be hidden (or disposed with the runtime) must come back
        with its current draft."""
        flow = self.surface.visible
        if flow is None or not flow.startswith("tool:b"):
            return
        if self.trusted:
            self.surface.expected[flow] = fs.state_to_json(self.surface.states[flow])
        else:
            self.surface.expected.pop(flow, None)

    async def mid_write(self, trigger: Trigger, target: str, position: GatePosition) -> None:
        """Cancel ``target`` while the write ``trigger`` causes waits at the gate."""
        await self.settle()
        visible = self.surface.visible
        task = Call(f"t{next(self._ids)}")
        started: Any = None
        seen = len(self.gate.held_types)
        self.gate.hold(position)
        match trigger:
            case "answer" | "cancel form" if visible is not None:
                self.changing(visible)
                response = (
                    answer({qid: [f"{qid}1"] for qid in self.flows[visible]})
                    if trigger == "answer"
                    else {"kind": "cancel"}
                )
                submit(self.rt.events, visible, response)
            case "boundary":
                started = self._trigger_boundary
            case "reload" | "fork":
                started = functools.partial(self.switch_session, trigger)
            case "user message":
                self.expect_reshow()
                self.panel_visible, self.panel_known = False, False
                started = self.user_message
            case "ask":
                n = next(self._ids)
                started = functools.partial(self._trigger_ask, f"b{n}")
            case "elapse":
                self.clock.jump(DRAFT_DELAY * 1.5)
        if started is not None:
            self.nursery.start_soon(self._run_trigger, task, started)
        await trio.testing.wait_all_tasks_blocked()
        if self.gate.held:
            for held in sorted(set(self.gate.held_types[seen:])):
                note(f"held a write: {held}")
            match target:
                case "foreground":
                    running = [call for call in self.foreground if not call.done]
                    if running:
                        running[-1].scope.cancel()
                case "wait":
                    running = [call for call in self.waits if not call.done]
                    if running:
                        running[-1].scope.cancel()
                case "trigger":
                    task.scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
        self.gate.release()
        if started is not None:
            # Its session work may run in a worker thread, which settling does not wait for.
            await task.ended.wait()
        await self.settle()
        if task.error is not None:
            self.problems.append(f"{trigger} raised {task.error!r}")
        for call_id, receipt in self.late_asks:
            self._took_receipt(call_id, 1, receipt)
        self.late_asks.clear()

    async def hook_while_marking(self, idle: bool, position: GatePosition) -> None:
        """Call a hook while a wake's delivery mark is being written (``HookWhileMarking``)."""
        await self.settle()
        visible = self.surface.visible
        if visible is not None:
            self.gate.hold(position)
            self.changing(visible)
            submit(
                self.rt.events, visible, answer({qid: [f"{qid}1"] for qid in self.flows[visible]})
            )
            # An answer writes its outcome first; the wake's mark comes after (if it wakes).
            for _ in range(8):
                await trio.testing.wait_all_tasks_blocked()
                if not self.gate.held or self.gate.held_types[-1] in MARK_TYPES:
                    break
                self.gate.release()
                self.gate.hold(position)
            if self.gate.held:
                note("a hook call while a wake's mark was written")
        await self.perform(AgentIdle() if idle else AgentBusy())
        self.gate.release()
        await self.settle()

    async def _run_trigger(self, task: Call, started: Any) -> None:
        try:
            with task.scope:
                await started()
        except Exception as error:
            task.error = error
        finally:
            task.done = True
            task.ended.set()

    async def _trigger_boundary(self) -> None:
        messages = await self.rt.turn_boundary()
        self.check_batch_order("boundary", messages)
        for message in messages:
            self._delivered("boundary", message)

    async def _trigger_ask(self, call_id: str) -> None:
        receipt: dict[str, Any] | None = None
        try:
            receipt = await self.rt.call_tool(
                "ask_user", payload("a", background=True), tool_call_id=call_id
            )
        finally:
            # Cancelled or not: a request the journal holds is in the queue, and the program
            # must know it (the reader runs at quiescence, after the gate opened).
            self.late_asks.append((call_id, receipt))

    async def read_wakes(self) -> None:
        """Take each wake as the host would, the moment it is sent: its delivery mark must
        be on the branch already."""
        async for message in self.rt.wakeups:
            self._check_marked("wake", message)
            self.inbox.append(message)

    async def _run_call(self, call: Call, name: str, arguments: dict[str, Any]) -> None:
        try:
            with call.scope:
                call.result = await self.rt.call_tool(name, arguments, tool_call_id=call.call_id)
        except Exception as error:
            call.error = error
        finally:
            # Also when the runtime is disposed with the call running (its nursery cancelled).
            call.done = True
            call.reloads_at_end = self.reloads
        if name == "wait_for_answers" and call.result is not None:
            details = call.result.get("details")
            if details is not None:
                self._check_wait_result(details)
                # Delivered through this wait: its completion must be journaled already.
                self.check_batch_order(f"wait:{call.call_id}", details["results"])
                for item in details["results"]:
                    self._delivered(f"wait:{call.call_id}", item)

    def _check_wait_result(self, details: dict[str, Any]) -> None:
        """A wait returns every awaited outcome: its set is what was undelivered when it
        started plus what was enqueued while it waited, and none of those can go elsewhere."""
        awaited = details["requestIds"]
        returned = [item["requestId"] for item in details["results"]]
        pending = details.get("pendingRequestIds", [])
        if details["status"] == "complete":
            ok = sorted(returned) == sorted(awaited)
        else:
            ok = sorted(returned + pending) == sorted(awaited) and not set(returned) & set(pending)
        if not ok:
            self.problems.append(f"wait result does not cover its requests: {details}")

    # -- deliveries ---------------------------------------------------------------------------

    def _delivered(self, channel: str, message: dict[str, Any]) -> None:
        details = message.get("details", message)
        request_id = details["requestId"]
        if message.get("customType") == RESUME_ANSWER:
            self.follow_ups.setdefault(request_id, []).append(Delivery(channel, message))
        else:
            self.deliveries.setdefault(request_id, []).append(Delivery(channel, message))
        if channel != "wake":  # the reader checked it when it took it
            self._check_marked(channel, message)
        if channel == "wake" and (details.get("error") or details["result"]["cancelled"]):
            self.problems.append(f"{request_id}: a cancellation or error woke the agent")

    def _check_marked(self, channel: str, message: dict[str, Any]) -> None:
        """At the moment a message is handed out, its completion and its delivery mark (the
        ``ask:background-answer`` or follow-up entry, or the wait's tool result) are on the
        branch: a crash right after the hand-out must not deliver it again."""
        details = message.get("details", message)
        request_id = details["requestId"]
        completed: set[str] = set()
        marked: set[str] = set()
        for path in self.sessions:
            for entry in read_branch(path) if path.exists() else ():
                if entry.type == "ask:history-completed":
                    completed.add(entry.data["requestId"])
                elif entry.type in ("ask:background-answer", RESUME_ANSWER):
                    marked.add(f"{entry.type}:{entry.data['details']['requestId']}")
                elif entry.type == "tool-result" and entry.data["name"] == "wait_for_answers":
                    result = entry.data["result"].get("details")
                    for item in result["results"] if result else ():
                        marked.add(f"wait:{entry.data['toolCallId']}:{item['requestId']}")
        if request_id not in completed:
            self.problems.append(f"{request_id} delivered through {channel} before it was recorded")
        if channel.startswith("wait:"):
            mark = f"{channel}:{request_id}"
        else:
            mark = f"{message.get('customType', 'ask:background-answer')}:{request_id}"
        if mark not in marked:
            self.problems.append(f"{request_id} handed out through {channel} before its mark")

    def collect_wakeups(self) -> None:
        while True:
            if self.inbox:
                message = self.inbox.pop(0)
            else:
                try:
                    message = self.rt.wakeups.receive_nowait()
                except trio.WouldBlock:
                    return
                self._check_marked("wake", message)
            self.woken = True
            self.wakes_in_period += 1
            # A wake whose delivery mark was being written when the host called a hook goes out
            # after that call (architecture invariant 11): to a busy agent after
            # ``agent_started``, as the period's one wake after ``agent_settled``.
            late = self.hooks.began_before_last_call(message)
            if late:
                note("a wake went out after a hook call made while its mark was written")
            if not self.idle and not late:
                self.problems.append(f"a wake while the agent is busy: {_request_id(message)}")
            if self.counted and self.wakes_in_period > 1:
                self.problems.append(f"wake number {self.wakes_in_period} of an idle period")
            self._delivered("wake", message)

    # -- checks ---------------------------------------------------------------------------------

    async def check_quiescent(self) -> None:
        """Invariants that hold whenever every task is blocked."""
        self.trusted = True
        self.escape_pending = False
        self.collect_wakeups()
        stats = await self.rt.statistics()
        await trio.testing.wait_all_tasks_blocked()
        assert not self.problems, self.problems
        assert not self.surface.overlaps, f"two forms shown at once: {self.surface.overlaps}"
        assert not self.surface.lost_drafts, f"draft lost: {self.surface.lost_drafts}"
        self.check_deliveries(final=False)
        self.check_outcomes_so_far()
        self.check_fifo()
        self.check_foreground_fifo()
        self.check_herdr_sequence()
        assert stats.visible == self.surface.visible, (stats.visible, self.surface.visible)
        if self.panel_known:
            assert stats.panel_visible == self.panel_visible, "panel visibility"
        visible = self.surface.visible
        if visible is not None and visible.startswith("tool:b"):
            assert stats.panel_visible, f"{visible} shown while the panel is hidden"
        if visible is None:
            running = [call.call_id for call in self.foreground if not call.done]
            assert not running, f"foreground calls wait, nothing is shown: {running}"
            assert not (stats.panel_visible and stats.pending), (
                f"the panel is open on pending forms {stats.pending}, nothing is shown"
            )
        waiting = any(not call.done for call in self.waits)
        active = bool(self.herdr) and self.herdr[-1]
        should_block = self.surface.visible is not None or waiting
        assert active == should_block, (
            f"herdr active={active}, visible={self.surface.visible}, wait={waiting}"
        )
        assert bool(stats.herdr_owners) == active, stats.herdr_owners
        assert stats.waiting == waiting
        if self.idle and not self.woken and not waiting:
            self.check_idle_wake()

    def check_outcomes_so_far(self) -> None:
        """No request has two terminal outcomes, at any time."""
        branch = read_branch(self.session)
        for kind in ("ask:history-completed", "ask:queue-completed"):
            counts = Counter(e.data["requestId"] for e in branch if e.type == kind)
            assert all(n == 1 for n in counts.values()), f"two outcomes ({kind}): {counts}"

    def check_idle_wake(self) -> None:
        """While idle and not yet woken, no ready answer may wait for a boundary."""
        outcomes = journal_outcomes(read_branch(self.session))
        for _flow, request_id in self.background:
            data = outcomes.get(request_id)
            if data is None or request_id in self.deliveries or "error" in data:
                continue
            assert data["result"]["cancelled"], (
                f"{request_id} is ready while the agent is idle, but did not wake it"
            )

    def check_deliveries(self, *, final: bool) -> None:
        background = {request_id for _flow, request_id in self.background}
        for request_id, deliveries in self.deliveries.items():
            assert request_id in background, f"{request_id} is not a background request"
            assert len(deliveries) == 1, (
                f"{request_id} delivered more than once: {[d.channel for d in deliveries]}"
            )
        for request_id, deliveries in self.follow_ups.items():
            assert len(deliveries) == 1, f"recovered answer {request_id} delivered twice"
        if final:
            missing = background - set(self.deliveries) - self.abandoned
            assert not missing, f"never delivered: {missing}"

    def check_fifo(self) -> None:
        order = self.fifo
        first_shown: list[str] = []
        for flow in self.surface.shown:
            if flow in order and flow not in first_shown:
                first_shown.append(flow)
        assert first_shown == order[: len(first_shown)], (first_shown, order)

    def check_batch_order(self, channel: str, messages: list[dict[str, Any]]) -> None:
        """The background answers of one boundary or one wait come in enqueue order."""
        position = {rid: index for index, (_flow, rid) in enumerate(self.background)}
        order = [
            position.get(message.get("details", message)["requestId"], -1)
            for message in messages
            if message.get("customType") != RESUME_ANSWER
        ]
        if order != sorted(order):
            self.problems.append(f"{channel} delivered out of enqueue order: {order}")

    def check_foreground_fifo(self) -> None:
        """Foreground calls get the surface in the order they asked for it: a call started
        after a settle that followed another's start is shown after it (no session change
        in between; a cancelled call is never shown)."""
        shown = self.surface.first_shown
        calls = [
            (call, shown[f"tool:{call.call_id}"])
            for call in self.foreground
            if f"tool:{call.call_id}" in shown
        ]
        for first, (first_at, first_switches) in calls:
            for second, (second_at, second_switches) in calls:
                if (
                    first.settled_at_start < second.settled_at_start
                    and first_switches == second_switches == first.reloads_at_start
                ):
                    assert first_at < second_at, (
                        f"foreground {second.call_id} shown before {first.call_id}, "
                        "which asked first"
                    )

    def check_herdr_sequence(self) -> None:
        expected = [index % 2 == 0 for index in range(len(self.herdr))]
        assert self.herdr == expected, f"herdr:blocked events {self.herdr}"

    # -- draining -----------------------------------------------------------------------------

    async def drain(self) -> None:
        """Answer everything still open and end every wait, then collect the last answers."""
        for _ in range(DRAIN_ROUNDS):
            await trio.testing.wait_all_tasks_blocked()
            await self.check_quiescent()
            if self.surface.visible is not None:
                flow = self.surface.visible
                self.changing(flow)
                submit(self.rt.events, flow, answer({qid: [f"{qid}1"] for qid in self.flows[flow]}))
                continue
            stats = await self.rt.statistics()
            if not stats.panel_visible and stats.pending:
                self.panel_visible, self.panel_known = True, True
                await self.rt.show_queue()
                continue
            running = [call.call_id for call in self.foreground + self.waits if not call.done]
            if not stats.pending and not running:
                break
            raise AssertionError(
                f"stuck: nothing visible, pending={stats.pending}, running calls={running}"
            )
        else:
            raise AssertionError("the program did not drain")
        messages = await self.rt.turn_boundary()
        self.check_batch_order("boundary", messages)
        for message in messages:
            self._delivered("boundary", message)
        await trio.testing.wait_all_tasks_blocked()
        self.collect_wakeups()
        assert not self.problems, self.problems
        self.check_deliveries(final=True)


def _qids(n: int) -> tuple[str, ...]:
    return ("a", "b")[:n]


def journal_outcomes(branch: tuple[Entry, ...]) -> dict[str, Any]:
    return {e.data["requestId"]: e.data for e in branch if e.type == "ask:history-completed"}


# ------------------------------------------------------------------------------------------
# The journal after disposal
# ------------------------------------------------------------------------------------------


def check_journal(world: World, branch: tuple[Entry, ...], *, drained: bool) -> None:
    """Exactly one outcome per request (at most one for background requests left pending);
    completion before delivery; every delivery marked, once."""
    requests = {e.data["requestId"]: e.data for e in branch if e.type == "ask:history-request"}
    completions = Counter(e.data["requestId"] for e in branch if e.type == "ask:history-completed")
    queue_completions = Counter(
        e.data["requestId"] for e in branch if e.type == "ask:queue-completed"
    )
    assert all(n == 1 for n in completions.values()), completions
    assert all(n == 1 for n in queue_completions.values()), queue_completions
    # A foreground call interrupted by a reload belonged to the old branch: its journal view
    # is revoked, so it records neither an outcome nor a tool result, and recovery on the next
    # startup or resume reopens it (the contract does not recover on reload).
    interrupted = {
        call.call_id
        for call in world.foreground
        if call.reloads_at_end > call.reloads_at_start
        and (call.result is None or _is_interrupted(call.result))
    }
    # A foreground call whose outcome write was refused ends with a tool error (and that
    # result is journaled, so recovery leaves it alone): its request stays without outcome.
    refused = {
        call.call_id
        for call in world.foreground
        if world.faults and call.result is not None and call.result.get("isError")
    }
    for request_id, data in requests.items():
        if completions[request_id] == 1 or (data["background"] and not drained):
            continue
        assert data.get("toolCallId") in interrupted | refused, (
            f"{request_id} has no outcome: {data}"
        )
    # A recovered form (dismissed from recovery once it ended) has its outcome, and its answer
    # reached the agent once.
    dismissed = {e.data["toolCallId"] for e in branch if e.type == "ask:pending-dismissed"}
    for request_id, data in requests.items():
        if data.get("toolCallId") not in dismissed:
            continue
        assert completions[request_id] == 1, f"recovered {request_id} has no outcome"
        [outcome] = [
            e.data
            for e in branch
            if e.type == "ask:history-completed" and e.data["requestId"] == request_id
        ]
        if drained and not outcome["result"]["cancelled"]:
            assert len(world.follow_ups.get(request_id, ())) == 1, f"recovered {request_id}"
    # The foreground results the agent got are the journaled ones.
    for call in world.foreground:
        if (
            call.result is not None
            and "details" in call.result
            and call.result["details"]["requestId"] in requests
        ):
            details = call.result["details"]
            [recorded] = [
                e.data
                for e in branch
                if e.type == "ask:history-completed" and e.data["requestId"] == details["requestId"]
            ]
            assert recorded["result"]["cancelled"] == details["cancelled"]
    # Completion precedes delivery; each request is marked delivered once.
    completed: set[str] = set()
    marked: Counter[str] = Counter()
    followed: Counter[str] = Counter()
    for entry in branch:
        if entry.type == "ask:history-completed":
            completed.add(entry.data["requestId"])
        elif entry.type == "ask:background-answer":
            request_id = entry.data["details"]["requestId"]
            assert request_id in completed, f"{request_id} delivered before it was recorded"
            marked[request_id] += 1
        elif entry.type == RESUME_ANSWER:
            request_id = entry.data["details"]["requestId"]
            assert request_id in completed, f"{request_id} followed up before it was recorded"
            followed[request_id] += 1
        elif entry.type == "tool-result" and entry.data["name"] == "wait_for_answers":
            details = entry.data["result"].get("details")
            for item in details["results"] if details else ():
                assert item["requestId"] in completed, item["requestId"]
                marked[item["requestId"]] += 1
    assert all(n == 1 for n in marked.values()), f"marked delivered twice: {marked}"
    # Requests of a session the program left (``new``) are not on this branch.
    unmarked = (set(world.deliveries) & set(requests)) - set(marked)
    assert not unmarked, f"delivered without a delivery mark in the journal: {unmarked}"
    assert all(n == 1 for n in followed.values()), f"followed up twice: {followed}"
    assert set(world.follow_ups) & set(requests) <= set(followed), (
        "a follow-up without its journal entry"
    )


def _is_interrupted(result: dict[str, Any]) -> bool:
    return result.get("isError") is True and result["content"][0]["text"] == FORM_INTERRUPTED_TEXT


def check_calls(world: World) -> None:
    """Every call ended in a way the API allows."""
    for call in world.foreground + world.waits:
        assert call.done, call
        assert call.error is None, f"{call.call_id} raised {call.error!r}"
    for call in world.waits:
        if call.result is not None and call.result.get("isError"):
            text = call.result["content"][0]["text"]
            assert text in (
                WAIT_BUSY_TEXT,
                WAIT_INTERRUPTED_TEXT,
                "Tool 'wait_for_answers' is not available.",
            ) or (world.faults and "failed" in text), text


# ------------------------------------------------------------------------------------------
# Running one program
# ------------------------------------------------------------------------------------------


def note(text: str) -> None:
    """A statistics event (``--hypothesis-show-statistics``), also outside a Hypothesis test."""
    if currently_in_test_context():
        event(text)


class Deadlock(AssertionError):
    """Every task of the example was blocked for ``DEADLOCK_SECONDS`` of real time."""


async def watch_for_deadlock(clock: trio.testing.MockClock) -> None:
    """Fail the example when every other task has been blocked for ``DEADLOCK_SECONDS``.

    The clock never moves by itself (only ``Elapse`` jumps it), so a task waiting on a timer
    is stuck as surely as one waiting on a lost reply: the runtime's bounded waits (its
    five-second teardown bounds) must never be what ends a wait in these programs."""
    await trio.testing.wait_all_tasks_blocked(cushion=DEADLOCK_SECONDS)
    # From here on time runs (jumps) by itself, so that the bounded, shielded waits of the
    # teardown this failure starts can end and the example reports instead of hanging.
    clock.autojump_threshold = 0.01
    raise Deadlock(
        f"every task was blocked for {DEADLOCK_SECONDS} s: a deadlock, or a wait that only "
        "a timeout would end"
    )


async def run_program(
    program: Program,
    directory: Path,
    clock: trio.testing.MockClock,
    gate: WriteGate,
    hooks: HookLog,
) -> World:
    root = trio.lowlevel.current_root_task()
    session = directory / "session.pas"
    settings_path = settings_file(directory, historyTools=True)
    async with trio.open_nursery() as watch:
        watch.start_soon(watch_for_deadlock, clock)
        await trio.testing.wait_all_tasks_blocked()
        before = count_tasks(root)
        world = await run_in_runtime(program, session, settings_path, clock, gate, hooks, watch)
        # Tasks waiting in ``wait_all_tasks_blocked`` with one cushion are woken together, in
        # any order: the gate's opener may still be on its way out when this count is taken.
        for done in world.outside_done:
            await done.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert count_tasks(root) == before, "disposal left tasks running"
        if program.damage:
            damage(world.session)
        world = await restart(world, settings_path, damaged=program.damage)
        await trio.testing.wait_all_tasks_blocked()
        assert count_tasks(root) == before, "disposal left tasks running"
        watch.cancel_scope.cancel()
    return world


def damage(path: Path) -> None:
    """A crash in the middle of a write: half a frame at the end of the file."""
    frame = encode_frame(b"\xa1\x64type\x6ball torn off" + b"\x00" * 40)
    with path.open("ab") as file:
        file.write(frame[: len(frame) // 2])


async def run_in_runtime(
    program: Program,
    session: Path,
    settings_path: Path,
    clock: trio.testing.MockClock,
    gate: WriteGate,
    hooks: HookLog,
    outside: trio.Nursery,
) -> World:
    """The program in one runtime, its ending, then disposal."""
    surface = CheckingSurface()
    world: World | None = None
    with trio.CancelScope() as host:
        async with (
            open_runtime(
                session=session,
                settings=settings_path,
                surface=surface,
                cwd=session.parent,
                check_actors=True,
            ) as rt,
            trio.open_nursery() as nursery,
        ):
            world = World(
                rt, surface, nursery, clock, session, gate=gate, sessions=[session], hooks=hooks
            )
            rt.events.on(ev.HERDR_BLOCKED, lambda p: world.herdr.append(p["active"]))
            nursery.start_soon(world.read_wakes)
            for step in program.steps:
                await world.perform(step.operation)
                if step.settle:
                    await world.settle()
                    await world.check_quiescent()
            if program.ending == "dispose":
                # The host aborts its calls and disposes the runtime: the visible background
                # form must come back with its draft after the restart.
                world.expect_reshow()
                nursery.cancel_scope.cancel()
            elif program.ending.startswith("cancel the runtime"):
                await cancel_the_runtime(world, host, outside, program.ending)
            else:
                if program.ending == "abort calls, then drain":
                    # What aborted waits held goes back to delivery; queued forms stay.
                    for call in world.foreground + world.waits:
                        call.scope.cancel()
                await world.drain()
                nursery.cancel_scope.cancel()  # the wake reader
    assert world is not None
    check_calls(world)
    # Wakes sent just before disposal stay readable: the host takes them after the block.
    world.collect_wakeups()
    assert not world.problems, world.problems
    world.check_herdr_sequence()
    assert not world.herdr or world.herdr[-1] is False
    check_journal(world, read_branch(world.session), drained=program.ending in ENDINGS[:2])
    return world


async def cancel_the_runtime(
    world: World, host: trio.CancelScope, outside: trio.Nursery, ending: Ending
) -> None:
    """The task holding the runtime is cancelled (its host went away): every call aborts and
    the runtime is disposed under that cancellation. Mid-write, the answer to the visible form
    is on its way to the journal when the cancellation lands; a task outside the runtime opens
    the gate once everything waits."""
    await world.settle()
    # Disposal quiesces before the queue ends, also under this cancellation: the visible
    # form's latest draft (inside the coalescing delay) comes back after the restart.
    world.expect_reshow()
    if ending == "cancel the runtime mid-write" and world.surface.visible is not None:
        visible = world.surface.visible
        world.surface.expected.pop(visible, None)
        world.gate.hold("before")
        submit(world.rt.events, visible, answer({qid: [f"{qid}1"] for qid in world.flows[visible]}))
        await trio.testing.wait_all_tasks_blocked()
        if world.gate.held:
            note("the runtime was cancelled with a write held")

        opened = trio.Event()
        world.outside_done.append(opened)

        async def open_the_gate() -> None:
            await trio.testing.wait_all_tasks_blocked()
            world.gate.release()
            opened.set()

        outside.start_soon(open_the_gate)
    host.cancel()
    await trio.lowlevel.checkpoint()


async def restart(old: World, settings_path: Path, *, damaged: bool = False) -> World:
    """Open the session file again (``startup``) and drain what it holds.

    Pending background forms come back in FIFO order with their drafts, undelivered answers
    are delivered (never the delivered ones again), the newest interrupted foreground call is
    reopened and its answer reaches the agent once. A torn tail is cut and reported; every
    whole entry before it counts.
    """
    outcomes = journal_outcomes(read_branch(old.session))
    surface = CheckingSurface(expected=dict(old.surface.expected), switches=old.reloads + 1)
    async with (
        open_runtime(
            session=old.session,
            settings=settings_path,
            surface=surface,
            cwd=old.session.parent,
            check_actors=True,
        ) as rt,
        trio.open_nursery() as nursery,
    ):
        world = World(
            rt,
            surface,
            nursery,
            old.clock,
            old.session,
            gate=old.gate,
            hooks=old.hooks,
            sessions=old.sessions,
            abandoned=old.abandoned,
            background_only=old.background_only,
            faults=old.faults,
            flows=old.flows,
            background=old.background,
            fifo=[
                flow
                for flow, rid in old.background
                if rid not in outcomes and rid not in old.abandoned
            ],
            foreground=old.foreground,
            waits=old.waits,
            deliveries=old.deliveries,
            follow_ups=old.follow_ups,
            reloads=old.reloads,
            panel_visible=old.panel_visible,
            panel_known=old.panel_known,
        )
        rt.events.on(ev.HERDR_BLOCKED, lambda p: world.herdr.append(p["active"]))
        nursery.start_soon(world.read_wakes)
        if damaged:
            notices = []
            while True:
                try:
                    notices.append(rt.notices.receive_nowait())
                except trio.WouldBlock:
                    break
            assert notices, "a torn tail was cut without a notice"
        await world.drain()
        nursery.cancel_scope.cancel()
    world.check_herdr_sequence()
    assert not world.herdr or world.herdr[-1] is False
    check_journal(world, read_branch(old.session), drained=True)
    if damaged:
        # What the restart wrote after cutting the torn tail is readable by the next open.
        with SessionFile.open(old.session) as session:
            assert session.report.ok, session.report
    return world


def run(program: Program) -> World:
    with tempfile.TemporaryDirectory() as directory:
        # The clock moves only when a step jumps it; a deadlock fails the example.
        clock = trio.testing.MockClock()
        gate = WriteGate()
        hooks = HookLog()
        with gated_journal(gate), noting_mark_writes(hooks):
            return trio.run(
                functools.partial(run_program, program, Path(directory), clock, gate, hooks),
                clock=clock,
            )


# Generation takes about a minute at most; a failure adds up to five minutes of shrinking.
@pytest.mark.timeout(900)
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(program=PROGRAMS)
def test_random_programs_keep_the_runtime_invariants(program: Program) -> None:
    world = run(program)
    # What the examples exercised (pytest --hypothesis-show-statistics).
    channels = Counter(d.channel.split(":")[0] for ds in world.deliveries.values() for d in ds)
    for channel in channels:
        event(f"delivered through {channel}")
    event(f"background requests: {_bucket(len(world.background))}")
    event(f"foreground requests: {_bucket(len(world.foreground))}")
    event(f"reloads: {_bucket(world.reloads)}")
    if any(call.result and call.result.get("isError") for call in world.waits):
        event("a wait ended with an error")
    if any(call.result is None for call in world.foreground):
        event("a foreground call was aborted")
    if world.follow_ups:
        event("a recovered form was answered")
    event(f"ending: {program.ending}")


def _bucket(n: int) -> str:
    return str(n) if n < 3 else "3 or more"


# A wait aborted right after ``agent_started``: the answers it held go back to delivery, and
# the queue must see the agent busy although the hook's forwarded message is still on its way.
@example(
    program=Program(
        (
            Step(AskBackground(1), False),
            Step(StartWait(), False),
            Step(Elapse(), False),
            Step(AskBackground(1), False),
            Step(AnswerVisible(1), True),
            Step(AgentBusy(), False),
        ),
        "abort calls, then drain",
    )
)
# An answer submitted right after ``agent_started`` completes the form (its ``FormStopped``
# reaches the queue before the forwarded hook).
@example(
    program=Program(
        (
            Step(AskBackground(1), False),
            Step(AgentIdle(), True),
            Step(AgentBusy(), False),
            Step(AnswerVisible(1), False),
        ),
        "drain",
    )
)
# ``agent_settled`` while an idle wake's mark is being written: that wake goes out after the
# call and is the new period's one wake, so the second answer waits (invariant 11).
@example(
    program=Program(
        (
            Step(AskBackground(1), False),
            Step(AskBackground(1), False),
            Step(HookWhileMarking(idle=True, position="before"), False),
            Step(AnswerVisible(1), True),
        ),
        "drain",
    )
)
@pytest.mark.timeout(900)
@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(program=PROGRAMS_HOOKS)
def test_hook_calls_go_before_everything_after_them(program: Program) -> None:
    world = run(program)
    for step in program.steps:
        event(f"operation: {type(step.operation).__name__}")
    event(
        f"wakes: {_bucket(sum(d.channel == 'wake' for ds in world.deliveries.values() for d in ds))}"
    )
    event(f"ending: {program.ending}")


@pytest.mark.timeout(900)
@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(program=PROGRAMS_MORE)
def test_session_changes_write_faults_and_cancellations_keep_the_invariants(
    program: Program,
) -> None:
    world = run(program)
    for step in program.steps:
        event(f"operation: {type(step.operation).__name__}")
    event(f"ending: {program.ending}")
    if program.damage:
        event("restarted on a torn tail")
    if world.faults:
        event("a write failed")
    if len(world.sessions) > 1:
        event("the session file changed")
