"""The desk's board: every agent's shown form, and the one on the display.

Each agent's runtime shows its forms on its own :class:`AgentSurface` (the runtime's
``Surface`` protocol, synchronous and non-blocking). The board collects the forms shown across
agents and puts exactly one of them on the display (the desk's terminal surface). Rules stated
once:

1. **FIFO by show time.** The displayed form is the one shown earliest among those still shown;
   a form shown later waits, whichever agent it belongs to. A runtime shows at most one form
   at a time (its queue owns its surface), so the board holds at most one form per agent and
   an agent with many queued forms takes its turn behind the others after each answer.
2. **Names never collide.** The display sees ``key + SEP + flow_id``: two agents' flows are
   different display flows even if their ids are equal.
3. **Snapshots only.** A waiting form's updates replace its stored snapshot; commands travel
   only through the channel its runtime handed over, so a key press can reach only the form on
   the display and only that form's own runtime.
4. **Blocked** means the agent waits on the form now: a foreground form, any form of an agent
   with a ``wait_for_answers`` call in progress, or the form a foreground ``ask_user`` call
   of the agent waits for (``blocked_on`` tells which). A team desk shows every form as a
   background one (Esc puts it back for every desk); ``waited_on`` says which of them a
   foreground call waits on.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime

import attrs
import trio

from pi_agent_ask.actors.form import Ended, FormInput, Surface
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.types import AskParams

__all__ = [
    "ENDINGS_KEPT",
    "SEP",
    "AgentSnapshot",
    "AgentSurface",
    "Board",
    "Ending",
    "Notice",
    "Shown",
    "form_name",
    "put_aside_hint",
]

SEP = "\x1f"
ENDINGS_KEPT = 64
"""Forms whose ending the board remembers (the newest): a page still showing one says what
became of it."""


@attrs.frozen
class Notice:
    """A notice of the desk (an agent's journal could not be written, an agent stopped), as
    the terminal's status line shows it: ``serial`` tells one from the next, ``at`` is when
    (ISO 8601, UTC)."""

    serial: int
    text: str
    at: str


def form_name(params: AskParams) -> str:
    """What the desk's surfaces call a form in a sentence about it: its title, else its first
    question's label. A sentence about a form that left is read with the next form on the
    screen, so it names the form it is about."""
    for name in (params.title, params.questions[0].label if params.questions else None):
        if name and name.strip():
            return name.strip()
    return "The form"


@attrs.frozen
class Ending:
    """Why a form left, and what to say of it when its desk knows more than ``ended`` (a team
    desk: who answered it, on which desk); ``said`` ``None``: the page's own sentence for
    ``ended``. ``name``: the form's :func:`form_name`, which the sentence names it by."""

    ended: Ended
    said: str | None = None
    name: str = "The form"


def put_aside_hint(ahead: int) -> str:
    """What the status line says once Esc ("later") put the form on display behind the
    ``ahead`` forms in the line: with none, the same form is back at once, which looked like
    a key ignored. Short enough for one row of a 40-column desk."""
    if ahead == 0:
        return "Nothing else is in line: it stays."
    return f"Deferred: {ahead} other form{'s go' if ahead > 1 else ' goes'} first."


@attrs.define(eq=False)
class Shown:
    key: str
    flow_id: str
    state: fs.FormState
    commands: trio.MemorySendChannel[FormInput]
    seq: int

    @property
    def display_id(self) -> str:
        return self.key + SEP + self.flow_id


@attrs.frozen
class AgentSnapshot:
    """One row of the agents pane."""

    key: str
    pending: int
    waiting: bool
    """A ``wait_for_answers`` call of this agent is in progress."""
    blocked: bool
    """The agent waits on a form now (foreground ask or active wait with a form pending)."""
    displayed: bool
    """This agent's form is the one on the display."""


@attrs.define(eq=False)
class _Agent:
    key: str
    order: int
    pending: int = 0
    waits: int = 0


@attrs.define(eq=False)
class Board:
    """The arbiter between the agents' runtimes and the one display."""

    display: Surface
    on_change: Callable[[], None] = lambda: None
    """Called after anything the desk shows changed (the terminal redraws)."""
    blocked_on: Callable[[Shown], bool] | None = None
    """While an agent waits, whether it waits on this form of its own (``None``: on every
    one). The desk asks the agent's tools which requests its foreground asks wait for."""
    waited_on: Callable[[Shown], bool] = lambda _shown: False
    """Whether a foreground call waits on ``shown`` though it is shown as a background form (a
    team desk's terminal, whose store knows each request's kind)."""
    waits_in_line: Callable[[str], bool] = lambda _key: False
    """Whether a foreground call of agent ``key`` waits on a form not shown on this board (a
    team desk's terminal shows one form of the store at a time; the rest wait in line)."""
    _shown: list[Shown] = attrs.field(factory=list)
    _agents: dict[str, _Agent] = attrs.field(factory=dict)
    _displayed: Shown | None = None
    _seq: itertools.count[int] = attrs.field(factory=itertools.count)
    _watchers: list[trio.Event] = attrs.field(factory=list)
    _notice: Notice | None = None
    _notices: itertools.count[int] = attrs.field(factory=itertools.count)
    _endings: dict[tuple[str, str], Ending] = attrs.field(factory=dict)

    # -- what the runtimes call (through their AgentSurface) -----------------------------------

    def show(
        self,
        key: str,
        flow_id: str,
        state: fs.FormState,
        commands: trio.MemorySendChannel[FormInput],
    ) -> None:
        self.add_agent(key)
        self._drop(key, flow_id)
        self._endings.pop((key, flow_id), None)
        self._shown.append(Shown(key, flow_id, state, commands, next(self._seq)))
        self._refresh()

    def update(self, key: str, flow_id: str, state: fs.FormState) -> None:
        shown = self._find(key, flow_id)
        if shown is None:
            return
        shown.state = state
        if shown is self._displayed:
            self.display.update(shown.display_id, state)
        self._changed()

    def hide(
        self, key: str, flow_id: str, ended: Ended | None = None, said: str | None = None
    ) -> None:
        """The form left (``ended``: why, remembered for the last :data:`ENDINGS_KEPT` forms
        so a page showing it can say what happened; ``said``: in these words, see
        :class:`Ending`)."""
        shown = self._drop(key, flow_id)
        if shown is not None:
            if ended is not None:
                name = form_name(shown.state.params)
                self._endings[(key, flow_id)] = Ending(ended, said, name)
                while len(self._endings) > ENDINGS_KEPT:
                    del self._endings[next(iter(self._endings))]
            self._refresh()

    # -- what the desk's tool handling reports ------------------------------------------------

    def add_agent(self, key: str) -> None:
        if key not in self._agents:
            self._agents[key] = _Agent(key, len(self._agents))
            self._changed()

    def set_pending(self, key: str, pending: int) -> None:
        self.add_agent(key)
        agent = self._agents[key]
        if agent.pending != pending:
            agent.pending = pending
            self._changed()

    def wait_started(self, key: str) -> None:
        self.add_agent(key)
        self._agents[key].waits += 1
        self._changed()

    def wait_ended(self, key: str) -> None:
        agent = self._agents.get(key)
        if agent is not None and agent.waits > 0:
            agent.waits -= 1
            self._changed()

    def touch(self) -> None:
        """Something the board reads through ``blocked_on`` may have changed: redraw."""
        self._changed()

    def note(self, text: str) -> None:
        """The desk's latest notice (the web page shows it; the terminal has its own line)."""
        at = datetime.now(UTC).isoformat(timespec="seconds")
        self._notice = Notice(next(self._notices), text, at)
        self._changed()

    # -- what the terminal reads ----------------------------------------------------------------

    @property
    def current(self) -> Shown | None:
        return self._displayed

    @property
    def notice(self) -> Notice | None:
        """The desk's latest notice, if it had one."""
        return self._notice

    @property
    def waiting_forms(self) -> int:
        """Forms shown by their runtimes but not on the display (their turn comes)."""
        return len(self._shown) - (1 if self._displayed is not None else 0)

    def is_blocked(self, shown: Shown) -> bool:
        agent = self._agents.get(shown.key)
        if not shown.state.background or self.waited_on(shown):
            return True
        if agent is None or agent.waits == 0:
            return False
        return self.blocked_on is None or self.blocked_on(shown)

    def agents(self) -> list[AgentSnapshot]:
        shown_by = {shown.key: shown for shown in self._shown}
        rows = []
        for agent in sorted(self._agents.values(), key=lambda a: a.order):
            shown = shown_by.get(agent.key)
            foreground = shown is not None and not shown.state.background
            rows.append(
                AgentSnapshot(
                    key=agent.key,
                    pending=agent.pending + (1 if foreground else 0),
                    waiting=agent.waits > 0,
                    blocked=(shown is not None and self.is_blocked(shown))
                    or self.waits_in_line(agent.key),
                    displayed=self._displayed is not None and self._displayed.key == agent.key,
                )
            )
        return rows

    def endings(self) -> list[tuple[str, str, Ending]]:
        """Why the forms that left lately left, ``(key, flow_id, ending)``, oldest first (a
        form shown again is not among them)."""
        return [(key, flow_id, ending) for (key, flow_id), ending in self._endings.items()]

    def ended(self, key: str, flow_id: str) -> Ending | None:
        """Why agent ``key``'s form ``flow_id`` left lately, if it did and is remembered."""
        return self._endings.get((key, flow_id))

    def shown_forms(self) -> list[Shown]:
        """Every shown form in display order (the first is on the display)."""
        return list(self._shown)

    async def wait_for(self, predicate: Callable[[Board], bool]) -> None:
        """Return once ``predicate(board)`` holds (checked after every change)."""
        while not predicate(self):
            event = trio.Event()
            self._watchers.append(event)
            await event.wait()

    # -- internals ------------------------------------------------------------------------------

    def _changed(self) -> None:
        self.on_change()
        watchers, self._watchers = self._watchers, []
        for event in watchers:
            event.set()

    def _find(self, key: str, flow_id: str) -> Shown | None:
        for shown in self._shown:
            if shown.key == key and shown.flow_id == flow_id:
                return shown
        return None

    def _drop(self, key: str, flow_id: str) -> Shown | None:
        """Take agent ``key``'s form ``flow_id`` off the board; the form taken, if shown."""
        shown = self._find(key, flow_id)
        if shown is not None:
            self._shown.remove(shown)
        return shown

    def _refresh(self) -> None:
        front = self._shown[0] if self._shown else None
        if front is not self._displayed:
            if self._displayed is not None:
                self.display.hide(self._displayed.display_id)
            self._displayed = front
            if front is not None:
                self.display.show(front.display_id, front.state, front.commands)
        self._changed()


@attrs.define(eq=False)
class AgentSurface:
    """The ``Surface`` one agent's runtime shows its forms on: a window onto the board."""

    board: Board
    key: str
    on_show_or_hide: Callable[[], None] = lambda: None
    """Called when the agent's shown form changes (its pending count is refreshed)."""

    def show(
        self, flow_id: str, state: fs.FormState, commands: trio.MemorySendChannel[FormInput]
    ) -> None:
        self.board.show(self.key, flow_id, state, commands)
        self.on_show_or_hide()

    def update(self, flow_id: str, state: fs.FormState) -> None:
        self.board.update(self.key, flow_id, state)

    def hide(self, flow_id: str, ended: Ended | None = None) -> None:
        self.board.hide(self.key, flow_id, ended)
        self.on_show_or_hide()
