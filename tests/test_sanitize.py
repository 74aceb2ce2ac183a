"""Agent text never changes the terminal: pi_agent_ask.form.sanitize."""

from __future__ import annotations

import sys
import unicodedata

import pyte
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pi_agent_ask.form.sanitize import MARKER, sanitize_line, sanitize_text

M = MARKER
assert M == "\ufffd"

# Independent statement of what may never come out, from the Unicode database rather than the
# module's tables: controls other than LF, format characters other than ZWNJ/ZWJ, surrogates,
# line/paragraph separators, and the Hangul fillers.
KEPT_FORMAT = {"\u200c", "\u200d"}
HANGUL_FILLERS = {"\u115f", "\u1160", "\u3164", "\uffa0"}


def forbidden(ch: str) -> bool:
    category = unicodedata.category(ch)
    if ch == "\n":
        return False
    if category in ("Cc", "Cs", "Zl", "Zp"):
        return True
    if category == "Cf":
        return ch not in KEPT_FORMAT
    return ch in HANGUL_FILLERS


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        # clear screen
        ("before\x1b[2Jafter", f"before{M}after"),
        # window title via OSC, BEL- and ST-terminated; the payload is gone
        ("\x1b]0;pwned\x07Scope", f"{M}Scope"),
        ("\x1b]0;pwned\x1b\\Scope", f"{M}Scope"),
        ("\x1b]2;pwned\x9cScope", f"{M}Scope"),
        # SGR colour
        ("\x1b[31mred\x1b[0m", f"{M}red{M}"),
        ("\x1b[38;2;255;0;0mred", f"{M}red"),
        # 8-bit CSI and OSC (C1 code points, which UTF-8 terminals may obey)
        ("a\x9b2Jb", f"a{M}b"),
        ("a\x9b?1049hb", f"a{M}b"),
        ("a\x9d0;pwned\x07b", f"a{M}b"),
        # DCS (sixel, DECRQSS), 8-bit DCS, APC, PM, SOS
        ("a\x1bPq#0;2;0;0;0#0~~\x1b\\b", f"a{M}b"),
        ("a\x90$qm\x9cb", f"a{M}b"),
        ("a\x1b_Gf=100;AAAA\x1b\\b", f"a{M}b"),
        ("a\x1b^privacy\x1b\\b", f"a{M}b"),
        ("a\x1bXstring\x1b\\b", f"a{M}b"),
        # two-character and nF escapes: full reset, DEC graphics charset, screen alignment test
        ("a\x1bcb", f"a{M}b"),
        ("a\x1b(0b", f"a{M}b"),
        ("a\x1b#8b", f"a{M}b"),
        ("a\x1b7b\x1b8", f"a{M}b{M}"),
        # a lone ESC, at the end or before text it cannot start a sequence with
        ("end\x1b", f"end{M}"),
        ("a\x1b\x01b", f"a{M}b"),
        # bidi overrides and isolates, direction marks
        ("file\u202egnp.exe", f"file{M}gnp.exe"),
        ("\u202aa\u202b\u202cb\u202d\u202e", f"{M}a{M}b{M}"),
        ("x\u2066y\u2067z\u2068w\u2069", f"x{M}y{M}z{M}w{M}"),
        ("a\u200eb\u200fc\u061cd", f"a{M}b{M}c{M}d"),
        # NUL, BEL, backspace, vertical tab, form feed, DEL, a C1 control
        ("a\x00b", f"a{M}b"),
        ("ding\x07", f"ding{M}"),
        ("yes\x08\x08\x08no", f"yes{M}no"),
        ("a\x0bb\x0cc\x7fd\x85e", f"a{M}b{M}c{M}d{M}e"),
        # carriage return overwriting the line; CRLF is a line break
        ("approve? no\rapprove? yes", f"approve? no{M}approve? yes"),
        ("one\r\ntwo", "one\ntwo"),
        # invisible text: zero-width space, word joiner, BOM, soft hyphen, tag characters
        ("ad\u200bmin", f"ad{M}min"),
        ("\ufeffheader", f"{M}header"),
        ("a\u2060b\u00adc", f"a{M}b{M}c"),
        ("ok\U000e0069\U000e0067\U000e006e\U000e006f\U000e0072\U000e0065", f"ok{M}"),
        ("\u3164\u3164", M),
        # lone surrogates cannot be printed at all
        ("a\ud83db", f"a{M}b"),
        # a run of sequences is one marker
        ("\x1b[1m\x1b[31m\x1b]0;t\x07\x00bold", f"{M}bold"),
    ],
)
def test_dangerous_text_is_neutralised(raw: str, shown: str) -> None:
    assert sanitize_text(raw) == shown


