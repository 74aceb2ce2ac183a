"""The host shell: a transcript, the background panel, a status line and the ordinary editor.

Layout, top to bottom (``ShellSurface.build_application``)::

    transcript   -- the agent's transcript lines, newest at the bottom; wheel/PageUp scroll
    ──────────   -- the panel's top rule  } shown only while a form is visible; the whole
    form         -- the form view          } panel is one focus area
    confirm      -- a yes/no question from the host (``/ask-mode``), while one is open
    status       -- ``Questions pending: <n>``, panel and wait state, the latest notice
    > editor     -- the ordinary input editor (multi-line; Enter sends, Alt+Enter breaks)

with the settings overlay floating above everything while it is open.

:class:`ShellSurface` is the runtime's ``Surface`` for this layout. It reuses the terminal
surface (form controller and control, key bindings, settings overlay) and changes what a
panel needs: ``show`` puts the form above the editor and gives it keyboard focus, ``hide``
returns focus to the editor, and nothing here ever reads or writes the editor's buffer except
the person's own keys.

What the person does reaches the host as :data:`ShellCommand` records on ``commands`` (the
shell decides nothing about the runtime):

- :class:`EditorInput` -- Enter in the editor with some text (slash commands included; the
  host interprets them);
- :class:`DeferAll` -- ``Esc`` (the live ``main.cancel`` keys) in the panel's question
  navigation on a background form: 000 makes it defer every question, not cancel the form.
  A foreground form (a recovered one) keeps its normal cancel; Review's own Cancel action
  cancels either;
- :class:`Quit` -- ``Ctrl+D`` in an empty editor.

Focus rules (000 §Background queue, §Mouse behavior): each newly shown form takes focus;
``Alt+Q`` switches between the panel and the editor; the first click into an unfocused panel
(its rule included) only takes focus; a click into the editor takes focus from the panel
without closing or answering anything; closing the settings overlay leaves focus where it was.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import trio
import trio_asyncio
from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import Condition, Filter, has_focus
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import (
    ConditionalKeyBindings,
    DynamicKeyBindings,
    KeyBindings,
    KeyBindingsBase,
    KeyPressEvent,
    merge_key_bindings,
)
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import (
    BufferControl,
    ConditionalContainer,
    Dimension,
    Float,
    FloatContainer,
    FormattedTextControl,
    HSplit,
    Layout,
    Window,
)
from prompt_toolkit.layout.controls import UIContent, UIControl
from prompt_toolkit.layout.processors import (
    Processor,
    Transformation,
    TransformationInput,
)
from prompt_toolkit.mouse_events import MouseEvent, MouseEventType
from prompt_toolkit.output import Output

from pi_agent_ask.actors.form import FormInput
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.sanitize import sanitize_text
from pi_agent_ask.form.transcript import cell_width, wrap_line
from pi_agent_ask.persistence.keys import to_prompt_toolkit
from pi_agent_ask.persistence.settings import Keymaps
from pi_agent_ask.ui import rebind_event_loop_lookup
from pi_agent_ask.ui.bindings import form_key_bindings
from pi_agent_ask.ui.form_window import FormWindow
from pi_agent_ask.ui.settings_overlay import settings_container, settings_key_bindings
from pi_agent_ask.ui.surface import ESCAPE_TIMEOUT, STYLE, TerminalSurface, tune_timeouts

__all__ = [
    "EDITOR_PLACEHOLDER",
    "FOCUS_KEY",
    "DeferAll",
    "EditorInput",
    "Quit",
    "ShellCommand",
    "ShellSurface",
    "TranscriptControl",
    "run_shell",
]

FOCUS_KEY = ("escape", "q")
"""``Alt+Q``: focus between the panel and the editor (fixed at host level, SPEC-NOTES)."""
EDITOR_PLACEHOLDER = "Type a message · /ask-settings /ask-defer /ask-queue /ask-mode /quit"
EDITOR_MAX_ROWS = 5
"""The editor grows with its text up to this many rows, then scrolls."""
TRANSCRIPT_MIN_ROWS = 3
"""Rows the transcript keeps when a tall form is shown (the form scrolls instead)."""
COMMAND_BUFFER = 16
"""Shell commands waiting for the host. Key handlers cannot await, and a person does not
send sixteen lines before the host has handled the first; a full buffer drops the command
and says so in the status line rather than block the terminal."""
TRANSCRIPT_PAGE = 10
"""Rows one PageUp/PageDown scrolls the transcript."""
WHEEL_ROWS = 3

_TRANSCRIPT_STYLES = {
    "text": "",
    "accent": "class:ask.accent",
    "warning": "class:ask.warning",
    "muted": "class:ask.muted",
    "success": "class:ask.success",
    "error": "class:ask.error",
}

Line = tuple[tuple[str, str], ...]


# -- commands to the host -------------------------------------------------------------------


@attrs.frozen
class EditorInput:
    """Enter in the ordinary editor: the text the person sent (never empty)."""

    text: str


@attrs.frozen
class DeferAll:
    """``Esc`` in the panel on a background form: hide the panel, defer every question."""


@attrs.frozen
class Quit:
    """``Ctrl+D`` in the empty editor: the person wants to leave."""


ShellCommand = EditorInput | DeferAll | Quit


# -- the transcript -------------------------------------------------------------------------


def _is_rule(line: Line) -> bool:
    text = "".join(text for _, text in line)
    return bool(text) and set(text) == {"─"}


@attrs.define(eq=False)
class Transcript:
    """The transcript's lines, neutralised once on arrival, and their rows at one width.

    ``scroll_back`` counts rows between the newest row and the bottom of the pane (0: the
    newest row is at the bottom).
    """

    lines: list[Line] = attrs.field(factory=list)
    scroll_back: int = 0
    anchors: dict[str, int] = attrs.field(factory=dict)
    """Where late lines of a block go: the index after the block's last line."""
    _width: int = 0
    _rows: list[Line] = attrs.field(factory=list)
    _wrapped: int = 0
    """How many of ``lines`` are in ``_rows`` (rows are added as lines arrive)."""

    def append(self, line: Line) -> None:
        """Add a line; text is neutralised and line breaks inside it start new lines."""
        current: list[tuple[str, str]] = []
        for style, text in line:
            parts = sanitize_text(text).split("\n")
            for index, part in enumerate(parts):
                if index:
                    self.lines.append(tuple(current))
                    current = []
                if part:
                    current.append((style, part))
        self.lines.append(tuple(current))

    def mark(self, anchor: str) -> None:
        """Name the block that ends here, so late lines can join it (``insert``)."""
        self.anchors[anchor] = len(self.lines)

    def insert(self, anchor: str, lines: Sequence[Line]) -> bool:
        """Add ``lines`` at the end of the block ``anchor``; False when there is no such block.

        Everything after moves down (later anchors too); the rows are re-wrapped.
        """
        at = self.anchors.get(anchor)
        if at is None:
            return False
        block = Transcript()
        for line in lines:
            block.append(line)
        self.lines[at:at] = block.lines
        for name, index in self.anchors.items():
            if index >= at and name != anchor:
                self.anchors[name] = index + len(block.lines)
        self.anchors[anchor] = at + len(block.lines)
        self._rows, self._wrapped = [], 0
        return True

    def rows(self, width: int) -> list[Line]:
        """Every line wrapped to ``width``; rules (lines of ``─`` only) span the width."""
        if width != self._width:
            self._width, self._rows, self._wrapped = width, [], 0
        for line in self.lines[self._wrapped :]:
            if _is_rule(line):
                self._rows.append(((line[0][0], "─" * width),))
                continue
            text = "".join(text for _, text in line)
            indent = len(text) - len(text.lstrip(" "))
            self._rows.extend(wrap_line(line, width, indent) if line else [()])
        self._wrapped = len(self.lines)
        return self._rows

    def scroll(self, rows: int) -> None:
        """Scroll by ``rows`` (positive: back in time); clamped when drawn."""
        self.scroll_back = max(0, self.scroll_back + rows)


