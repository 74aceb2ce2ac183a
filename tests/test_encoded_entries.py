"""Entry data written with its CBOR (``codec.Encoded``): a background form's two completion
entries (``journal.completion_entries``) carry the bytes cbor2 gives their maps, with the
result's bytes in place, and an entries frame holds those bytes as they are
(``codec.encode_frame_entries``): the same frame as the maps encoded by cbor2, the same
refusal of data too deep to read back. The runtime's completions then go through no encoder
hook at all."""

from __future__ import annotations

import math
import os
import pickle
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
from pi_agent_ask.form.result import build_result
from pi_agent_ask.form.types import Draft
from pi_agent_ask.persistence import codec
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.projection import JOURNAL
from pi_agent_ask.persistence.records import Outcome
from pi_agent_ask.persistence.session_file import SessionFile
from tests.test_append_fast import _nested
from tests.test_mutants_entries import _params

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)
_RESULT = build_result(_params("a"), [Draft(selected=(0,))], request_id="r1")


def _plain(data: Any) -> Any:
    return dict(data) if type(data) is codec.Encoded else data


def _depth(cbor: bytes) -> int:
    return codec._depth(cbor2.loads(cbor))


@settings(max_examples=200, deadline=None)
@given(
    request_id=st.one_of(st.text(), st.text(alphabet="0123456789abcdef-", max_size=300)),
    details=st.dictionaries(st.text(), _JSON, max_size=4),
    error=st.one_of(st.none(), st.text(max_size=5)),
)
def test_completion_entries_encode_as_their_maps(
    request_id: str, details: dict[str, Any], error: str | None
) -> None:
    outcome = Outcome(request_id, result=_RESULT, error=error)
    entries = jr.completion_entries(outcome, background=True, details=details)
    for entry_type, data in entries:
        assert entry_type in (jr.HISTORY_COMPLETED, jr.QUEUE_COMPLETED)
        if type(data) is codec.Encoded:
            assert data.cbor == cbor2.dumps(dict(data), default=codec._splice)
            assert data.nesting >= _depth(data.cbor)
    encoded = [type(data) is codec.Encoded for _, data in entries]
    ascii_short = request_id.isascii() and len(request_id) < 256
    assert encoded == [ascii_short and error is None] * 2
    [(_, history), (_, queue)] = entries
    assert _plain(history) == {"version": 1, **_plain(queue)}
    assert type(queue["result"]) is codec.Spliced and queue["result"].value is details


def test_encoded_data_is_read_only_and_pickles_as_a_map() -> None:
    [(_, history), _] = jr.completion_entries(Outcome("r1", result=_RESULT), background=True)
    assert type(history) is codec.Encoded
    with pytest.raises(TypeError):
        history["version"] = 2
    with pytest.raises(TypeError):
        history.update(version=2)
    back = pickle.loads(pickle.dumps(history))
    assert type(back) is dict and jr.thaw(back) == jr.thaw(history)


_ROW_DATA = st.one_of(
    st.dictionaries(st.text(), _JSON, max_size=3),
    st.dictionaries(st.text(), _JSON, max_size=3).map(
        lambda d: codec.Encoded.made(d, cbor2.dumps(d), _depth(cbor2.dumps(d)))
    ),
)


@settings(max_examples=200, deadline=None)
@given(
    data=st.lists(_ROW_DATA, min_size=1, max_size=12),
    kinds=st.lists(st.sampled_from([jr.QUEUED, jr.HISTORY_COMPLETED, "note", "é"]), min_size=12),
    first=st.sampled_from([None, b"parentid", "a-text-id"]),
    now=st.sampled_from([1.5, 1_796_495_804.4724002, 7, math.nan, math.inf]),
)
def test_a_frame_holds_encoded_data_as_the_maps_would_be(
    data: list[Any], kinds: list[str], first: Any, now: Any
) -> None:
    rows: list[list[Any]] = []
    parent = first
    for value, kind in zip(data, kinds, strict=False):
        key = os.urandom(8)
        rows.append([key, parent, kind, now, value])
        parent = key
    plain = codec.encode_frame_entries(rows, encoded=True)
    assert plain == cbor2.dumps([[*row[:4], _plain(row[4])] for row in rows])
    assert plain == codec.encode_frame_entries([[*row[:4], _plain(row[4])] for row in rows])


