"""The form controller renders a frame again only when what it is rendered from changed.

Each test changes one input of the frame (the snapshot, the live editor buffer, the keymaps,
the footer setting, the width, the height) and checks the next frame shows it: a cache key
that left that input out would hand back the stale frame and fail here.
"""

from __future__ import annotations

import trio

from pi_agent_ask.actors.form import FormInput
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence.settings import Keymaps, MainKeymap
from pi_agent_ask.ui.form_view import FormController
from pi_agent_ask.ui.render import Frame, RenderOptions, render_form

QUESTIONS = {
    "title": "Build setup",
    "questions": [
        {
            "id": "goal",
            "label": "Goal",
            "prompt": "What should I optimize for?",
            "options": [
                {"value": "speed", "label": "Speed"},
                {"value": "size", "label": "Size"},
            ],
        },
        {
            "id": "tone",
            "label": "Tone",
            "prompt": "Which tones fit?",
            "options": [{"value": "formal", "label": "Formal"}],
        },
    ],
}


def _form() -> fs.FormState:
    validation = validate_ask_params(QUESTIONS)
    assert validation.params is not None, validation.issues
    return fs.new_form(validation.params)


def _reduce(state: fs.FormState, *commands: fs.Command) -> fs.FormState:
    for command in commands:
        state, _ = fs.reduce(state, command)
    return state


class _Live:
    """Settings the controller reads on every render, changed by the test."""

    def __init__(self) -> None:
        self.keymaps = Keymaps()
        self.hints = True


def _controller(state: fs.FormState) -> tuple[FormController, _Live]:
    live = _Live()
    controller = FormController(keymaps=lambda: live.keymaps, show_footer_hints=lambda: live.hints)
    send, _receive = trio.open_memory_channel[FormInput](16)
    controller.attach("flow", state, send)
    return controller, live


def _frame(controller: FormController, width: int = 80, height: int | None = 30) -> Frame:
    frame = controller.render(width, height)
    assert frame is not None
    return frame


def _pointer_row(frame: Frame) -> str:
    return next(row for row in frame.text().splitlines() if row.startswith("› "))


def test_the_same_snapshot_at_the_same_size_is_not_rendered_again() -> None:
    state = _form()
    controller, _live = _controller(state)
    first = _frame(controller)
    assert _frame(controller) is first
    assert first.text() == render_form(state, 80, RenderOptions(height=30)).text()


def test_a_new_snapshot_gives_a_new_frame() -> None:
    state = _form()
    controller, _live = _controller(state)
    assert "Speed" in _pointer_row(_frame(controller))
    controller.apply("flow", _reduce(state, fs.NextOption()))
    assert "Size" in _pointer_row(_frame(controller))


def test_text_typed_into_the_open_editor_shows_before_its_snapshot() -> None:
    state = _reduce(_form(), fs.OpenQuestionNote())
    controller, _live = _controller(state)
    assert "Add a note..." in _frame(controller).text()
    controller.buffer.insert_text("ship it")  # the live buffer, a key ahead of the snapshot
    frame = _frame(controller)
    assert "Question note: ship it" in frame.text()
    assert frame.cursor is not None
    cursor_before = frame.cursor
    controller.buffer.cursor_position = 0
    assert _frame(controller).cursor != cursor_before


def test_saved_keymaps_change_the_hints_at_once() -> None:
    controller, live = _controller(_form())
    assert "Up/Down move" in _frame(controller).text()
    live.keymaps = Keymaps(main=MainKeymap(previous_option=("k",), next_option=("j",)))
    assert "k/j move" in _frame(controller).text()


def test_turning_hints_off_removes_them() -> None:
    controller, live = _controller(_form())
    assert "move" in _frame(controller).text()
    live.hints = False
    assert "move" not in _frame(controller).text()


def test_a_new_width_or_height_gives_a_new_frame() -> None:
    controller, _live = _controller(_form())
    wide = _frame(controller, width=80)
    narrow = _frame(controller, width=40)
    assert narrow.width == 40 and wide.width == 80
    tall = _frame(controller, width=40, height=30)
    short = _frame(controller, width=40, height=12)
    # A short screen keeps the key hints to one row.
    assert short.footer_rows < tall.footer_rows


def test_a_hidden_form_leaves_no_frame_behind() -> None:
    controller, _live = _controller(_form())
    _frame(controller)
    controller.detach("flow")
    assert controller.render(80, 30) is None


def test_wrapped_rows_are_remembered_by_value_and_handed_out_as_fresh_lists() -> None:
    from pi_agent_ask.ui.render.frame import TEXT
    from pi_agent_ask.ui.render.lines import wrap_fragments

    fragments = [(TEXT, "alpha beta gamma delta")]
    rows = wrap_fragments(fragments, 12)
    assert [row[-1][1].strip() for row in rows] == ["alpha beta", "gamma delta"]
    rows[0] = ((TEXT, "changed by a caller"),)
    rows.append(())
    again = wrap_fragments(list(fragments), 12)
    assert [row[-1][1].strip() for row in again] == ["alpha beta", "gamma delta"]
    # The same text at another width or indent is its own entry.
    assert len(wrap_fragments(fragments, 30)) == 1
    assert wrap_fragments(fragments, 12, 2)[1][0] == (TEXT, "  ")


def test_every_tab_mark_is_one_cell_wide() -> None:
    # The tab bar measures tabs without their marks (so tabs out of view are never built).
    from pi_agent_ask.form.transcript import cell_width
    from pi_agent_ask.ui.render.header import TAB_MARK_CELLS

    assert {cell_width(mark) for mark in ("✓", "□", "–")} == {TAB_MARK_CELLS}
