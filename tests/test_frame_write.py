"""The one-encode write of a chain (``SessionFile._append_frame``: ``append_chains`` with one
chain, the runtime's journal write), held to the general path it stands in for: the same
bytes for the same entries, entries handed back that equal the entries read back, the same
fold, and a refused entry that refuses its whole chain with the general path's error and
writes nothing of it.
"""

from __future__ import annotations

import errno
import itertools
import os
from pathlib import Path
from typing import Any

import attrs
import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_agent_ask.form.result import build_result
from pi_agent_ask.form.types import Draft
from pi_agent_ask.persistence import codec
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence import session_file as sf
from pi_agent_ask.persistence.projection import JOURNAL, JournalFold
from pi_agent_ask.persistence.records import AskRequest, Outcome
from pi_agent_ask.persistence.session_file import MEMORY_GROUP_BYTES, SessionFile
from tests.test_append_fast import ENTRIES, _nested, _RecordFold, _state
from tests.test_mutants_entries import _params

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@st.composite
def _spliced(draw: st.DrawFn, value: Any) -> Any:
    """``value`` with some of its maps and arrays made ``Spliced`` (at any depth)."""
    if isinstance(value, dict):
        value = {k: draw(_spliced(v)) for k, v in value.items()}
    elif isinstance(value, list):
        value = [draw(_spliced(v)) for v in value]
    else:
        return value
    return codec.Spliced(value) if draw(st.booleans()) else value


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    chain=st.lists(
        st.tuples(st.text(min_size=1), st.dictionaries(st.text(), _JSON, max_size=4)),
        min_size=1,
        max_size=6,
    ),
)
def test_a_frame_encoded_at_once_is_the_bytes_of_its_entries_encoded_one_by_one(
    data: st.DataObject, chain: list[tuple[str, dict[str, Any]]]
) -> None:
    keys = [os.urandom(8) for _ in chain]
    rows, items = [], []
    parent: bytes | None = None
    for key, (entry_type, value) in zip(keys, chain, strict=True):
        spliced = data.draw(_spliced(value))
        rows.append([key, parent, entry_type, 1.5, spliced])
        items.append(codec.encode_stored(key, parent, entry_type, 1.5, spliced))
        parent = key
    plain = codec.encode_frame_entries(rows)
    assert plain == codec.array_head(len(items)) + b"".join(items)
    payload = codec.frame_payload(plain, codec.Packer())
    assert (payload, len(plain)) == codec.entries_payload(items, codec.Packer())


def _runtime_chain(n: int) -> list[tuple[str, dict[str, Any]]]:
    shared = codec.Spliced({"questions": [{"id": "q", "prompt": f"Pick {n}?"}]})
    return [
        ("tool-call", {"toolCallId": f"c{n}", "name": "ask_user", "arguments": {"n": n}}),
        ("ask:payload", {"version": 1, "params": shared, "sourceEntryId": f"c{n}"}),
        ("ask:queued", {"version": 1, "requestId": f"r{n}", "params": shared}),
    ]


def test_a_chain_of_the_runtime_is_written_at_once_and_reads_back_as_written(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path, projection=JOURNAL) as session:
        written = []
        for n in range(3):
            [entries] = session.append_chains([_runtime_chain(n)])
            assert isinstance(entries, tuple)
            # Each entry holds the frame it was encoded in (the one-encode path was taken).
            assert [e._src[1] for e in entries] == [0, 1, 2]  # type: ignore[attr-defined]
            written.extend(entries)
        # A chain that is not a list or tuple takes the general path.
        [general] = session.append_chains([iter(_runtime_chain(3))])
        assert isinstance(general, tuple)
        assert [e._src[1] for e in general] == [-1, -1, -1]  # type: ignore[attr-defined]
        written.extend(general)
        fold = session.fold()
        assert isinstance(fold, JournalFold)
        live = fold.live()
    assert [e.parent_id for e in written[1:]] == [e.id for e in written[:-1]]
    with SessionFile.open(path, projection=JOURNAL) as session:
        assert session.report.ok
        back = session.branch()
        assert back == tuple(written)
        assert [e.data for e in back] == [e.data for e in written]
        assert back[1].data["params"] == {"questions": ({"id": "q", "prompt": "Pick 0?"},)}
        assert session.fold().live() == live  # type: ignore[attr-defined]


