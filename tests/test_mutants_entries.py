"""Tests that kill mutants of ``persistence/entries.py`` that the other suites let live
(docs/mutation-persistence.md, "entries.py"): each record stands for the data the journal's
writers build (``to_data``), its CBOR is ``[type, data]`` and reads back through ``parse``
(``to_cbor`` / ``from_cbor``), and the fields only a reader of the records sees (a call's
parent, an error-only completion) reach that reader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cbor2
import pytest

from pi_agent_ask.form.result import build_result
from pi_agent_ask.form.types import Draft
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence import entries as je
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.records import AskRequest, Outcome
from pi_agent_ask.persistence.session_file import Entry, SessionFile

from .runtime_support import payload

CREATED = "2026-12-01T00:00:00.000Z"


def _params(*qids: str, **kwargs: Any) -> Any:
    params = validate_ask_params(payload(*qids, **kwargs)).params
    assert params is not None
    return params


def _request(**kwargs: Any) -> AskRequest:
    fields: dict[str, Any] = {
        "request_id": "r1",
        "params": _params("a", "b", title="Plan"),
        "background": True,
        "created_at": CREATED,
        "tool_call_id": "c1",
        "parent_tool_call_id": "p1",
    }
    fields.update(kwargs)
    return AskRequest(**fields)


def _record(entry_type: str, data: dict[str, Any]) -> Any:
    """The record of ``data`` as the file hands it back (deep-frozen)."""
    return je.parse(Entry.from_cbor(Entry("e1", None, entry_type, 1.0, data).to_cbor()))


def _same(record: Any, data: dict[str, Any]) -> None:
    """``record`` stands for ``data``: its data, its CBOR and the record that CBOR reads as."""
    assert jr.thaw(record.to_data()) == jr.thaw(data)
    assert cbor2.loads(record.to_cbor()) == [record.TYPE or record.type, jr.thaw(data)]
    assert je.Other.from_cbor(record.to_cbor()) == record


def _outcome(rid: str = "r1") -> Outcome:
    params = _params("a", "b", title="Plan")
    result = build_result(params, [Draft(selected=(0,)), Draft(selected=(1,))], request_id=rid)
    return Outcome(rid, result=result)


# ---- each record stands for the data its writer builds ------------------------------------


def test_a_tool_call_stands_for_its_data_with_and_without_a_parent() -> None:
    data = {"toolCallId": "c1", "name": "ask_user", "arguments": {"questions": [1]}}
    plain = _record(jr.TOOL_CALL, data)
    assert plain == je.ToolCall("c1", "ask_user", {"questions": (1,)}, None)
    _same(plain, data)
    child = _record(jr.TOOL_CALL, {**data, "parentToolCallId": "p1"})
    assert child.parent_tool_call_id == "p1"
    _same(child, {**data, "parentToolCallId": "p1"})


def test_a_tool_result_stands_for_its_data() -> None:
    data = jr.tool_result_entry("c1", "ask_user", {"content": [{"type": "text", "text": "x"}]})
    record = _record(jr.TOOL_RESULT, data)
    assert (record.tool_call_id, record.name) == ("c1", "ask_user")
    _same(record, data)


def test_a_user_message_stands_for_its_text() -> None:
    record = _record(jr.USER_MESSAGE, {"text": "hello"})
    assert record == je.UserMessage("hello")
    _same(record, {"text": "hello"})


def test_a_payload_stands_for_the_data_the_journal_writes() -> None:
    data = jr.payload_entry(_params("a"), "c1", CREATED)
    record = _record(jr.PAYLOAD, data)
    assert (record.version, record.source_entry_id, record.timestamp) == (1, "c1", CREATED)
    _same(record, data)


def test_a_history_request_stands_for_the_fields_it_reads() -> None:
    request = _request()
    data = jr.history_request_entry(request)
    record = _record(jr.HISTORY_REQUEST, data)
    assert (record.request_id, record.tool_call_id, record.parent_tool_call_id) == (
        "r1",
        "c1",
        "p1",
    )
    assert (record.title, record.background, record.created_at) == ("Plan", True, CREATED)
    # ``source`` is written for other readers; the record does not read it.
    _same(record, {k: v for k, v in data.items() if k != "source"})
    bare = jr.history_request_entry(
        _request(params=_params("a"), tool_call_id=None, parent_tool_call_id=None)
    )
    assert {"toolCallId", "parentToolCallId", "title"}.isdisjoint(bare)
    _same(_record(jr.HISTORY_REQUEST, bare), {k: v for k, v in bare.items() if k != "source"})


def test_completions_stand_for_the_data_the_journal_writes() -> None:
    for outcome in (_outcome(), Outcome("r1", error="ui failed")):
        [(history_type, history), (queue_type, queue)] = jr.completion_entries(
            outcome, background=True
        )
        for entry_type, data, cls in (
            (history_type, history, je.HistoryCompleted),
            (queue_type, queue, je.QueueCompleted),
        ):
            record = _record(entry_type, data)
            assert type(record) is cls and record.has_outcome
            _same(record, data)
    assert _record(jr.QUEUE_COMPLETED, {"requestId": "r1"}).to_data() == {"requestId": "r1"}
    assert _record(jr.HISTORY_COMPLETED, {"requestId": "r1"}).to_data() == {
        "version": 1,
        "requestId": "r1",
    }


def test_a_queued_entry_stands_for_the_fields_it_reads() -> None:
    data = jr.queued_entry(_request())
    record = _record(jr.QUEUED, data)
    assert (record.request_id, record.tool_call_id, record.parent_tool_call_id) == (
        "r1",
        "c1",
        "p1",
    )
    assert record.created_at == CREATED
    _same(record, {k: v for k, v in data.items() if k != "presentSingleAsMulti"})
    bare = jr.queued_entry(_request(tool_call_id=None, parent_tool_call_id=None))
    _same(
        _record(jr.QUEUED, bare),
        {k: v for k, v in bare.items() if k != "presentSingleAsMulti"},
    )


def test_the_small_records_stand_for_their_data() -> None:
    for entry_type, data, expected in (
        (jr.PENDING_DISMISSED, {"toolCallId": "c1"}, je.PendingDismissed("c1")),
        (jr.DRAFT, {"requestId": "r1", "form": {"a": [1]}}, je.Draft("r1", {"a": (1,)})),
        (jr.PANEL, {"visible": False}, je.Panel(False)),
        (jr.PANEL, {"visible": True}, je.Panel(True)),
    ):
        record = _record(entry_type, data)
        assert record == expected
        _same(record, data)
    assert _record(jr.PANEL, {}) == je.Panel(True)


def test_a_delivered_message_stands_for_the_whole_message() -> None:
    message = {"customType": "x", "content": "answer", "details": {"requestId": "r1", "n": 2}}
    for entry_type, cls in (
        (jr.BACKGROUND_ANSWER, je.BackgroundAnswer),
        (jr.RESUME_ANSWER, je.ResumeAnswer),
    ):
        record = _record(entry_type, message)
        assert type(record) is cls and record.request_id == "r1"
        _same(record, message)
        assert _record(entry_type, {"content": "x"}).request_id is None


def test_an_entry_the_journal_does_not_read_is_kept_whole() -> None:
    data = {"customType": "host", "n": [1, 2]}
    record = _record("host-record", data)
    assert record == je.Other("host-record", {"customType": "host", "n": (1, 2)})
    _same(record, data)


def test_parse_type_names_the_record_class_of_each_journal_type() -> None:
    assert je.parse_type(jr.QUEUED) is je.Queued
    assert je.parse_type(jr.RESUME_ANSWER) is je.ResumeAnswer
    assert je.parse_type("host-record") is None


def test_cbor_that_is_not_a_journal_record_is_refused_with_its_reason() -> None:
    with pytest.raises(ValueError, match=r"^not a journal record: \S"):
        je.Other.from_cbor(b"\xff\xff")
    with pytest.raises(ValueError, match=r"^not a journal record: \S"):
        je.Other.from_cbor(cbor2.dumps(["a", {}, 3]))
    for bad in ([1, {}], ["a", [1]], ["a", None]):
        with pytest.raises(ValueError, match=r"^not a journal record$"):
            je.Other.from_cbor(cbor2.dumps(bad))
    assert je.Other.from_cbor(cbor2.dumps([jr.PANEL, {"visible": False}])) == je.Panel(False)


# ---- fields only a reader of the records sees ---------------------------------------------


def test_an_interrupted_call_keeps_its_parent_call(tmp_path: Path) -> None:
    with SessionFile.open(tmp_path / "s.pias") as session:
        session.append(
            jr.TOOL_CALL,
            {
                "toolCallId": "c1",
                "name": "ask_user",
                "arguments": payload("a"),
                "parentToolCallId": "p1",
            },
        )
        branch = session.branch()
    call = jr.find_interrupted_call(
        branch, revalidate=lambda arguments: validate_ask_params(arguments).params
    )
    assert call is not None and call.parent_tool_call_id == "p1"


def test_an_error_only_queue_completion_rebuilds_as_that_error(tmp_path: Path) -> None:
    request = _request(params=_params("a", background=True), parent_tool_call_id=None)
    with SessionFile.open(tmp_path / "s.pias") as session:
        session.append(jr.QUEUED, jr.queued_entry(request))
        for entry_type, data in jr.completion_entries(
            Outcome("r1", error="ui failed"), background=True
        ):
            session.append(entry_type, data)
        branch = session.branch()
    [rebuilt] = jr.rebuild_queue(branch).requests
    assert rebuilt.outcome == Outcome("r1", error="ui failed")


def test_only_a_successful_wait_result_delivers_and_only_the_ids_it_names() -> None:
    details = {"results": [{"requestId": "r1"}, {"requestId": 5}, {"other": 1}, "r9", None]}
    ok = je.ToolResult("c1", "wait_for_answers", {"details": details})
    assert ok.delivered_ids() == ("r1",)
    failed = je.ToolResult("c1", "wait_for_answers", {"isError": True, "details": details})
    assert failed.delivered_ids() == ()
    assert je.ToolResult("c1", "ask_user", {"details": details}).delivered_ids() == ()
    assert je.ToolResult("c1", "wait_for_answers", {"details": {}}).delivered_ids() == ()
