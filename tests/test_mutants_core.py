"""Tests that kill mutants of the journal and the queue reducer that the other suites let live
(docs/mutation.md, "persistence/journal.py"). Each drives a module function with real entries
on a real session file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pi_agent_ask.actors.records import AskRequest
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.session_file import SessionFile

from .runtime_support import payload


def _revalidate(arguments: Any) -> Any:
    return validate_ask_params(arguments).params


def _call(session: SessionFile, call_id: str, arguments: dict[str, Any]) -> None:
    session.append(
        jr.TOOL_CALL, {"toolCallId": call_id, "name": "ask_user", "arguments": arguments}
    )


def test_an_error_only_completion_reads_back_as_that_error_under_its_parent() -> None:
    outcome = jr.outcome_from_entry({"requestId": "r1", "error": "ui failed"}, "parent-1")
    assert outcome is not None
    assert (outcome.request_id, outcome.error, outcome.result) == ("r1", "ui failed", None)
    assert outcome.parent_tool_call_id == "parent-1"
    assert jr.outcome_from_entry({"requestId": "r1"}, "parent-1") is None


def test_an_interrupted_call_without_a_payload_is_rebuilt_from_its_arguments(
    tmp_path: Path,
) -> None:
    arguments = payload("scope", title="Plan")
    with SessionFile.open(tmp_path / "s.jsonl") as session:
        _call(session, "call-1", arguments)
        branch = session.branch()
    call = jr.find_interrupted_call(branch, revalidate=_revalidate)
    assert call is not None
    assert call.tool_call_id == "call-1"
    assert [q.id for q in call.params.questions] == ["scope"]
    assert call.params.title == "Plan"
    assert call.request_id is None


def test_an_interrupted_call_presents_single_as_multi_when_asked(tmp_path: Path) -> None:
    arguments = payload("scope")
    params = validate_ask_params(arguments).params
    assert params is not None
    request = AskRequest("req-1", params, False, "2026-12-01T00:00:00.000Z", "call-1")
    with SessionFile.open(tmp_path / "s.jsonl") as session:
        _call(session, "call-1", arguments)
        session.append(jr.PAYLOAD, jr.payload_entry(params, "call-1", request.created_at))
        session.append(jr.HISTORY_REQUEST, jr.history_request_entry(request))
        branch = session.branch()
    plain = jr.find_interrupted_call(branch, revalidate=_revalidate)
    multi = jr.find_interrupted_call(branch, revalidate=_revalidate, present_single_as_multi=True)
    assert plain is not None and multi is not None
    assert plain.params.questions[0].effective_type == "single"
    assert multi.params.questions[0].effective_type == "multi"
    assert multi.request_id == "req-1"
