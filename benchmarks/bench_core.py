"""The pure core against the TypeScript original: the rows of issue 12's second table that
concern validation, the form reducer and results.

For each case and size (1q/3o, 10q/10o, 100q/20o) this prints our median and, as text, the
ratio ours / peer the issue measured side by side before this work (the peer is not run here).
Today's ratio is today's median times that ratio divided by the median the issue's run had,
which this benchmark does not know; compare medians before and after instead.

The "result" case builds the result, the tool result (text, details, structuredContent) and the
background-answer message; the UI's transcript rows of the issue's case are not included.

Run: ``.venv/bin/python -m benchmarks core``. Prints; asserts nothing.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from benchmarks.bench_form import make_payload
from benchmarks.bench_result import make_form
from benchmarks.bench_state import answer_sequence, make_params, run_once
from pi_agent_ask.form.result import BackgroundOutcome, build_result
from pi_agent_ask.form.text import background_answer_message, tool_result
from pi_agent_ask.form.validate import validate_ask_params

SIZES = ((1, 3), (10, 10), (100, 20))

PEER_RATIO_BEFORE = {
    "validate + normalise": ("19", "9.7", "9.4"),
    "transition script": ("145", "73", "25"),
    "result + result text + transcript rows": ("47", "40", "39"),  # ours: no UI rows
    "script + result": ("80", "60", "26"),
}


def _median(call: Callable[[], object], budget: float = 0.5, min_rounds: int = 10) -> float:
    samples: list[float] = []
    started = time.perf_counter()
    while len(samples) < min_rounds or time.perf_counter() - started < budget:
        begin = time.perf_counter()
        call()
        samples.append(time.perf_counter() - begin)
    return statistics.median(samples)


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e6:9.1f} µs" if seconds < 1e-3 else f"{seconds * 1e3:9.2f} ms"


def _cases(questions: int, options: int) -> dict[str, Callable[[], object]]:
    payload = make_payload(questions, options)
    params = make_params(questions, options)
    commands = answer_sequence(params)
    result_params, drafts = make_form(questions, options)

    def result_and_text() -> None:
        result = build_result(result_params, drafts, request_id="bench")
        tool_result(result, params=result_params)
        background_answer_message(BackgroundOutcome("bench", result=result), params=result_params)

    def script_and_result() -> None:
        state = run_once(params, commands)
        result = build_result(params, state.drafts, request_id="bench")
        tool_result(result, params=params)

    return {
        "validate + normalise": lambda: validate_ask_params(payload),
        "transition script": lambda: run_once(params, commands),
        "result + result text + transcript rows": result_and_text,
        "script + result": script_and_result,
    }


def main() -> None:
    """Print every case at every size, with the peer ratio the issue measured before."""
    validate_ask_params(make_payload(1, 1))  # build the cached schema validator first
    print("pure core (median); [ratio ours / peer before this work, from issue 12]")
    results: dict[str, list[float]] = {}
    for questions, options in SIZES:
        for name, call in _cases(questions, options).items():
            results.setdefault(name, []).append(_median(call))
    for name, medians in results.items():
        sizes = "  ".join(
            f"{q}q/{o}o {_fmt(m)} [{ratio}]"
            for (q, o), m, ratio in zip(SIZES, medians, PEER_RATIO_BEFORE[name], strict=True)
        )
        print(f"  {name:<40} {sizes}")


if __name__ == "__main__":
    main()
