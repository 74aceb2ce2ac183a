"""Pure rendering of form snapshots: texts, styles, layout by width, click targets."""

from __future__ import annotations

import unicodedata
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pi_agent_ask.form import state as fs
from pi_agent_ask.form.sanitize import sanitize_text
from pi_agent_ask.form.transcript import cell_width
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence.settings import EditorKeymap, GlobalKeymap, Keymaps, MainKeymap
from pi_agent_ask.ui.render import RenderOptions, footer_hints, line_text, render_form
from pi_agent_ask.ui.render import frame as r

CONTEXT = "Benchmarks from last week.\nCold build: 41s, warm build: 9s."


def params(**overrides: Any) -> Any:
    arguments: dict[str, Any] = {
        "title": "Build setup",
        "questions": [
            {
                "id": "goal",
                "label": "Goal",
                "prompt": "What should I optimize for?",
                "context": CONTEXT,
                "options": [
                    {
                        "value": "speed",
                        "label": "Speed",
                        "description": "Fastest builds",
                        "recommended": True,
                    },
                    {"value": "size", "label": "Size", "description": "Smallest output"},
                    {"value": "balanced", "label": "Balanced", "recommended": True},
                ],
            },
            {
                "id": "tone",
                "label": "Tone",
                "prompt": "Which tones fit?",
                "type": "multi",
                "options": [
                    {"value": "formal", "label": "Formal"},
                    {"value": "casual", "label": "Casual"},
                ],
            },
        ],
    }
    arguments.update(overrides)
    arguments = {key: value for key, value in arguments.items() if value is not None}
    validation = validate_ask_params(arguments)
    assert validation.ok, validation.issues
    return validation.params


def form(**overrides: Any) -> fs.FormState:
    return fs.new_form(params(**overrides))


def run(state: fs.FormState, *commands: fs.Command) -> fs.FormState:
    for command in commands:
        state, _ = fs.reduce(state, command)
    return state


def rows(frame: r.Frame) -> list[str]:
    return [line_text(line) for line in frame.lines]


def row_index(frame: r.Frame, needle: str) -> int:
    for index, text in enumerate(rows(frame)):
        if needle in text:
            return index
    raise AssertionError(f"{needle!r} not in frame:\n{frame.text()}")


# --------------------------------------------------------------------------------------------
# Options, recommended, custom row
# --------------------------------------------------------------------------------------------


def test_recommended_is_warning_styled_and_followed_by_muted_description() -> None:
    frame = render_form(form(), 80)
    speed = frame.lines[row_index(frame, "Speed")]
    texts = [text for _, text in speed]
    at = texts.index("(recommended)")
    assert speed[at][0] == r.WARNING
    assert speed[at + 1] == (r.MUTED, " | Fastest builds")


def test_recommended_without_description_shows_only_the_marker() -> None:
    frame = render_form(form(), 80)
    balanced = frame.lines[row_index(frame, "Balanced")]
    assert balanced[-1] == (r.WARNING, "(recommended)")
    assert " | " not in line_text(balanced)


def test_recommended_options_are_not_preselected() -> None:
    frame = render_form(form(), 80)
    assert "› 1. ( ) Speed" in rows(frame)[row_index(frame, "Speed")]
    assert "  3. ( ) Balanced" in rows(frame)[row_index(frame, "Balanced")]
    assert "(•)" not in frame.text()


def test_plain_description_goes_under_the_label_muted() -> None:
    frame = render_form(form(), 80)
    at = row_index(frame, "Size")
    assert rows(frame)[at + 1].strip() == "Smallest output"
    assert frame.lines[at + 1][-1] == (r.MUTED, "Smallest output")


def test_custom_row_and_its_editor_placeholder() -> None:
    state = form()
    frame = render_form(state, 80)
    assert "  4. ( ) Type your own" in frame.text()
    state = run(state, fs.Number(4))  # opens the custom editor
    frame = render_form(state, 80)
    at = row_index(frame, "Type your own")
    assert rows(frame)[at + 1].strip() == "> Type answer..."
    assert (r.PLACEHOLDER, "Type answer...") in frame.lines[at + 1]
    # The cursor sits where typing starts, and the frame keeps it in view.
    assert frame.cursor == (at + 1, rows(frame)[at + 1].index(">") + 2)
    assert frame.focus_row == at + 1


