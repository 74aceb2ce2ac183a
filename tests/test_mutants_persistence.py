"""The persistence actor's errors say what happened: tests that mutation testing asked for.

Each test here kills surviving mutants of ``actors/persistence.py`` (``just mutate``); they
check behaviour through the actor's handle, not its layout.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from pi_agent_ask.actors.persistence import (
    PersistenceClosedError,
    PersistenceHandle,
    WriteRefused,
    run_persistence,
)
from pi_agent_ask.persistence.session_file import SessionFile

TIMEOUT = 20


async def test_a_refused_entry_names_its_type_and_the_cause() -> None:
    session = SessionFile.in_memory()
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle: PersistenceHandle = await nursery.start(run_persistence, session)
            async with handle:
                with pytest.raises(WriteRefused) as caught:
                    await handle.append("ask:note", {"text": "\ud800"})  # a lone surrogate
                refused = caught.value
                assert refused.entry_type == "ask:note"
                assert isinstance(refused.cause, UnicodeEncodeError)
                assert str(refused).startswith("'ask:note' entry not written: UnicodeEncodeError: ")
                # The same through a batch: the type of the entry that could not be stored.
                with pytest.raises(WriteRefused) as caught:
                    await handle.append_many([("ask:a", {}), ("ask:b", {"x": "\udfff"})])
                assert caught.value.entry_type in ("ask:a", "ask:b")
                assert await handle.branch() == ()


async def test_fork_into_memory() -> None:
    session = SessionFile.in_memory()
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle: PersistenceHandle = await nursery.start(run_persistence, session)
            async with handle:
                first = await handle.append("message", {"text": "hi"})
                report = await handle.fork(None)
                assert report.path is None
                info = await handle.info()
                assert info.path is None
                assert await handle.branch() == (first,)


async def test_a_request_after_the_actor_ended_says_it_is_not_running(tmp_path: Path) -> None:
    session = SessionFile.open(tmp_path / "s.pias")
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle: PersistenceHandle = await nursery.start(run_persistence, session)
            other = handle.clone()
            await handle.aclose()
            await other.aclose()
        assert session.closed
        with pytest.raises(PersistenceClosedError, match=r"^the persistence actor is not running$"):
            await handle.append("message", {"text": "late"})