class TranscriptControl(UIControl):
    """The transcript pane: the newest rows at the bottom, wheel scrolling."""

    def __init__(self, transcript: Transcript, on_width: Callable[[int], None]) -> None:
        self.transcript = transcript
        self.on_width = on_width

    def is_focusable(self) -> bool:
        return False

    def create_content(self, width: int, height: int) -> UIContent:
        self.on_width(width)
        rows = self.transcript.rows(width)
        self.transcript.scroll_back = min(
            self.transcript.scroll_back, max(0, len(rows) - max(1, height))
        )
        end = len(rows) - self.transcript.scroll_back
        shown = rows[max(0, end - height) : end]
        padded: list[Line] = [()] * (height - len(shown)) + shown

        def get_line(index: int) -> StyleAndTextTuples:
            if not 0 <= index < len(padded):
                return []
            return [(_TRANSCRIPT_STYLES.get(style, ""), text) for style, text in padded[index]]

        return UIContent(get_line=get_line, line_count=len(padded), show_cursor=False)

    def mouse_handler(self, mouse_event: MouseEvent) -> object:
        if mouse_event.event_type == MouseEventType.SCROLL_UP:
            self.transcript.scroll(WHEEL_ROWS)
            return None
        if mouse_event.event_type == MouseEventType.SCROLL_DOWN:
            self.transcript.scroll(-WHEEL_ROWS)
            return None
        return NotImplemented


