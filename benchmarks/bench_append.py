"""The journal write of a background form: ``SessionFile.append_chains`` as the runtime calls it.

The chains are captured from the ``runtime`` benchmark (``bench_runtime.throughput``: background
forms enqueued and answered through ``submit`` events): every argument the persistence actor
passes to ``append_chains`` is recorded, in order. Per form that is a request chain
(``tool-call``, ``ask:payload``, ``ask:history-request``, ``ask:queued``), the receipt
``tool-result``, a completion chain (``ask:history-completed``, ``ask:queue-completed``) and
its share of the delivered ``ask:background-answer`` entries (written together when several
are delivered at once).

The captured calls are then replayed into a fresh in-memory session with the journal's
projection (``open_session_file(None)``, as the runtime opens one), and the CPU time of the
``append_chains`` calls alone is measured: per form, and per kind of chain. Bytes per entry
come from replaying them into a session file (checkpoints included). Prints figures, asserts
nothing.

Run: ``.venv/bin/python -m benchmarks append``.
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import trio

from pi_agent_ask.actors.session import open_session_file
from pi_agent_ask.persistence.session_file import SessionFile

FORMS = 200
ROUNDS = 15

Chain = list[tuple[str, Mapping[str, Any] | None]]
Call = list[Chain]


@contextlib.contextmanager
def _recording(into: list[Call]) -> Iterator[None]:
    """Record every ``append_chains`` argument (each chain as a list of its items)."""
    original = SessionFile.append_chains

    def append_chains(self: SessionFile, chains: Sequence[Any]) -> Any:
        call = [list(chain) for chain in chains]
        into.append(call)
        return original(self, call)

    SessionFile.append_chains = append_chains  # type: ignore[method-assign]
    try:
        yield
    finally:
        SessionFile.append_chains = original  # type: ignore[method-assign]


def capture(forms: int = FORMS) -> list[Call]:
    """The ``append_chains`` calls of ``forms`` background forms enqueued and answered."""
    from benchmarks.bench_runtime import throughput

    calls: list[Call] = []
    with tempfile.TemporaryDirectory() as tmp, _recording(calls):
        trio.run(throughput, forms, Path(tmp) / "settings.json")
    return calls


def _kind(call: Call) -> str:
    types = [entry_type for chain in call for entry_type, _ in chain]
    if len(set(types)) == 1 and len(types) > 1:
        return f"{types[0]} x{len(types)}"
    return " + ".join(types)


def replay(calls: Sequence[Call]) -> tuple[float, dict[str, list[float]]]:
    """Seconds of CPU time of every ``append_chains`` call replayed into a fresh in-memory
    journal session, and the seconds of each call by kind."""
    session = open_session_file(None)
    clock = time.process_time_ns
    total = 0
    kinds: dict[str, list[float]] = defaultdict(list)
    for call in calls:
        start = clock()
        session.append_chains(call)
        spent = clock() - start
        total += spent
        kinds[_kind(call)].append(spent / 1e9)
    session.close()
    return total / 1e9, kinds


def bytes_per_entry(calls: Sequence[Call]) -> float:
    """File size / entries of a session file the calls are replayed into."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "append.pias"
        with open_session_file(path) as session:
            for call in calls:
                session.append_chains(call)
            entries = len(session)
        return path.stat().st_size / entries


def journal_bytes_per_entry(entries: int = 8_000) -> float:
    """Bytes per entry of the ``journal`` benchmark's session (``bench_journal.write_session``:
    eight entries in five frames per form, the issue's "bytes per journal entry" row)."""
    from benchmarks.bench_journal import ENTRIES_PER_FORM, PENDING, write_session

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "journal.pias"
        forms = write_session(path, entries)
        return path.stat().st_size / (forms * ENTRIES_PER_FORM - PENDING * 3)


def figures(forms: int = FORMS, rounds: int = ROUNDS) -> dict[str, float]:
    """``append/us-per-form``, ``append/us-per-entry``, ``append/frames-per-form``,
    ``append/entries-per-form``, ``append/bytes-per-entry``, ``append/journal-bytes-per-entry``
    and ``append/us/<kind>`` (median µs per call of that kind)."""
    calls = capture(forms)
    entries = sum(len(chain) for call in calls for chain in call)
    replay(calls)  # warm up
    totals: list[float] = []
    by_kind: dict[str, list[float]] = defaultdict(list)
    for _ in range(rounds):
        total, kinds = replay(calls)
        totals.append(total)
        for kind, spent in kinds.items():
            by_kind[kind].append(statistics.median(spent))
    per_round = statistics.median(totals)
    out = {
        "append/us-per-form": per_round / forms * 1e6,
        "append/us-per-entry": per_round / entries * 1e6,
        "append/frames-per-form": len(calls) / forms,
        "append/entries-per-form": entries / forms,
        "append/bytes-per-entry": bytes_per_entry(calls),
        "append/journal-bytes-per-entry": journal_bytes_per_entry(),
    }
    for kind, medians in by_kind.items():
        out[f"append/us/{kind}"] = statistics.median(medians) * 1e6
    return out


def main() -> None:
    found = figures()
    print(
        f"append_chains as the runtime calls it ({FORMS} background forms captured from the "
        f"runtime benchmark, replayed into an in-memory journal session; CPU time, median of "
        f"{ROUNDS} rounds)"
    )
    print(
        f"  per form: {found['append/us-per-form']:7.1f} µs "
        f"({found['append/entries-per-form']:.1f} entries in "
        f"{found['append/frames-per-form']:.2f} frames; "
        f"{found['append/us-per-entry']:.1f} µs per entry)"
    )
    for name, value in found.items():
        if name.startswith("append/us/"):
            print(f"  per call, {name.removeprefix('append/us/')}: {value:7.1f} µs")
    print(
        f"  bytes per entry: {found['append/bytes-per-entry']:.0f} (these calls, in a session "
        f"file); {found['append/journal-bytes-per-entry']:.0f} (the journal benchmark's "
        f"session, 5 frames per form; target <= 200)"
    )


if __name__ == "__main__":
    main()