def test_encoded_data_too_deep_to_read_back_refuses_its_frame() -> None:
    deep = {"deep": _nested(codec.MAX_NESTING - 1)}  # with the map and the entry: 391 levels
    fine = {"fine": _nested(codec.MAX_NESTING - 2)}
    for value, nesting in ((deep, codec.MAX_NESTING), (fine, codec.MAX_NESTING - 1)):
        # ``nesting`` as the writer states it: a map that says it is shallower is trusted (the
        # row is written as it is), one that says it may be too deep is checked as a map.
        encoded = codec.Encoded.made(value, cbor2.dumps(value), nesting)
        rows = [
            [os.urandom(8), None, "note", 1.5, {"n": 1}],
            [b"12345678", None, jr.QUEUED, 1.5, encoded],
        ]
        if value is deep:
            with pytest.raises(ValueError):
                codec.encode_frame_entries(rows, encoded=True)
        else:
            assert codec.encode_frame_entries(rows, encoded=True) == cbor2.dumps(
                [[*row[:4], _plain(row[4])] for row in rows]
            )


@pytest.mark.parametrize("in_file", [False, True])
async def test_the_runtimes_completions_go_through_no_encoder_hook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_file: bool
) -> None:
    """Every answered background form's completions are written with their result's bytes in
    place: no ``Spliced`` value reaches cbor2's hook (``codec._splice``). Read back, the
    entries are the maps."""
    count = 9
    hooked: list[Any] = []
    splice = codec._splice

    def counted(encoder: Any, value: Any) -> None:
        hooked.append(value)
        splice(encoder, value)

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
            monkeypatch.setattr(codec, "_splice", counted)
            _answer(rt.events, visible)
            await done.wait()
            monkeypatch.setattr(codec, "_splice", splice)
    assert hooked == []
    if in_file:
        with SessionFile.open(path, readonly=True, projection=JOURNAL) as session:
            completions = [
                e for e in session.branch() if e.type in (jr.HISTORY_COMPLETED, jr.QUEUE_COMPLETED)
            ]
            assert len(completions) == 2 * count
            for entry in completions:
                assert set(entry.data) >= {"requestId", "result"}
                assert entry.data["result"]["answers"] == {
                    "q": {"values": ("b",), "labels": ("B",), "indices": (2,)}
                }


def test_encoded_data_stores_as_its_map_on_every_path(tmp_path: Path) -> None:
    """Through the one-encode path, the general one (two chains at once, ``append_many``)
    and into a version 1 file, a completion chain of ``codec.Encoded`` data stores the maps
    it holds, and the journal's fold takes the same from each."""
    from tests.test_checkpoints import v1_file

    def chain() -> list[tuple[str, Any]]:
        entries = jr.completion_entries(Outcome("r1", result=_RESULT), background=True)
        assert all(type(data) is codec.Encoded for _, data in entries)
        return entries

    plain = [(kind, jr.thaw(data)) for kind, data in chain()]
    source = SessionFile.in_memory(projection=JOURNAL)
    [fast] = source.append_chains([chain()])
    [general, other] = source.append_chains([chain(), chain()])
    many = source.append_many(chain())
    for written in (fast, general, other, many):
        assert isinstance(written, tuple)
        assert [(e.type, jr.thaw(e.data)) for e in written] == plain
    old = tmp_path / "old.pias"
    v1_file(old, source)
    with SessionFile.open(old, projection=JOURNAL) as session:
        assert session.header.version == 1
        [appended] = session.append_chains([chain()])
        assert isinstance(appended, tuple)
        assert [(e.type, jr.thaw(e.data)) for e in session.branch()] == plain * 5
        assert [item[0] for item in session.fold().log] == ["c"] * 5  # type: ignore[attr-defined]
