"""Property tests: random programs of interleaved operations against the real runtime.

Hypothesis generates a program: a short list of steps, each one operation (an attrs value)
and a flag saying whether the program waits for quiescence afterwards. Each example opens one
real runtime (``open_runtime`` on a session file in a fresh directory, a recording surface),
runs the program in one ``trio.run`` with real Trio scheduling (pytest-trio lets Hypothesis
seed Trio's run-queue shuffle, so a failing interleaving replays), then drains it: every form
still open is answered and every wait ends. Foreground asks and waits run as tasks that later
steps may cancel; everything else runs in the program's task.

The clock is a ``MockClock`` that moves only when an ``Elapse`` step jumps it: the queue's
coalesced draft writes happen then, so the steps, not the machine's load, decide when. (It
also jumps when every task has been blocked for ``DEADLOCK_SECONDS`` of real time, which only
a deadlock does; the program's deadline then reports the deadlock instead of hanging.)

Invariants (``docs/architecture.md``, contract 000 §Background queue):

- every request has at most one terminal outcome in the journal, exactly one after draining
  (a foreground call interrupted by a session reload may end with none: it belonged to the
  old branch, whose journal view is revoked, so it records neither an outcome nor a tool
  result, and the next startup or resume reopens it);
- every background outcome is delivered exactly once across turn-boundary messages, idle
  wakes and wait results, and a wait returns every outcome it awaited; a cancellation never
  wakes; while the agent is idle a ready answer wakes it, once per idle period, never while
  the agent is busy;
- nothing is delivered before its completion is in the journal, and every delivery is marked
  in the journal (a background-answer entry or the wait's tool result);
- background forms are first shown in enqueue order and only while the panel is open; no two
  forms are shown at once; a waiting foreground call or an open panel with pending forms
  always has a form shown; a form hidden by a defer or a reload comes back with its draft;
- ``herdr:blocked`` alternates true/false starting with true, and at quiescence it is active
  exactly when a form is visible or a wait is active;
- disposal leaves no task running.
"""

from __future__ import annotations

import functools
import tempfile
import typing
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest
import trio
import trio.lowlevel
import trio.testing
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pi_agent_ask import events as ev
from pi_agent_ask import open_runtime
from pi_agent_ask.actors.runtime import (
    FORM_INTERRUPTED_TEXT,
    WAIT_BUSY_TEXT,
    Runtime,
)
from pi_agent_ask.form import state as fs
from pi_agent_ask.persistence.journal import RESUME_ANSWER
from pi_agent_ask.persistence.session_file import Entry, SessionFile

from .runtime_support import RecordingSurface, answer, payload, settings_file, submit

DRAFT_DELAY = 0.25
"""The queue's draft coalescing delay (``QueueActor.draft_delay``); ``Elapse`` jumps past it."""

DEADLOCK_SECONDS = 5.0
"""Real seconds with every task blocked before the clock jumps: only a deadlock does that,
and the jump then reaches the program's ``fail_after`` deadline, which reports it."""

PROGRAM_DEADLINE = 3600.0
"""Virtual seconds a program may take; only reached through deadlock jumps."""

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
# A branch listed ``weight`` times is drawn that much more often.
OPERATIONS: st.SearchStrategy[Operation] = st.sampled_from(
    [strategy for weight, strategy in _WEIGHTED for _ in range(weight)]
).flatmap(lambda strategy: strategy)


Ending = Literal["drain", "abort calls, then drain", "dispose"]
"""How a program ends: answer everything left; abort every running call (the agent gave up)
and then answer everything; or abort every call and dispose the runtime with forms open."""


@attrs.frozen
class Program:
    steps: tuple[Step, ...]
    ending: Ending


