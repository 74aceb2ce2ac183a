"""Median time of a typical answer sequence through the form reducer, for three form sizes.

The sequence: open the form, write one question note, answer every question (single-select:
one number key, which advances; multi-select: two number keys and Enter), then press ``1``
twice on Review to submit. Result building is not included (``bench_form`` style: the reducer
alone). Run with ``python -m benchmarks.bench_state``. Prints; asserts nothing.
"""

from __future__ import annotations

import statistics
import time

from pi_agent_ask.form import state as fs
from pi_agent_ask.form.types import AskParams, Option, Question

SIZES = ((1, 3), (10, 10), (100, 20))


def make_params(questions: int, options: int) -> AskParams:
    """Alternating single- and multi-select questions with ``options`` options each."""
    return AskParams(
        title="Benchmark form",
        questions=[
            Question(
                id=f"question-{q}",
                label=f"Q{q + 1}",
                prompt=f"Question number {q}: which option fits best?",
                type="multi" if q % 2 else "single",
                options=[
                    Option(value=f"option_{q}_{o}", label=f"Option {o}") for o in range(options)
                ],
            )
            for q in range(questions)
        ],
    )


def answer_sequence(params: AskParams) -> list[fs.Command]:
    """The commands of the typical sequence for ``params``."""
    commands: list[fs.Command] = [
        fs.OpenQuestionNote(),
        fs.EditorChanged("needs examples"),
        fs.EditorSubmit(),
    ]
    for question in params.questions:
        last = min(len(question.options), 3)
        if question.type == "single":
            commands.append(fs.Number(last))
        else:
            commands.extend((fs.Number(1), fs.Number(last), fs.Confirm()))
    commands.extend((fs.Number(1), fs.Number(1)))
    return commands


def run_once(params: AskParams, commands: list[fs.Command]) -> fs.FormState:
    state = fs.new_form(params)
    for command in commands:
        state, _effects = fs.reduce(state, command)
    return state


def median_seconds(
    params: AskParams, *, min_rounds: int = 20, budget: float = 1.0
) -> tuple[float, int]:
    """Median of whole sequences, repeated for ``budget`` seconds (at least ``min_rounds``);
    also the number of commands in one sequence."""
    commands = answer_sequence(params)
    samples: list[float] = []
    started = time.perf_counter()
    while len(samples) < min_rounds or time.perf_counter() - started < budget:
        begin = time.perf_counter()
        final = run_once(params, commands)
        samples.append(time.perf_counter() - begin)
        if final.outcome != fs.Outcome("submitted"):
            raise SystemExit(f"benchmark sequence did not submit: {final.outcome}")
    return statistics.median(samples), len(commands)


def _format(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    return f"{seconds * 1e3:.2f} ms"


def main() -> None:
    """Print the median reducer time of the answer sequence for each form size."""
    print("form reducer: answer every question + one note + submit (median, no result building)")
    for questions, options in SIZES:
        seconds, count = median_seconds(make_params(questions, options))
        per_command = seconds / count
        print(
            f"  {questions:>3} question(s) x {options:>2} options: {_format(seconds)}"
            f" ({count} commands, {_format(per_command)} each)"
        )


if __name__ == "__main__":
    main()
