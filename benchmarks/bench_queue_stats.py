"""The queue's snapshot (``Runtime.statistics``, the ``Inspect`` message) in a long-running
epoch: the desk asks for it after every change of an agent's queue.

A queue state is restored (the queue's own ``Restore`` transition) with ``N`` answered and
delivered forms and two pending ones, as a desk that has served an agent for a long time
holds it; then the time of one snapshot (``QueueState.stats``, what the queue's task spends
on an ``Inspect``), the median of ``REPEATS`` runs of ``CALLS`` calls. The snapshot should
cost what is pending, not what the epoch answered. Prints figures; asserts nothing.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from pi_agent_ask.actors import queue_state as qs
from pi_agent_ask.actors.records import AskRequest, Outcome
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.result import AskResult
from pi_agent_ask.form.validate import validate_ask_params

SIZES = (100, 1_000, 10_000)
CALLS = 200
REPEATS = 5
ASK = {
    "questions": [
        {
            "id": "q",
            "prompt": "Which one?",
            "options": [{"label": "A", "value": "a"}, {"label": "B", "value": "b"}],
        }
    ],
    "background": True,
}


class _Nowhere:
    """A reply channel nobody reads (the restore's reply)."""

    def send_nowait(self, value: Any) -> None:
        pass

    def close(self) -> None:
        pass


def restored(answered: int) -> qs.QueueState:
    params = validate_ask_params(ASK).params
    assert params is not None
    form = fs.new_form(params, background=True)
    items = [
        qs.RestoredItem(
            AskRequest(f"r{n}", params, background=True, created_at="t"),
            form,
            Outcome(f"r{n}", result=AskResult(cancelled=False)) if n < answered else None,
            n < answered,
        )
        for n in range(answered + 2)
    ]
    state, _effects = qs.reduce(
        qs.initial_state(),
        qs.Restore(1, tuple(items), True, object(), _Nowhere()),  # type: ignore[arg-type]
    )
    return state.commit()


def per_call(state: qs.QueueState) -> float:
    runs = []
    for _ in range(REPEATS):
        began = time.perf_counter()
        for _ in range(CALLS):
            state.stats()
        runs.append((time.perf_counter() - began) / CALLS)
    return statistics.median(runs)


def main() -> None:
    for answered in SIZES:
        state = restored(answered)
        stats = state.stats()
        assert len(stats.pending) == 2
        print(
            f"queue snapshot with {answered:>6} answered forms and 2 pending: "
            f"{per_call(state) * 1e6:8.1f} µs"
        )


if __name__ == "__main__":
    main()
