"""Median time to build and draw one form frame, first question and Review, at width 100.

Two figures per case:

- ``frame``: ``render_form`` -- the styled rows and click targets of one snapshot, as a redraw
  renders it (the renderer remembers wrapped rows and widths of strings it has seen);
- ``first frame``: the same with those memos cleared, as the first frame of a new form;
- ``screen``: the same frame laid out by the form control and written into a prompt_toolkit
  screen (what one redraw costs before the terminal diff is written out).

Forms of 1 question / 3 options, 10/10 and 100/20, every question answered with a note, so the
Review lists everything. For comparison, the TypeScript original drew the first question in
0.45-0.76 ms and a 100-question Review in 8.7 ms.

Run with ``python -m benchmarks ui``. Prints; asserts nothing.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable
from typing import Any

import attrs
import trio
from prompt_toolkit.application import Application
from prompt_toolkit.application.current import set_app
from prompt_toolkit.input import DummyInput
from prompt_toolkit.layout import Layout
from prompt_toolkit.layout.mouse_handlers import MouseHandlers
from prompt_toolkit.layout.screen import Screen, WritePosition
from prompt_toolkit.output import DummyOutput

from pi_agent_ask.actors.form import FormInput
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence.settings import Keymaps
from pi_agent_ask.ui.form_view import FormController, form_container
from pi_agent_ask.ui.render import editor, footer, header, lines, question, render_form, review

SIZES = ((1, 3), (10, 10), (100, 20))
WIDTH = 100
HEIGHT = 40


def make_payload(questions: int, options: int) -> dict[str, Any]:
    return {
        "title": "Benchmark form",
        "questions": [
            {
                "id": f"question-{q}",
                "label": f"Q{q}",
                "prompt": f"Question number {q}: which option fits best for this project?",
                "context": f"Background for question {q}.\nIt spans two lines.",
                "type": "multi" if q % 2 else "single",
                "options": [
                    {
                        "value": f"option_{q}_{o}",
                        "label": f"Option {o}",
                        "description": f"Option {o} of question {q}",
                        **({"recommended": True} if o == 0 else {}),
                    }
                    for o in range(options)
                ],
            }
            for q in range(questions)
        ],
    }


def answered_form(questions: int, options: int) -> fs.FormState:
    """Every question answered, with an option note and a question note."""
    validation = validate_ask_params(make_payload(questions, options))
    assert validation.params is not None, validation.issues
    state = fs.new_form(validation.params)
    for _ in range(questions):
        for command in (
            fs.OpenOptionNote(),
            fs.EditorChanged("an option note"),
            fs.EditorClose(),
            fs.OpenQuestionNote(),
            fs.EditorChanged("a question note"),
            fs.EditorClose(),
            fs.Number(1),
        ):
            state, _ = fs.reduce(state, command)
        if not state.on_review and state.types[state.tab - 1] == "multi":
            state, _ = fs.reduce(state, fs.Confirm())
    state, _ = fs.reduce(state, fs.SelectTab(len(validation.params.questions)))
    return state


def median(action: Callable[[], object], *, min_rounds: int = 20, budget: float = 0.5) -> float:
    samples: list[float] = []
    started = time.perf_counter()
    while len(samples) < min_rounds or time.perf_counter() - started < budget:
        begin = time.perf_counter()
        action()
        samples.append(time.perf_counter() - begin)
    return statistics.median(samples)


def _format(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:7.1f} µs"
    return f"{seconds * 1e3:7.2f} ms"


def clear_render_memos() -> None:
    """Forget every string the renderer remembers by value, so the next frame costs what the
    first frame of a never-seen form costs."""
    for module in (editor, footer, header, lines, question, review):
        for value in vars(module).values():
            clear = getattr(value, "cache_clear", None)
            if callable(clear):
                clear()


def first_frame(state: fs.FormState) -> Callable[[], object]:
    """Render ``state`` as the first frame of a form never seen before (memos cleared)."""

    def draw() -> object:
        clear_render_memos()
        return render_form(state, WIDTH)

    return draw


def screen_drawer(state: fs.FormState) -> Callable[[], object]:
    """Render ``state`` and draw it through the form container into a fresh prompt_toolkit
    screen. Each draw hands the controller a snapshot it has not drawn yet (two equal copies
    in turn), as a keystroke does, so its frame cache is missed and the frame is rendered."""
    _send, _ = trio.open_memory_channel[FormInput](64)
    controller = FormController(keymaps=Keymaps, show_footer_hints=lambda: True)
    controller.attach("bench", state, _send)
    container = form_container(controller)
    app: Application[Any] = Application(
        layout=Layout(container), input=DummyInput(), output=DummyOutput()
    )
    snapshots = itertools.cycle((state, attrs.evolve(state)))

    def draw() -> object:
        controller.state = next(snapshots)
        with set_app(app):
            screen = Screen()
            container.write_to_screen(
                screen,
                MouseHandlers(),
                WritePosition(xpos=0, ypos=0, width=WIDTH, height=HEIGHT),
                parent_style="",
                erase_bg=False,
                z_index=None,
            )
            return screen

    return draw


def main() -> None:
    print(f"width {WIDTH}, height {HEIGHT} (screen); medians")
    print(
        f"{'questions/options':>18} {'tab':>15} {'frame':>11} {'first frame':>11} "
        f"{'screen':>11} {'rows':>6}"
    )
    for questions, options in SIZES:
        review = answered_form(questions, options)
        first = fs.reduce(review, fs.SelectTab(0))[0]
        for name, state in (("first question", first), ("review", review)):
            rows = len(render_form(state, WIDTH).lines)
            frame = median(lambda state=state: render_form(state, WIDTH))
            first_ = median(first_frame(state))
            screen = median(screen_drawer(state))
            print(
                f"{f'{questions}/{options}':>18} {name:>15} {_format(frame)} {_format(first_)} "
                f"{_format(screen)} {rows:>6}"
            )


if __name__ == "__main__":
    main()
