"""A long chain (a delivery of many answers at once, one entry each) is written by the
one-encode path (``SessionFile._append_frame``): its rows are encoded and checked a group at a
time (``codec.FRAME_GROUP``), which makes the bytes of the frame encoded at once, and data too
deep to read back still refuses its whole chain with the general path's error."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import cbor2
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.bench_runtime import FORM, _answer
from pi_agent_ask import events as ev
from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.actors.runtime import open_runtime
from pi_agent_ask.persistence import codec
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.projection import JOURNAL
from pi_agent_ask.persistence.session_file import SessionFile
from tests.test_append_fast import _nested

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=100, deadline=None)
@given(
    data=st.lists(st.dictionaries(st.text(), _JSON, max_size=3), min_size=1, max_size=40),
    spliced=st.lists(st.booleans(), min_size=40, max_size=40),
)
def test_a_frame_encoded_a_group_at_a_time_is_the_frame_encoded_at_once(
    data: list[dict[str, Any]], spliced: list[bool]
) -> None:
    rows: list[list[Any]] = []
    parent: bytes | None = None
    for value, splice in zip(data, spliced, strict=False):
        key = os.urandom(8)
        rows.append([key, parent, "t", 1.5, codec.Spliced(value) if splice else value])
        parent = key
    plain = codec.encode_frame_entries(rows)
    assert plain == cbor2.dumps(rows, default=codec._splice)
    items = [codec.encode_stored(*row) for row in rows]
    assert plain == codec.array_head(len(items)) + b"".join(items)


def _frame_of(session: SessionFile, entry_id: str) -> int:
    return session._index.frame_off[session._index.pos[entry_id]]


def test_a_long_chain_is_one_encode_and_reads_back_as_written(tmp_path: Path) -> None:
    count = 3 * codec.FRAME_GROUP + 70  # more than one run of ids, several groups
    chain = [("note", {"n": n, "text": f"note {n}", "list": [n, [n]]}) for n in range(count)]
    path = tmp_path / "s.pias"
    with SessionFile.open(path, projection=JOURNAL) as session:
        [written] = session.append_chains([chain])
        assert isinstance(written, tuple) and len(written) == count
        assert [e._src[1] for e in written] == list(range(count))  # type: ignore[attr-defined]
        assert len({e.id for e in written}) == count
    with SessionFile.open(path, readonly=True) as session:
        back = session.branch()
        assert back == written
        assert [e.data for e in back] == [e.data for e in written]
        assert len({_frame_of(session, e.id) for e in back}) == 1


def test_deep_data_in_a_long_chain_refuses_it_and_writes_nothing(tmp_path: Path) -> None:
    count = 4 * codec.FRAME_GROUP + 3
    deep = {"deep": _nested(codec.MAX_NESTING - 1)}  # with the map and the entry: 391 levels
    fine = {"fine": _nested(codec.MAX_NESTING - 2)}  # 390 levels
    chain = [("note", {"n": n}) for n in range(count)]
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        [refused] = session.append_chains([[*chain[:20], ("d", deep), *chain[20:]]])
        assert isinstance(refused, ValueError)
        assert len(session) == 0
        [stored] = session.append_chains([[*chain[:20], ("f", fine), *chain[20:]]])
        assert isinstance(stored, tuple)
        assert [e._src[1] for e in stored] == list(range(count + 1))  # type: ignore[attr-defined]
    with SessionFile.open(path) as session:
        assert session.report.ok
        assert [e.type for e in session.branch()].count("f") == 1


@pytest.mark.parametrize("in_file", [False, True])
async def test_a_turn_boundary_delivers_many_answers_in_one_encode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_file: bool
) -> None:
    """The runtime's delivery of many background answers at once: one chain, one entry per
    answer, encoded as one frame (no entry encoded on its own)."""
    count = 70
    encoded: list[Any] = []
    encode_stored = codec.encode_stored

    def counted(*args: Any) -> bytes:
        encoded.append(args[2])
        return encode_stored(*args)

    path = tmp_path / "s.pias"
    with trio.fail_after(60):
        async with open_runtime(
            session=path if in_file else None,
            settings=tmp_path / "settings.json",
            surface=NullSurface(),
        ) as rt:
            rt.agent_started()
            done = trio.Event()
            answered = 0

            def on_completed(_payload: Any) -> None:
                nonlocal answered
                answered += 1
                if answered == count:
                    done.set()

            rt.events.on(ev.COMPLETED, on_completed)
            for i in range(count):
                await rt.call_tool("ask_user", FORM, tool_call_id=f"c{i}")
            rt.events.on(ev.STARTED, lambda p: _answer(rt.events, p["flowId"]))
            await rt.show_queue()
            visible = (await rt.statistics()).visible
            assert visible is not None
            _answer(rt.events, visible)
            await done.wait()
            monkeypatch.setattr(codec, "encode_stored", counted)
            messages = await rt.turn_boundary()
            monkeypatch.setattr(codec, "encode_stored", encode_stored)
    assert len(messages) == count
    assert encoded == []
    if in_file:
        with SessionFile.open(path, readonly=True) as session:
            answers = [e for e in session.branch() if e.type == jr.BACKGROUND_ANSWER]
            assert len(answers) == count
            assert len({_frame_of(session, e.id) for e in answers}) == 1


def test_an_in_memory_chain_skips_the_checkpoint_rule_and_a_file_follows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In memory no checkpoint is written: the one-encode path does not ask the rule; with a
    file it asks once per frame, and the checkpoint comes as it did."""
    asked: list[int] = []
    rule = SessionFile._maybe_checkpoint

    def counted(self: SessionFile) -> None:
        asked.append(len(self))
        rule(self)

    monkeypatch.setattr(SessionFile, "_maybe_checkpoint", counted)
    chain = [("note", {"n": n}) for n in range(4)]
    memory = SessionFile.in_memory(projection=JOURNAL)
    for _ in range(3):
        memory.append_chains([chain])
    assert asked == []
    with SessionFile.open(tmp_path / "s.pias", projection=JOURNAL, checkpoint_every=8) as session:
        asked.clear()  # (an open asks the rule too)
        for _ in range(3):
            session.append_chains([chain])
        assert asked == [4, 8, 12]
        assert session._written is not None  # the checkpoint after 8 entries