# -- small controls -------------------------------------------------------------------------


class _PanelRule(UIControl):
    """The panel's top rule. It belongs to the panel's focus area: a click here only focuses
    the panel (a rule has nothing to select)."""

    def __init__(self, focus_panel: Callable[[], None], focused: Callable[[], bool]) -> None:
        self.focus_panel = focus_panel
        self.focused = focused

    def create_content(self, width: int, height: int) -> UIContent:
        line = _rule_line(self.focused(), width)
        return UIContent(get_line=lambda _i: line, line_count=1, show_cursor=False)

    def mouse_handler(self, mouse_event: MouseEvent) -> object:
        if mouse_event.event_type == MouseEventType.MOUSE_DOWN:
            self.focus_panel()
            return None
        return NotImplemented


PANEL_FOCUSED_LABEL = " Questions · keys answer here "
PANEL_UNFOCUSED_LABEL = " Questions · Alt+Q to answer "


def _rule_line(focused: bool, width: int) -> StyleAndTextTuples:
    """The panel's top rule: heavy and bright with "keys answer here" while the panel has the
    keyboard, thin and muted with the key that takes it otherwise (focus is never told by
    colour alone)."""
    if focused:
        char, style, label = "━", "class:ask.focus", PANEL_FOCUSED_LABEL
    else:
        char, style, label = "─", "class:ask.rule", PANEL_UNFOCUSED_LABEL
    if cell_width(label) + 4 > width:
        return [(style, char * width)]
    return [
        (style, char * 2),
        (style if focused else "class:ask.muted", label),
        (style, char * (width - 2 - cell_width(label))),
    ]


class _Placeholder(Processor):
    """Shows a muted hint in the empty editor."""

    def __init__(self, text: str, columns: Callable[[], int] = lambda: 1 << 16) -> None:
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


@attrs.define(eq=False)
class _Confirm:
    """An open yes/no question; ``reply`` receives the one answer."""

    message: str
    reply: trio.MemorySendChannel[bool]
    answered: bool = False

    def answer(self, yes: bool) -> None:
        if self.answered:
            return
        self.answered = True
        self.reply.send_nowait(yes)


# -- the surface ----------------------------------------------------------------------------


