"""The board against a model: whatever agents show and hide, in any order, the display holds
exactly the earliest-shown form still shown, and never two forms at once."""

from __future__ import annotations

import attrs
import trio
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from pi_agent_ask.actors.form import Ended
from pi_agent_ask.desk.board import SEP, Board
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.types import AskParams, Option, Question

KEYS = st.sampled_from(["alpha", "beta", "gamma"])
FLOWS = st.sampled_from(["f1", "f2", "f3"])
FORM = fs.new_form(
    AskParams(
        questions=(
            Question(id="q", label="Q", prompt="Q?", type="single", options=[Option("a", "A")]),
        )
    ),
    background=True,
)


@attrs.define
class RecordingDisplay:
    """A display that records what it holds; showing over a shown form is a bug."""

    holding: str | None = None
    shows: int = 0

    def show(self, flow_id: str, state: fs.FormState, commands: object) -> None:
        assert self.holding is None, f"{flow_id} shown over {self.holding}"
        self.holding = flow_id
        self.shows += 1

    def update(self, flow_id: str, state: fs.FormState) -> None:
        assert flow_id == self.holding

    def hide(self, flow_id: str, ended: Ended | None = None) -> None:
        assert flow_id == self.holding
        self.holding = None


class BoardModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.display = RecordingDisplay()
        self.board = Board(display=self.display)
        self.shown: list[tuple[str, str]] = []  # the model: show order
        self.commands, _ = trio.open_memory_channel(1)

    @rule(key=KEYS, flow=FLOWS)
    def show(self, key: str, flow: str) -> None:
        self.board.show(key, flow, FORM, self.commands)
        if (key, flow) in self.shown:
            self.shown.remove((key, flow))
        self.shown.append((key, flow))

    @rule(key=KEYS, flow=FLOWS)
    def hide(self, key: str, flow: str) -> None:
        self.board.hide(key, flow)
        if (key, flow) in self.shown:
            self.shown.remove((key, flow))

    @rule(key=KEYS, flow=FLOWS)
    def update(self, key: str, flow: str) -> None:
        self.board.update(key, flow, FORM)

    @invariant()
    def the_display_holds_the_earliest_shown(self) -> None:
        expected = self.shown[0] if self.shown else None
        current = self.board.current
        assert (None if current is None else (current.key, current.flow_id)) == expected
        assert self.display.holding == (None if expected is None else SEP.join(expected))
        assert [(s.key, s.flow_id) for s in self.board.shown_forms()] == self.shown


TestBoardModel = BoardModel.TestCase
