"""The terminal surface: the runtime's ``Surface`` on a prompt_toolkit application.

:class:`TerminalSurface` implements the ``Surface`` protocol of ``actors/form.py``: ``show``,
``update`` and ``hide`` are synchronous and never block; they store the snapshot in the form
controller and ask for a redraw. :func:`run_terminal_surface` runs the prompt_toolkit
``Application`` inside the Trio run through trio-asyncio, from the first thing there is to show
(a form or the settings overlay) until its scope is cancelled; cancelling exits the application
and restores the terminal. Nothing here reaches into an actor: commands go out through the
channel each ``show`` hands over.

The form view itself is :func:`form_view.form_container`, which a host layout can embed as a
panel above its own input editor; the full-screen layout here is that container with the
settings overlay floating above it.

Live settings: the surface keeps the loaded settings. When the overlay saves a config, the
surface takes it at once (keymaps, footer hints). The behaviour settings reach the open form
through the surface itself (a ``SettingsUpdate`` into its inbox, in order with the person's
keys) and through ``on_settings_saved`` when the owner set it (``Runtime.apply_settings``
pushes them to the visible form too and to every later one).
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs
import trio
import trio_asyncio
from prompt_toolkit.application import Application
from prompt_toolkit.application.current import set_app
from prompt_toolkit.filters import Condition
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import DynamicKeyBindings, KeyBindings, merge_key_bindings
from prompt_toolkit.key_binding.key_processor import KeyPress
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import Float, FloatContainer, Layout
from prompt_toolkit.output import Output
from prompt_toolkit.styles import Style

from pi_agent_ask.actors.form import Ended, FormInput
from pi_agent_ask.form import state as fs
from pi_agent_ask.persistence.settings import Config, Keymaps, LoadedSettings
from pi_agent_ask.ui import rebind_event_loop_lookup
from pi_agent_ask.ui.bindings import form_key_bindings
from pi_agent_ask.ui.form_view import FormControl, FormController, form_container
from pi_agent_ask.ui.settings_overlay import (
    SettingsOverlay,
    settings_container,
    settings_key_bindings,
)

if TYPE_CHECKING:  # imported where used: a paste, the settings overlay (not at the start)
    from pi_agent_ask.clipboard import ClipboardResult
    from pi_agent_ask.persistence import settings_list as sl

__all__ = ["STYLE", "TerminalSurface", "form_settings_of", "run_terminal_surface"]

STYLE = Style.from_dict(
    {
        "ask.title": "bold",
        "ask.accent": "ansicyan",
        "ask.muted": "ansibrightblack",
        "ask.warning": "ansiyellow",
        "ask.success": "ansigreen",
        "ask.error": "ansired bold",
        "ask.prompt": "bold",
        "ask.tab": "",
        "ask.tab.active": "reverse bold",
        "ask.pointer": "ansicyan bold",
        "ask.option.active": "ansicyan bold",
        "ask.mark.selected": "ansigreen bold",
        "ask.note": "ansimagenta",
        "ask.editor": "underline",
        "ask.placeholder": "ansibrightblack italic",
        "ask.hint": "bold",
        # prompt_toolkit's style of a held key, drawn in the cursor's cell while it waits for
        # the next; the form puts that cursor on the hints' own digit (``Frame.held_row``).
        "partial-key-binding": "bold",
        "ask.rule": "ansibrightblack",
        "ask.setting.on": "ansigreen bold",
        "ask.setting.off": "ansibrightblack",
        "ask.overlay": "",
        "ask.focus": "ansicyan bold",
    }
)

ESCAPE_TIMEOUT = 0.05
"""Seconds a lone Esc byte waits for the rest of an escape sequence (prompt_toolkit's
``ttimeoutlen``; its default of half a second makes Esc feel slow)."""
SEQUENCE_TIMEOUT = 0.1
"""Seconds a key that starts a longer binding waits for the next key (``timeoutlen``)."""


def form_settings_of(config: Config) -> fs.FormSettings:
    """The behaviour settings a form follows, from a config."""
    behaviour = config.behaviour
    return fs.FormSettings(
        auto_submit_when_answered_without_notes=behaviour.auto_submit_when_answered_without_notes,
        confirm_dismiss_when_dirty=behaviour.confirm_dismiss_when_dirty,
        double_press_review_shortcuts=behaviour.double_press_review_shortcuts,
    )


@attrs.define(eq=False, repr=False)
class TerminalSurface:
    """The ``Surface`` of a terminal: one visible form and the settings overlay.

    ``settings`` is the loaded settings; ``settings.path`` is the file the overlay saves.
    ``on_settings_saved`` receives the settings after each config the overlay saved.
    ``clipboard`` replaces the system clipboard (tests, hosts with their own).
    """

    settings: LoadedSettings
    on_settings_saved: Callable[[LoadedSettings], None] | None = None
    clipboard: Callable[[], Awaitable[ClipboardResult]] | None = None
    """Reads an image from the clipboard; ``None``: the system clipboard (``clipboard.py``)."""
    controller: FormController = attrs.field(init=False)
    control: FormControl = attrs.field(init=False)
    overlay: SettingsOverlay | None = None
    settings_closed: trio.Event = attrs.field(factory=trio.Event)
    _app: Application[Any] | None = None
    _nursery: trio.Nursery | None = None
    clock: Callable[[], float] = time.monotonic
    """Monotonic seconds for the overlay's reset confirmation window (tests freeze it)."""
    _wanted: trio.Event = attrs.field(factory=trio.Event)
    _exit_when_idle: bool = False
    _saves_in_flight: int = 0
    _close_when_saved: bool = False
    _notices_shown: bool = False
    _save_queue: deque[tuple[SettingsOverlay, sl.SaveConfig]] = attrs.field(factory=deque)
    _saving: bool = False

    def __attrs_post_init__(self) -> None:
        self.controller = FormController(
            keymaps=self.keymaps,
            show_footer_hints=lambda: self.settings.config.behaviour.show_footer_hints,
            invalidate=self.invalidate,
            replay=self._replay,
            blocked=lambda: self.overlay is not None,
        )
        self.control = FormControl(self.controller)

    # -- the Surface protocol -----------------------------------------------------------------

    def show(
        self, flow_id: str, state: fs.FormState, commands: trio.MemorySendChannel[FormInput]
    ) -> None:
        """Make a form visible and focused. The first form shown also shows what was wrong
        with the settings file, if anything."""
        self.controller.attach(flow_id, state, commands)
        if not self._notices_shown:
            self._notices_shown = True
            self.controller.config_notices = self.settings.notices
        if self._app is not None:
            self._app.layout.focus(self.control)
        self._wanted.set()

    def update(self, flow_id: str, state: fs.FormState) -> None:
        """A new snapshot of a visible form."""
        self.controller.apply(flow_id, state)

    def hide(self, flow_id: str, ended: Ended | None = None) -> None:
        """The form is gone; the settings overlay it opened, if any, closes with it."""
        if flow_id == self.controller.flow_id and self.overlay is not None:
            self._drop_overlay()
        self.controller.detach(flow_id)
        self._idle_check()

    @property
    def has_content(self) -> bool:
        """Whether a form or the settings overlay is shown."""
        return self.controller.state is not None or self.overlay is not None

    @property
    def app_running(self) -> bool:
        """Whether the terminal application is on screen now."""
        return self._app is not None and self._app.is_running

    def _idle_check(self) -> None:
        """In ``exit_when_idle`` mode, leave the terminal when nothing is shown any more."""
        app = self._app
        if not self._exit_when_idle or self.has_content or app is None or not app.is_running:
            return
        if app.future is None or not app.future.done():
            app.exit()

    # -- live settings and the overlay --------------------------------------------------------

    def keymaps(self) -> Keymaps:
        return self.settings.config.keymaps

    def open_settings(self) -> None:
        """Open the settings overlay over whatever is shown (the form keeps its state)."""
        if self.overlay is not None:
            return
        from pi_agent_ask.persistence import settings_list as sl

        self.settings_closed = trio.Event()
        self.overlay = SettingsOverlay(
            state=sl.open_settings_list(
                self.settings.global_config, self.settings.path, notices=self.settings.notices
            ),
            save=self._start_save,
            saved=self.apply_config,
            close=self._close_overlay,
            invalidate=self.invalidate,
            call_later=self._call_later,
            clock=self.clock,
        )
        self._wanted.set()
        self.invalidate()

    def _close_overlay(self) -> None:
        """The person closed the overlay. A save still in flight is waited for (a few
        milliseconds, two fsyncs): once the overlay is gone, the form behaves as the settings
        it showed, and a failed save is reverted before it closes."""
        if self._saves_in_flight:
            self._close_when_saved = True
            return
        self._drop_overlay()

    def _drop_overlay(self) -> None:
        self._close_when_saved = False
        self.overlay = None
        self.settings_closed.set()
        self.invalidate()
        self._idle_check()

    def apply_config(self, config: Config) -> None:
        """A config was saved: apply it to this surface and to the open form at once. The
        file now holds a config that loads, so what was wrong with it when it was read (the
        load notices) is gone: from the form's footer, and from the overlay when it opens
        again."""
        old = self.settings.config
        self.settings = attrs.evolve(self.settings.with_global_config(config), notices=())
        self.controller.config_notices = ()
        # The open form gets its behaviour settings from here, in order with the keys: the
        # owner's push below travels through the runtime and could arrive after a key typed
        # right after the overlay closed (which then acted under the old settings).
        if form_settings_of(old) != form_settings_of(self.settings.config):
            self.controller.send_settings(form_settings_of(self.settings.config))
        if self.on_settings_saved is not None:
            self.on_settings_saved(self.settings)
        self.invalidate()

    def _start_save(self, effect: sl.SaveConfig) -> None:
        """Queue a save. Saves run one at a time, in the order they were made, so the file,
        the overlay and the form end with the last toggle (concurrent worker threads finished
        out of order and left an older config on disk)."""
        overlay = self.overlay
        if self._nursery is None or overlay is None:
            return
        self._save_queue.append((overlay, effect))
        self._saves_in_flight += 1
        if not self._saving:
            self._saving = True
            self._nursery.start_soon(self._save_all)

    async def _save_all(self) -> None:
        from pi_agent_ask.persistence import settings_list as sl

        try:
            while self._save_queue:
                overlay, effect = self._save_queue.popleft()
                try:
                    outcome = await trio.to_thread.run_sync(
                        sl.save_command, self.settings.path, effect
                    )
                    overlay.report(outcome)
                finally:
                    self._saves_in_flight -= 1
                    if (
                        self._close_when_saved
                        and not self._saves_in_flight
                        and self.overlay is overlay
                    ):
                        self._drop_overlay()
        finally:
            self._saving = False

    # -- clipboard images ---------------------------------------------------------------------

    def paste_image(self) -> None:
        """Start reading a clipboard image for the open editor (its paste-image key).

        The read remembers the editor it started for: a result that arrives after that editor
        closed carries the old serial and the form attaches it nowhere.
        """
        state = self.controller.state
        if state is None or state.editor is None or self._nursery is None:
            return
        from pi_agent_ask.clipboard import READING_NOTICE

        self.controller.notice = READING_NOTICE
        self.invalidate()
        self._nursery.start_soon(self._read_clipboard, self.controller.flow_id, state.editor.serial)

    async def _read_clipboard(self, flow_id: str | None, serial: int) -> None:
        from pi_agent_ask.clipboard import ClipboardImage, notice_for, to_image

        read = self.clipboard if self.clipboard is not None else _system_clipboard
        result = await read()
        if self.controller.flow_id != flow_id:
            return
        if isinstance(result, ClipboardImage):
            self.controller.notice = None
            self.controller.send(fs.AttachImage(to_image(result), serial))
        else:
            self.controller.notice = notice_for(result)
        self.invalidate()

    # -- the application ----------------------------------------------------------------------

    def invalidate(self) -> None:
        if self._app is not None and self._app.is_running:
            self._app.invalidate()

    def _call_later(self, delay: float, callback: Callable[[], None]) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(_later, delay, callback)

    def _replay(self, key: KeyPress) -> None:
        """Process one parked key now (the controller replays them one by one)."""
        app = self._app
        if app is None or not app.is_running:
            return
        with set_app(app):
            app.key_processor.feed(key, first=True)
            app.key_processor.process_keys()

    def build_application(
        self,
        *,
        input: Input | None = None,
        output: Output | None = None,
        full_screen: bool = True,
        mouse_support: bool | None = None,
    ) -> Application[Any]:
        """The prompt_toolkit application showing the form and the settings overlay."""
        overlay_open = Condition(lambda: self.overlay is not None)
        form = form_key_bindings(
            self.controller,
            self.keymaps,
            open_settings=self.open_settings,
            overlay_open=overlay_open,
            paste_image=self.paste_image,
        )
        cache: dict[str, tuple[Keymaps, KeyBindings]] = {}
        closed = KeyBindings()  # the overlay's bindings are all off while it is closed

        def modal() -> KeyBindings:
            if self.overlay is None:
                return closed
            live = self.keymaps()
            cached = cache.get("modal")
            if cached is None or cached[0] is not live:
                cached = (live, settings_key_bindings(lambda: self.overlay, lambda: live))
                cache["modal"] = cached
            return cached[1]

        body = form_container(self.controller, self.control)
        root = FloatContainer(
            content=body,
            floats=[Float(content=settings_container(lambda: self.overlay))],
        )
        app: Application[Any] = Application(
            layout=Layout(root, focused_element=body),
            key_bindings=merge_key_bindings([DynamicKeyBindings(modal), form]),
            style=STYLE,
            full_screen=full_screen,
            mouse_support=full_screen if mouse_support is None else mouse_support,
            input=input,
            output=output,
        )
        tune_application(app, self.controller)
        return app