# Half the programs start with a busy agent, where answers wait for a boundary or a wait
# instead of waking the agent at once.
PROGRAMS = st.builds(
    lambda busy, steps, ending: Program((Step(AgentBusy(), True),) * busy + steps, ending),
    st.booleans(),
    st.lists(st.builds(Step, OPERATIONS, st.booleans()), min_size=6, max_size=24).map(tuple),
    st.sampled_from(typing.get_args(Ending)),
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
    overlaps: list[tuple[str, str | None]] = attrs.field(factory=list)
    expected: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    lost_drafts: list[tuple[str, dict[str, Any], dict[str, Any]]] = attrs.field(factory=list)

    def show(
        self, flow_id: str, state: fs.FormState, commands: trio.MemorySendChannel[Any]
    ) -> None:
        if self.open_forms:
            self.overlaps.append((flow_id, self.visible))
        self.open_forms += 1
        want = self.expected.pop(flow_id, None)
        if want is not None and fs.state_to_json(state) != want:
            self.lost_drafts.append((flow_id, want, fs.state_to_json(state)))
        super().show(flow_id, state, commands)

    def hide(self, flow_id: str) -> None:
        self.open_forms -= 1
        super().hide(flow_id)


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


@attrs.define(eq=False)
class Delivery:
    channel: str  # "boundary", "wake" or "wait:<call id>"
    message: dict[str, Any]


@attrs.define(eq=False)
class World:
    """The program's view of the runtime: what it started, saw and was handed."""

    rt: Runtime
    surface: CheckingSurface
    nursery: trio.Nursery
    clock: trio.testing.MockClock
    session: Path
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
    idle: bool = True
    woken: bool = False
    reloads: int = 0
    quiet: bool = True
    """Nothing happened since the last quiescence."""
    panel_visible: bool = True
    """What the person last did with the panel (hide, reopen); it follows reloads."""
    panel_known: bool = True
    """False after an Esc whose effect (defer, or closing an editor) the world cannot tell."""
    escape_pending: bool = False
    """An Esc was sent since the last quiescence: the form may read it after later steps."""
    period: str = "clean"
    """The idle period the queue is in: ``clean`` when the last hook was called at quiescence
    and took effect before anything else happened, so every wake since belongs to it;
    ``pending`` until then; ``ambiguous`` otherwise."""
    wakes_in_period: int = 0
    trusted: bool = True
    """No command or answer was sent since the last quiescence: the surface's states are
    the forms' states."""
    _ids: Iterator[int] = attrs.field(factory=lambda: iter(range(1, 10_000)))

    # -- operations -------------------------------------------------------------------------

    async def perform(self, operation: Operation) -> None:
        rt = self.rt
        if self.period == "pending":
            self.period = "ambiguous"
        starts_quiet, self.quiet = self.quiet, False
        match operation:
            case AskForeground(questions=n):
                call = Call(f"f{next(self._ids)}", reloads_at_start=self.reloads)
                self.flows[f"tool:{call.call_id}"] = _qids(n)
                self.foreground.append(call)
                self.nursery.start_soon(self._run_call, call, "ask_user", payload(*_qids(n)))
            case AskBackground(questions=n):
                call_id = f"b{next(self._ids)}"
                receipt = await rt.call_tool(
                    "ask_user", payload(*_qids(n), background=True), tool_call_id=call_id
                )
                content = receipt["structuredContent"]
                assert content["status"] == "queued", receipt
                self.flows[f"tool:{call_id}"] = _qids(n)
                self.background.append((f"tool:{call_id}", content["requestId"]))
                self.fifo.append(f"tool:{call_id}")
            case AnswerVisible(option=option):
                flow = self.surface.visible
                if flow is not None:
                    self.trusted = False
                    submit(
                        rt.events,
                        flow,
                        answer({qid: [f"{qid}{option}"] for qid in self.flows[flow]}),
                    )
            case CancelVisible():
                if self.surface.visible is not None:
                    self.trusted = False
                    submit(rt.events, self.surface.visible, {"kind": "cancel"})
            case Command(command=command):
                flow = self.surface.visible
                if flow is not None:
                    if isinstance(command, fs.Cancel) and flow.startswith("tool:b"):
                        self._escape_in_panel(flow)
                    self.trusted = False
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
                await rt.user_message("something else")
            case TurnBoundary():
                for message in await rt.turn_boundary():
                    self._delivered("boundary", message)
            case AgentBusy():
                self._hook(starts_quiet)
                self.idle = False
                rt.agent_started()
            case AgentIdle():
                self._hook(starts_quiet)
                self.idle = True
                self.woken = False
                rt.agent_settled()
            case Reload():
                self.expect_reshow()
                self.reloads += 1
                self.woken = False
                self.period = "ambiguous"
                await rt.change_session("reload")
            case Elapse():
                self.clock.jump(DRAFT_DELAY * 1.5)

    def _hook(self, quiet: bool) -> None:
        self.collect_wakeups()
        self.period = "pending" if quiet else "ambiguous"
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
        completed = {
            e.data["requestId"]
            for e in read_branch(self.session)
            if e.type == "ask:history-completed"
        }
        if request_id not in completed:
            self.problems.append(f"{request_id} delivered through {channel} before it was recorded")
        if channel == "wake" and (details.get("error") or details["result"]["cancelled"]):
            self.problems.append(f"{request_id}: a cancellation or error woke the agent")

    def collect_wakeups(self) -> None:
        while True:
            try:
                message = self.rt.wakeups.receive_nowait()
            except trio.WouldBlock:
                return
            self.woken = True
            self.wakes_in_period += 1
            if self.period == "clean" and not (self.idle and self.wakes_in_period == 1):
                self.problems.append(
                    f"wake number {self.wakes_in_period} of an idle period, agent idle={self.idle}"
                )
            self._delivered("wake", message)

    # -- checks ---------------------------------------------------------------------------------

    async def check_quiescent(self) -> None:
        """Invariants that hold whenever every task is blocked."""
        self.trusted = True
        if self.period == "pending":
            self.period = "clean"
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
            self.check_idle_wake(stats.delivered)
        self.quiet = True

    def check_outcomes_so_far(self) -> None:
        """No request has two terminal outcomes, at any time."""
        branch = read_branch(self.session)
        for kind in ("ask:history-completed", "ask:queue-completed"):
            counts = Counter(e.data["requestId"] for e in branch if e.type == kind)
            assert all(n == 1 for n in counts.values()), f"two outcomes ({kind}): {counts}"

    def check_idle_wake(self, delivered: tuple[str, ...]) -> None:
        """While idle and not yet woken, no ready answer may wait for a boundary."""
        outcomes = journal_outcomes(read_branch(self.session))
        for _flow, request_id in self.background:
            data = outcomes.get(request_id)
            if data is None or request_id in self.deliveries or "error" in data:
                continue
            assert data["result"]["cancelled"], (
                f"{request_id} is ready while the agent is idle, but did not wake it "
                f"(queue says delivered={request_id in delivered})"
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
            missing = background - set(self.deliveries)
            assert not missing, f"never delivered: {missing}"

    def check_fifo(self) -> None:
        order = self.fifo
        first_shown: list[str] = []
        for flow in self.surface.shown:
            if flow in order and flow not in first_shown:
                first_shown.append(flow)
        assert first_shown == order[: len(first_shown)], (first_shown, order)

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
                self.trusted = False
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
        for message in await self.rt.turn_boundary():
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
    for request_id, data in requests.items():
        if completions[request_id] == 1 or (data["background"] and not drained):
            continue
        assert data.get("toolCallId") in interrupted, f"{request_id} has no outcome: {data}"
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
        if call.result is not None and "details" in call.result:
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
    unmarked = set(world.deliveries) - set(marked)
    assert not unmarked, f"delivered without a delivery mark in the journal: {unmarked}"
    assert all(n == 1 for n in followed.values()), f"followed up twice: {followed}"
    assert set(world.follow_ups) <= set(followed), "a follow-up without its journal entry"


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
            assert text in (WAIT_BUSY_TEXT, "Question wait interrupted"), text


# ------------------------------------------------------------------------------------------
# Running one program
# ------------------------------------------------------------------------------------------


async def run_program(program: Program, directory: Path, clock: trio.testing.MockClock) -> World:
    root = trio.lowlevel.current_root_task()
    before = count_tasks(root)
    session = directory / "session.pas"
    settings_path = settings_file(directory)
    with trio.fail_after(PROGRAM_DEADLINE):
        world = await run_in_runtime(program, session, settings_path, clock)
        await trio.testing.wait_all_tasks_blocked()
        assert count_tasks(root) == before, "disposal left tasks running"
        world = await restart(world, settings_path)
    await trio.testing.wait_all_tasks_blocked()
    assert count_tasks(root) == before, "disposal left tasks running"
    return world


async def run_in_runtime(
    program: Program, session: Path, settings_path: Path, clock: trio.testing.MockClock
) -> World:
    """The program in one runtime, its ending, then disposal."""
    surface = CheckingSurface()
    async with open_runtime(
        session=session, settings=settings_path, surface=surface, cwd=session.parent
    ) as rt:
        async with trio.open_nursery() as nursery:
            world = World(rt, surface, nursery, clock, session)
            rt.events.on(ev.HERDR_BLOCKED, lambda p: world.herdr.append(p["active"]))
            for step in program.steps:
                await world.perform(step.operation)
                if step.settle:
                    await trio.testing.wait_all_tasks_blocked()
                    await world.check_quiescent()
            if program.ending == "dispose":
                # The host aborts its calls and disposes the runtime: the visible background
                # form must come back with its draft after the restart.
                world.expect_reshow()
                nursery.cancel_scope.cancel()
            else:
                if program.ending == "abort calls, then drain":
                    # What aborted waits held goes back to delivery; queued forms stay.
                    for call in world.foreground + world.waits:
                        call.scope.cancel()
                await world.drain()
        check_calls(world)
    # Wakes sent just before disposal stay readable: the host takes them after the block.
    world.collect_wakeups()
    world.check_herdr_sequence()
    assert not world.herdr or world.herdr[-1] is False
    check_journal(world, read_branch(session), drained=program.ending != "dispose")
    return world


async def restart(old: World, settings_path: Path) -> World:
    """Open the session file again (``startup``) and drain what it holds.

    Pending background forms come back in FIFO order with their drafts, undelivered answers
    are delivered (never the delivered ones again), the newest interrupted foreground call is
    reopened and its answer reaches the agent once.
    """
    outcomes = journal_outcomes(read_branch(old.session))
    surface = CheckingSurface(expected=dict(old.surface.expected))
    async with (
        open_runtime(
            session=old.session, settings=settings_path, surface=surface, cwd=old.session.parent
        ) as rt,
        trio.open_nursery() as nursery,
    ):
        world = World(
            rt,
            surface,
            nursery,
            old.clock,
            old.session,
            flows=old.flows,
            background=old.background,
            fifo=[flow for flow, rid in old.background if rid not in outcomes],
            foreground=old.foreground,
            waits=old.waits,
            deliveries=old.deliveries,
            follow_ups=old.follow_ups,
            reloads=old.reloads,
            panel_visible=old.panel_visible,
            panel_known=old.panel_known,
        )
        rt.events.on(ev.HERDR_BLOCKED, lambda p: world.herdr.append(p["active"]))
        await world.drain()
    world.check_herdr_sequence()
    assert not world.herdr or world.herdr[-1] is False
    check_journal(world, read_branch(old.session), drained=True)
    return world


def run(program: Program) -> World:
    with tempfile.TemporaryDirectory() as directory:
        clock = trio.testing.MockClock(autojump_threshold=DEADLOCK_SECONDS)
        return trio.run(
            functools.partial(run_program, program, Path(directory), clock), clock=clock
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
