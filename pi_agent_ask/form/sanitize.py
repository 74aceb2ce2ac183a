"""Terminal safety: agent-supplied text is shown, never obeyed by the terminal.

Titles, labels, prompts, descriptions, contexts and notification messages come from the agent
(or from files it names). Printed raw, they could clear the screen, retitle the window, move the
cursor, redefine keys, smuggle invisible text, or reorder what the person reads. Everything that
reaches the terminal goes through :func:`sanitize_text` or :func:`sanitize_line` first.

What is removed (each maximal run of removed material becomes one :data:`MARKER`, ``U+FFFD``, so
the person sees that something was there without seeing raw bytes):

- escape sequences, consumed whole, the way a terminal would parse them (ECMA-48):
  CSI ``ESC [`` and 8-bit ``U+009B`` with their parameter, intermediate and final bytes;
  control strings OSC ``ESC ]``/``U+009D``, DCS ``ESC P``/``U+0090``, SOS ``ESC X``/``U+0098``,
  PM ``ESC ^``/``U+009E`` and APC ``ESC _``/``U+009F``, up to their terminator (BEL, ST as
  ``ESC \\`` or ``U+009C``, or CAN/SUB, which terminals treat as an abort); any other escape
  (``ESC`` + intermediates + one final byte, e.g. ``ESC c``, ``ESC ( 0``, ``ESC # 8``);
- C0 controls except ``\\n`` and ``\\t`` (NUL, BEL, backspace, lone carriage return, form feed,
  ESC, ...), DEL, and all C1 controls ``U+0080``-``U+009F``;
- every Unicode format character (category ``Cf``) except ZERO WIDTH NON-JOINER ``U+200C`` and
  ZERO WIDTH JOINER ``U+200D`` (needed by emoji sequences and several scripts). This covers
  bidi embeddings, overrides and isolates (``U+202A``-``U+202E``, ``U+2066``-``U+2069``), the
  direction marks (``U+200E``, ``U+200F``, ``U+061C``), zero-width space, word joiner and
  invisible operators (``U+200B``, ``U+2060``-``U+2064``), the byte-order mark ``U+FEFF``, soft
  hyphen, interlinear annotation, and the tag characters ``U+E0000``-``U+E007F`` (invisible
  "ASCII smuggling"; subdivision flag emoji lose their tags, a cost accepted for safety);
- the Hangul fillers ``U+115F``, ``U+1160``, ``U+3164``, ``U+FFA0``: letters that render as
  nothing and are used to forge blank-looking text;
- lone surrogates ``U+D800``-``U+DFFF``, which cannot even be encoded for output.

What is rewritten rather than removed:

- ``\\r\\n``, ``U+2028`` LINE SEPARATOR and ``U+2029`` PARAGRAPH SEPARATOR become ``\\n``;
  with ``keep_newlines=False`` every ``\\n`` then becomes one space;
- tabs are expanded to spaces with tab stops every :data:`TAB_SIZE` columns, counted from the
  start of each line in code points (a tab is a control: the terminal decides how far it moves).

A control string without a terminator ends before the next ``\\n``, ``ESC`` or the end of the text:
its payload is removed, the following lines stay readable.

Invariants (property-tested): the output contains none of the removed characters; sanitising
is idempotent; text without any of them (and without tabs, ``\\r`` or line separators) comes back
unchanged.
"""

from __future__ import annotations

import functools
import re

__all__ = [
    "MARKER",
    "TAB_SIZE",
    "escape_for_json",
    "escape_visibly",
    "is_safe",
    "sanitize_line",
    "sanitize_text",
]

MARKER = "\ufffd"
"""Shown once in place of each run of removed sequences and characters."""

TAB_SIZE = 4
"""Tab stops, in columns, used when expanding tabs."""

# Single code points that are removed wherever they occur (inclusive ranges). The Cf ranges are
# those of Unicode 15.1 minus ZWNJ/ZWJ; tests/test_sanitize.py checks them against the running
# Python's unicodedata, so a newer Unicode adding a format character is noticed.
_REMOVED_RANGES: tuple[tuple[int, int], ...] = (
    (0x00, 0x08),  # C0 below TAB
    (0x0B, 0x1F),  # C0 after LF (VT, FF, CR, ..., ESC, ...)
    (0x7F, 0x9F),  # DEL and C1
    (0xAD, 0xAD),  # soft hyphen
    (0x600, 0x605),  # Arabic prepended concatenation marks
    (0x61C, 0x61C),  # ARABIC LETTER MARK
    (0x6DD, 0x6DD),
    (0x70F, 0x70F),
    (0x890, 0x891),
    (0x8E2, 0x8E2),
    (0x115F, 0x1160),  # Hangul fillers
    (0x180E, 0x180E),  # MONGOLIAN VOWEL SEPARATOR
    (0x200B, 0x200B),  # ZERO WIDTH SPACE (200C ZWNJ and 200D ZWJ are kept)
    (0x200E, 0x200F),  # LRM, RLM
    (0x202A, 0x202E),  # bidi embeddings and overrides
    (0x2060, 0x2064),  # word joiner, invisible operators
    (0x2066, 0x206F),  # bidi isolates, deprecated format characters
    (0x3164, 0x3164),  # HANGUL FILLER
    (0xD800, 0xDFFF),  # lone surrogates
    (0xFEFF, 0xFEFF),  # BOM / ZERO WIDTH NO-BREAK SPACE
    (0xFFA0, 0xFFA0),  # HALFWIDTH HANGUL FILLER
    (0xFFF9, 0xFFFB),  # interlinear annotation
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),  # Egyptian hieroglyph format controls
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol format controls
    (0xE0001, 0xE0001),  # LANGUAGE TAG
    (0xE0020, 0xE007F),  # tag characters
)