def test_live_editor_text_and_cursor_come_from_the_render_options() -> None:
    state = run(form(), fs.Number(4), fs.EditorChanged("abc"))
    frame = render_form(state, 80, RenderOptions(editor_text="abcdef", editor_cursor=2))
    at = row_index(frame, "> abcdef")
    assert frame.cursor == (at, rows(frame)[at].index("abcdef") + 2)


def test_option_and_question_note_editors_show_add_a_note() -> None:
    state = run(form(), fs.OpenOptionNote())
    frame = render_form(state, 80)
    at = row_index(frame, "Speed")
    assert rows(frame)[at + 1].strip() == "Note: Add a note..."
    state = run(state, fs.EditorClose(), fs.OpenQuestionNote())
    frame = render_form(state, 80)
    assert "Question note: Add a note..." in frame.text()


def test_saved_notes_and_custom_text_stay_under_their_rows() -> None:
    state = run(
        form(),
        fs.NextOption(),
        fs.OpenOptionNote(),
        fs.EditorChanged("too big for us"),
        fs.EditorClose(),
        fs.SelectTab(1),
        fs.Number(3),
        fs.EditorChanged("Playful"),
        fs.EditorSubmit(),
        fs.Toggle(),  # deselect the saved custom answer: its text stays visible
        fs.SelectTab(0),
    )
    frame = render_form(state, 80)
    size = row_index(frame, "2. ( ) Size")
    assert rows(frame)[size].startswith("› ")  # highlighted; its description, then its note
    assert rows(frame)[size + 2].strip() == "Note: too big for us"
    state = run(state, fs.PreviousOption())  # move the highlight away from Size
    frame = render_form(state, 80)
    size = row_index(frame, "2. ( ) Size")
    assert rows(frame)[size].startswith("  ")
    assert rows(frame)[size + 2].strip() == "Note: too big for us"
    frame = render_form(run(state, fs.SelectTab(1), fs.PreviousOption()), 80)
    custom = row_index(frame, "Type your own")
    assert "[ ] Type your own" in rows(frame)[custom]
    assert rows(frame)[custom + 1].strip() == "Playful"


def test_selected_marks_are_radio_for_single_and_checkbox_for_multi() -> None:
    state = run(form(), fs.Number(2))  # single: selects Size and advances to Tone
    frame = render_form(run(state, fs.Number(1), fs.Number(2)), 80)
    assert "[x] Formal" in frame.text()
    assert "[x] Casual" in frame.text()
    frame = render_form(run(state, fs.SelectTab(0)), 80)
    assert "(•) Size" in frame.text()
    assert "( ) Speed" in frame.text()


# --------------------------------------------------------------------------------------------
# Context beside or below
# --------------------------------------------------------------------------------------------


def test_context_beside_the_options_on_wide_screens() -> None:
    frame = render_form(form(), 120)
    first = rows(frame)[row_index(frame, "1. ( ) Speed")]
    assert "│ Benchmarks from last week." in first
    assert "│ Cold build: 41s, warm build: 9s." in rows(frame)[row_index(frame, "2. ( ) Size")]
    # Every option target stops at the option column: context text is not clickable.
    column = first.index("│")
    options = [t for t in frame.targets if t.kind == "option"]
    assert options and all(t.end_col <= column for t in options)
    row = row_index(frame, "1. ( ) Speed")
    assert frame.target_at(row, column + 5) is None
    assert frame.target_at(row, 3) is not None


def test_context_below_the_options_on_narrow_screens() -> None:
    frame = render_form(form(), 70)
    assert "│" not in frame.text()
    assert row_index(frame, "Benchmarks from last week.") > row_index(frame, "Type your own")


