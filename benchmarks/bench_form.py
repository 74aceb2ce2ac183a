"""Median time of ``ask_user`` validation and normalisation for three form sizes.

Run with ``python -m benchmarks.bench_form``. Prints; asserts nothing.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from pi_agent_ask.form.validate import validate_ask_params

SIZES = ((1, 3), (10, 10), (100, 20))


def make_payload(questions: int, options: int) -> dict[str, Any]:
    """A valid form as a model sends it: labels on every option, text contexts, descriptions,
    one recommended option per question."""
    return {
        "title": "Benchmark form",
        "questions": [
            {
                "id": f"question-{q}",
                "label": f"Q{q}",
                "prompt": f"Question number {q}: which option fits best?",
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


def median_seconds(payload: dict[str, Any], *, min_rounds: int = 20, budget: float = 1.0) -> float:
    """Median of single validations, repeated for ``budget`` seconds (at least ``min_rounds``)."""
    samples: list[float] = []
    started = time.perf_counter()
    while len(samples) < min_rounds or time.perf_counter() - started < budget:
        begin = time.perf_counter()
        validation = validate_ask_params(payload)
        samples.append(time.perf_counter() - begin)
        if not validation.ok:
            raise SystemExit(f"benchmark payload is invalid: {validation.issues}")
    return statistics.median(samples)


def _format(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    return f"{seconds * 1e3:.2f} ms"


def main() -> None:
    """Print the median validate+normalise time for each form size."""
    validate_ask_params(make_payload(1, 1))  # build the cached schema validator first
    print("ask_user validate + normalise (median)")
    for questions, options in SIZES:
        seconds = median_seconds(make_payload(questions, options))
        print(f"  {questions:>3} question(s) x {options:>2} options: {_format(seconds)}")


if __name__ == "__main__":
    main()