def _char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    parts = []
    for low, high in ranges:
        parts.append(f"\\U{low:08x}" if low == high else f"\\U{low:08x}-\\U{high:08x}")
    return "[" + "".join(parts) + "]"


# A control string: introducer, payload, optional terminator. The payload stops at a terminator
# (BEL, CAN, SUB, 8-bit ST, ESC \ -- all consumed), before any other ESC (which starts the next
# sequence, as in a terminal), or before a newline (our choice for unterminated strings).
_CONTROL_STRING = (
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])"
    r"[^\x07\x18\x1a\x1b\x9c\n]*"
    r"(?:[\x07\x18\x1a\x9c]|\x1b\\)?"
)
# CSI: parameter bytes, intermediate bytes, one final byte (missing when the text ends early).
_CSI = r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
# Any other escape: ESC, intermediate bytes, one final byte; a lone ESC is matched too.
_ESCAPE = r"\x1b[\x20-\x2f]*[\x30-\x7e]?"

_UNSAFE_RUN = re.compile(
    "(?:" + "|".join((_CONTROL_STRING, _CSI, _ESCAPE, _char_class(_REMOVED_RANGES))) + ")+"
)
_LINE_BREAKS = re.compile("\r\n|[\u2028\u2029]")


def sanitize_text(text: str, *, keep_newlines: bool = True) -> str:
    """Return ``text`` safe to print on a terminal, keeping everything a person can read.

    Escape sequences, control characters and invisible formatting characters are removed; each
    run of removed material is replaced by one :data:`MARKER`. Line breaks are normalised to
    ``\\n`` (or to a space when ``keep_newlines`` is false) and tabs are expanded to spaces.
    The module docstring lists exactly what is removed. Idempotent.
    """
    text = _LINE_BREAKS.sub("\n", text)
    text = _UNSAFE_RUN.sub(MARKER, text)
    if not keep_newlines:
        text = text.replace("\n", " ")
    if "\t" in text:
        text = text.expandtabs(TAB_SIZE)
    return text


def sanitize_line(text: str) -> str:
    """Like :func:`sanitize_text`, for single-line places (labels, titles): newlines -> spaces."""
    return sanitize_text(text, keep_newlines=False)


def is_safe(text: str) -> bool:
    """Whether :func:`sanitize_line` leaves ``text`` as it is: what a typed key may insert and
    an editor may show as typed (a joiner of emoji or of a script included, a control not)."""
    if text.isascii():  # the same answer: ASCII keeps exactly its printable characters
        return text.isprintable()
    return sanitize_line(text) == text


# -- keeping the text, escaped (printed JSON, Markdown exports) ------------------------------


@functools.cache
def _active() -> re.Pattern[str]:
    """Every character :func:`sanitize_text` removes, and U+2028/U+2029. Compiled on first
    use: only exports and printed JSON need it, a form's start does not."""
    return re.compile(_char_class(((0x2028, 0x2029), *_REMOVED_RANGES)))


def escape_visibly(text: str) -> str:
    """``text`` with every character :func:`sanitize_text` would remove written as
    ``<U+XXXX>`` instead (and ``U+2028``/``U+2029``), so nothing in it is live on a terminal
    yet a reader sees what was there. Newlines and tabs stay. Used for Markdown exports."""
    return _active().sub(lambda match: f"<U+{ord(match.group()):04X}>", text)


def escape_for_json(encoded: str) -> str:
    """``encoded`` JSON (from ``json.dumps(..., ensure_ascii=False)``, which escapes C0 itself)
    with every other character :func:`escape_visibly` names as a ``\\uXXXX`` escape: the
    same JSON value, safe to print on a terminal."""
    return _active().sub(_json_escape, encoded)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # outside the BMP: a UTF-16 surrogate pair, as JSON spells it
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