DIGITS = frozenset("123456789")
JUMP_TIMEOUT = 0.6
"""Seconds a digit waits for a second one on a question with ten or more rows."""


def tune_application(app: Application[Any], controller: FormController) -> None:
    """The timing every application showing the form shares: a short ``Esc``, redraws at once,
    the key processor's timeout (``timeoutlen``) chosen for the keys it holds, and key handling
    made ready after the first frame, not on the first key."""
    app.ttimeoutlen = ESCAPE_TIMEOUT
    # Redraw at once: prompt_toolkit would postpone a redraw up to 10 ms while "other work is
    # scheduled", which under trio-asyncio is always, so every key waited the full 10 ms.
    # Invalidations are still coalesced into one redraw.
    app.max_render_postpone_time = None

    def tune(_processor: object = None) -> None:
        # Read after every key, just before the key processor starts its timeout for the keys
        # it holds. A held Esc waits no more: the input parser already gave the rest of an
        # escape sequence (Alt+<key> included) ``ESCAPE_TIMEOUT`` to arrive, so this Esc is
        # a lone one. A digit on a question with 10+ numbered rows may be the first of two
        # (``1`` ``2`` picks 12), and a person needs time for the second.
        held = app.key_processor.key_buffer
        if held and held[0].key == Keys.Escape:
            app.timeoutlen = 0.0
        elif controller.option_rows() >= 10:
            app.timeoutlen = JUMP_TIMEOUT
        else:
            app.timeoutlen = SEQUENCE_TIMEOUT
        # The hints show a digit held for a second one; whatever ends the wait (a key, or the
        # timeout's flush, which is no key press) goes through a binding that clears it.
        digit = held[0].key if len(held) == 1 and not controller.editor_open else ""
        controller.hold_digit(int(digit) if digit in DIGITS else None)

    tune()
    app.key_processor.after_key_press += tune

    def fill_key_caches(_app: object) -> None:
        # prompt_toolkit fills its binding caches (each of its default bindings wrapped with
        # its conditions, over a thousand) on the first key it processes: the person's first
        # key after a form appeared waited for that. A key no binding acts on (``Keys.Ignore``)
        # fills them right after the first frame, while the person reads the form.
        app.after_render -= fill_key_caches
        with set_app(app):
            app.key_processor.feed(KeyPress(Keys.Ignore))
            app.key_processor.process_keys()

    app.after_render += fill_key_caches


