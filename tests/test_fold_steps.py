"""The journal fold's steps over the runtime's own chains do no more than they must: the
``tool-result`` that ends an enqueue chain does not resolve its call again (its ``ask:queued``
did), and what the fold keeps is what a fold of the branch read back keeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from benchmarks.bench_runtime import FORM
from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.actors.runtime import open_runtime
from pi_agent_ask.persistence.projection import JOURNAL, JournalFold
from pi_agent_ask.persistence.session_file import SessionFile


@pytest.mark.parametrize("in_file", [False, True])
async def test_an_enqueued_form_resolves_its_call_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_file: bool
) -> None:
    count = 12
    resolved: list[str] = []
    resolve = JournalFold._resolve

    def counted(self: JournalFold, call_id: str, **kwargs: Any) -> None:
        resolved.append(call_id)
        resolve(self, call_id, **kwargs)

    monkeypatch.setattr(JournalFold, "_resolve", counted)
    path = tmp_path / "s.pias"
    with trio.fail_after(60):
        async with open_runtime(
            session=path if in_file else None,
            settings=tmp_path / "settings.json",
            surface=NullSurface(),
        ) as rt:
            rt.agent_started()
            for i in range(count):
                await rt.call_tool("ask_user", FORM, tool_call_id=f"c{i}")
            pending = (await rt.statistics()).pending
    assert len(pending) == count
    assert resolved == [f"c{i}" for i in range(count)]
    if in_file:
        monkeypatch.setattr(JournalFold, "_resolve", resolve)
        with SessionFile.open(path, readonly=True) as session:
            fold = JOURNAL.empty()
            for n, entry in enumerate(session.branch()):
                fold.step(entry, (n, 0))
            assert fold.calls == [] and fold.payloads == {} and fold.call_requests == {}
            assert len(fold.requests) == count
