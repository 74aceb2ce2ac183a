"""The journal fold and the session's appends against their models: the fold's handlers,
which read only the fields they need, agree with the fold of the parsed records; the fold of
appended chains equals the fold read back from the file; frames through the primed compressor
inflate to what was written; ids stay unique across a fork of the process; data that cannot be
stored, or nested too deep to read back, is refused.
"""

from __future__ import annotations

import os
import types
from pathlib import Path
from typing import Any

import cbor2
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pi_agent_ask.persistence import codec
from pi_agent_ask.persistence import entries as je
from pi_agent_ask.persistence.projection import JOURNAL, JournalFold, PendingRequest
from pi_agent_ask.persistence.session_file import Entry, Loc, SessionFile
from pi_agent_ask.persistence.stored_questions import stored_questions


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


# ---- data that cannot be stored ------------------------------------------------------------


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
        assert codec.inflate(packed) == plain
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
    assert codec.inflate(packed) == plain
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