def test_context_below_is_hidden_while_the_custom_row_is_highlighted() -> None:
    state = run(form(), fs.NextOption(), fs.NextOption(), fs.NextOption())
    assert state.cursors[0] == 3
    assert "Benchmarks" not in render_form(state, 70).text()
    # Beside the options there is room: it stays.
    assert "Benchmarks" in render_form(state, 120).text()
    assert "Benchmarks" in render_form(run(state, fs.EditorClose(), fs.PreviousOption()), 70).text()


# --------------------------------------------------------------------------------------------
# Tabs
# --------------------------------------------------------------------------------------------


def test_tab_bar_marks_answered_and_skipped_and_highlights_the_current_tab() -> None:
    state = run(form(), fs.Number(1), fs.Skip())
    assert state.on_review
    frame = render_form(state, 80)
    bar = frame.lines[1]
    assert line_text(bar) == " ✓ Goal   – Tone   → Review "
    active = [text for style, text in bar if style == r.TAB_ACTIVE]
    assert "".join(active) == " → Review "
    tabs = [t for t in frame.targets if t.kind == "tab"]
    assert [t.command for t in tabs] == [fs.SelectTab(0), fs.SelectTab(1), fs.SelectTab(2)]
    for target in tabs:
        assert line_text(bar)[target.start_col : target.end_col].strip()


def test_many_tabs_show_a_window_around_the_current_one() -> None:
    questions = [
        {"id": f"q{i}", "label": f"Question {i}", "prompt": "?", "options": [{"value": "a"}]}
        for i in range(30)
    ]
    state = run(fs.new_form(params(questions=questions, title=None)), *[fs.NextTab()] * 12)
    frame = render_form(state, 80)
    # The tabs fill their row, so the progress has one of its own above them.
    assert line_text(frame.lines[0]) == "0/30 answered · U next unanswered"
    bar = line_text(frame.lines[1])
    assert "Question 12" in bar
    assert bar.startswith("‹ +")
    assert bar.endswith(" ›")
    assert cell_width(bar) <= 80
    selected = [t.command for t in frame.targets if t.kind == "tab"]
    assert fs.SelectTab(12) in selected
    assert fs.SelectTab(0) not in selected


# --------------------------------------------------------------------------------------------
# Review
# --------------------------------------------------------------------------------------------


def review_state() -> fs.FormState:
    questions = [
        *params().to_json()["questions"],
        {"id": "scope", "label": "Scope", "prompt": "Which scope?", "options": [{"value": "x"}]},
        {"id": "later", "label": "Later", "prompt": "Anything else?", "options": [{"value": "y"}]},
    ]
    state = fs.new_form(params(questions=questions))
    return run(
        state,
        fs.NextOption(),
        fs.OpenOptionNote(),
        fs.EditorChanged("too big"),
        fs.EditorClose(),
        fs.OpenQuestionNote(),
        fs.EditorChanged("ask ops"),
        fs.EditorClose(),
        fs.Number(1),  # Speed; advances to Tone
        fs.Number(1),
        fs.Number(3),
        fs.EditorChanged("Dry"),
        fs.EditorSubmit(),
        fs.NextTab(),  # Scope
        fs.Skip(),  # skip Scope -> Later
        fs.NextTab(),  # Review; Later unanswered
    )


def test_review_lists_every_question_answer_and_note() -> None:
    frame = render_form(review_state(), 80)
    text = rows(frame)
    assert "Review your answers" in text
    goal = row_index(frame, "✓ Goal: What should I optimize for?")
    assert text[goal + 1] == "  → Speed"
    assert text[goal + 2] == "  note: ask ops"
    assert text[goal + 3] == "  Size (not selected) note: too big"
    tone = row_index(frame, "✓ Tone: Which tones fit?")
    assert text[tone + 1 : tone + 3] == ["  → Formal", "  → (wrote) Dry"]
    scope = row_index(frame, "– Scope: Which scope?")
    assert text[scope + 1] == "  → (skipped)"
    later = row_index(frame, "? Later: Anything else?")
    assert text[later + 1] == "  → (no answer)"
    assert text[row_index(frame, "1. Submit")] == "› 1. Submit"
    assert text[row_index(frame, "2. Cancel")] == "  2. Cancel"


