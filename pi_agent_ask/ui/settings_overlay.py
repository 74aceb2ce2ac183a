"""The ask settings overlay: ``?`` in a form, ``/ask-settings``, ``pi-agent-ask settings``.

The model, its reducer and its texts live in ``persistence/settings_list.py``; this module is
the terminal shell around it: a controller that feeds key presses to the reducer with the
current monotonic time, performs its effects (save the config, close), and a container that
renders the model's view. A toggle is shown changed at once and saved immediately; a failed
save reverts the toggle and shows the error (the reducer does both). The reset action needs a
second press within the confirmation window; when the window runs out unused, the overlay is
redrawn so it stops saying ``[confirm reset]``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs
from prompt_toolkit.data_structures import Point
from prompt_toolkit.filters import Condition, Filter
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import (
    ConditionalContainer,
    Container,
    Dimension,
    HSplit,
    ScrollOffsets,
    VSplit,
    Window,
)
from prompt_toolkit.layout.controls import UIContent, UIControl
from prompt_toolkit.widgets import Frame

from pi_agent_ask.form.sanitize import sanitize_line, sanitize_text
from pi_agent_ask.persistence.keys import to_prompt_toolkit
from pi_agent_ask.persistence.settings import Config, Keymaps
from pi_agent_ask.ui.render.frame import ACCENT, ERROR, HINT, MUTED, TEXT, TITLE, WARNING, Line
from pi_agent_ask.ui.render.lines import wrap_fragments

if TYPE_CHECKING:  # imported where used: the overlay's model is not needed before it opens
    from pi_agent_ask.persistence import settings_list as sl

__all__ = [
    "OVERLAY_WIDTH",
    "SettingsOverlay",
    "render_settings",
    "settings_container",
    "settings_key_bindings",
]

OVERLAY_WIDTH = 72
"""Columns of the overlay box (borders included), as the original's overlay options say."""
ON = "class:ask.setting.on"
OFF = "class:ask.setting.off"
ROW_ACTIVE = "class:ask.option.active"
POINTER = "class:ask.pointer"


@attrs.define(eq=False, repr=False)
class SettingsOverlay:
    """One open settings overlay.

    ``save`` performs a :class:`settings_list.SaveConfig` effect and later calls
    :meth:`report` with the outcome; ``saved`` receives every config that reached the file;
    ``close`` is called once, when the overlay closes; ``call_later(seconds, fn)`` schedules a
    redraw when an armed reset expires.
    """

    state: sl.SettingsListState
    save: Callable[[sl.SaveConfig], None]
    saved: Callable[[Config], None]
    close: Callable[[], None]
    invalidate: Callable[[], None] = lambda: None
    call_later: Callable[[float, Callable[[], None]], None] | None = None
    clock: Callable[[], float] = time.monotonic

    def press(self, command: sl.SettingsCommand) -> None:
        """A key press mapped to a settings-list command."""
        from pi_agent_ask.persistence import settings_list as sl

        self._apply(command)
        if (
            self.state.reset_armed_until is not None
            and self.call_later is not None
            and isinstance(command, sl.Activate)
        ):
            delay = max(0.0, self.state.reset_armed_until - self.clock()) + 0.01
            self.call_later(delay, self.invalidate)

    def report(self, outcome: sl.SaveSucceeded | sl.SaveFailed) -> None:
        """The outcome of a save this overlay asked for."""
        from pi_agent_ask.persistence import settings_list as sl

        self._apply(outcome)
        if isinstance(outcome, sl.SaveSucceeded):
            self.saved(outcome.config)

    def _apply(self, command: sl.SettingsCommand) -> None:
        from pi_agent_ask.persistence import settings_list as sl

        self.state, effects = sl.reduce(self.state, command, self.clock())
        for effect in effects:
            match effect:
                case sl.SaveConfig():
                    self.save(effect)
                case sl.CloseSettings():
                    self.close()
        self.invalidate()

    @property
    def closed(self) -> bool:
        return self.state.closed

    def view(self) -> sl.SettingsView:
        from pi_agent_ask.persistence import settings_list as sl

        return sl.settings_view(self.state, self.clock())


def render_settings(view: sl.SettingsView, width: int) -> list[Line]:
    """The overlay's scrolled rows for an inner width of ``width`` cells, all but the footer.
    Pure."""
    width = max(10, width)
    lines: list[Line] = []
    lines.extend(wrap_fragments([(TITLE, view.title)], width))
    for section, rows in view.sections():
        lines.append(())
        lines.extend(wrap_fragments([(ACCENT, section)], width))
        for row in rows:
            value = row.bracketed
            if row.kind == "action":
                value_style = WARNING if row.value == "confirm reset" else MUTED
            else:
                value_style = ON if row.value == "on" else OFF
            pointer = "› " if row.selected else "  "
            label_room = max(1, width - len(pointer) - len(value) - 1)
            label = row.label if len(row.label) <= label_room else row.label[: label_room - 1] + "…"
            gap = " " * max(1, width - len(pointer) - len(label) - len(value))
            lines.append(
                (
                    (POINTER, pointer),
                    (ROW_ACTIVE if row.selected else TEXT, label),
                    (TEXT, gap),
                    (value_style, value),
                )
            )
    lines.append(())
    lines.extend(wrap_fragments([(MUTED, view.description)], width))
    lines.append(())
    lines.extend(wrap_fragments([(TEXT, view.path_hint)], width))
    lines.extend(wrap_fragments([(ACCENT, sanitize_line(view.config_path))], width))
    return lines  # notices, the error and how to close stand below: render_settings_pinned


