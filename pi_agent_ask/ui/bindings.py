"""Key bindings of the form, built from the live keymaps and mapped to form commands.

Contexts, each a ``Condition`` over the controller's latest snapshot:

- *navigation*: a form is shown, no editor is open, the settings overlay is closed. The
  ``main`` keymap acts here, plus the fixed keys: digits ``1``..``9`` (``Number``) and ``D``
  (``Skip``).
- *custom editor* / *note editor*: the ``editor`` / ``noteEditor`` keymaps; the ``*WhenEmpty``
  actions only while the editor is empty. Everything else a person types is text: digits,
  ``D``, ``?`` in a non-empty editor, arrows and Tab in a non-empty editor.
- *global*: ``global.dismiss`` wherever a form is shown; ``global.settings`` in navigation and
  in an empty editor.
- *Alt+<key>* without a binding of its own, everywhere: nothing but a notice naming it (a
  terminal sends Alt+Q as Esc followed by ``q``, which must not read as Esc and then ``q``).

prompt_toolkit calls the last added of several matching bindings, so the text-editing defaults
are added first and the configurable actions after them: a person who binds ``editor.submit``
to ``ctrl+a`` gets submit, not "start of line". The binding set is rebuilt whenever the
keymaps object changes (settings saved or reset while a form is open).

The first binding of all parks keys while a command is in flight (``form_view`` explains why);
it is eager, so it wins over every other binding, and its filter is false the rest of the time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition, Filter
from prompt_toolkit.key_binding import (
    DynamicKeyBindings,
    KeyBindings,
    KeyBindingsBase,
    KeyPressEvent,
    merge_key_bindings,
)
from prompt_toolkit.keys import Keys

from pi_agent_ask.form import state as fs
from pi_agent_ask.form.sanitize import is_safe, sanitize_text
from pi_agent_ask.persistence.keys import format_key, from_prompt_toolkit, to_prompt_toolkit
from pi_agent_ask.persistence.settings import Keymaps
from pi_agent_ask.ui.form_view import FormController
from pi_agent_ask.ui.render.footer import no_such_row
from pi_agent_ask.ui.render.header import NEXT_UNANSWERED_KEY

__all__ = [
    "FIXED_SKIP_KEY",
    "alt_key_bindings",
    "editing_key_bindings",
    "form_key_bindings",
    "keymap_key_bindings",
]

FIXED_SKIP_KEY = "D"
"""``shift+d``: skip the current question (navigation only; text in editors)."""
EXTERNAL_EDITOR_KEY = "c-g"
"""``ctrl+g`` in an editor: edit its text in ``$VISUAL`` / ``$EDITOR``."""


def _add(
    kb: KeyBindings,
    keys: tuple[str, ...],
    handler: Callable[[KeyPressEvent], None],
    filter: Filter,
) -> None:
    for key in keys:
        kb.add(*to_prompt_toolkit(key), filter=filter)(handler)


def _send(controller: FormController, command: fs.Command) -> Callable[[KeyPressEvent], None]:
    def handler(_event: KeyPressEvent) -> None:
        controller.send(command)

    return handler


def _number_key(controller: FormController, digit: int) -> Callable[[KeyPressEvent], None]:
    """A row number typed in navigation (one digit, or two from 10 on): its row, or, past the
    question's last numbered row, a notice saying which rows there are (as for any other key
    that does nothing here, never silence). Review's digits past its actions stay ignored
    (the reference's rule)."""

    def handler(_event: KeyPressEvent) -> None:
        controller.hold_digit(None)
        rows = controller.option_rows()
        if 0 < rows < digit:
            controller.notice = no_such_row(digit, rows)
            controller.invalidate()
            return
        controller.send(fs.Number(digit))

    return handler


def _has_rows(controller: FormController, rows: int) -> Filter:
    """True while the current question has at least ``rows`` option rows."""
    return Condition(lambda: controller.option_rows() >= rows)


def _call(action: Callable[[], None]) -> Callable[[KeyPressEvent], None]:
    def handler(_event: KeyPressEvent) -> None:
        action()

    return handler


def editing_key_bindings(controller: FormController, in_editor: Filter) -> KeyBindings:
    """Plain text editing of the open editor's buffer (lowest priority)."""
    kb = KeyBindings()
    buffer = controller.buffer
    has_text = in_editor & Condition(lambda: bool(controller.buffer.text))

    @kb.add(Keys.Any, filter=in_editor)
    def _insert(event: KeyPressEvent) -> None:
        key = event.key_sequence[0].key
        if isinstance(key, Keys):
            return  # a key without a binding here (F5, ctrl+g, ...): not text
        if is_safe(event.data):  # not ``isprintable``: that refused the ZWJ of 👩‍💻
            buffer.insert_text(event.data)

    @kb.add(Keys.BracketedPaste, filter=in_editor)
    def _paste(event: KeyPressEvent) -> None:
        # Pasted text is neutralised before it reaches the buffer, so nothing it carries can
        # reach the terminal when it is echoed.
        buffer.insert_text(sanitize_text(event.data.replace("\r\n", "\n").replace("\r", "\n")))

    @kb.add("c-m", filter=in_editor)
    def _newline(_event: KeyPressEvent) -> None:
        buffer.insert_text("\n")  # reached only when Enter is not the submit/save key

    # A new line whatever Enter does: Alt+Enter, or Ctrl+J (what many terminals send for
    # Shift+Enter or Ctrl+Enter).
    @kb.add("escape", "c-m", filter=in_editor)
    @kb.add("c-j", filter=in_editor)
    def _break_line(_event: KeyPressEvent) -> None:
        buffer.insert_text("\n")

    @kb.add(EXTERNAL_EDITOR_KEY, filter=in_editor)
    def _external_editor(event: KeyPressEvent) -> None:
        from pi_agent_ask.ui.external_editor import edit_in_external_editor

        event.app.create_background_task(_edit(edit_in_external_editor(buffer), controller))

    @kb.add("c-h", filter=in_editor)
    def _backspace(_event: KeyPressEvent) -> None:
        buffer.delete_before_cursor(1)

    @kb.add("delete", filter=in_editor)
    def _delete(_event: KeyPressEvent) -> None:
        buffer.delete(1)

    @kb.add("left", filter=in_editor)
    def _left(_event: KeyPressEvent) -> None:
        buffer.cursor_left()

    @kb.add("right", filter=in_editor)
    def _right(_event: KeyPressEvent) -> None:
        buffer.cursor_right()

    # By the rows the text is drawn in, which are lines only while it does not wrap.
    @kb.add("up", filter=in_editor)
    def _up(_event: KeyPressEvent) -> None:
        controller.move_by_row(-1)

    @kb.add("down", filter=in_editor)
    def _down(_event: KeyPressEvent) -> None:
        controller.move_by_row(1)

    @kb.add("home", filter=in_editor)
    @kb.add("c-a", filter=in_editor)
    def _home(_event: KeyPressEvent) -> None:
        buffer.cursor_position += buffer.document.get_start_of_line_position()

    @kb.add("end", filter=in_editor)
    @kb.add("c-e", filter=in_editor)
    def _end(_event: KeyPressEvent) -> None:
        buffer.cursor_position += buffer.document.get_end_of_line_position()

    @kb.add("c-u", filter=in_editor)
    def _kill_start(_event: KeyPressEvent) -> None:
        buffer.delete_before_cursor(-buffer.document.get_start_of_line_position())

    @kb.add("c-k", filter=in_editor)
    def _kill_end(_event: KeyPressEvent) -> None:
        buffer.delete(buffer.document.get_end_of_line_position())

    @kb.add("c-w", filter=in_editor)
    def _kill_word(_event: KeyPressEvent) -> None:
        start = buffer.document.find_start_of_previous_word() or 0
        buffer.delete_before_cursor(-start)

    # Words, as the host's editor and a shell have them: Ctrl+Left/Right and Alt+B/F move,
    # Alt+Backspace and Alt+D delete (bound as Alt pairs, so not the "does nothing" notice).
    @kb.add("c-left", filter=in_editor)
    @kb.add("escape", "b", filter=in_editor)
    def _word_left(_event: KeyPressEvent) -> None:
        buffer.cursor_position += buffer.document.find_previous_word_beginning() or 0

    @kb.add("c-right", filter=in_editor)
    @kb.add("escape", "f", filter=in_editor)
    def _word_right(_event: KeyPressEvent) -> None:
        buffer.cursor_position += buffer.document.find_next_word_ending() or 0

    @kb.add("escape", "c-h", filter=in_editor)
    def _kill_word_left(_event: KeyPressEvent) -> None:
        buffer.delete_before_cursor(-(buffer.document.find_previous_word_beginning() or 0))

    @kb.add("escape", "d", filter=in_editor)
    def _kill_word_right(_event: KeyPressEvent) -> None:
        buffer.delete(buffer.document.find_next_word_ending() or 0)

    # Ctrl+Alt+D (fixed): remove the editor's last image. Configured keys win over it.
    @kb.add("escape", "c-d", filter=in_editor)
    def _remove_image(_event: KeyPressEvent) -> None:
        controller.send(fs.RemoveLastImage())

    # With text in the editor, Tab stays in the editor: it completes an ``@`` file path before
    # the cursor (candidates show as the editor's notice), and otherwise does nothing.
    # With several candidates they show as a list under the editor; Tab/Shift+Tab (and
    # Down/Up while the list is open) put the next/previous one into the text.
    menu_open = in_editor & Condition(lambda: controller.menu is not None)

    def choose(delta: int) -> None:
        menu = controller.menu
        assert menu is not None
        menu, text, cursor = menu.moved(buffer.text, delta)
        buffer.set_document(Document(text, cursor))  # closes the menu (a text change) ...
        controller.menu = menu  # ... which stays open on its new choice
        controller.invalidate()

    @kb.add("c-i", filter=has_text)
    def _tab(_event: KeyPressEvent) -> None:
        if controller.menu is not None:
            choose(1)
            return
        from pi_agent_ask.ui.paths import CompletionMenu, complete_at_path

        completion = complete_at_path(
            buffer.text, buffer.cursor_position, controller.cwd or Path.cwd()
        )
        if completion is None:
            return
        if completion.text != buffer.text:
            buffer.set_document(Document(completion.text, completion.cursor))
        if completion.candidates:
            controller.menu = CompletionMenu(
                completion.start, completion.base, completion.candidates
            )
        controller.invalidate()

    @kb.add("s-tab", filter=has_text)
    def _back_tab(_event: KeyPressEvent) -> None:
        if controller.menu is not None:
            choose(-1)

    @kb.add("down", filter=menu_open)
    def _menu_down(_event: KeyPressEvent) -> None:
        choose(1)

    @kb.add("up", filter=menu_open)
    def _menu_up(_event: KeyPressEvent) -> None:
        choose(-1)

    return kb


async def _edit(editing: Awaitable[str | None], controller: FormController) -> None:
    problem = await editing
    if problem is not None:
        controller.notice = problem
        controller.invalidate()


NOT_TYPED_KEYS = frozenset(
    {
        Keys.Escape,
        Keys.BracketedPaste,
        Keys.Vt100MouseEvent,
        Keys.WindowsMouseEvent,
        Keys.CPRResponse,
        Keys.SIGINT,
        Keys.Ignore,
    }
)
"""Input that can follow an Esc in one read without being the Alt form of a key: another Esc,
a paste, a mouse report, a terminal's reply."""


def alt_key_notice(key: str | Keys) -> str:
    """What the form says to Alt+``key`` when nothing is bound to it."""
    name = from_prompt_toolkit(key.value if isinstance(key, Keys) else key)
    if name == "q":
        return "Alt+Q does nothing here: the form has the keys."
    if name is None:
        return "That Alt key does nothing here."
    return f"{format_key('alt+' + name)} does nothing here."


def alt_key_bindings(controller: FormController, overlay_open: Filter) -> KeyBindings:
    """Alt+<key> with no binding of its own (see the module docstring).

    A terminal sends Alt+<key> as Esc and the key in one write, and prompt_toolkit reads them
    as two key presses. Bound as the pair, they never reach the Esc bindings (cancel, close an
    editor, close the overlay) or the key's own. Every Alt binding that names its key (a
    configured ``alt+n``, Alt+Enter, Ctrl+Alt+D, the host's Alt+Q) is the more specific match
    and wins. A lone Esc is a prefix of the pair now, so it waits for the key processor's
    timeout, which ``ui.surface.tune_application`` makes zero after an Esc: the input parser
    has already waited for the rest of an escape sequence by then."""
    kb = KeyBindings()

    @kb.add("escape", Keys.Any)
    def _alt(event: KeyPressEvent) -> None:
        follower = event.key_sequence[1]
        if follower.key in NOT_TYPED_KEYS:
            # Not an Alt key: the Esc before it goes, the input after it is processed.
            event.app.key_processor.feed(follower, first=True)
            return
        if not overlay_open():
            controller.notice = alt_key_notice(follower.key)
            controller.invalidate()

    return kb


def keymap_key_bindings(
    controller: FormController,
    keymaps: Keymaps,
    *,
    open_settings: Callable[[], None],
    overlay_open: Filter,
    paste_image: Callable[[], None] | None = None,
    elsewhere: str = "",
) -> KeyBindings:
    """The bindings of one keymaps object: fixed keys, then the configurable actions.

    ``paste_image`` starts a clipboard image read for the open editor (``*.pasteImage``).
    ``elsewhere`` ends what the form says of typed text that reaches no editor: where else
    it may go (a host's own editor).
    """
    shown = Condition(lambda: controller.visible) & ~overlay_open
    navigation = shown & Condition(lambda: not controller.editor_open)
    custom = shown & Condition(lambda: controller.editor_kind() == "custom")
    note = shown & Condition(lambda: controller.editor_kind() in ("note", "option_note"))
    empty = Condition(lambda: controller.editor_empty)
    main = keymaps.main
    kb = KeyBindings()

    # Scrolling (fixed keys): PageUp/PageDown wherever a form is shown, Home/End in navigation
    # (in an editor they move its cursor).
    kb.add("pageup", filter=shown)(_call(lambda: controller.page(-1)))
    kb.add("pagedown", filter=shown)(_call(lambda: controller.page(1)))
    kb.add("home", filter=navigation)(_call(lambda: controller.scroll_to_end(False)))
    kb.add("end", filter=navigation)(_call(lambda: controller.scroll_to_end(True)))

    # Rows 10 and up: two digits typed in a row ("1", "2" picks 12). A digit that begins a
    # row of the question waits for the next key (``surface.JUMP_TIMEOUT``), and the hints
    # say so: a second digit makes the number (past the last row, "15" of 12 rows, it picks
    # nothing and says so, never row 1 and then a 5 on the next question), the confirm key
    # picks the digit's own row at once, the cancel key clears it. Any other key, or the wait
    # running out, lets the digit act alone first. Elsewhere a digit acts at once.
    for digit in range(1, 10):
        kb.add(str(digit), filter=navigation)(_number_key(controller, digit))
        begins = navigation & _has_rows(controller, digit * 10)
        for second in range(10):
            number = _number_key(controller, digit * 10 + second)
            kb.add(str(digit), str(second), filter=begins)(number)
        for key in main.confirm:
            kb.add(str(digit), *to_prompt_toolkit(key), filter=begins)(
                _number_key(controller, digit)
            )
        for key in main.cancel:
            kb.add(str(digit), *to_prompt_toolkit(key), filter=begins)(
                _call(lambda: controller.hold_digit(None))
            )
    kb.add(FIXED_SKIP_KEY, filter=navigation)(_send(controller, fs.Skip()))
    kb.add(NEXT_UNANSWERED_KEY, filter=navigation)(_call(controller.next_unanswered))

    # Pasted text with no editor open is neither keys (it would select, skip, switch types)
    # nor dropped without a word: the form says where it goes. So does a typed character no
    # key is bound to (a letter typed after the editor closed, say).
    def text_goes_to_an_editor(what: str) -> None:
        note = f" ({format_key(main.option_note[0])})" if main.option_note else ""
        controller.notice = (
            f"{what} goes into an editor: open Type your own, or a note{note}.{elsewhere}"
        )
        controller.invalidate()

    @kb.add(Keys.BracketedPaste, filter=navigation)
    def _paste_nowhere(_event: KeyPressEvent) -> None:
        text_goes_to_an_editor("Pasted text")

    on_question = navigation & Condition(lambda: controller.option_rows() > 0)

    @kb.add(Keys.Any, filter=on_question)
    def _typed_nowhere(event: KeyPressEvent) -> None:
        if isinstance(event.key_sequence[0].key, Keys) or not event.data.strip():
            return  # a key without a binding here (F5, ctrl+g, ...): not text
        if is_safe(event.data):
            text_goes_to_an_editor("Typed text")

    for keys, command in (
        (main.confirm, fs.Confirm()),
        (main.cancel, fs.Cancel()),
        (main.toggle, fs.Toggle()),
        (main.change_question_type, fs.ChangeQuestionType()),
        (main.next_tab, fs.NextTab()),
        (main.previous_tab, fs.PreviousTab()),
        (main.next_option, fs.NextOption()),
        (main.previous_option, fs.PreviousOption()),
        (main.option_note, fs.OpenOptionNote()),
        (main.question_note, fs.OpenQuestionNote()),
    ):
        _add(kb, keys, _send(controller, command), navigation)

    for context, editor in ((custom, keymaps.editor), (note, keymaps.note_editor)):
        save = keymaps.editor.submit if editor is keymaps.editor else keymaps.note_editor.save
        _add(kb, save, _send(controller, fs.EditorSubmit()), context)
        _add(kb, editor.close, _send(controller, fs.EditorClose()), context)
        when_empty = context & empty
        _add(kb, editor.next_tab_when_empty, _send(controller, fs.EditorMoveTab(1)), when_empty)
        _add(
            kb, editor.previous_tab_when_empty, _send(controller, fs.EditorMoveTab(-1)), when_empty
        )
        _add(
            kb, editor.next_option_when_empty, _send(controller, fs.EditorMoveOption(1)), when_empty
        )
        _add(
            kb,
            editor.previous_option_when_empty,
            _send(controller, fs.EditorMoveOption(-1)),
            when_empty,
        )
        if paste_image is not None:
            _add(kb, editor.paste_image, _call(paste_image), context)

    _add(kb, keymaps.global_.settings, _call(open_settings), navigation | (shown & empty))
    _add(kb, keymaps.global_.dismiss, _send(controller, fs.Dismiss()), shown)
    return kb


def form_key_bindings(
    controller: FormController,
    keymaps: Callable[[], Keymaps],
    *,
    open_settings: Callable[[], None],
    overlay_open: Filter,
    paste_image: Callable[[], None] | None = None,
    elsewhere: str = "",
) -> KeyBindingsBase:
    """Every key binding of the form: parking, text editing, Alt keys, then the live
    keymaps (``elsewhere``: see :func:`keymap_key_bindings`)."""
    parking = KeyBindings()

    @parking.add(Keys.Any, filter=Condition(lambda: controller.in_flight > 0), eager=True)
    def _park(event: KeyPressEvent) -> None:
        controller.park(event.key_sequence[0])

    in_editor = Condition(lambda: controller.editor_open) & ~overlay_open
    editing = editing_key_bindings(controller, in_editor)
    cache: dict[int, tuple[Keymaps, KeyBindings]] = {}

    def current() -> KeyBindings:
        live = keymaps()
        cached = cache.get(id(live))
        if cached is None or cached[0] is not live:
            cache.clear()
            built = keymap_key_bindings(
                controller,
                live,
                open_settings=open_settings,
                overlay_open=overlay_open,
                paste_image=paste_image,
                elsewhere=elsewhere,
            )
            cache[id(live)] = (live, built)
            return built
        return cached[1]

    # Ctrl+L (fixed, unless a keymap takes it), as in other terminal programs: the screen is
    # drawn again from scratch, so another program's output over the form goes.
    redraw = KeyBindings()

    @redraw.add("c-l")
    def _redraw(event: KeyPressEvent) -> None:
        event.app.renderer.clear()

    # merge_key_bindings: later registries win ties, so the parking set comes last.
    alt = alt_key_bindings(controller, overlay_open)
    return merge_key_bindings([editing, alt, redraw, DynamicKeyBindings(current), parking])
