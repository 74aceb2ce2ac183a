"""The host shell's ordinary input editor: ``> `` and a muted hint while empty, multi-line
(Enter sends, Alt+Enter breaks the line), wrapped at words as the form's editor is, growing up
to :data:`EDITOR_MAX_ROWS` rows."""

from __future__ import annotations

from collections.abc import Callable

from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import Condition, Filter
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import BufferControl, Dimension, Window
from prompt_toolkit.layout.processors import Processor, Transformation, TransformationInput

from pi_agent_ask.form.sanitize import sanitize_text
from pi_agent_ask.form.transcript import cell_width, drawn
from pi_agent_ask.ui.render.editor import word_rows
from pi_agent_ask.ui.rows import row_move

__all__ = [
    "EDITOR_MAX_ROWS",
    "EDITOR_PLACEHOLDER",
    "editor_bindings",
    "editor_rows",
    "editor_window",
]

EDITOR_PLACEHOLDER = "Type a message · /ask-settings /ask-defer /ask-queue /ask-mode /quit"
EDITOR_MAX_ROWS = 5
"""The editor grows with its text up to this many rows, then scrolls."""


class _Placeholder(Processor):
    """Shows a muted hint in the empty editor."""

    def __init__(self, text: str, columns: Callable[[], int]) -> None:
        self.text = text
        self.columns = columns

    def apply_transformation(self, transformation_input: TransformationInput) -> Transformation:
        ti = transformation_input
        if ti.lineno == 0 and not ti.buffer_control.buffer.text:
            # One row: on a narrow screen the hint is cut short rather than take two rows.
            room = max(1, self.columns() - 3)
            text = self.text if cell_width(self.text) <= room else self.text[: room - 1] + "…"
            return Transformation([*ti.fragments, ("class:ask.placeholder", text)])
        return Transformation(ti.fragments)


class _Drawn(Processor):
    """Draws the text as the rest of the screen is drawn (``form.transcript.drawn``): without
    the joiners of emoji, whose width terminals draw differently from what prompt_toolkit
    counts (tmux drew ``👩‍💻`` in two cells where four were counted, and what followed stood
    two cells off). The buffer keeps them; the cursor maps across the characters left out."""

    def apply_transformation(self, transformation_input: TransformationInput) -> Transformation:
        fragments = transformation_input.fragments
        if all(text.isascii() for _, text, *_ in fragments):
            return Transformation(fragments)
        shown: StyleAndTextTuples = []
        to_display: list[int] = []  # source position -> display position
        to_source: list[int] = []  # display position -> source position
        for style, text, *handler in fragments:
            kept = []
            for char in text:
                to_display.append(len(to_source))
                if drawn(char):
                    to_source.append(len(to_display) - 1)
                    kept.append(char)
            shown.append((style, "".join(kept), *handler))  # type: ignore[arg-type]
        source_end, display_end = len(to_display), len(to_source)

        def source_to_display(position: int) -> int:
            if position < source_end:
                return to_display[position]
            return display_end + position - source_end

        def display_to_source(position: int) -> int:
            if position < display_end:
                return to_source[position]
            return source_end + position - display_end

        return Transformation(shown, source_to_display, display_to_source)


def editor_window(
    editor: Buffer, columns: Callable[[], int], focused: Callable[[], bool]
) -> Window:
    """The editor's window; ``columns``: the screen's width, ``focused``: whether the editor has
    the keyboard (its ``> `` is in the focus style then, muted otherwise)."""

    def prefix(line: int, wrap: int) -> StyleAndTextTuples:
        if line != 0 or wrap != 0:
            return [("", " " * PREFIX_CELLS)]
        return [("class:ask.focus" if focused() else "class:ask.muted", "> ")]

    return Window(
        BufferControl(
            editor,
            input_processors=[_Drawn(), _AtWords(), _Placeholder(EDITOR_PLACEHOLDER, columns)],
            focus_on_click=True,
        ),
        height=Dimension(min=1, max=EDITOR_MAX_ROWS),
        dont_extend_height=True,
        wrap_lines=True,
        get_line_prefix=prefix,
    )


PREFIX_CELLS = 2
"""The cells of ``> `` (and of the blank prefix of every row after the first)."""