@attrs.define(eq=False)
class ShellSurface(TerminalSurface):
    """The ``Surface`` of the host shell (see the module docstring).

    ``settings`` and ``on_settings_saved`` are as for ``TerminalSurface``. ``on_change`` is
    called whenever the panel shows or hides a form (the host refreshes its status line);
    ``on_width`` receives the transcript's width on every redraw (the host wraps new lines to
    it).
    """

    on_change: Callable[[], None] | None = None
    on_width: Callable[[int], None] | None = None
    transcript: Transcript = attrs.field(factory=Transcript)
    editor: Buffer = attrs.field(factory=lambda: Buffer(multiline=True, name="editor"))
    status: str = ""
    notice_text: str = ""
    agent_note: str = ""
    background_flows: set[str] = attrs.field(factory=set)
    """Flows the runtime announced as background forms (``pi-agent-ask:started``)."""
    confirming: _Confirm | None = None
    commands: trio.MemoryReceiveChannel[ShellCommand] = attrs.field(init=False)
    _commands_tx: trio.MemorySendChannel[ShellCommand] = attrs.field(init=False)
    _overlay_from_form: bool = False
    _editor_window: Window = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._commands_tx, self.commands = trio.open_memory_channel[ShellCommand](COMMAND_BUFFER)
        self._editor_window = Window(
            BufferControl(
                self.editor,
                input_processors=[
                    _Placeholder(EDITOR_PLACEHOLDER, lambda: self._rows_and_columns()[1])
                ],
                focus_on_click=True,
            ),
            height=Dimension(min=1, max=EDITOR_MAX_ROWS),
            dont_extend_height=True,
            wrap_lines=True,
            get_line_prefix=self._editor_prefix,
        )

    def _editor_prefix(self, line: int, wrap: int) -> StyleAndTextTuples:
        """``> `` in the focus style while the editor has the keyboard, muted otherwise."""
        if line != 0 or wrap != 0:
            return [("", "  ")]
        focused = self._app is not None and self._app.layout.has_focus(self.editor)
        return [("class:ask.focus" if focused else "class:ask.muted", "> ")]

    # -- the Surface protocol -----------------------------------------------------------------

    def show(
        self, flow_id: str, state: fs.FormState, commands: trio.MemorySendChannel[FormInput]
    ) -> None:
        """Show a form in the panel above the editor and give it keyboard focus."""
        self.controller.attach(flow_id, state, commands)
        self.focus_panel()
        self._changed()

    def hide(self, flow_id: str) -> None:
        """The form is gone: the panel closes and the editor has focus again.

        A settings overlay the form opened (``?``) closes with it; one opened with
        ``/ask-settings`` stays.
        """
        if flow_id != self.controller.flow_id:
            return
        if self.overlay is not None and self._overlay_from_form:
            self._drop_overlay()
        self.controller.detach(flow_id)
        self.focus_editor()
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()
        self.invalidate()

    # -- what the host calls ------------------------------------------------------------------

    def append(self, line: Line) -> None:
        """Add a transcript line (the host's ``emit``)."""
        self.transcript.append(line)
        self.invalidate()

    def mark(self, anchor: str) -> None:
        """The lines so far end the block of ``anchor`` (a tool call's rows)."""
        self.transcript.mark(anchor)

    def insert(self, anchor: str, lines: Sequence[Line]) -> bool:
        """Late lines for an earlier block (an answer card at the call that asked)."""
        placed = self.transcript.insert(anchor, lines)
        self.invalidate()
        return placed

    def notice(self, text: str) -> None:
        """A notice for the person: a transcript line, and the status line until the next input."""
        self.notice_text = sanitize_text(text, keep_newlines=False)
        self.transcript.append((("warning", "! " + text),))
        self.invalidate()

    def set_status(self, text: str) -> None:
        """The status line's main text (the host's ``Questions pending: <n>``)."""
        self.status = text
        self.invalidate()

    def set_notice(self, text: str) -> None:
        """A short notice in the status line only, until the next input."""
        self.notice_text = sanitize_text(text, keep_newlines=False)
        self.invalidate()

    def set_agent_note(self, text: str) -> None:
        """What the agent is doing, at the right of the status line."""
        self.agent_note = sanitize_text(text, keep_newlines=False)
        self.invalidate()

    def mark_background(self, flow_id: str) -> None:
        """``flow_id`` is a background form: ``Esc`` in its navigation defers all."""
        self.background_flows.add(flow_id)

    @property
    def panel_visible(self) -> bool:
        return self.controller.visible

    @property
    def panel_focused(self) -> bool:
        return self._app is not None and self._app.layout.has_focus(self.control)

    def focus_panel(self) -> None:
        """Give the panel keyboard focus (no-op while no form is shown)."""
        if self._app is not None and self.controller.visible:
            self._app.layout.focus(self.control)
            self.invalidate()

    def focus_editor(self) -> None:
        if self._app is not None:
            self._app.layout.focus(self._editor_window)
            self.invalidate()

    def toggle_focus(self) -> None:
        """``Alt+Q``: panel ↔ editor."""
        if self.panel_focused or not self.controller.visible:
            self.focus_editor()
        else:
            self.focus_panel()

    def open_settings(self) -> None:
        """Open the settings overlay (``/ask-settings``); focus stays where it is."""
        self._overlay_from_form = False
        super().open_settings()

    def _open_settings_from_form(self) -> None:
        super().open_settings()
        self._overlay_from_form = True

    async def confirm(self, message: str) -> bool:
        """Ask a yes/no question above the editor; ``y`` is yes, ``n``/``Esc``/``Ctrl+C`` no.

        Cancelling the caller closes the question (as a no)."""
        send, receive = trio.open_memory_channel[bool](1)
        question = _Confirm(message, send)
        self.confirming = question
        self.invalidate()
        try:
            async with receive:
                return await receive.receive()
        finally:
            if self.confirming is question:
                self.confirming = None
            self.invalidate()

    # -- commands from keys -------------------------------------------------------------------

    def _emit(self, command: ShellCommand) -> None:
        try:
            self._commands_tx.send_nowait(command)
        except trio.WouldBlock:
            self.notice("Busy: that input was dropped; try again in a moment.")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return

    def _submit(self) -> None:
        text = self.editor.text
        if not text.strip():
            return
        self.editor.reset(append_to_history=True)
        self.transcript.scroll_back = 0
        self.notice_text = ""
        self._emit(EditorInput(text))

    def _visible_is_background(self) -> bool:
        return self.controller.flow_id in self.background_flows

    # -- the application ----------------------------------------------------------------------

    def _rows_and_columns(self) -> tuple[int, int]:
        if self._app is None:
            return 24, 80
        size = self._app.output.get_size()
        return size.rows, size.columns

    def _panel_height(self) -> Dimension:
        """The panel's cap: the transcript keeps a few rows (a taller form scrolls inside)."""
        rows, _columns = self._rows_and_columns()
        # The panel's rule, the status line, the editor, one row for a yes/no question.
        used = 1 + 1 + min(EDITOR_MAX_ROWS, self.editor.document.line_count) + 1
        keep = TRANSCRIPT_MIN_ROWS if rows >= 16 else 1  # a short screen gives the panel more
        return Dimension(max=max(4, rows - used - keep))

    def _status_fragments(self) -> StyleAndTextTuples:
        _rows, width = self._rows_and_columns()
        focus = (
            "keys: questions · Alt+Q: editor"
            if self.panel_focused
            else "keys: editor · Alt+Q: questions"
        )
        left = f" {self.status} " if self.status else " "
        parts: StyleAndTextTuples = [("class:ask.rule", "─"), ("class:ask.accent", left)]
        if self.notice_text:
            parts.append(("class:ask.warning", f"{self.notice_text} "))
        notes = [
            note for note in (self.agent_note, focus if self.controller.visible else "") if note
        ]
        right = f" {' · '.join(notes)} ─" if notes else " "
        used = sum(cell_width(part[1]) for part in parts) + cell_width(right)
        if used > width:
            return _clip(parts, width)
        parts.append(("class:ask.rule", "─" * (width - used)))
        parts.append(("class:ask.muted", right))
        return parts

    def _confirm_fragments(self) -> StyleAndTextTuples:
        question = self.confirming
        if question is None:
            return []
        # Wrapped here at word boundaries (prompt_toolkit's own wrapping splits words).
        _rows, width = self._rows_and_columns()
        out: StyleAndTextTuples = []
        for index, row in enumerate(wrap_line(self._confirm_line(question), width)):  # type: ignore[arg-type]
            if index:
                out.append(("", "\n"))
            out.extend(row)
        return out

    def _confirm_line(self, question: _Confirm) -> StyleAndTextTuples:
        return [
            ("class:ask.warning", question.message),
            ("", "  "),
            ("class:ask.hint", "y"),
            ("class:ask.muted", " yes · "),
            ("class:ask.hint", "n"),
            ("class:ask.muted", "/"),
            ("class:ask.hint", "Esc"),
            ("class:ask.muted", " no"),
        ]

    def build_application(
        self,
        *,
        input: Input | None = None,
        output: Output | None = None,
        full_screen: bool = True,
        mouse_support: bool | None = None,
    ) -> Application[Any]:
        """The shell's prompt_toolkit application (see the module docstring)."""
        overlay_open = Condition(lambda: self.overlay is not None)
        confirm_open = Condition(lambda: self.confirming is not None)
        modal = overlay_open | confirm_open
        panel_shown = Condition(lambda: self.controller.visible)
        panel_focus = has_focus(self.control) & panel_shown
        editor_focus = has_focus(self.editor)

        form = form_key_bindings(
            self.controller,
            self.keymaps,
            open_settings=self._open_settings_from_form,
            overlay_open=modal,
        )
        cache: dict[str, tuple[Keymaps, KeyBindingsBase]] = {}

        def live(name: str, build: Callable[[Keymaps], KeyBindingsBase]) -> KeyBindingsBase:
            keymaps = self.keymaps()
            cached = cache.get(name)
            if cached is None or cached[0] is not keymaps:
                cached = (keymaps, build(keymaps))
                cache[name] = cached
            return cached[1]

        settings_modal = functools.partial(
            live, "modal", lambda km: settings_key_bindings(lambda: self.overlay, lambda: km)
        )
        defer = functools.partial(live, "defer", self._defer_bindings(panel_focus & ~modal))

        transcript = Window(
            TranscriptControl(self.transcript, self._width_changed),
            height=Dimension(min=1, preferred=1),
            wrap_lines=False,
        )
        panel_window = FormWindow(
            content=self.control,
            height=self._panel_height,
            dont_extend_height=True,
            wrap_lines=False,
            always_hide_cursor=Condition(lambda: not self.controller.editor_open),
        )
        rule = Window(
            _PanelRule(self.focus_panel, lambda: self.panel_focused),
            height=1,
            dont_extend_height=True,
        )
        panel = ConditionalContainer(HSplit([rule, panel_window]), filter=panel_shown)
        confirm = ConditionalContainer(
            Window(
                FormattedTextControl(self._confirm_fragments),
                wrap_lines=False,
                dont_extend_height=True,
            ),
            filter=confirm_open,
        )
        status = Window(
            FormattedTextControl(self._status_fragments),
            height=1,
            dont_extend_height=True,
            wrap_lines=False,
        )
        body = HSplit([transcript, panel, confirm, status, self._editor_window])
        root = FloatContainer(
            content=body,
            floats=[Float(content=settings_container(lambda: self.overlay))],
        )
        focused = panel_window if self.controller.visible else self._editor_window
        app: Application[Any] = Application(
            layout=Layout(root, focused_element=focused),
            key_bindings=merge_key_bindings(
                [
                    self._editor_bindings(editor_focus & ~modal),
                    ConditionalKeyBindings(form, has_focus(self.control)),
                    DynamicKeyBindings(defer),
                    self._shell_bindings(~modal),
                    DynamicKeyBindings(settings_modal),
                    self._confirm_bindings(confirm_open),
                ]
            ),
            style=STYLE,
            full_screen=full_screen,
            mouse_support=full_screen if mouse_support is None else mouse_support,
            input=input,
            output=output,
        )
        app.ttimeoutlen = ESCAPE_TIMEOUT
        # Redraw at once: prompt_toolkit would postpone a redraw up to 10 ms while "other work
        # is scheduled", which under trio-asyncio is always, so every key waited the full
        # 10 ms. Invalidations are still coalesced into one redraw.
        app.max_render_postpone_time = None
        tune_timeouts(app, self.controller)
        return app

    def _width_changed(self, width: int) -> None:
        if self.on_width is not None:
            self.on_width(width)

    def _editor_bindings(self, active: Filter) -> KeyBindings:
        kb = KeyBindings()
        empty = Condition(lambda: not self.editor.text)

        @kb.add("c-m", filter=active)
        def _send(_event: KeyPressEvent) -> None:
            self._submit()

        @kb.add("escape", "c-m", filter=active)
        @kb.add("c-j", filter=active)
        def _newline(_event: KeyPressEvent) -> None:
            self.editor.insert_text("\n")

        @kb.add("c-d", filter=active & empty)
        def _quit(_event: KeyPressEvent) -> None:
            self._emit(Quit())

        @kb.add("c-c", filter=active)
        def _clear(_event: KeyPressEvent) -> None:
            if self.editor.text:
                self.editor.reset()
            else:
                self.set_notice("Ctrl+D or /quit exits.")

        @kb.add(Keys.BracketedPaste, filter=active)
        def _paste(event: KeyPressEvent) -> None:
            # Pasted text is neutralised before it reaches the buffer (and the terminal).
            data = event.data.replace("\r\n", "\n").replace("\r", "\n")
            self.editor.insert_text(sanitize_text(data))

        return kb

    def _defer_bindings(self, panel_focus: Filter) -> Callable[[Keymaps], KeyBindingsBase]:
        navigation = (
            panel_focus
            & Condition(lambda: not self.controller.editor_open)
            & Condition(self._visible_is_background)
        )

        def build(keymaps: Keymaps) -> KeyBindingsBase:
            kb = KeyBindings()
            for key in keymaps.main.cancel:
                kb.add(*to_prompt_toolkit(key), filter=navigation)(
                    lambda _event: self._emit(DeferAll())
                )
            return kb

        return build

    def _shell_bindings(self, active: Filter) -> KeyBindings:
        kb = KeyBindings()

        @kb.add(*FOCUS_KEY, filter=active)
        def _focus(_event: KeyPressEvent) -> None:
            self.toggle_focus()

        # With the panel focused, PageUp/PageDown scroll the form instead.
        transcript_keys = active & ~Condition(lambda: self.panel_focused)

        @kb.add("pageup", filter=transcript_keys)
        def _page_up(_event: KeyPressEvent) -> None:
            self.transcript.scroll(TRANSCRIPT_PAGE)

        @kb.add("pagedown", filter=transcript_keys)
        def _page_down(_event: KeyPressEvent) -> None:
            self.transcript.scroll(-TRANSCRIPT_PAGE)

        return kb

    def _confirm_bindings(self, active: Filter) -> KeyBindings:
        kb = KeyBindings()

        def answer(yes: bool) -> Callable[[KeyPressEvent], None]:
            def handler(_event: KeyPressEvent) -> None:
                if self.confirming is not None:
                    self.confirming.answer(yes)

            return handler

        for key in ("y", "Y"):
            kb.add(key, filter=active)(answer(True))
        for key in ("n", "N", "escape", "c-c"):
            kb.add(key, filter=active)(answer(False))

        # Everything else waits for the answer: no key reaches the editor or the form.
        @kb.add(Keys.Any, filter=active)
        def _swallow(_event: KeyPressEvent) -> None:
            return

        return kb


