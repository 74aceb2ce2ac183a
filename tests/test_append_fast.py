"""The fast paths of ``SessionFile.append_chains`` (the runtime's journal write), each held to
the slow path it replaces: entries handed back equal the entries read back; the journal fold
stepping over the data as given (and reading only the fields it needs) equals the fold of the
records read from the file; frames through the primed compressor inflate to what was written;
ids stay unique across a fork; data too deep to read back is refused.
"""

from __future__ import annotations

import copy
import os
import pickle
import types
from pathlib import Path
from typing import Any

import attrs
import cbor2
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pi_agent_ask.persistence import codec
from pi_agent_ask.persistence import entries as je
from pi_agent_ask.persistence.projection import JOURNAL, JournalFold, PendingRequest
from pi_agent_ask.persistence.session_file import Entry, FrozenMap, Loc, SessionFile
from pi_agent_ask.persistence.stored_questions import stored_question_count, stored_questions


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


DATA: dict[str, Any] = {
    "text": "héllo wörld",
    "n": 3,
    "x": 1.5,
    "flag": True,
    "none": None,
    "blob": b"\x00\xff",
    "list": [1, [2, {"deep": ["a", "b"]}]],
    "tuple": (1, 2),
    "map": {"k": {"k2": [3]}},
    "proxy": types.MappingProxyType({"inside": [1, 2]}),  # not a dict: frozen, then stored
}


# ---- entries handed back -------------------------------------------------------------------