def editor_rows(text: str, columns: int) -> list[tuple[int, int]]:
    """The rows the editor's window draws ``text`` in at ``columns`` (``ui/rows.py``): the
    form's editor's rule (``word_rows``: at words, a word longer than a row split where it is
    full), in the cells after the prefix less one, where a cursor after the text stands."""
    return word_rows(text, max(1, columns - PREFIX_CELLS - 1))


class _AtWords(Processor):
    """Wraps each line at words (:func:`editor_rows`): a row the rule ends early is filled
    with blanks to the window's edge, where the window wraps (it wraps where a row is full,
    inside a word too). The space a row ends at is the break: the blanks stand in its place,
    and the cursor on it stands at the end of the row, as in the form's editor."""

    def apply_transformation(self, transformation_input: TransformationInput) -> Transformation:
        ti = transformation_input
        chars: StyleAndTextTuples = [
            (style, char, *handler)  # type: ignore[misc]
            for style, text, *handler in ti.fragments
            for char in text
        ]
        text = "".join(char for _style, char, *_ in chars)
        room = ti.width - PREFIX_CELLS
        if cell_width(text) < room:
            return Transformation(ti.fragments)
        spans = editor_rows(text, ti.width)
        shown: StyleAndTextTuples = []
        to_display = [0] * (len(text) + 1)  # source position -> display position
        to_source: list[int] = []  # display position -> source position
        for number, (first, end) in enumerate(spans):
            for index in range(first, end):
                to_display[index] = len(shown)
                to_source.append(index)
                shown.append(chars[index])
            if number + 1 < len(spans):
                for index in range(end, spans[number + 1][0]):  # the break
                    to_display[index] = len(shown)
                blanks = max(0, room - cell_width(text[first:end]))
                to_source.extend([end] * blanks)
                shown.extend([("", " ")] * blanks)
        to_display[len(text)] = len(shown)

        def source_to_display(position: int) -> int:
            return to_display[min(position, len(text))] + max(0, position - len(text))

        def display_to_source(position: int) -> int:
            if position < len(to_source):
                return to_source[position]
            return len(text) + position - len(to_source)

        return Transformation(shown, source_to_display, display_to_source)


def editor_bindings(
    editor: Buffer,
    active: Filter,
    *,
    submit: Callable[[], None],
    quit: Callable[[], None],
    notice: Callable[[str], None],
    columns: Callable[[], int],
) -> KeyBindings:
    """Enter sends (``submit``), Alt+Enter and Ctrl+J break the line, Ctrl+D in the empty editor
    quits, Ctrl+C clears, Up and Down move by the rows the text is drawn in (``columns``: the
    window's width); pasted text is neutralised before it reaches the buffer."""
    kb = KeyBindings()
    empty = Condition(lambda: not editor.text)

    def move(step: int) -> None:
        text = editor.text
        rows = editor_rows(text, columns())
        # ``preferred_column`` is reset by every other move: a run keeps its first column.
        moved = row_move(
            text, rows, editor.cursor_position, step, editor.preferred_column, cell_width
        )
        if moved is not None:
            editor.cursor_position, column = moved
            editor.preferred_column = column

    # By the rows the text is drawn in, which are its lines only while it does not wrap. On
    # the first (last) row nothing moves, as on a line's.
    @kb.add("up", filter=active)
    def _up(_event: KeyPressEvent) -> None:
        move(-1)

    @kb.add("down", filter=active)
    def _down(_event: KeyPressEvent) -> None:
        move(1)

    @kb.add("c-m", filter=active)
    def _send(_event: KeyPressEvent) -> None:
        submit()

    @kb.add("escape", "c-m", filter=active)
    @kb.add("c-j", filter=active)
    def _newline(_event: KeyPressEvent) -> None:
        editor.insert_text("\n")

    @kb.add("c-d", filter=active & empty)
    def _quit(_event: KeyPressEvent) -> None:
        quit()

    @kb.add("c-c", filter=active)
    def _clear(_event: KeyPressEvent) -> None:
        if editor.text:
            editor.reset()
        else:
            notice("Ctrl+D or /quit exits.")

    @kb.add(Keys.BracketedPaste, filter=active)
    def _paste(event: KeyPressEvent) -> None:
        data = event.data.replace("\r\n", "\n").replace("\r", "\n")
        editor.insert_text(sanitize_text(data))

    return kb
