"""The host shell: a transcript, the background panel, a status line and the ordinary editor.

Layout, top to bottom (``ShellSurface.build_application``)::

    transcript   -- the agent's transcript lines, newest at the bottom; wheel/PageUp scroll
    ──────────   -- the panel's top rule  } shown only while a form is visible; the whole
    form         -- the form view          } panel is one focus area
    confirm      -- a yes/no question from the host (``/ask-mode``), while one is open
    status       -- ``Questions pending: <n>``, panel and wait state, the latest notice
    > editor     -- the ordinary input editor (multi-line; Enter sends, Alt+Enter breaks)

with the settings overlay floating above everything while it is open. Each part is its own
module (``transcript.py``, ``panel.py``, ``confirm.py``, ``status_line.py``,
``shell_editor.py``); this one assembles them.

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

Focus rules (000 §Background queue, §Mouse behavior): each newly shown form takes focus,
unless the person is writing in the editor (it holds text they changed since the panel last
had the keys): then the keys stay where they are, so letters meant for the agent never run
form commands (``n`` a note, ``t`` the question type, ``D`` a skip), and the panel's rule says
``Alt+Q to answer``; ``Alt+Q`` switches between the panel and the editor; the first click into
an unfocused panel (its rule included) only takes focus; a click into the editor takes focus
from the panel without closing or answering anything; closing the settings overlay leaves
focus where it was. A letter that is no form key, typed while the panel has the keys, is
answered with where typed text goes, this editor (``Alt+Q``) included.
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
from prompt_toolkit.layout import (
    ConditionalContainer,
    Dimension,
    Float,
    FloatContainer,
    FormattedTextControl,
    HSplit,
    Layout,
    Window,
)
from prompt_toolkit.output import Output

from pi_agent_ask.actors.form import Ended, FormInput
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.fieldless import Fieldless
from pi_agent_ask.form.transcript import drawn_text
from pi_agent_ask.persistence.keys import to_prompt_toolkit
from pi_agent_ask.persistence.settings import Keymaps
from pi_agent_ask.ui import rebind_event_loop_lookup
from pi_agent_ask.ui.bindings import form_key_bindings
from pi_agent_ask.ui.confirm import Confirmation, confirm_bindings, confirm_fragments
from pi_agent_ask.ui.form_window import FormWindow
from pi_agent_ask.ui.panel import PanelRule, panel_height
from pi_agent_ask.ui.settings_overlay import settings_container, settings_key_bindings
from pi_agent_ask.ui.shell_editor import EDITOR_MAX_ROWS, editor_bindings, editor_window
from pi_agent_ask.ui.status_line import status_fragments
from pi_agent_ask.ui.surface import STYLE, TerminalSurface, tune_application
from pi_agent_ask.ui.transcript import TRANSCRIPT_PAGE, Line, Transcript, TranscriptControl

__all__ = [
    "FOCUS_KEY",
    "DeferAll",
    "EditorInput",
    "Quit",
    "ShellCommand",
    "ShellSurface",
    "run_shell",
]

FOCUS_KEY = ("escape", "q")
"""``Alt+Q``: focus between the panel and the editor (fixed at host level, SPEC-NOTES)."""
ELSEWHERE_TEXT = " Alt+Q: a message to the agent."
"""What the panel adds when typed text reaches none of its editors: the keys are the form's,
and a message for the agent goes into this editor."""
COMMAND_BUFFER = 16
"""Shell commands waiting for the host. Key handlers cannot await, and a person does not
send sixteen lines before the host has handled the first; a full buffer drops the command
and says so in the status line rather than block the terminal."""
# -- commands to the host -------------------------------------------------------------------


@attrs.frozen(repr=False)
class EditorInput:
    """Enter in the ordinary editor: the text the person sent (never empty)."""

    text: str


class DeferAll(Fieldless):
    """``Esc`` in the panel on a background form: hide the panel, defer every question."""


class Quit(Fieldless):
    """``Ctrl+D`` in the empty editor: the person wants to leave."""


ShellCommand = EditorInput | DeferAll | Quit


# -- the surface ----------------------------------------------------------------------------


@attrs.define(eq=False, repr=False)
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
    confirming: Confirmation | None = None
    commands: trio.MemoryReceiveChannel[ShellCommand] = attrs.field(init=False)
    _commands_tx: trio.MemorySendChannel[ShellCommand] = attrs.field(init=False)
    _overlay_from_form: bool = False
    _editor_window: Window = attrs.field(init=False)
    _writing: bool = False
    """The person changed the editor's text since the panel last had the keys (focus rules)."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.editor.on_text_changed += self._editor_changed
        self._commands_tx, self.commands = trio.open_memory_channel[ShellCommand](COMMAND_BUFFER)
        self._editor_window = editor_window(
            self.editor,
            lambda: self._rows_and_columns()[1],
            lambda: self._app is not None and self._app.layout.has_focus(self.editor),
        )

    # -- the Surface protocol -----------------------------------------------------------------

    def show(
        self, flow_id: str, state: fs.FormState, commands: trio.MemorySendChannel[FormInput]
    ) -> None:
        """Show a form in the panel above the editor and give it keyboard focus, unless the
        person is writing in the editor (the focus rules)."""
        self.controller.attach(flow_id, state, commands)
        if not (self._writing and self.editor.text):
            self.focus_panel()
        self._changed()

    def _editor_changed(self, _buffer: Buffer) -> None:
        self._writing = True

    def hide(self, flow_id: str, ended: Ended | None = None) -> None:
        """The form is gone: the panel closes and the editor has focus again.

        A settings overlay the form opened (``?``) closes with it; one opened with
        ``/ask-settings`` stays.
        """
        if flow_id != self.controller.flow_id:
            return
        if self.overlay is not None and self._overlay_from_form:
            self._drop_overlay()
        if self.panel_focused:
            self._writing = False  # the person was answering: the next form takes the keys
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
        self.notice_text = drawn_text(text, keep_newlines=False)
        self.transcript.append((("warning", "! " + text),))
        self.invalidate()

    def set_status(self, text: str) -> None:
        """The status line's main text (the host's ``Questions pending: <n>``)."""
        self.status = text
        self.invalidate()

    def set_notice(self, text: str) -> None:
        """A short notice in the status line only, until the next input."""
        self.notice_text = drawn_text(text, keep_newlines=False)
        self.invalidate()

    def set_agent_note(self, text: str) -> None:
        """What the agent is doing, at the right of the status line."""
        self.agent_note = drawn_text(text, keep_newlines=False)
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
            self._writing = False
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
        question = Confirmation(message, send)
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
        rows, _columns = self._rows_and_columns()
        return panel_height(rows, min(EDITOR_MAX_ROWS, self.editor.document.line_count))

    def _status_fragments(self) -> StyleAndTextTuples:
        _rows, width = self._rows_and_columns()
        keys: tuple[str, ...] = ()
        if self.controller.visible:
            keys = (
                ("keys: questions · Alt+Q: editor", "Alt+Q: editor", "Alt+Q")
                if self.panel_focused
                else ("keys: editor · Alt+Q: questions", "Alt+Q: questions", "Alt+Q")
            )
        notes = [self.agent_note] if self.agent_note else []
        return status_fragments(self.status, self.notice_text, notes, width, keys)

    def _confirm_fragments(self) -> StyleAndTextTuples:
        return confirm_fragments(self.confirming, self._rows_and_columns()[1])

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
            elsewhere=ELSEWHERE_TEXT,
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
            PanelRule(self.focus_panel, lambda: self.panel_focused),
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
                    editor_bindings(
                        self.editor,
                        editor_focus & ~modal,
                        submit=self._submit,
                        quit=lambda: self._emit(Quit()),
                        notice=self.set_notice,
                        columns=lambda: self._rows_and_columns()[1],
                    ),
                    ConditionalKeyBindings(form, has_focus(self.control)),
                    DynamicKeyBindings(defer),
                    self._shell_bindings(~modal),
                    DynamicKeyBindings(settings_modal),
                    confirm_bindings(lambda: self.confirming, confirm_open),
                ]
            ),
            style=STYLE,
            full_screen=full_screen,
            mouse_support=full_screen if mouse_support is None else mouse_support,
            input=input,
            output=output,
        )
        tune_application(app, self.controller)
        return app

    def _width_changed(self, width: int) -> None:
        if self.on_width is not None:
            self.on_width(width)

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
