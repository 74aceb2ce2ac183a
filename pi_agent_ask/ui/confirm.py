"""A yes/no question from the host (``/ask-mode``) in the row above the shell's status line:
``y`` is yes, ``n``/``Esc``/``Ctrl+C`` no; every other key waits for the answer."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import trio
from prompt_toolkit.filters import Filter
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys

from pi_agent_ask.form.transcript import wrap_line

__all__ = ["Confirmation", "confirm_bindings", "confirm_fragments"]


@attrs.define(eq=False, repr=False)
class Confirmation:
    """An open yes/no question; ``reply`` receives the one answer."""

    message: str
    reply: trio.MemorySendChannel[bool]
    answered: bool = False

    def answer(self, yes: bool) -> None:
        if self.answered:
            return
        self.answered = True
        self.reply.send_nowait(yes)


def confirm_fragments(question: Confirmation | None, width: int) -> StyleAndTextTuples:
    """The question and its keys, wrapped here at word boundaries (prompt_toolkit's own
    wrapping splits words)."""
    if question is None:
        return []
    line: StyleAndTextTuples = [
        ("class:ask.warning", question.message),
        ("", "  "),
        ("class:ask.hint", "y"),
        ("class:ask.muted", " yes · "),
        ("class:ask.hint", "n"),
        ("class:ask.muted", "/"),
        ("class:ask.hint", "Esc"),
        ("class:ask.muted", " no"),
    ]
    out: StyleAndTextTuples = []
    for index, row in enumerate(wrap_line(line, width)):  # type: ignore[arg-type]
        if index:
            out.append(("", "\n"))
        out.extend(row)
    return out


def confirm_bindings(confirming: Callable[[], Confirmation | None], active: Filter) -> KeyBindings:
    """The keys of the open question (``active``: while one is open)."""
    kb = KeyBindings()

    def answer(yes: bool) -> Callable[[KeyPressEvent], None]:
        def handler(_event: KeyPressEvent) -> None:
            question = confirming()
            if question is not None:
                question.answer(yes)

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