def test_review_double_press_hint_and_action_targets() -> None:
    state = run(review_state(), fs.Number(2))
    frame = render_form(state, 80)
    assert "Press 2 again (or click Cancel again) to cancel the questions." in frame.text()
    actions = [t for t in frame.targets if t.kind == "review"]
    assert [t.command for t in actions] == [fs.ReviewAction("submit"), fs.ReviewAction("cancel")]
    cancel = actions[1]
    assert rows(frame)[cancel.first_row][cancel.start_col : cancel.end_col] == "2. Cancel"
    # The review text beside/around the actions is no target.
    assert frame.target_at(row_index(frame, "→ Speed"), 4) is None
    assert frame.focus_row == cancel.first_row


def test_dirty_dismiss_warning_names_the_key_again() -> None:
    state = run(form(), fs.Number(1), fs.Cancel())
    frame = render_form(state, 80)
    assert "Unsaved answers will be lost. Press Esc again to cancel the questions." in frame.text()
    state = run(form(), fs.Number(1), fs.Dismiss())
    keymaps = Keymaps(global_=GlobalKeymap(dismiss=("ctrl+q",)))
    frame = render_form(state, 80, RenderOptions(keymaps=keymaps))
    assert "Press Ctrl+Q again to dismiss the questions." in frame.text()


def test_type_change_confirmation_is_shown() -> None:
    state = run(form(), fs.SelectTab(1), fs.Number(1), fs.Number(2), fs.ChangeQuestionType())
    assert state.pending_type_change == 1
    assert "Press t again to switch to single-select" in render_form(state, 80).text()


# --------------------------------------------------------------------------------------------
# Footer hints
# --------------------------------------------------------------------------------------------


def footer(frame: r.Frame) -> str:
    return " ".join(rows(frame)[len(frame.lines) - frame.footer_rows :])


def test_footer_hints_come_from_the_live_keymaps() -> None:
    keymaps = Keymaps(
        main=MainKeymap(confirm=("ctrl+k",), option_note=("o",)),
        editor=EditorKeymap(submit=("ctrl+s",)),
    )
    state = form()
    hints = footer(render_form(state, 200, RenderOptions(keymaps=keymaps)))
    assert "Ctrl+K select" in hints
    assert "o option note" in hints
    assert "Enter" not in hints
    assert "D skip" in hints
    editing = render_form(run(state, fs.Number(4)), 200, RenderOptions(keymaps=keymaps))
    assert "Ctrl+S submit" in footer(editing)


def test_the_digit_hint_goes_as_far_as_the_question_s_rows() -> None:
    """``1-4 select`` for three options and ``Type your own``; two digits from 10 on; the
    Review tab names its own digits, an open editor none."""
    state = form()
    assert ("1-4", "select") in hints_of(state)
    assert footer(render_form(state, 30, RenderOptions(height=12))).startswith("1-4 select")
    assert ("1-3", "toggle") in hints_of(run(state, fs.NextTab()))
    one = form(
        questions=[{"id": "go", "prompt": "Ship?", "options": [{"value": "y", "label": "Y"}]}]
    )
    assert ("1-2", "select") in hints_of(one)
    many = [{"value": f"v{n}", "label": f"Option {n}"} for n in range(12)]
    twelve = form(questions=[{"id": "pick", "prompt": "Which?", "options": many}])
    assert ("1-13", "select") in hints_of(twelve)
    review = hints_of(run(state, fs.SelectTab(2)))
    assert ("1", "submit") in review and not any(k.startswith("1-") for k, _ in review)
    editing = hints_of(run(state, fs.Number(4)))
    assert not any(k.startswith("1") for k, _ in editing)
    for shown in (state, one, twelve):
        assert "1-9" not in render_form(shown, 200).text()