def render_settings_pinned(view: sl.SettingsView, width: int) -> list[Line]:
    """The overlay's rows under the scrolled ones, always in view: the notices (a settings
    file that could not be read), the error of a save, how to close the overlay. Pure."""
    width = max(10, width)
    lines: list[Line] = []
    for notice in view.notices:
        for part in sanitize_text(notice).split("\n"):
            lines.extend(wrap_fragments([(WARNING, part)], width))
    if view.error:
        for part in sanitize_text(view.error).split("\n"):
            lines.extend(wrap_fragments([(ERROR, part)], width))
    if view.footer:
        if lines:
            lines.append(())
        lines.extend(wrap_fragments([(HINT, view.footer)], width))
    return [(), *lines] if lines else []


class _SettingsControl(UIControl):
    """The overlay's rows rendered at the width the box really gets (it narrows with the
    screen, down to 40 columns), with the selected row as the cursor so a short box scrolls to
    keep it in view."""

    def __init__(self, overlay: Callable[[], SettingsOverlay | None], inner: int) -> None:
        self.overlay = overlay
        self.inner = inner
        self._last: tuple[sl.SettingsView, int, list[Line]] | None = None

    def _render(self, view: sl.SettingsView, width: int) -> list[Line]:
        return render_settings(view, width)

    def _lines(self, width: int) -> list[Line]:
        """The rows of the overlay's view at ``width``: a redraw asks for them twice (the
        box's height, then its content), and ``render_settings`` is pure, so an equal view at
        the same width is rendered once."""
        current = self.overlay()
        if current is None:
            return []
        view = current.view()
        last = self._last
        if last is not None and last[1] == width and last[0] == view:
            return last[2]
        lines = self._render(view, width)
        self._last = (view, width, lines)
        return lines

    def preferred_width(self, max_available_width: int) -> int | None:
        return min(self.inner, max_available_width)

    def preferred_height(
        self, width: int, max_available_height: int, wrap_lines: bool, get_line_prefix: object
    ) -> int | None:
        return len(self._lines(width))

    def create_content(self, width: int, height: int) -> UIContent:
        lines = self._lines(width)
        selected = next(
            (i for i, line in enumerate(lines) if line and line[0] == (POINTER, "› ")), 0
        )

        def get_line(index: int) -> StyleAndTextTuples:
            return list(lines[index]) if 0 <= index < len(lines) else []

        return UIContent(
            get_line=get_line,
            line_count=len(lines),
            cursor_position=Point(x=0, y=selected),
            show_cursor=False,
        )


class _PinnedControl(_SettingsControl):
    """The rows under the scrolled ones (:func:`render_settings_pinned`), with the cell of
    padding on each side drawn in its rows (a window of its own in the box's column, so its
    weight reaches the split that shares the box's height out)."""

    def preferred_width(self, max_available_width: int) -> int | None:
        return min(self.inner + 2, max_available_width)

    def _render(self, view: sl.SettingsView, width: int) -> list[Line]:
        return [
            ((TEXT, " "), *line) if line else ()
            for line in render_settings_pinned(view, max(10, width - 2))
        ]


def settings_container(overlay: Callable[[], SettingsOverlay | None]) -> Container:
    """The overlay box, shown while ``overlay()`` returns an open overlay."""
    inner = OVERLAY_WIDTH - 4  # borders and one cell of padding on each side
    body = Window(
        _SettingsControl(overlay, inner),
        width=Dimension(min=10, preferred=inner, max=inner),
        wrap_lines=False,
        always_hide_cursor=True,
        scroll_offsets=ScrollOffsets(top=1, bottom=1),
    )
    padded = VSplit([Window(width=1), body, Window(width=1)])
    # Below the scrolled rows, so a short screen (40x12) still shows what went wrong and how
    # to close the overlay; its weight gives it its rows before the scrolled ones get theirs.
    pinned = Window(
        _PinnedControl(overlay, inner),
        width=Dimension(min=12, preferred=inner + 2, max=inner + 2),
        height=Dimension(weight=1000),
        wrap_lines=False,
        always_hide_cursor=True,
        dont_extend_height=True,
    )
    framed = Frame(HSplit([padded, pinned]), style="class:ask.overlay")
    return ConditionalContainer(framed, filter=Condition(lambda: overlay() is not None))


def settings_key_bindings(
    overlay: Callable[[], SettingsOverlay | None], keymaps: Callable[[], Keymaps]
) -> KeyBindings:
    """``settingsModal`` bindings, active while the overlay is open.

    Built once from the keymaps of the moment the overlay's bindings were created; the keymap
    cannot change while the overlay is open except through the overlay itself (reset), and the
    surface rebuilds these bindings whenever the keymaps object changes.
    """
    from pi_agent_ask.persistence import settings_list as sl

    kb = KeyBindings()
    is_open: Filter = Condition(lambda: overlay() is not None)
    modal = keymaps().settings_modal

    def send(command: sl.SettingsCommand) -> Callable[[KeyPressEvent], None]:
        def handler(_event: KeyPressEvent) -> None:
            current = overlay()
            if current is not None:
                current.press(command)

        return handler

    for keys, command in (
        (modal.toggle, sl.Activate()),
        (modal.next_option, sl.MoveFocus(1)),
        (modal.previous_option, sl.MoveFocus(-1)),
        (modal.close, sl.Close()),
    ):
        for key in keys:
            kb.add(*to_prompt_toolkit(key), filter=is_open)(send(command))

    # Everything else is swallowed while the overlay is open: it must not reach the form.
    @kb.add("<any>", filter=is_open)
    def _swallow(_event: KeyPressEvent) -> None:
        return

    return kb
