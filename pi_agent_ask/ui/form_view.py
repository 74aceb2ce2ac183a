"""The terminal's own model of the visible form, and the prompt_toolkit control that shows it.

:class:`FormController` holds what the terminal needs between snapshots: the latest
``FormState`` the runtime sent, the channel for commands, the editor's text buffer, the scroll
position and the pending mouse press. It decides nothing about the form: keys and clicks
become commands (``form.state``), the runtime reduces them and sends a new snapshot back.

Ordering rule (why keys may wait). Which binding a key triggers depends on the snapshot (is an
editor open? is it empty?). Between sending a command and receiving the snapshot that includes
it, the terminal's view is one step behind, so a key typed in that gap -- ``n`` followed at
once by ``hello``, or a paste of both -- would be read in the wrong mode. While a command is in
flight, the bindings therefore park every key (:meth:`FormController.park`) and
:meth:`FormController.apply` replays them in order as soon as the snapshot arrives. The runtime
sends one snapshot per message it processes (or hides the form), so every command in flight is
answered and parked keys never wait for anything but the runtime itself.

Replay is one key at a time: a replayed key that sends a command stops the replay, and the keys
after it stay parked, untouched, until that command's snapshot arrives. Each key therefore
goes through the key processor at most twice (parked, then processed), whatever the length of
a burst.

Text typed into an open editor does not park keys: an ``EditorChanged`` snapshot changes
nothing the bindings read (the editor stays open; "is it empty" is read from the live buffer).
At most one text update is in flight; text typed meanwhile is sent, whole, when it is answered
or right before the next command, so the runtime always sees the text before a command that
follows it and a fast typist never fills the form's inbox.

:class:`FormControl` renders the controller's snapshot with ``render.render_form`` at the real
width and height of its window: the header (title, tabs) and footer (key hints) stay, the rows
between scroll so the focused row stays visible, and the wheel scrolls them. Clicks are mapped
through the targets of the frame that is on screen, so resizes and scrolling never leave stale
click positions. Only a completed click acts: a left press and a left release on the same
target. A press, a drag or a release alone does nothing.

When the control does not have keyboard focus (a panel above another editor), the first click
anywhere in it only takes focus; that click neither selects nor counts for a double press.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio
from prompt_toolkit.application.current import get_app
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.data_structures import Point
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding.key_processor import KeyPress
from prompt_toolkit.layout import Container
from prompt_toolkit.layout.controls import UIContent, UIControl
from prompt_toolkit.mouse_events import MouseButton, MouseEvent, MouseEventType

from pi_agent_ask.actors.form import FormInput, SettingsUpdate, UserCommand
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.snapshot import numbered_rows
from pi_agent_ask.form.transcript import cell_width, drawn_line
from pi_agent_ask.persistence.settings import Keymaps
from pi_agent_ask.ui.form_window import FormWindow
from pi_agent_ask.ui.render import Frame, RenderOptions, Target, render_form
from pi_agent_ask.ui.render.editor import editor_cells, word_rows
from pi_agent_ask.ui.render.frame import SHORT_SCREEN_ROWS
from pi_agent_ask.ui.rows import row_move

if TYPE_CHECKING:  # path completion is imported on the first Tab in an editor
    from pi_agent_ask.ui.paths import CompletionMenu

__all__ = ["WHEEL_ROWS", "FormControl", "FormController", "form_container"]

WHEEL_ROWS = 3
"""Rows one wheel step scrolls."""


@attrs.define(eq=False, repr=False)
class FormController:
    """The visible form as the terminal sees it: see the module docstring.

    ``keymaps`` and ``show_footer_hints`` are read on every render, so settings saved while the
    form is open apply at once. ``invalidate`` asks for a redraw; ``replay`` feeds parked keys
    processes one parked key (both set by the surface that runs the application).
    """

    keymaps: Callable[[], Keymaps]
    show_footer_hints: Callable[[], bool]
    invalidate: Callable[[], None] = lambda: None
    replay: Callable[[KeyPress], None] | None = None
    blocked: Callable[[], bool] = lambda: False
    """True while something modal (the settings overlay) is above the form: clicks on the form
    do nothing then (the wheel still scrolls)."""
    buffer: Buffer = attrs.field(factory=lambda: Buffer(multiline=True))
    flow_id: str | None = None
    state: fs.FormState | None = None
    commands: trio.MemorySendChannel[FormInput] | None = None
    in_flight: int = 0
    """Commands sent whose snapshot has not arrived and that park keys (see the docstring)."""
    parked: deque[KeyPress] = attrs.field(factory=deque)
    _sent: deque[bool] = attrs.field(factory=deque)
    """Per message in flight, in order: whether it parks keys (False: a text update)."""
    _text_stale: bool = False
    """The buffer changed while a text update was in flight; send it when that one returns."""
    buffer_serial: int | None = None
    scroll: int = 0
    follow_focus: bool = True
    pressed: tuple[str, int, int] | None = None
    notice: str | None = None
    """Shown until the next command: under the open editor (clipboard read results, ``@``
    path candidates), else above the key hints (an Alt key that does nothing)."""
    held_digit: int | None = None
    """A first digit the key processor holds for a second one (a question of ten rows or
    more), shown in the key hints until a key or the wait decides what it picks."""
    cwd: Path | None = None
    """Where relative ``@`` paths start (the runtime's working directory)."""
    config_notices: tuple[str, ...] = ()
    """Settings problems shown on the form until the person's first command."""
    menu: CompletionMenu | None = None
    """``@`` path candidates listed under the open editor (closed by any other edit)."""
    page_rows: int = 10
    """Body rows the control showed last (one page for PageUp/PageDown)."""
    editor_room: int | None = None
    """The cells a row of the open editor's text was wrapped to on screen last (``None``: no
    editor shown): Up and Down move by those rows."""
    laid_out: tuple[int, int] | None = None
    """The width and height of the last layout: a new size brings the focus back into view (a
    scroll position taken on the old size points at stale rows)."""
    _syncing: bool = False
    _frames: dict[bool, tuple[fs.FormState, RenderOptions, int, Frame]] = attrs.field(factory=dict)
    """The frames of the current snapshot, for a short screen (``True``) and a tall one."""
    """The latest frame with what it was rendered from (see :meth:`render`)."""

    def __attrs_post_init__(self) -> None:
        self.buffer.on_text_changed += self._buffer_changed

    # -- snapshots from the runtime -----------------------------------------------------------

    def attach(
        self, flow_id: str, state: fs.FormState, commands: trio.MemorySendChannel[FormInput]
    ) -> None:
        """Show a new form (``Surface.show``)."""
        self.flow_id = flow_id
        self.commands = commands
        self._reset_flight()
        self.scroll = 0
        self.follow_focus = True
        self.pressed = None
        self.notice = None
        self.held_digit = None
        self.buffer_serial = None
        self.state = state
        self._sync_buffer()
        self.invalidate()

    def apply(self, flow_id: str, state: fs.FormState) -> None:
        """A new snapshot of the visible form (``Surface.update``); replays parked keys."""
        if flow_id != self.flow_id:
            return
        if self.state is not None and self.state.tab != state.tab:
            # Another tab starts at its top (the focus is then scrolled into view): kept, the
            # last tab's scroll, clamped to a shorter tab's end, hid its first rows.
            self.scroll = 0
        self.state = state
        if self._sent and self._sent.popleft():
            self.in_flight -= 1
        self.follow_focus = True
        self._sync_buffer()
        self.invalidate()
        if self._text_stale and not self._text_in_flight:
            self._send_text()
        self._replay_parked()

    def _replay_parked(self) -> None:
        """Process parked keys in order until one sends a command (see the docstring)."""
        while self.in_flight == 0 and self.parked and self.replay is not None:
            self.replay(self.parked.popleft())

    def detach(self, flow_id: str) -> None:
        """The form is gone (``Surface.hide``); parked keys belonged to it and are dropped."""
        if flow_id != self.flow_id:
            return
        self.flow_id = None
        self.state = None
        self.commands = None
        self._reset_flight()
        self.pressed = None
        self.held_digit = None
        self.buffer_serial = None
        self._frames = {}
        self._set_buffer("")
        self.invalidate()

    @property
    def visible(self) -> bool:
        return self.state is not None and self.state.outcome is None

    # -- commands to the runtime --------------------------------------------------------------

    def send(self, command: fs.Command) -> None:
        """Send one command to the visible form; it is in flight until the next snapshot.
        Editor text not yet sent goes first, so the command sees what is on screen."""
        if self._text_stale:
            self._send_text()
        self.config_notices = ()
        self._send(UserCommand(command), parks=True)

    def send_settings(self, settings: fs.FormSettings) -> None:
        """Live behaviour settings changed (the settings overlay saved them)."""
        self._send(SettingsUpdate(settings), parks=True)

    def _reset_flight(self) -> None:
        self.in_flight = 0
        self._sent.clear()
        self._text_stale = False
        self.parked.clear()

    @property
    def _text_in_flight(self) -> bool:
        return not all(self._sent)

    def _send_text(self) -> None:
        self._text_stale = False
        self._send(UserCommand(fs.EditorChanged(self.buffer.text)), parks=False)

    def _send(self, message: FormInput, *, parks: bool) -> None:
        if self.commands is None:
            return
        try:
            self.commands.send_nowait(message)
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            # The form is ending (its inbox closed) or hopelessly behind: nothing to wait for.
            return
        self._sent.append(parks)
        if parks:
            self.in_flight += 1
        self.follow_focus = True
        if isinstance(message, UserCommand) and not isinstance(
            message.command, fs.AttachImage | fs.EditorChanged
        ):
            self.notice = None

    def park(self, key: KeyPress) -> None:
        """Keep a key until the snapshot of the commands in flight arrives."""
        self.parked.append(key)

    # -- the editor buffer --------------------------------------------------------------------

    def _set_buffer(self, text: str) -> None:
        self._syncing = True
        try:
            self.buffer.set_document(Document(text, len(text)), bypass_readonly=True)
        finally:
            self._syncing = False

    def _sync_buffer(self) -> None:
        """Load an editor's text into the buffer when the state opens it; while it stays open
        the buffer is ahead of the snapshot and is kept as it is."""
        editor = self.state.editor if self.state is not None else None
        if editor is None:
            if self.buffer_serial is not None:
                self.buffer_serial = None
                self._set_buffer("")
        elif editor.serial != self.buffer_serial:
            self.buffer_serial = editor.serial
            self._set_buffer(editor.text)

    def _buffer_changed(self, _buffer: Buffer) -> None:
        if self._syncing or self.buffer_serial is None:
            return
        self.notice = None  # typing dismisses the editor's notice (path candidates, ...)
        self.menu = None
        self.follow_focus = True
        if self._text_in_flight:
            self._text_stale = True
            return
        self._send_text()

    @property
    def editor_open(self) -> bool:
        return self.visible and self.state is not None and self.state.editor is not None

    @property
    def editor_empty(self) -> bool:
        """The open editor has no text (live buffer) and no images."""
        if not self.editor_open or self.state is None or self.state.editor is None:
            return False
        return not self.buffer.text and not self.state.editor.images

    def move_by_row(self, step: int) -> None:
        """Up (``step`` -1) or Down (+1) in the open editor: to the row above or below as the
        text is wrapped on screen, keeping the column of the first of a run of such moves (a
        row too short for it takes its end). On the first (last) row nothing moves, as on the
        first (last) line of a text that does not wrap."""
        buffer = self.buffer
        if self.editor_room is None:
            return
        # ``preferred_column`` is reset by every other move of the cursor: a run of Up and
        # Down keeps the column it started from.
        text = buffer.text
        rows = word_rows(text, self.editor_room)
        moved = row_move(
            text, rows, buffer.cursor_position, step, buffer.preferred_column, editor_cells
        )
        if moved is not None:
            buffer.cursor_position, column = moved
            buffer.preferred_column = column

    def editor_kind(self) -> str | None:
        if not self.editor_open or self.state is None or self.state.editor is None:
            return None
        return self.state.editor.kind

    # -- rendering ----------------------------------------------------------------------------

    def render(self, width: int, height: int | None = None) -> Frame | None:
        """The frame of the current snapshot at ``width`` (None when no form is shown);
        ``height``: the rows it will be shown in, when known."""
        state = self.state
        if state is None:
            return None
        live = self.buffer_serial is not None and state.editor is not None
        options = RenderOptions(
            keymaps=self.keymaps(),
            show_footer_hints=self.show_footer_hints(),
            editor_text=self.buffer.text if live else None,
            editor_cursor=self.buffer.cursor_position if live else None,
            notice=self.notice,
            config_notices=self.config_notices,
            held_digit=self.held_digit,
            menu=(
                tuple(
                    (candidate, index == self.menu.index)
                    for index, candidate in enumerate(self.menu.candidates)
                )
                if self.menu is not None and live
                else ()
            ),
        )
        # A redraw asks for the frame more than once (a panel's height, then its content), and
        # the host redraws for reasons of its own (its editor, status line, transcript): the
        # frame is rendered again only when its inputs changed. render_form is pure, so the
        # same snapshot (by identity) with equal options at the same width is the same frame;
        # of the height it reads only whether the screen is short (``is_short``), so the
        # snapshot's frame is kept for each of the two.
        short = height is not None and height <= SHORT_SCREEN_ROWS
        last = self._frames.get(short)
        if last is not None and last[0] is state and last[2] == width and last[1] == options:
            return last[3]
        frame = render_form(state, width, attrs.evolve(options, height=height))
        self._frames = {
            **{kept: entry for kept, entry in self._frames.items() if entry[0] is state},
            short: (state, options, width, frame),
        }
        return frame

    def scroll_by(self, rows: int) -> None:
        self.scroll = max(0, self.scroll + rows)
        self.follow_focus = False
        self.invalidate()

    def hold_digit(self, digit: int | None) -> None:
        """The key processor holds ``digit`` for a second one (``None``: it holds none now).
        A digit held is a key pressed: the notice of the key before it goes."""
        if digit != self.held_digit:
            self.held_digit = digit
            if digit is not None:
                self.notice = None
            self.invalidate()

    def option_rows(self) -> int:
        """Numbered rows of the current question (its options and ``Type your own``); 0 on
        Review or without a form."""
        return 0 if self.state is None else numbered_rows(self.state)

    def next_unanswered(self) -> None:
        """``U``: the next question (after the current one, wrapping) without an answer;
        Review when every question has one."""
        state = self.state
        if state is None:
            return
        count = len(state.params.questions)
        start = state.tab + 1 if not state.on_review else 0
        for step in range(count):
            q = (start + step) % count
            if not state.drafts[q].is_answered and not state.drafts[q].skipped:
                if q != state.tab:
                    self.send(fs.SelectTab(q))
                return
        self.send(fs.SelectTab(state.review_tab))

    def page(self, pages: int) -> None:
        """PageUp/PageDown: scroll the body by its visible height less one row."""
        self.scroll_by(pages * max(1, self.page_rows - 1))

    def scroll_to_end(self, end: bool) -> None:
        """Home/End in navigation: the body's first or last rows."""
        self.scroll = 1 << 30 if end else 0
        self.follow_focus = False
        self.invalidate()


@attrs.define(eq=False, repr=False)
class _Viewport:
    """What the control put on screen last: the frame and, per visible row, its frame row."""

    frame: Frame
    rows: list[int | None]


class FormControl(UIControl):
    """The form as one prompt_toolkit control (see the module docstring)."""

    def __init__(self, controller: FormController) -> None:
        self.controller = controller
        self._viewport: _Viewport | None = None
        self._swallow_release = False
        self._short = False
        # The form was drawn short at the last ``preferred_height`` (``SHORT_SCREEN_ROWS``).

    def is_focusable(self) -> bool:
        return True

    def preferred_width(self, max_available_width: int) -> int | None:
        return max_available_width

    def preferred_height(
        self,
        width: int,
        max_available_height: int,
        wrap_lines: bool,
        get_line_prefix: object,
    ) -> int | None:
        """The rows the form asks for: all of its frame's, at most ``max_available_height``.

        Shown in 18 rows or fewer (``SHORT_SCREEN_ROWS``) the form is drawn short (blank rows
        dropped, the key hints on one row), so a form whose tall frame fits in that many rows
        asks for its short frame's rows; a panel would keep the difference blank otherwise.
        The frame asked for is the one ``create_content`` draws next (the controller keeps
        it), and the kind the form took last is rendered first: a short frame tells how tall
        the form is drawn tall (``Frame.tall_rows``), so a redraw renders the form once, and
        twice only when it changes from one kind to the other."""
        short_rows = min(max_available_height, SHORT_SCREEN_ROWS)
        if max_available_height <= SHORT_SCREEN_ROWS or self._short:
            frame = self.controller.render(width, short_rows)
            if frame is None:
                return 0
            if max_available_height <= SHORT_SCREEN_ROWS or frame.tall_rows <= short_rows:
                self._short = True
                return min(max_available_height, len(frame.lines))
        frame = self.controller.render(width, max_available_height)
        if frame is None:
            return 0
        self._short = len(frame.lines) <= SHORT_SCREEN_ROWS
        if not self._short:
            return min(max_available_height, len(frame.lines))
        shorter = self.controller.render(width, len(frame.lines))
        return len(shorter.lines) if shorter is not None else len(frame.lines)

    def create_content(self, width: int, height: int) -> UIContent:
        frame = self.controller.render(width, height)
        if frame is None or height <= 0:
            self._viewport = None
            return UIContent(line_count=0, show_cursor=False)
        laid_out, rows = self._layout(frame, height)
        # What the terminal is given (``drawn``): the same cells, so the cursor's cell column
        # still holds, and it is mapped to an index of the characters drawn.
        lines = [drawn_line(line) for line in laid_out]
        self._viewport = _Viewport(frame, rows)
        cursor: Point | None = None
        if frame.cursor is not None and frame.cursor[0] in rows:
            y = rows.index(frame.cursor[0])
            lines[y], x = _cursor_index(lines[y], frame.cursor[1])
            cursor = Point(x=x, y=y)
        elif frame.held_row is not None and frame.held_row in rows:
            # prompt_toolkit draws a held key in the cursor's cell while it waits for the next
            # (at the focus row's first cell it hid the ``›`` marker): on the hints' own digit
            # it draws that digit over itself, and nothing on screen changes.
            cursor = Point(x=0, y=rows.index(frame.held_row))
        elif frame.focus_row in rows:
            cursor = Point(x=0, y=rows.index(frame.focus_row))

        def get_line(index: int) -> StyleAndTextTuples:
            return list(lines[index]) if 0 <= index < len(lines) else []

        return UIContent(
            get_line=get_line,
            line_count=len(lines),
            cursor_position=cursor,
            show_cursor=frame.cursor is not None and cursor is not None,
        )

    def _layout(
        self, frame: Frame, height: int
    ) -> tuple[list[tuple[tuple[str, str], ...]], list[int | None]]:
        """Choose the visible rows: sticky header and footer, the body scrolled so the focused
        row (and the editor cursor) stay visible unless the person scrolled with the wheel.

        When not everything fits, what stays on screen goes in this order: the focused row
        (with the cursor and the alerts), then the question's prompt (``lead_rows``: what the
        person answers), then one row of context around the focus. So the prompt stays with
        the header whenever one body row and the scroll marker fit beside it; where it cannot
        (a prompt taller than that), the context row never scrolls a prompt row away that the
        focus leaves room for."""
        total = len(frame.lines)
        header, footer = frame.header_rows, frame.footer_rows
        if header + footer + 1 > height:
            header = footer = 0  # too small for sticky parts: everything scrolls
        elif total > height and header + frame.lead_rows + footer + 2 <= height:
            header += frame.lead_rows  # the prompt stays with the header while options scroll
        body_first, body_end = header, total - footer
        # The body offset just past the prompt (none of it scrolls when this is 0 or less).
        prompt_end = frame.header_rows + frame.lead_rows - body_first
        body_rows = body_end - body_first
        room = height - header - footer
        # A body taller than its room gets a marker row saying where it is and how to scroll.
        marked = body_rows > room >= 2
        if marked:
            room -= 1
        controller = self.controller
        controller.page_rows = max(1, room)
        controller.editor_room = frame.editor_room
        if controller.laid_out != (frame.width, height):
            controller.laid_out = (frame.width, height)
            controller.follow_focus = True
        if controller.follow_focus:
            wanted = [frame.focus_row]
            if frame.cursor is not None:
                wanted.append(frame.cursor[0])
            # Warnings last: when they and the focus cannot both fit, the warning the person
            # just caused is what they need to read.
            wanted.extend(frame.alert_rows)
            margin = 1 if room >= 3 else 0  # one row of context around the focus when possible
            for row in wanted:
                offset = row - body_first
                if offset < controller.scroll + margin:
                    controller.scroll = max(0, offset - margin)
                elif offset > controller.scroll + room - 1 - margin:
                    least = offset - room + 1  # the row is on screen from this scroll on
                    # The context row below the focus gives way to the prompt (docstring).
                    controller.scroll = least if least < prompt_end else least + margin
        controller.scroll = max(0, min(controller.scroll, max(0, body_rows - room)))
        rows: list[int | None] = list(range(header))
        visible_body = list(range(body_first + controller.scroll, body_end))[:room]
        rows.extend(visible_body)
        lines = [frame.lines[row] if row is not None else () for row in rows]
        if marked:
            rows.append(None)
            lines.append(_scroll_marker(controller.scroll, room, body_rows, frame.width))
        if footer:
            blank = room - len(visible_body)
            rows.extend([None] * blank)
            lines.extend([()] * blank)
            rows.extend(range(body_end, total))
            lines.extend(frame.lines[body_end:total])
        return lines, rows

    def mouse_handler(self, mouse_event: MouseEvent) -> object:
        controller = self.controller
        kind = mouse_event.event_type
        if kind == MouseEventType.SCROLL_UP:
            controller.scroll_by(-WHEEL_ROWS)
            return None
        if kind == MouseEventType.SCROLL_DOWN:
            controller.scroll_by(WHEEL_ROWS)
            return None
        if controller.blocked():
            controller.pressed = None
            return None
        app = get_app()
        if kind == MouseEventType.MOUSE_DOWN and not app.layout.has_focus(self):
            # The first click into an unfocused form only takes focus.
            with suppress(ValueError):
                app.layout.focus(self)
            self._swallow_release = True
            controller.pressed = None
            return None
        target = self._target(mouse_event.position)
        if kind == MouseEventType.MOUSE_DOWN:
            if mouse_event.button != MouseButton.LEFT:
                controller.pressed = None
                return NotImplemented
            controller.pressed = target.key if target is not None else None
            return None
        if kind == MouseEventType.MOUSE_UP:
            pressed, controller.pressed = controller.pressed, None
            if self._swallow_release:
                self._swallow_release = False
                return None
            if target is not None and pressed == target.key and controller.visible:
                controller.send(target.command)
                return None
            return NotImplemented
        return NotImplemented  # moves and drags do nothing

    def _target(self, position: Point) -> Target | None:
        """The target under a click at ``position``: a cell of the window (``FormWindow``)."""
        viewport = self._viewport
        if viewport is None or not 0 <= position.y < len(viewport.rows):
            return None
        row = viewport.rows[position.y]
        if row is None:
            return None
        return viewport.frame.target_at(row, position.x)


def _scroll_marker(
    scroll: int, room: int, body_rows: int, width: int
) -> tuple[tuple[str, str], ...]:
    """``↑ 3 more · rows 4-9 of 20 · PgUp/PgDn · ↓ 11 more``, shortened to fit ``width``."""
    above = scroll
    below = max(0, body_rows - scroll - room)
    last = min(body_rows, scroll + room)
    parts = [
        *([f"↑ {above} more"] if above else []),
        f"rows {scroll + 1}-{last} of {body_rows}",
        "PgUp/PgDn",
        *([f"↓ {below} more"] if below else []),
    ]
    text = " · ".join(parts)
    if cell_width(text) > width:
        text = " · ".join(
            [
                *([f"↑{above}"] if above else []),
                f"{last}/{body_rows}",
                *([f"↓{below}"] if below else []),
            ]
        )
    return (("class:ask.muted", text[:width]),)


def _cursor_index(
    line: tuple[tuple[str, str], ...], column: int
) -> tuple[tuple[tuple[str, str], ...], int]:
    """The line and the character index prompt_toolkit needs for a cursor at cell ``column``.

    A frame's cursor is a cell column; a ``UIContent`` cursor is an index into the line's
    characters (a wide character is one index and two cells). prompt_toolkit places the cursor
    only on a character that exists, so a cursor past the line's end gets spaces to stand on.
    """
    cells = 0
    index = 0
    for _style, text in line:
        for char in text:
            if cells >= column:
                return line, index
            cells += cell_width(char)
            index += 1
    if cells >= column:
        return (*line, ("", " ")), index
    return (*line, ("", " " * (column - cells + 1))), index + column - cells


def form_container(controller: FormController, control: FormControl | None = None) -> Container:
    """The form view as a container a host layout can embed (full screen, or as a panel above
    an ordinary input editor). The terminal cursor is shown only while an editor is open."""
    control = control if control is not None else FormControl(controller)
    return FormWindow(
        content=control,
        always_hide_cursor=Condition(lambda: not controller.editor_open),
        wrap_lines=False,
    )