async def _system_clipboard() -> ClipboardResult:
    from pi_agent_ask.clipboard import read_clipboard_image, read_proc_version

    return await read_clipboard_image(env=dict(os.environ), proc_version=await read_proc_version())


async def _run_on_trio_asyncio(start: Callable[[], Awaitable[Any]]) -> Any:
    return await trio_asyncio.aio_as_trio(start)()


async def _later(delay: float, callback: Callable[[], None]) -> None:
    await trio.sleep(delay)
    callback()


async def run_terminal_surface(
    surface: TerminalSurface,
    *,
    input: Input | None = None,
    output: Output | None = None,
    full_screen: bool = True,
    mouse_support: bool | None = None,
    exit_when_idle: bool = False,
    on_idle: Callable[[], None] | None = None,
    run_asyncio: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]] | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``surface``'s terminal application until cancelled.

    Starts at once (``task_status.started()``) so forms can be shown right away; the
    application itself starts with the first form or overlay, so a call that never shows
    anything never switches the terminal to the full-screen buffer. ``input``/``output`` are
    prompt_toolkit objects (``None``: the process's terminal). Mouse support defaults to on in
    full screen and off otherwise (a regular terminal keeps mouse selection).

    With ``exit_when_idle`` the application leaves the terminal whenever nothing is shown any
    more (``on_idle`` is called then, e.g. to print what waited) and starts again with the next
    form; without it, it stays until cancelled.

    ``run_asyncio(start)`` runs ``start()`` (the application's ``run_async``) on an asyncio
    loop that is already running and returns its result; cancelling it cancels that task. By
    default the application runs on a trio-asyncio loop opened here; ``pi_agent_ask.aio``
    passes its host loop instead (``docs/asyncio.md``).
    """
    if run_asyncio is None:
        rebind_event_loop_lookup()
        loop: Any = trio_asyncio.open_loop()
        run_asyncio = _run_on_trio_asyncio
    else:
        loop = contextlib.nullcontext()
    surface._exit_when_idle = exit_when_idle
    async with loop, trio.open_nursery() as nursery:
        surface._nursery = nursery
        task_status.started()
        try:
            while True:
                while not surface.has_content:
                    surface._wanted = trio.Event()
                    await surface._wanted.wait()
                app = surface.build_application(
                    input=input,
                    output=output,
                    full_screen=full_screen,
                    mouse_support=mouse_support,
                )
                surface._app = app
                run = functools.partial(
                    app.run_async, set_exception_handler=False, handle_sigint=False
                )
                await run_asyncio(run)
                surface._app = None
                if on_idle is not None:
                    on_idle()
        finally:
            surface._app = None
            surface._nursery = None
            nursery.cancel_scope.cancel()