def test_unterminated_control_string_ends_at_the_line() -> None:
    assert sanitize_text("\x1b]0;title without end\nnext line") == f"{M}\nnext line"
    assert sanitize_text("\x1bPpayload") == M


def test_escape_inside_a_control_string_starts_the_next_sequence() -> None:
    # As in a terminal: ESC aborts the OSC and begins a CSI; the text after it is shown.
    assert sanitize_text("\x1b]0;x\x1b[31mred") == f"{M}red"


def test_newlines_kept_or_turned_into_spaces() -> None:
    assert sanitize_text("one\ntwo") == "one\ntwo"
    assert sanitize_text("one\u2028two\u2029three") == "one\ntwo\nthree"
    assert sanitize_text("one\r\ntwo\nthree", keep_newlines=False) == "one two three"
    assert sanitize_line("one\ntwo\u2028three") == "one two three"
    assert sanitize_line("\x1b]0;t\nx") == f"{M} x"


def test_tabs_expand_to_tab_stops() -> None:
    assert sanitize_text("a\tb") == "a   b"
    assert sanitize_text("\tx\nab\ty") == "    x\nab  y"
    assert sanitize_line("a\nb\tc") == "a b c"


def test_readable_text_is_unchanged() -> None:
    text = "Pick one — café, naïve, 日本語, emoji 👩\u200d💻 🇫🇷, Persian می\u200cخواهم\nsecond line"
    assert sanitize_text(text) == text
    assert sanitize_text(M) == M


def test_every_format_character_of_this_python_is_covered() -> None:
    # The module's ranges are written out; this notices a Unicode update adding format characters.
    missed = [
        f"U+{code:04X}"
        for code in range(sys.maxunicode + 1)
        if forbidden(chr(code))
        and chr(code) not in "\t\r\u2028\u2029"
        and sanitize_text(chr(code)) != M
    ]
    assert missed == []


def test_output_can_be_encoded() -> None:
    sanitize_text("\udc80\ud800\udfff").encode("utf-8")


dangerous_chars = st.sampled_from(
    list("\x1b[]P^_X\\\x07\x18\x1a\x9b\x9c\x9d\x90\x9e\x9f\x98;0123?m(#Jc\n\r\t\u202e\u2028 a")
)
any_text = st.text(st.one_of(st.characters(exclude_categories=()), dangerous_chars))


@given(any_text)
def test_output_has_no_forbidden_character(text: str) -> None:
    out = sanitize_text(text)
    assert not [ch for ch in out if forbidden(ch)]
    assert "\t" not in out
    line = sanitize_line(text)
    assert not [ch for ch in line if forbidden(ch)]
    assert "\n" not in line


@given(any_text)
def test_sanitising_is_idempotent(text: str) -> None:
    once = sanitize_text(text)
    assert sanitize_text(once) == once
    line = sanitize_line(text)
    assert sanitize_line(line) == line


@given(st.text(st.characters(exclude_categories=("Cc", "Cf", "Cs", "Zl", "Zp")) | st.just("\n")))
def test_printable_text_is_unchanged(text: str) -> None:
    text = "".join(ch for ch in text if ch not in HANGUL_FILLERS)
    assert sanitize_text(text) == text


def _terminal_state(text: str) -> tuple[object, ...]:
    screen = pyte.Screen(80, 24)
    stream = pyte.Stream(screen)
    stream.feed(text)
    cursor = screen.cursor
    return (
        screen.title,
        screen.icon_name,
        frozenset(screen.mode),
        screen.margins,
        screen.charset,
        cursor.attrs,
    )


PRISTINE = _terminal_state("")


def test_raw_attacks_do_change_a_terminal() -> None:
    # Guards the property below: the emulator does notice these sequences.
    assert _terminal_state("\x1b]0;pwned\x07") != PRISTINE
    assert _terminal_state("\x1b[31m") != PRISTINE
    assert _terminal_state("\x9b?6h") != PRISTINE


@given(any_text)
def test_sanitised_text_leaves_a_terminal_as_it_was(text: str) -> None:
    assert _terminal_state(sanitize_text(text)) == PRISTINE
