"""How long ``list_ask_history`` takes over a large journal. Prints timings, asserts nothing.

The branch is built in memory: 50,000 requests of two questions each (100,000 records), every
request answered with a note, as the runtime journals them. Each history call rebuilds its
records from the branch, so the timings include reading every entry.

Run: ``.venv/bin/python -m benchmarks.bench_history`` (or ``python benchmarks/bench_history.py``).
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable

from pi_agent_ask.actors.records import AskRequest, Outcome
from pi_agent_ask.form.result import build_result
from pi_agent_ask.form.types import AskParams, Draft, Option, Question
from pi_agent_ask.persistence import history as h
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.session_file import Entry

REQUESTS = 50_000
ROUNDS = 3


def _params(n: int) -> AskParams:
    options = (Option("small", "Small", "Keep it small"), Option("large", "Large"))
    return AskParams(
        title=f"Form {n}",
        questions=(
            Question("scope", "Scope", f"Which scope for change {n}?", "single", options),
            Question("tone", "Tone", "Which tone?", "multi", options, context="Some context."),
        ),
    )


def build_branch(requests: int = REQUESTS) -> list[Entry]:
    """A branch of ``requests`` answered requests, two questions each, root first."""
    entries: list[Entry] = []
    parent: str | None = None

    def add(type_: str, data: dict[str, object]) -> None:
        nonlocal parent
        entry = Entry(f"e{len(entries)}", parent, type_, 0.0, data)
        entries.append(entry)
        parent = entry.id

    for n in range(requests):
        params = _params(n)
        request = AskRequest(str(uuid.uuid4()), params, False, "2026-01-01T00:00:00.000Z")
        add(jr.HISTORY_REQUEST, jr.history_request_entry(request))
        note = "Needle note" if n == requests // 2 else f"note {n}"
        result = build_result(
            params,
            [Draft(selected=(n % 2,), note=note), Draft(selected=(0, 1))],
            request_id=request.request_id,
        )
        for type_, data in jr.completion_entries(
            Outcome(request.request_id, result=result), background=False
        ):
            add(type_, data)
    return entries


def _time(label: str, call: Callable[[], object], rounds: int = 1) -> None:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    print(f"{label:<48} median {statistics.median(samples) * 1000:9.1f} ms ({rounds} rounds)")


def main() -> None:
    """Build the branch, then time list (with and without a query) and read."""
    start = time.perf_counter()
    branch = build_branch()
    print(f"built {len(branch)} entries in {time.perf_counter() - start:.1f} s")
    records = h.build_records(branch)
    print(f"records: {len(records)}")
    found = h.list_history(branch, query="NEEDLE NOTE")
    print(f"query 'NEEDLE NOTE' matched {found['total']} record(s)")
    middle = records[len(records) // 2]
    _time("build_records", lambda: h.build_records(branch))
    _time("list_ask_history, no query", lambda: h.list_history(branch))
    _time(
        "list_ask_history, query 'NEEDLE NOTE'",
        lambda: h.list_history(branch, query="NEEDLE NOTE"),
        rounds=ROUNDS,
    )
    _time(
        "list_ask_history, query + answeredOnly",
        lambda: h.list_history(branch, query="scope", answered_only=True, limit=200),
    )
    _time(
        "read_ask_history (middle record)",
        lambda: h.read_history(branch, middle.request_id, middle.question_id),
        rounds=ROUNDS,
    )
    index = h.index_records(branch)
    _time(
        "list_ask_history, query, next page (index reused)",
        lambda: h.list_history(branch, query="NEEDLE NOTE", offset=50, index=index),
        rounds=ROUNDS,
    )


if __name__ == "__main__":
    main()