def test_written_entries_equal_the_entries_read_back(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    data = copy.deepcopy({k: v for k, v in DATA.items() if k != "proxy"})
    data["proxy"] = DATA["proxy"]
    with SessionFile.open(path) as session:
        [written, second] = session.append_chains([[("a", data), ("b", None)], [("c", {})]])
        assert isinstance(written, tuple) and isinstance(second, tuple)
        data["text"] = "changed after the append"  # the caller's dict is not the entry's
        data["list"][1][1]["deep"].append("c")
    with SessionFile.open(path) as session:
        read = session.branch()
    assert list(written + second) == list(read)
    assert all(hash(w) == hash(r) for w, r in zip(written + second, read, strict=True))
    first = written[0]
    assert first.data["text"] == "héllo wörld"
    assert first.data["list"] == (1, (2, {"deep": ("a", "b")}))
    assert isinstance(first.data, FrozenMap) and isinstance(first.data["map"]["k"], FrozenMap)
    assert first.data["proxy"] == {"inside": (1, 2)}
    assert written[1].data == {} and written[1].parent_id == first.id
    assert second[0].parent_id == written[1].id
    with pytest.raises(TypeError):
        first.data["text"] = "x"  # type: ignore[index]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        first.data = {}  # type: ignore[misc]


def test_written_entries_behave_as_entries() -> None:
    session = SessionFile.in_memory()
    [(entry,)] = session.append_chains([[("note", {"a": [1]})]])
    assert isinstance(entry, tuple | Entry)
    plain = Entry(entry.id, entry.parent_id, entry.type, entry.timestamp, {"a": [1]})
    assert entry == plain and plain == entry
    assert not entry != plain  # noqa: SIM202
    assert entry != attrs.evolve(plain, type="other")
    assert hash(entry) == hash(plain)
    assert repr(entry) == repr(plain)
    assert pickle.loads(pickle.dumps(entry)) == plain
    assert type(copy.copy(entry)) is Entry
    evolved = attrs.evolve(entry, data={"b": [2]})
    assert evolved.data == {"b": (2,)} and evolved.id == entry.id
    assert entry in {plain} and session.get(entry.id) == entry


def test_written_entries_of_one_frame_read_their_fields_from_it() -> None:
    """The entries of a chain written at once share their frame's fields (``_Frame``): each
    reads its own id, type and place in the chain, as the entries read back have them."""
    session = SessionFile.in_memory()
    [root] = session.append_chains([[("root", {})]])
    [chain] = session.append_chains([[("a", {"n": 1}), ("b", {"n": 2}), ("c", {})]])
    assert isinstance(root, tuple) and isinstance(chain, tuple)
    back = session.branch()
    assert back == root + chain
    for written, read in zip(root + chain, back, strict=True):
        assert (written.id, written.parent_id, written.type, written.timestamp) == (
            read.id,
            read.parent_id,
            read.type,
            read.timestamp,
        )
        assert repr(written) == repr(read) and hash(written) == hash(read)
        evolved = attrs.evolve(written, type="other")
        assert (evolved.id, evolved.parent_id, evolved.type) == (read.id, read.parent_id, "other")
        assert evolved.data == read.data
    assert [e.type for e in chain] == ["a", "b", "c"]
    assert [e.parent_id for e in chain] == [root[0].id, chain[0].id, chain[1].id]


def test_data_that_is_not_a_mapping_is_refused_as_before() -> None:
    session = SessionFile.in_memory()
    [result] = session.append_chains([[("a", ["not", "a", "map"])]])  # type: ignore[list-item]
    assert isinstance(result, TypeError)
    [result] = session.append_chains([[("a", {"odd": object()})]])
    assert isinstance(result, TypeError)
    assert len(session) == 0


# ---- data a reader could not decode ------------------------------------------------------


@pytest.mark.parametrize("append", ["chains", "many"])
def test_data_nested_deeper_than_a_reader_decodes_is_refused(tmp_path: Path, append: str) -> None:
    path = tmp_path / "s.pias"
    deep = {"deep": _nested(codec.MAX_NESTING - 1)}  # with the map and the entry: 391 levels
    fine = {"fine": _nested(codec.MAX_NESTING - 2)}  # 390 levels
    wide = {"text": "é" * 4_000}  # many bytes 0x80-0xbf, nothing deep: decoded to be sure
    with SessionFile.open(path) as session:
        if append == "chains":
            [refused, stored, text] = session.append_chains(
                [[("d", deep)], [("f", fine)], [("w", wide)]]
            )
            assert isinstance(refused, ValueError)
            assert isinstance(stored, tuple) and isinstance(text, tuple)
        else:
            with pytest.raises(ValueError):
                session.append_many([("d", deep)])
            session.append_many([("f", fine)])
            session.append_many([("w", wide)])
    with SessionFile.open(path) as session:
        assert session.report.ok
        assert [e.type for e in session.branch()] == ["f", "w"]
        assert session.branch()[1].data["text"] == "é" * 4_000


# ---- the primed compressor -----------------------------------------------------------------


def test_frames_through_the_packer_inflate_and_do_not_depend_on_earlier_frames() -> None:
    packer = codec.Packer()
    plains = [cbor2.dumps([n, "x" * n, list(range(n % 50))]) for n in range(0, 3_000, 37)]
    plains.append(cbor2.dumps(["y" * 40_000]))
    for plain in plains:
        packed = packer.deflate(plain)
        assert codec._inflate(packed) == plain
        # Each frame starts from the dictionary alone: the primed compressor is never used
        # itself, only copied.
        assert packed == codec.Packer().deflate(plain)


def test_a_large_frame_gets_the_whole_window() -> None:
    # A repeat 6 KB back lies outside the small frames' 4 KiB window: only the 32 KiB window
    # finds it.
    chunk = bytes(os.urandom(3_000).hex(), "ascii")
    plain = chunk + chunk
    assert len(plain) > codec.SMALL_FRAME
    packed = codec.Packer().deflate(plain)
    assert codec._inflate(packed) == plain
    assert len(packed) < len(chunk) * 0.7


# ---- ids -------------------------------------------------------------------------------------


def test_ids_stay_unique_in_a_forked_child() -> None:
    session = SessionFile.in_memory()
    session.append("before", {})  # the parent has drawn its pool of ids
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(read_end)
            ids = [e.id for e in session.append_many([("child", {})] * 20)]
            [chain] = session.append_chains([[("child", {})] * 20])
            assert isinstance(chain, tuple)
            ids += [e.id for e in chain]
            os.write(write_end, " ".join(ids).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    ids = {e.id for e in session.append_many([("parent", {})] * 20)}
    [chain] = session.append_chains([[("parent", {})] * 20])
    assert isinstance(chain, tuple)
    ids |= {e.id for e in chain}
    with os.fdopen(read_end, "rb") as pipe:
        child = set(pipe.read().decode().split())
    os.waitpid(pid, 0)
    assert len(child) == 40 and len(ids) == 40
    assert not ids & child
    assert all(len(i) == 16 and int(i, 16) >= 0 for i in ids | child)


# ---- the journal fold ------------------------------------------------------------------------


class _RecordFold(JournalFold):
    """The fold as it was written before the fast handlers: every entry parsed into its
    record, dispatched with ``match``. The model the fast fold must agree with."""

    def step(self, entry: Entry, loc: Loc) -> None:
        match je.parse(entry):
            case je.ToolCall(tool_call_id=str(call_id), name="ask_user"):
                self.calls.append((call_id, loc))
            case je.ToolResult() as result:
                if result.tool_call_id is not None:
                    self._resolve(result.tool_call_id)
                for request_id in result.delivered_ids():
                    self._deliver(request_id)
            case je.Payload(source_entry_id=str(call_id), version=1):
                if call_id in self.payloads or any(c == call_id for c, _ in self.calls):
                    self.payloads.setdefault(call_id, []).append(loc)
            case je.HistoryRequest() as request:
                self._history_request(request, loc)
            case je.HistoryCompleted(request_id=str(request_id)) as completed:
                if completed.has_outcome:
                    self.log.append(["c", request_id, loc[0], loc[1]])
                if any(rid == request_id for rid, _ in self.call_requests.values()):
                    self.completions[request_id] = loc
            case je.Queued(request_id=request_id, tool_call_id=call_id):
                if call_id is not None:
                    self._resolve(call_id)
                if request_id is not None and request_id not in self.requests:
                    self.requests[request_id] = PendingRequest(loc)
            case je.QueueCompleted(request_id=str(request_id)) as completed:
                pending = self.requests.get(request_id)
                if pending is not None and completed.has_outcome:
                    pending.outcome = loc
                    self._settle(request_id)
            case je.BackgroundAnswer(request_id=str(request_id)):
                self._deliver(request_id)
            case je.Draft(request_id=str(request_id), form=form) if form is not None:
                pending = self.requests.get(request_id)
                if pending is not None:
                    pending.draft = loc
            case je.Panel(visible=visible):
                self.panel_visible = visible
            case je.PendingDismissed(tool_call_id=str(call_id)):
                self._resolve(call_id, dismissed=True)
            case je.ResumeAnswer(request_id=str(request_id)):
                for call_id in [c for c in self.dismissed if self._request_of(c) == request_id]:
                    del self.dismissed[call_id]
                    self._forget_request(call_id)
            case _:
                pass

    def _history_request(self, request: Any, loc: Loc) -> None:  # type: ignore[override]
        request_id = request.request_id
        if request_id is None:
            return
        questions = stored_questions(request_id, request.questions)
        if questions is not None:
            self.log.append(["q", request_id, loc[0], loc[1], len(questions)])
        call_id = request.tool_call_id
        if call_id is not None and (
            call_id in self.dismissed or any(c == call_id for c, _ in self.calls)
        ):
            self._forget_request(call_id)
            self.call_requests[call_id] = (request_id, loc)


IDS = st.sampled_from(["c1", "c1", "r1", "c2"])
ODD = st.one_of(st.none(), st.integers(-1, 2), st.booleans(), st.just(["c1"]), st.just({}))
FIELD = st.one_of(IDS, IDS, IDS, ODD)  # mostly well-formed, so the rules past the checks run
OPTION = st.fixed_dictionaries({"value": FIELD, "label": FIELD})
QUESTION = st.fixed_dictionaries(
    {
        "id": FIELD,
        "label": FIELD,
        "prompt": FIELD,
        "options": st.one_of(st.lists(OPTION, max_size=2), st.lists(OPTION, max_size=2), ODD),
    },
    optional={
        "type": st.sampled_from(["single", "multi", "preview", "bad", 3]),
        "presentedType": st.sampled_from(["single", "multi", "odd"]),
    },
)
RESULT = st.one_of(ODD, st.just({"answers": {}}))
# A completion's result as a background form's entries hold it (``journal.completion_entries``).
COMPLETED = st.one_of(RESULT, st.builds(codec.Spliced, RESULT))
DATA_OF: dict[str, Any] = {
    je.ToolCall.TYPE: st.fixed_dictionaries(
        {"toolCallId": FIELD}, optional={"name": st.sampled_from(["ask_user", "ask_user", 1])}
    ),
    je.ToolResult.TYPE: st.fixed_dictionaries(
        {},
        optional={
            "toolCallId": FIELD,
            "name": st.sampled_from(["ask_user", "wait_for_answers", None]),
            "result": st.one_of(
                ODD,
                st.fixed_dictionaries(
                    {},
                    optional={
                        "isError": st.booleans(),
                        "details": st.one_of(
                            ODD,
                            st.fixed_dictionaries(
                                {},
                                optional={
                                    "results": st.lists(
                                        st.one_of(ODD, st.fixed_dictionaries({"requestId": FIELD})),
                                        max_size=3,
                                    )
                                },
                            ),
                        ),
                    },
                ),
            ),
        },
    ),
    je.Payload.TYPE: st.fixed_dictionaries(
        {"sourceEntryId": FIELD}, optional={"version": st.sampled_from([1, 1.0, True, 2, "1"])}
    ),
    je.HistoryRequest.TYPE: st.fixed_dictionaries(
        {},
        optional={
            "requestId": FIELD,
            "toolCallId": FIELD,
            "questions": st.one_of(
                ODD,
                st.lists(QUESTION, min_size=1, max_size=2),
                # As a request's entries hold several (``journal.shared_params``).
                st.builds(codec.Spliced, st.lists(QUESTION, min_size=1, max_size=2)),
            ),
        },
    ),
    je.HistoryCompleted.TYPE: st.fixed_dictionaries(
        {}, optional={"requestId": FIELD, "result": COMPLETED, "error": FIELD}
    ),
    je.QueueCompleted.TYPE: st.fixed_dictionaries(
        {}, optional={"requestId": FIELD, "result": COMPLETED, "error": FIELD}
    ),
    je.Queued.TYPE: st.fixed_dictionaries({}, optional={"requestId": FIELD, "toolCallId": FIELD}),
    je.BackgroundAnswer.TYPE: st.fixed_dictionaries(
        {}, optional={"details": st.one_of(ODD, st.fixed_dictionaries({"requestId": FIELD}))}
    ),
    je.ResumeAnswer.TYPE: st.fixed_dictionaries(
        {}, optional={"details": st.one_of(ODD, st.fixed_dictionaries({"requestId": FIELD}))}
    ),
    je.Draft.TYPE: st.fixed_dictionaries({}, optional={"requestId": FIELD, "form": RESULT}),
    je.Panel.TYPE: st.fixed_dictionaries({}, optional={"visible": st.booleans()}),
    je.PendingDismissed.TYPE: st.fixed_dictionaries({}, optional={"toolCallId": FIELD}),
    "user-message": st.fixed_dictionaries({"text": FIELD}),
}
ENTRIES = st.lists(
    st.one_of([st.tuples(st.just(kind), data) for kind, data in sorted(DATA_OF.items())]),
    max_size=40,
)


def _state(fold: JournalFold) -> Any:
    return (fold.live(), fold.log)


_CALL = ("tool-call", {"toolCallId": "c1", "name": "ask_user"})
_QUEUED = ("ask:queued", {"requestId": "r1", "toolCallId": "c9"})
_WAIT = {
    "toolCallId": "c8",
    "name": "wait_for_answers",
    "result": {"details": {"results": [{"requestId": "r1"}]}},
}


@settings(max_examples=600, deadline=None)
@given(items=ENTRIES)
# Each rule of the fast handlers met at least once, whatever the generator draws.
@example(items=[_CALL, ("ask:payload", {"sourceEntryId": "c1", "version": 2})])
@example(items=[_CALL, ("ask:payload", {"sourceEntryId": "c1", "version": True})])
@example(items=[_QUEUED, ("tool-result", _WAIT), ("ask:queue-completed", {"requestId": "r1"})])
@example(items=[_QUEUED, ("tool-result", {**_WAIT, "name": "ask_user"})])
@example(items=[_QUEUED, ("ask:queue-completed", {"requestId": "r1", "error": "x"})])
@example(items=[_QUEUED, ("ask:background-answer", {"details": {"requestId": "r1"}})])
@example(
    items=[
        _CALL,
        (
            "ask:history-request",
            {
                "requestId": "r2",
                "toolCallId": "c1",
                "questions": codec.Spliced(
                    [{"id": "a", "label": "b", "prompt": "c", "options": []}] * 2
                ),
            },
        ),
        ("ask:history-request", {"requestId": "r3", "questions": codec.Spliced([{}])}),
    ]
)
@example(
    items=[
        _QUEUED,
        ("ask:history-completed", {"requestId": "r1", "result": codec.Spliced({})}),
        ("ask:history-completed", {"requestId": "r1", "result": codec.Spliced(["x"])}),
        ("ask:queue-completed", {"requestId": "r1", "result": codec.Spliced({"answers": {}})}),
    ]
)
@example(
    items=[
        _QUEUED,
        ("ask:draft", {"requestId": "r1"}),
        ("ask:draft", {"requestId": "r1", "form": {}}),
    ]
)
@example(
    items=[
        _CALL,
        ("ask:history-request", {"requestId": "r2", "toolCallId": "c1", "questions": []}),
        ("ask:history-completed", {"requestId": "r2", "result": {}}),
        ("ask:pending-dismissed", {"toolCallId": "c1"}),
        ("ask:history-completed", {"requestId": "r2", "error": "e"}),
        ("ask:resume-answer", {"details": {"requestId": "r2"}}),
        ("ask:panel", {"visible": False}),
    ]
)
def test_the_fast_fold_agrees_with_the_record_fold(items: list[tuple[str, Any]]) -> None:
    fast, model = JournalFold(), _RecordFold()
    for n, (entry_type, data) in enumerate(items):
        entry = Entry(f"{n:016x}", None, entry_type, 0.0, data)
        fast.step(entry, (n, 0))
        model.step(entry, (n, 0))
        assert _state(fast) == _state(model)
    # The write path's way in: the data as the writer passed it, the chain in one frame.
    chained, model = JournalFold(), _RecordFold()
    chained.step_chain(items, 7)
    for n, (entry_type, data) in enumerate(items):
        model.step(Entry(f"{n:016x}", None, entry_type, 0.0, data), (7, n))
    assert _state(chained) == _state(model)


_Q = {"id": "a", "label": "b", "prompt": "c", "options": [{"value": "v", "label": "l"}]}


@settings(max_examples=300, deadline=None)
@example(request_id="r1", questions=[_Q])
@example(request_id="r1", questions=[{**_Q, "options": [{"value": "v", "label": 1}]}])
@example(request_id="r1", questions=[{**_Q, "options": [{"value": 1, "label": "l"}]}])
@example(request_id="r1", questions=[{**_Q, "type": "preview"}, {**_Q, "type": "bad"}])
@example(request_id="r1", questions=[{**_Q, "label": None}])
@example(request_id="", questions=[_Q])
@given(request_id=FIELD, questions=st.one_of(ODD, st.lists(QUESTION, min_size=1, max_size=2)))
def test_question_count_agrees_with_the_questions(request_id: Any, questions: Any) -> None:
    stored = stored_questions(request_id, questions)
    assert stored_question_count(request_id, questions) == (None if stored is None else len(stored))


@settings(max_examples=100, deadline=None)
@given(chains=st.lists(ENTRIES, min_size=1, max_size=4))
def test_the_fold_of_appended_chains_equals_the_fold_read_back(
    tmp_path_factory: pytest.TempPathFactory, chains: list[list[tuple[str, Any]]]
) -> None:
    path = tmp_path_factory.mktemp("fold") / "s.pias"
    with SessionFile.open(path, projection=JOURNAL, checkpoint_every=7) as session:
        session.append_chains(chains)
        written = _state(session.fold())  # type: ignore[arg-type]
        log = session.log()
    with SessionFile.open(path, projection=JOURNAL, checkpoint_every=7) as session:
        fold = session.fold()
        assert isinstance(fold, JournalFold)
        assert fold.live() == written[0] and session.log() == log
    # And from the whole branch, without checkpoints.
    with SessionFile.open(path, readonly=True) as session:
        model = _RecordFold()
        for n, entry in enumerate(session.branch()):
            model.step(entry, (n, 0))
    assert [item[:2] for item in model.log] == [item[:2] for item in log]
