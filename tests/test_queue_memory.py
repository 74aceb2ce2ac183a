"""Memory a queued form costs, counted in bytes (tracemalloc), never timed."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import trio

from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.actors.runtime import open_runtime
from pi_agent_ask.persistence.projection import JOURNAL
from pi_agent_ask.persistence.session_file import SessionFile, freeze
from tests.runtime_support import payload, settings_file

FORMS = 300


async def test_a_queued_background_form_costs_at_most_4_kib(tmp_path: Path) -> None:
    """Everything a queued form keeps: its journal entries (in memory, the session keeps them
    encoded), the queue's item, request, parameters and form state."""
    form = payload("a", "b", background=True)
    with trio.fail_after(60):
        async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
            rt.agent_started()  # busy: nothing wakes, every form stays queued
            for i in range(50):  # tables and caches reach their steady sizes first
                await rt.call_tool("ask_user", form, tool_call_id=f"warm{i}")
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                for i in range(FORMS):
                    result = await rt.call_tool("ask_user", form, tool_call_id=f"c{i}")
                    assert not result.get("isError")
                per_form = (tracemalloc.get_traced_memory()[0] - before) / FORMS
            finally:
                tracemalloc.stop()
            stats = await rt.statistics()
            assert len(stats.pending) == FORMS + 50
    assert per_form <= 4096, f"{per_form:.0f} bytes per queued form"


def test_an_in_memory_session_keeps_encoded_entries() -> None:
    """An in-memory session holds frames, as a file does: an entry costs its compressed bytes
    and its place in the index, not its decoded data; it reads back equal."""
    session = SessionFile.in_memory(projection=JOURNAL)
    data = {"questions": [{"id": f"q{n}", "prompt": "Which one?" * 5} for n in range(8)]}
    first = session.append("warm", data)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(200):
            session.append_many([("a", data), ("b", data)])  # the entries given back are dropped
        per_entry = (tracemalloc.get_traced_memory()[0] - before) / 400
    finally:
        tracemalloc.stop()
    # Decoded, one entry's data is over 1 KiB of maps and strings.
    assert per_entry <= 400, f"{per_entry:.0f} bytes per entry"
    branch = session.branch()
    assert len(branch) == 401 and branch[0] == first
    assert all(entry.data == freeze(data) for entry in branch)
    assert [entry.type for entry in branch[1:5]] == ["a", "b", "a", "b"]
