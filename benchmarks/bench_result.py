"""Median time to build a result and its tool result (text, details, structuredContent) for
fully answered forms of three sizes.

Run with ``python -m benchmarks.bench_result``. Prints; asserts nothing.
"""

from __future__ import annotations

import statistics
import time

from pi_agent_ask.form.result import BackgroundOutcome, build_result
from pi_agent_ask.form.text import background_answer_message, tool_result
from pi_agent_ask.form.types import AskParams, Draft, Option, Question

SIZES = ((1, 3), (10, 10), (100, 20))
"""(questions, options per question)."""


def make_form(questions: int, options: int) -> tuple[AskParams, list[Draft]]:
    """A form with every question answered: multi questions pick every other option plus
    custom text, single questions one option; every question has a note and an option note."""
    params = AskParams(
        title="Benchmark form",
        questions=[
            Question(
                id=f"question-{q}",
                label=f"Q{q + 1}",
                prompt=f"Question number {q}: which option fits best?",
                type="multi" if q % 2 else "single",
                options=[Option(f"option_{q}_{o}", f"Option {o}") for o in range(options)],
            )
            for q in range(questions)
        ],
    )
    drafts = [
        Draft(
            selected=range(0, options, 2) if question.type == "multi" else (options - 1,),
            custom_text="my own answer" if question.type == "multi" else "",
            custom_selected=question.type == "multi",
            note=f"note on question {q}",
            option_notes={question.options[0].value: "first option note"},
        )
        for q, question in enumerate(params.questions)
    ]
    return params, drafts


def measure(questions: int, options: int, rounds: int) -> float:
    """Median seconds for build_result + tool_result + the background-answer message."""
    params, drafts = make_form(questions, options)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        result = build_result(params, drafts, request_id="bench")
        tool_result(result, params=params)
        background_answer_message(BackgroundOutcome("bench", result=result), params=params)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    """Print the median build time per form size."""
    for questions, options in SIZES:
        rounds = 200 if questions < 100 else 40
        median = measure(questions, options, rounds)
        print(
            f"result build+text {questions:>3} questions x {options:>2} options: "
            f"{median * 1000:8.3f} ms (median of {rounds})"
        )


if __name__ == "__main__":
    main()