def _clip(parts: StyleAndTextTuples, width: int) -> StyleAndTextTuples:
    out: StyleAndTextTuples = []
    used = 0
    for style, text, *_ in parts:
        room = width - used
        if room <= 0:
            break
        piece = ""
        for char in text:
            if cell_width(piece + char) > room:
                break
            piece += char
        out.append((style, piece))
        used += cell_width(piece)
    return out


async def run_shell(
    surface: ShellSurface,
    *,
    input: Input | None = None,
    output: Output | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the shell's full-screen application (mouse on) until cancelled.

    Unlike a one-shot form, the shell is on screen from the start: the application is built
    before ``task_status.started()``, so forms shown right after it land in the panel. If the
    application ends by itself, the host gets a :class:`Quit`.
    """
    rebind_event_loop_lookup()
    async with trio_asyncio.open_loop(), trio.open_nursery() as nursery:
        surface._nursery = nursery
        app = surface.build_application(input=input, output=output)
        surface._app = app
        task_status.started()
        try:
            run = functools.partial(app.run_async, set_exception_handler=False, handle_sigint=False)
            await trio_asyncio.aio_as_trio(run)()
            surface._emit(Quit())
        finally:
            surface._app = None
            surface._nursery = None
            nursery.cancel_scope.cancel()