def test_a_frame_hangs_from_the_leaf_whichever_write_set_it(tmp_path: Path) -> None:
    """The one-encode path keeps the stored form of the last id it wrote, for the parent of
    the next frame's first entry; a leaf another write set (the general path, ``move_leaf``,
    a session opened again) is encoded afresh. Read back, every entry hangs where the
    session said it would."""
    path = tmp_path / "s.pias"
    with SessionFile.open(path, projection=JOURNAL) as session:
        [a] = session.append_chains([_runtime_chain(0)])
        b = session.append_many([("note", {"n": 1})])
        [c] = session.append_chains([_runtime_chain(1)])
        session.move_leaf(a[0].id)
        [d] = session.append_chains([_runtime_chain(2)])
        session.move_leaf(None)
        [e] = session.append_chains([_runtime_chain(3)])
        [f] = session.append_chains([_runtime_chain(4)])
    written = [a, b, c, d, e, f]
    for chain in written:
        assert isinstance(chain, tuple)
    assert c[0].parent_id == b[0].id and b[0].parent_id == a[-1].id
    assert d[0].parent_id == a[0].id and e[0].parent_id is None and f[0].parent_id == e[-1].id
    with SessionFile.open(path) as session:
        [g] = session.append_chains([_runtime_chain(5)])  # under the leaf the open found
        assert isinstance(g, tuple) and g[0].parent_id == f[-1].id
    with SessionFile.open(path, readonly=True) as session:
        assert session.report.ok
        for entry in [entry for chain in [*written, g] for entry in chain]:
            assert session.get(entry.id) == entry
            assert session.parent_id(entry.id) == entry.parent_id


@settings(max_examples=100, deadline=None)
@given(chains=st.lists(ENTRIES.filter(bool), min_size=1, max_size=4))
def test_the_fold_of_chains_written_at_once_equals_the_fold_read_back(
    tmp_path_factory: pytest.TempPathFactory, chains: list[list[tuple[str, Any]]]
) -> None:
    path = tmp_path_factory.mktemp("fold") / "s.pias"
    with SessionFile.open(path, projection=JOURNAL, checkpoint_every=7) as session:
        for chain in chains:
            [entries] = session.append_chains([chain])
            assert isinstance(entries, tuple)
        written = _state(session.fold())  # type: ignore[arg-type]
        log = session.log()
    with SessionFile.open(path, projection=JOURNAL, checkpoint_every=7) as session:
        assert session.fold().live() == written[0]  # type: ignore[attr-defined]
        assert session.log() == log
    with SessionFile.open(path, readonly=True) as session:
        model = _RecordFold()
        for n, entry in enumerate(session.branch()):
            model.step(entry, (n, 0))
    assert [item[:2] for item in model.log] == [item[:2] for item in log]


_REFUSED = [
    pytest.param({"odd": object()}, TypeError, id="cannot-encode"),
    pytest.param({"deep": _nested(codec.MAX_NESTING - 1)}, ValueError, id="too-deep"),
]


@pytest.mark.parametrize(("bad", "error"), _REFUSED)
def test_a_refused_entry_refuses_its_chain_with_the_general_error_and_writes_nothing(
    tmp_path: Path, bad: dict[str, Any], error: type[Exception]
) -> None:
    path = tmp_path / "s.pias"
    with SessionFile.open(path, projection=JOURNAL) as session:
        [first] = session.append_chains([_runtime_chain(0)])
        assert isinstance(first, tuple)
        size, leaf = path.stat().st_size, session.leaf_id
        chain = [*_runtime_chain(1)[:2], ("bad", bad), _runtime_chain(1)[2]]
        [refused] = session.append_chains([chain])
        [general] = session.append_chains([iter(chain)])
        assert type(refused) is type(general) and isinstance(refused, error)
        assert str(refused) == str(general)
        assert (path.stat().st_size, session.leaf_id, len(session)) == (size, leaf, 3)
        [after] = session.append_chains([_runtime_chain(2)])
        assert isinstance(after, tuple) and after[0].parent_id == leaf
    with SessionFile.open(path) as session:
        assert session.report.ok
        assert len(session.branch()) == 6


