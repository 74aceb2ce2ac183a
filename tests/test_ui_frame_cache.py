"""The form controller renders a frame again only when what it is rendered from changed.

Each test changes one input of the frame (the snapshot, the live editor buffer, the keymaps,
the footer setting, the width, the height) and checks the next frame shows it: a cache key
that left that input out would hand back the stale frame and fail here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from prompt_toolkit.layout import Dimension

from pi_agent_ask.actors.form import FormInput
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence.settings import Config, Keymaps, MainKeymap
from pi_agent_ask.persistence.settings_list import MoveFocus, open_settings_list
from pi_agent_ask.ui import form_view, settings_overlay
from pi_agent_ask.ui.form_view import FormControl, FormController
from pi_agent_ask.ui.form_window import FormWindow
from pi_agent_ask.ui.render import Frame, RenderOptions, render_form
from pi_agent_ask.ui.settings_overlay import SettingsOverlay, render_settings

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


def _many_questions() -> fs.FormState:
    questions = [
        {
            "id": f"q{n}",
            "prompt": f"Question {n}: " + "a longer prompt that wraps " * 4,
            "options": [{"value": f"v{m}", "label": f"Option {m}"} for m in range(8)],
        }
        for n in range(3)
    ]
    validation = validate_ask_params({"questions": questions})
    assert validation.params is not None, validation.issues
    return fs.new_form(validation.params)


@pytest.mark.parametrize(
    ("form", "screen_rows"),
    [(_form, 40), (_form, 12), (_many_questions, 40), (_many_questions, 20)],
    ids=["small-form-tall-screen", "small-form-short-screen", "long-form", "long-form-20-rows"],
)
def test_a_redraw_renders_the_form_once(
    form: Callable[[], fs.FormState], screen_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A redraw asks the control for its height (at the rows the screen has), then for its
    content (in the rows the layout gave it): the frame is rendered once for both (the first
    redraw may render it twice: it learns whether the form is drawn short)."""
    rendered: list[int | None] = []

    def counting(state: fs.FormState, width: int, options: RenderOptions) -> Frame:
        rendered.append(options.height)
        return render_form(state, width, options)

    monkeypatch.setattr(form_view, "render_form", counting)
    controller, _live = _controller(form())
    control = FormControl(controller)
    for keys in range(3):  # each key a new snapshot: each redraw renders it once
        if keys:
            assert controller.state is not None
            controller.apply("flow", _reduce(controller.state, fs.NextOption()))
        rendered.clear()
        rows = control.preferred_height(60, screen_rows, False, None)
        assert rows is not None and 0 < rows <= screen_rows
        content = control.create_content(60, rows)
        assert content.line_count == rows
        assert len(rendered) == 1 if keys else len(rendered) <= 2, rendered


def test_a_form_in_a_capped_panel_is_measured_for_the_panel_s_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A panel of at most 12 rows on a 40-row screen: the form is measured and drawn short,
    once per redraw (measured for the 40 rows around it, it was drawn tall, then rendered
    again short for the 12 rows the panel keeps)."""
    rendered: list[int | None] = []

    def counting(state: fs.FormState, width: int, options: RenderOptions) -> Frame:
        rendered.append(options.height)
        return render_form(state, width, options)

    monkeypatch.setattr(form_view, "render_form", counting)
    controller, _live = _controller(_many_questions())
    control = FormControl(controller)
    window = FormWindow(content=control, height=Dimension(max=12))
    for keys in range(3):
        if keys:
            assert controller.state is not None
            controller.apply("flow", _reduce(controller.state, fs.NextOption()))
        rendered.clear()
        rows = window.preferred_height(60, 40).preferred
        assert rows == 12
        control.create_content(60, rows)
        assert rendered == [12], rendered


@pytest.mark.parametrize("form", [_form, _many_questions])
@pytest.mark.parametrize("width", [30, 60, 120])
def test_a_short_frame_knows_the_rows_of_the_tall_one(
    form: Callable[[], fs.FormState], width: int
) -> None:
    states = [form()]
    states.append(_reduce(states[0], fs.SelectTab(states[0].review_tab)))  # the review
    states.append(_reduce(states[0], fs.OpenQuestionNote()))  # an open editor
    for state in states:
        tall = render_form(state, width, RenderOptions(height=40))
        short = render_form(state, width, RenderOptions(height=12))
        assert len(short.lines) < len(tall.lines)
        assert short.tall_rows == tall.tall_rows == len(tall.lines)


def test_a_redraw_renders_the_settings_overlay_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The overlay box asks for its rows for its height, then for its content: one render of
    an unchanged view at one width; a change (a key moving the selection) renders again."""
    rendered: list[int] = []

    def counting(view: Any, width: int) -> Any:
        rendered.append(width)
        return render_settings(view, width)

    monkeypatch.setattr(settings_overlay, "render_settings", counting)
    overlay = SettingsOverlay(
        state=open_settings_list(Config(), tmp_path / "pi-agent-ask.json"),
        save=lambda _effect: None,
        saved=lambda _config: None,
        close=lambda: None,
    )
    control = settings_overlay._SettingsControl(lambda: overlay, 36)
    rows = control.preferred_height(36, 20, False, None)
    assert rows is not None and control.create_content(36, rows).line_count == rows
    assert rendered == [36]
    overlay.press(MoveFocus(1))
    control.preferred_height(36, 20, False, None)
    content = control.create_content(36, rows)
    assert rendered == [36, 36]
    assert content.cursor_position is not None and content.cursor_position.y > 0
