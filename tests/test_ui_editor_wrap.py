"""The open editor wraps at words: every row fits, no word is split unless it is longer than a
row, and the text and the cursor's place survive the wrapping."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from pi_agent_ask.form.transcript import cell_width
from pi_agent_ask.ui.render.editor import _editor_rows, editor_cells, word_rows
from pi_agent_ask.ui.rows import row_move

texts = st.text(alphabet=st.sampled_from("ab cdé\n漢x  "), max_size=60)


@given(texts, st.integers(min_value=2, max_value=20))
def test_rows_cover_the_text_and_fit(text: str, room: int) -> None:
    rows = word_rows(text, room)
    # Consecutive rows meet, or are apart by exactly the newline that ended the first.
    assert rows[0][0] == 0 and rows[-1][1] == len(text)
    for (_, end), (start, _) in itertools.pairwise(rows):
        assert start == end or (start == end + 1 and text[end] in "\n ")
    for start, end in rows:
        shown = text[start:end]
        assert "\n" not in shown
        assert cell_width(shown) <= room or end - start == 1


@given(texts, st.integers(min_value=2, max_value=20))
def test_a_word_that_fits_a_row_is_never_split(text: str, room: int) -> None:
    rows = word_rows(text, room)
    for (_, end), (start, _) in itertools.pairwise(rows):
        if start == end and text[end - 1] not in " \n" and text[end] not in " \n":
            # Split inside a word: only when the word is wider than a row.
            word_start, word_end = end, end
            while word_start > 0 and text[word_start - 1] not in " \n":
                word_start -= 1
            while word_end < len(text) and text[word_end] not in " \n":
                word_end += 1
            assert cell_width(text[word_start:word_end]) > room


def test_the_editor_wraps_between_words_and_keeps_the_cursor() -> None:
    text = "the deployment pipeline configuration needs"
    rows, cursor = _editor_rows(text, len(text), 2, 24, "Type answer...")
    shown = ["".join(part for _, part in row).strip() for row in rows]
    assert shown == ["the deployment", "pipeline", "configuration needs"]
    assert cursor == (2, 2 + len("configuration needs"))
    # A cursor where a row was wrapped sits at the start of the next row.
    rows, cursor = _editor_rows(text, len("the deployment "), 2, 24, "Type answer...")
    assert cursor == (1, 2)


def test_a_space_that_does_not_fit_is_the_break_not_an_indent() -> None:
    """At 30 columns "custom answer that" fills a row but for its space: the next row starts
    with "must", in line with the rows above (the space indented it by one cell), and a
    cursor on either side of that space has a cell of its own."""
    text = "a fairly long custom answer that must wrap around"
    rows, cursor = _editor_rows(text, len(text), 9, 30, "Type answer...", [("", "> ")])
    shown = ["".join(part for _, part in row).rstrip() for row in rows]
    assert shown == [
        "         > a fairly long",
        "           custom answer that",
        "           must wrap around",
    ]
    assert cursor == (2, 11 + len("must wrap around"))
    before = text.index(" must")
    assert _editor_rows(text, before, 9, 30, "", [("", "> ")])[1] == (1, 29)
    assert _editor_rows(text, before + 1, 9, 30, "", [("", "> ")])[1] == (2, 11)


def test_up_and_down_cross_line_breaks_as_rows_and_stop_at_the_ends() -> None:
    """Lines are rows too: a move keeps the column (``column`` given: a run's), takes a
    shorter row's end, and there is no row above the first or below the last."""
    text = "abc\nde\nfghij"

    def move(cursor: int, step: int, column: int | None = None) -> tuple[int, int] | None:
        return row_move(text, word_rows(text, 20), cursor, step, column, editor_cells)

    assert move(2, 1) == (6, 2)  # "ab|c" down: "de|", its end
    assert move(6, 1, 2) == (9, 2)  # on with the run's column: "fg|hij"
    assert move(12, -1) == (6, 5)  # from "fghij|": "de|"
    assert move(1, -1) is None
    assert move(10, 1) is None


def test_the_frame_says_how_the_open_editor_wraps_in_either_layout() -> None:
    """The rows Up and Down move between are the ones drawn: the full width under the
    options, the option column when the context is beside them (at 120 columns)."""
    from pi_agent_ask.form import state as fs
    from pi_agent_ask.form.validate import validate_ask_params
    from pi_agent_ask.ui.render import RenderOptions, render_form

    question = {
        "id": "q",
        "prompt": "Which?",
        "options": [{"value": "a", "label": "A"}],
    }
    rooms = []
    for context in (None, "Some context beside the options."):
        given = {**question, "context": context} if context else question
        validation = validate_ask_params({"questions": [given]})
        assert validation.params is not None
        state, _ = fs.reduce(fs.new_form(validation.params), fs.Number(2))
        assert state.editor is not None
        frame = render_form(state, 120, RenderOptions(editor_text="x" * 200, editor_cursor=0))
        assert frame.editor_room is not None
        drawn = [row for row in frame.text().splitlines() if "xxxx" in row]
        assert len(drawn) == len(word_rows("x" * 200, frame.editor_room))
        rooms.append(frame.editor_room)
    assert rooms[1] < 60 < rooms[0]