def test_data_that_is_not_a_dict_takes_the_general_path_and_is_stored_frozen() -> None:
    session = SessionFile.in_memory()
    [entries] = session.append_chains([[("a", None), ("b", {"x": [1]})]])
    assert isinstance(entries, tuple)
    assert [e._src[1] for e in entries] == [-1, -1]  # type: ignore[attr-defined]
    assert [dict(e.data) for e in session.branch()] == [{}, {"x": (1,)}]


def test_an_in_memory_session_reads_back_frames_held_plain_and_deflated_in_groups() -> None:
    """In memory, the one-encode path's frames are held plain until the next would take them
    past ``MEMORY_GROUP_BYTES``, then deflated together (a larger frame alone); frames of
    other paths stay payloads. Every entry reads back as written, alone (``entry_at``) and
    along the branch, whichever way its frame is held."""
    session = SessionFile.in_memory(projection=JOURNAL)
    written = []
    for n in range(40):
        size = MEMORY_GROUP_BYTES + 5_000 if n == 17 else 7_000
        chain = [*_runtime_chain(n), ("note", {"text": os.urandom(size // 2).hex()})]
        if n % 5 == 4:
            written.extend(session.append_many(chain))  # a payload frame
        else:
            [entries] = session.append_chains([chain])
            assert isinstance(entries, tuple)
            written.extend(entries)
    memory = session._memory
    assert memory is not None
    kinds = {type(item) for item in memory._items}
    assert kinds == {bytes, list, tuple}  # payloads, plain frames waiting, grouped frames
    groups: dict[int, list[int]] = {}
    for item in memory._items:
        if type(item) is tuple:
            groups.setdefault(id(item[0]), []).append(item[2] - item[1])
    sizes = list(groups.values())
    assert max(len(frames) for frames in sizes) > 1
    for frames, after in itertools.pairwise(sizes):
        assert sum(frames) <= MEMORY_GROUP_BYTES or len(frames) == 1
        assert sum(frames) + after[0] > MEMORY_GROUP_BYTES  # the next one did not fit
    assert session.branch() == tuple(written)
    assert [e.data for e in session.branch()] == [e.data for e in written]
    for n in (0, len(written) - 1, len(written) // 2):
        loc = (session._index.frame_off[n], session._index.slot[n])
        assert session.entry_at(loc) == written[n]
    forked = session.fork(None)
    assert forked.branch() == tuple(written)


def test_a_failed_write_of_a_chain_alone_is_rolled_back_and_is_its_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.pias"
    real_write = os.write
    with SessionFile.open(path, projection=JOURNAL) as session:
        [first] = session.append_chains([_runtime_chain(0)])
        assert isinstance(first, tuple)
        size, live = path.stat().st_size, session.fold().live()  # type: ignore[attr-defined]

        def half_then_full(fd: int, data: bytes | memoryview) -> int:
            real_write(fd, bytes(data)[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(sf.os, "write", half_then_full)
        [failed] = session.append_chains([_runtime_chain(1)])
        monkeypatch.setattr(sf.os, "write", real_write)
        assert isinstance(failed, OSError) and failed.errno == errno.ENOSPC
        assert path.stat().st_size == size
        assert (session.leaf_id, len(session)) == (first[-1].id, 3)
        assert session.fold().live() == live  # type: ignore[attr-defined]
        [second] = session.append_chains([_runtime_chain(2)])
        assert isinstance(second, tuple)
    with SessionFile.open(path) as again:
        assert again.report.ok
        assert again.branch() == first + second


def test_a_background_forms_completions_hold_its_result_encoded_once(tmp_path: Path) -> None:
    """A background form's two completion entries hold its result as one ``Spliced``
    (encoded once); a foreground form's one entry holds it as it is. Written and read back,
    both are the result, and the fold counts both completions."""
    params = _params("a", "b", title="Plan")
    result = build_result(params, [Draft(selected=(0,)), Draft(selected=(1,))], request_id="r1")
    details = result.to_details()
    [(_, history), (_, queue)] = jr.completion_entries(
        Outcome("r1", result=result), background=True
    )
    assert type(history["result"]) is codec.Spliced and queue["result"] is history["result"]
    assert history["result"].cbor == cbor2.dumps(details)
    [(_, alone)] = jr.completion_entries(Outcome("r1", result=result), background=False)
    assert alone["result"] == details
    path = tmp_path / "s.pias"
    with SessionFile.open(path, projection=JOURNAL) as session:
        queued = ("ask:queued", {"version": 1, "requestId": "r1", "params": {}})
        [written] = session.append_chains(
            [[queued, *jr.completion_entries(Outcome("r1", result=result), background=True)]]
        )
        assert isinstance(written, tuple)
        fold = session.fold()
        assert isinstance(fold, JournalFold)
        assert [item[:2] for item in fold.log] == [["c", "r1"]]
        outcome = fold.requests["r1"].outcome
        assert outcome is not None and outcome[1] == 2  # the queue's completion
    with SessionFile.open(path, readonly=True) as session:
        back = session.branch()
    assert [jr.thaw(e.data["result"]) for e in back[1:]] == [details, details]
    assert back == written


def test_an_in_memory_session_holds_the_general_paths_frames_plain_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In memory, a frame ``append_chains`` writes the general way (a chain longer than the
    one-encode path takes, several chains at once) is held plain and grouped too, unless it
    is larger than half the frame limit (then deflated on its own, as a file holds it, and
    refused past the limit as a file refuses it). Every entry reads back as written."""
    session = SessionFile.in_memory(projection=JOURNAL)
    long = [("note", {"n": n}) for n in range(sf._FRAME_IDS + 6)]
    [first] = session.append_chains([long])
    [second, third] = session.append_chains([_runtime_chain(0), _runtime_chain(1)])
    for written in (first, second, third):
        assert isinstance(written, tuple)
        assert {e._src[1] for e in written} == {-1}  # type: ignore[attr-defined]
    memory = session._memory
    assert memory is not None
    assert [type(item) for item in memory._items] == [list, list]
    monkeypatch.setattr(sf, "MAX_FRAME_BYTES", 4_000)
    [big] = session.append_chains([[("note", {"text": "x" * 3_000})]])
    [refused] = session.append_chains([[("note", {"text": "x" * 4_500})]])
    assert isinstance(big, tuple) and isinstance(refused, ValueError)
    assert [type(item) for item in memory._items] == [list, list, bytes]
    written = [*first, *second, *third, *big]
    assert session.branch() == tuple(written)
    assert [e.data for e in session.branch()] == [e.data for e in written]
    forked = session.fork(None)
    assert forked.branch() == tuple(written)


def test_a_request_of_several_questions_holds_their_list_encoded_once(tmp_path: Path) -> None:
    """With several questions, ``shared_params`` encodes their list on its own and a history
    request holds it as it is (the same bytes as the plain list); a request whose questions
    are presented differently holds its own records, one question stays inline. Written and
    read back, the entries are the plain data, and the fold counts the questions."""
    several = _params("a", "b")
    spliced = jr.shared_params(several)
    questions = spliced.value["questions"]
    assert type(questions) is codec.Spliced
    assert spliced.cbor == cbor2.dumps(several.to_json())
    request = AskRequest("r1", several, True, "2026-12-01T00:00:00.000Z", "c1")
    data = jr.history_request_entry(request, shared=spliced)
    assert data["questions"] is questions
    presented = attrs.evolve(
        several,
        questions=tuple(attrs.evolve(q, presented_type="multi") for q in several.questions),
    )
    records = jr.history_request_entry(
        attrs.evolve(request, params=presented), shared=jr.shared_params(presented)
    )["questions"]
    assert [q["presentedType"] for q in records] == ["multi", "multi"]
    one = jr.shared_params(_params("a"))
    assert type(one.value["questions"]) is list
    path = tmp_path / "s.pias"
    chain = [
        ("ask:history-request", data),
        ("ask:queued", jr.queued_entry(request, shared=spliced)),
    ]
    with SessionFile.open(path, projection=JOURNAL) as session:
        [written] = session.append_chains([chain])
        assert isinstance(written, tuple)
        fold = session.fold()
        assert isinstance(fold, JournalFold)
        assert [item[0::4] for item in fold.log] == [["q", 2]]
    with SessionFile.open(path, readonly=True) as session:
        back = session.branch()
    assert back == written
    assert jr.thaw(back[0].data) == jr.thaw(data)
    assert jr.thaw(back[0].data["questions"]) == several.to_json()["questions"]
