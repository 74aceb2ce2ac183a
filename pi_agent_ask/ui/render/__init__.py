"""The form view as a pure function: a ``FormState`` snapshot in, styled lines and targets out.

``render_form(state, width, options) -> Frame``. No prompt_toolkit objects, no I/O; the
terminal surface (``surface.py``) shows a frame and maps clicks through its targets.

What a frame holds, stated once:

- ``lines``: every row of the form, each a tuple of ``(style, text)`` fragments whose cells fit
  ``width``. Styles are prompt_toolkit class names (``class:ask.warning``); the surface's style
  sheet gives them colours. The first ``header_rows`` lines (title, tab bar) and the last
  ``footer_rows`` lines (key hints) stay on screen; the rows between them scroll.
- ``targets``: the click targets -- each option row, each visible tab, each Review action --
  with the rows and columns they cover *in this frame*. A target covers its own row text only:
  context shown beside the options, notes under a row and the Review summary are not part of
  any target. Because targets come with the frame, a click is always mapped through the rows
  that are on screen now (after a resize or a scroll), never through stale positions.
- ``focus_row``: the row the surface keeps visible (the highlighted option, the open editor's
  cursor, the highlighted Review action); ``cursor``: where the editor's cursor is, if one is
  open; ``held_row``: the key hints' row that starts with a held digit (``1 typed``).

Every string the agent supplied (title, labels, prompts, descriptions, context) and every
string the person typed passes through ``sanitize_text``/``sanitize_line`` before it becomes a
fragment, so no escape sequence or control character reaches the terminal from here.

Layout rules: the context of a question is shown beside its options when the frame is at least
:data:`CONTEXT_BESIDE_MIN_WIDTH` cells wide, and below them otherwise; below the options it is
hidden while the cursor is on the ``Type your own`` row (the editor needs the room there).
Recommended options render ``(recommended)`` in the warning style followed by a muted
`` | <description>``; no option is ever shown selected because it is recommended. Saved option
notes and custom text stay under their rows whether or not the row is highlighted.

The package's modules: ``frame`` (what a frame is made of), ``lines`` (styled rows, wrapping),
``header``, ``question``, ``editor``, ``review`` and ``footer`` (the parts of a frame); this
module puts the parts together.
"""

from __future__ import annotations

import attrs

from pi_agent_ask.form import state as fs
from pi_agent_ask.form.transcript import line_text
from pi_agent_ask.ui.render.footer import footer_hints, footer_rows
from pi_agent_ask.ui.render.frame import Fragment, Frame, Line, RenderOptions, Target, is_short
from pi_agent_ask.ui.render.header import header_block
from pi_agent_ask.ui.render.lines import Block, line_width, wrap_fragments
from pi_agent_ask.ui.render.question import (
    ADD_NOTE_PLACEHOLDER,
    CONTEXT_BESIDE_MIN_WIDTH,
    CUSTOM_LABEL,
    CUSTOM_PLACEHOLDER,
    question_body,
)
from pi_agent_ask.ui.render.review import review_body

__all__ = [
    "ADD_NOTE_PLACEHOLDER",
    "CONTEXT_BESIDE_MIN_WIDTH",
    "CUSTOM_LABEL",
    "CUSTOM_PLACEHOLDER",
    "Fragment",
    "Frame",
    "Line",
    "RenderOptions",
    "Target",
    "footer_hints",
    "line_text",
    "line_width",
    "render_form",
    "wrap_fragments",
]


def render_form(state: fs.FormState, width: int, options: RenderOptions | None = None) -> Frame:
    """Render ``state`` at ``width`` terminal cells. Pure; see the module docstring."""
    options = options if options is not None else RenderOptions()
    width = max(10, width)
    short = is_short(options)
    header = header_block(state, width, short)
    body = (
        review_body(state, options, width)
        if state.on_review
        else question_body(state, options, width)
    )
    footer, held = footer_rows(state, options, width)
    rows = len(header.lines) + len(body.lines) + len(footer)
    if short:
        # Drawn tall, the header and the key hints keep their blank rows and the hints their
        # full rows, and a question keeps the blank row under its prompt (the body's only
        # difference): their rows, without rendering the body again.
        tall = attrs.evolve(options, height=None)
        rows = (
            len(header_block(state, width, False).lines)
            + len(body.lines)
            + (0 if state.on_review else 1)
            + len(footer_rows(state, tall, width)[0])
        )
    frame = Block()
    frame.append_block(header)
    frame.append_block(body)
    frame.extend(footer)
    focus = frame.focus if frame.focus is not None else len(header.lines)
    return Frame(
        lines=tuple(frame.lines),
        width=width,
        header_rows=len(header.lines),
        footer_rows=len(footer),
        targets=tuple(frame.targets),
        focus_row=focus,
        cursor=frame.cursor,
        alert_rows=tuple(frame.alerts),
        lead_rows=body.lead,
        held_row=None if held is None else len(frame.lines) - len(footer) + held,
        editor_room=frame.editor_room,
        tall_rows=rows,
    )