def test_a_held_digit_takes_the_hint_rows_without_moving_anything() -> None:
    """A first digit waiting for a second says what each next key does with it, in the rows
    the hints take anyway: at 40x12 on the one hint row, at 80 columns over the three."""
    many = [{"value": f"v{n}", "label": f"Option {n}"} for n in range(11)]
    twelve = form(questions=[{"id": "pick", "prompt": "Which?", "options": many}])
    for width, height in ((40, 12), (80, 24)):
        plain = render_form(twelve, width, RenderOptions(height=height))
        held = render_form(twelve, width, RenderOptions(height=height, held_digit=1))
        assert len(held.lines) == len(plain.lines)
        assert held.footer_rows == plain.footer_rows
        assert footer(held).strip().startswith("1 typed · 0-2 rows 10-12 · Enter row 1")
    assert "Esc clear" in footer(held)
    ten = form(questions=[{"id": "pick", "prompt": "Which?", "options": many[:9]}])
    assert "1 typed · 0 row 10 ·" in footer(render_form(ten, 80, RenderOptions(held_digit=1)))


def hints_of(state: fs.FormState) -> list[tuple[str, str]]:
    return footer_hints(state, Keymaps())


def test_footer_hints_can_be_turned_off() -> None:
    frame = render_form(form(), 80, RenderOptions(show_footer_hints=False))
    assert frame.footer_rows == 0
    assert "Ctrl+C dismiss" not in frame.text()
    assert "Ctrl+C dismiss" in render_form(form(), 200).text()


# --------------------------------------------------------------------------------------------
# Wrapping and sanitising
# --------------------------------------------------------------------------------------------


LONG = "A rather long sentence that keeps going so that it must wrap on every reasonable width. "


@pytest.mark.parametrize("width", [20, 33, 60, 99, 100, 140])
def test_every_row_fits_the_width(width: int) -> None:
    arguments = params().to_json()
    arguments["title"] = LONG * 2
    arguments["questions"][0]["prompt"] = LONG * 3
    arguments["questions"][0]["options"][1]["description"] = LONG * 2
    arguments["questions"][0]["context"] = LONG * 4
    state = fs.new_form(params(**arguments))
    for current in (state, run(state, fs.Number(4), fs.EditorChanged(LONG * 2))):
        frame = render_form(current, width)
        assert all(cell_width(line_text(line)) <= width for line in frame.lines), frame.text()
        # Every fragment carries a style class the surface's style sheet knows.
        assert all(style.startswith("class:ask.") for line in frame.lines for style, _ in line)
        assert "wrap on every reasonable width." in " ".join(rows(frame))


@given(
    text=st.text(st.characters(codec="utf-8"), max_size=60),
    width=st.integers(min_value=10, max_value=130),
)
def test_agent_text_never_reaches_a_fragment_raw(text: str, width: int) -> None:
    arguments = params().to_json()
    arguments["title"] = "T" + text
    arguments["questions"][0]["prompt"] = "P" + text
    arguments["questions"][0]["context"] = "C" + text
    arguments["questions"][0]["options"][0]["label"] = "L" + text
    arguments["questions"][0]["options"][0]["description"] = "D" + text
    validation = validate_ask_params(arguments)
    if not validation.ok:
        return
    assert validation.params is not None
    state = fs.new_form(validation.params)
    for current in (state, run(state, fs.NextTab(), fs.NextTab())):
        for line in render_form(current, width).lines:
            for _, fragment in line:
                # Already neutralised (sanitising again changes nothing), and one row each.
                assert sanitize_text(fragment) == fragment, repr(fragment)
                assert "\n" not in fragment
                assert not any(unicodedata.category(char) == "Cc" for char in fragment)


def test_a_background_form_says_esc_defers_all() -> None:
    foreground = footer(render_form(form(), 200))
    assert "Esc cancel" in foreground
    background = attrs.evolve(form(), background=True)
    hints = footer(render_form(background, 200))
    assert "Esc defer all" in hints and "Esc cancel" not in hints
