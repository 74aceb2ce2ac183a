"""The open editor wraps at words: every row fits, no word is split unless it is longer than a
row, and the text and the cursor's place survive the wrapping."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from pi_agent_ask.form.transcript import cell_width
from pi_agent_ask.ui.render.editor import _editor_rows, _word_rows

texts = st.text(alphabet=st.sampled_from("ab cdé\n漢x  "), max_size=60)


@given(texts, st.integers(min_value=2, max_value=20))
def test_rows_cover_the_text_and_fit(text: str, room: int) -> None:
    rows = _word_rows(text, room)
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
    rows = _word_rows(text, room)
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
