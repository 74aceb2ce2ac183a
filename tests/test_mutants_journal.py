"""Tests that kill mutants of ``persistence/journal.py`` that the other suites let live
(docs/mutation-persistence.md, "journal.py"): saved presentation types applied again on
recovery, and the request a rebuilt queue holds. Each drives the module with real entries on a
real session file (``tests/test_mutants_core.py`` has the earlier ones)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from pi_agent_ask.form.result import build_result
from pi_agent_ask.form.types import Draft
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.projection import JOURNAL
from pi_agent_ask.persistence.records import AskRequest, Outcome
from pi_agent_ask.persistence.session_file import SessionFile

from .runtime_support import question

CREATED = "2026-12-01T00:00:00.000Z"


def _params(*, background: bool = False, present_single_as_multi: bool = False) -> Any:
    arguments: dict[str, Any] = {
        "title": "Plan",
        "questions": [question("a"), question("b", "multi")],
        "background": background,
    }
    validation = validate_ask_params(
        arguments, present_single_as_multi=present_single_as_multi, background_only=background
    )
    assert validation.params is not None
    return validation.params


def _types(params: Any) -> list[tuple[str, str | None]]:
    return [(q.type, q.presented_type) for q in params.questions]


# ---- apply_presented_types ------------------------------------------------------------------


def test_saved_presentation_types_are_applied_again() -> None:
    params = _params()
    assert _types(params) == [("single", None), ("multi", None)]
    swapped = jr.apply_presented_types(params, ["multi", "single"])
    assert _types(swapped) == [("single", "multi"), ("multi", "single")]
    assert [q.effective_type for q in swapped.questions] == ["multi", "single"]
    assert [q.id for q in swapped.questions] == ["a", "b"] and swapped.title == "Plan"
    one = jr.apply_presented_types(params, ["multi", "multi"])
    assert _types(one) == [("single", "multi"), ("multi", None)]
    assert one.questions[1] is params.questions[1]


def test_presentation_types_that_do_not_fit_change_nothing() -> None:
    params = _params()
    unfit: list[list[Any] | None] = [None, [], ["multi"], ["multi", "single", "multi"]]
    for types in unfit:
        assert jr.apply_presented_types(params, types) is params
    odd: list[list[Any]] = [["single", "multi"], ["bogus", None], ["preview", 1]]
    for types in odd:
        assert _types(jr.apply_presented_types(params, types)) == _types(params)


# ---- the request a rebuilt queue holds ------------------------------------------------------


def test_a_rebuilt_request_is_the_background_request_that_was_queued(tmp_path: Path) -> None:
    params = _params(background=True, present_single_as_multi=True)
    assert _types(params) == [("single", "multi"), ("multi", None)]
    request = AskRequest("r2", params, True, CREATED, "c2", "p2", source="background")
    with SessionFile.open(tmp_path / "s.pias") as session:
        # A queued request whose params no longer validate is skipped, not the end of the queue.
        session.append(jr.QUEUED, {"version": 1, "requestId": "r1", "params": {"questions": []}})
        session.append(jr.QUEUED, jr.queued_entry(request))
        without_time = {k: v for k, v in jr.queued_entry(request).items() if k != "createdAt"}
        session.append(jr.QUEUED, {**without_time, "requestId": "r3"})
        branch = session.branch()
    rebuilt = jr.rebuild_queue(branch).requests
    assert [r.request.request_id for r in rebuilt] == ["r2", "r3"]
    first, second = rebuilt[0].request, rebuilt[1].request
    assert first == request
    assert (first.background, first.params.background, first.source) == (True, True, "background")
    assert (first.tool_call_id, first.parent_tool_call_id, first.created_at) == (
        "c2",
        "p2",
        CREATED,
    )
    assert [q.effective_type for q in first.params.questions] == ["multi", "multi"]
    # Without ``createdAt`` the request takes its entry's time.
    assert second.created_at == str(branch[2].timestamp)


def test_a_queued_request_saved_without_the_background_flag_rebuilds_as_background(
    tmp_path: Path,
) -> None:
    foreground = _params()
    assert "background" not in foreground.to_json()
    request = AskRequest("r1", foreground, True, CREATED, "c1")
    with SessionFile.open(tmp_path / "s.pias") as session:
        session.append(jr.QUEUED, jr.queued_entry(request))
        branch = session.branch()
    [rebuilt] = jr.rebuild_queue(branch).requests
    assert rebuilt.request.params.background is True and rebuilt.request.background is True


def test_a_rebuilt_outcome_carries_its_request_s_parent_call(tmp_path: Path) -> None:
    params = _params(background=True)
    request = AskRequest("r1", params, True, CREATED, "c1", "p1", source="background")
    outcome = Outcome("r1", error="ui failed")
    with SessionFile.open(tmp_path / "s.pias") as session:
        session.append(jr.QUEUED, jr.queued_entry(request))
        for entry_type, data in jr.completion_entries(outcome, background=True):
            session.append(entry_type, data)
        branch = session.branch()
    [rebuilt] = jr.rebuild_queue(branch).requests
    assert rebuilt.outcome == attrs.evolve(outcome, parent_tool_call_id="p1")


# ---- answers of reopened forms that were recorded, never delivered --------------------------


def _dismissed_call(
    session: SessionFile, call_id: str, request_id: str | None, result: Any | None
) -> None:
    """A foreground call whose form was reopened and dismissed, with its history request
    (when ``request_id``) and completion (when ``result``)."""
    params = _params()
    session.append(
        jr.TOOL_CALL, {"toolCallId": call_id, "name": "ask_user", "arguments": params.to_json()}
    )
    if request_id is not None:
        request = AskRequest(request_id, params, False, CREATED, call_id)
        session.append(jr.HISTORY_REQUEST, jr.history_request_entry(request))
    session.append(jr.PENDING_DISMISSED, {"toolCallId": call_id})
    if request_id is not None and result is not None:
        [(entry_type, data), *_] = jr.completion_entries(
            Outcome(request_id, result=result), background=False
        )
        session.append(entry_type, data)


def _answered(request_id: str, *, cancelled: bool = False) -> Any:
    return build_result(
        _params(),
        [Draft(selected=(0,)), Draft(selected=(1,))],
        cancelled=cancelled,
        request_id=request_id,
    )


def test_an_answer_recorded_for_a_dismissed_call_is_recovered(tmp_path: Path) -> None:
    with SessionFile.open(tmp_path / "s.pias") as session:
        _dismissed_call(session, "c0", None, None)  # no history request: nothing to recover
        _dismissed_call(session, "c1", "r1", _answered("r1"))
        _dismissed_call(session, "c2", "r2", _answered("r2", cancelled=True))
        _dismissed_call(session, "c3", "r3", None)  # never completed
        # Completed without an answer: no outcome at all, or an error.
        _dismissed_call(session, "c5", "r5", None)
        session.append(jr.HISTORY_COMPLETED, {"version": 1, "requestId": "r5"})
        _dismissed_call(session, "c6", "r6", None)
        session.append(jr.HISTORY_COMPLETED, {"version": 1, "requestId": "r6", "error": "x"})
        # A request whose params no longer validate.
        _call(session, "c7", _params().to_json())
        session.append(
            jr.HISTORY_REQUEST,
            {"version": 1, "requestId": "r7", "toolCallId": "c7", "params": {"questions": []}},
        )
        session.append(jr.PENDING_DISMISSED, {"toolCallId": "c7"})
        [(entry_type, data), *_] = jr.completion_entries(
            Outcome("r7", result=_answered("r7")), background=False
        )
        session.append(entry_type, data)
        _dismissed_call(session, "c4", "r4", _answered("r4"))
        branch = session.branch()
    recovered = jr.rebuild_queue(branch).recovered_answers
    assert [(a.tool_call_id, a.request_id) for a in recovered] == [("c1", "r1"), ("c4", "r4")]
    first = recovered[0]
    assert first == jr.RecoveredAnswer("c1", "r1", _params(), Outcome("r1", result=_answered("r1")))


# ---- interrupted foreground calls -----------------------------------------------------------


def _revalidate(arguments: Any) -> Any:
    return validate_ask_params(arguments).params


def _call(session: SessionFile, call_id: str, arguments: Any) -> None:
    session.append(
        jr.TOOL_CALL, {"toolCallId": call_id, "name": "ask_user", "arguments": arguments}
    )


def test_the_newest_valid_payload_of_a_call_gives_its_form(tmp_path: Path) -> None:
    params = _params()
    with SessionFile.open(tmp_path / "s.pias") as session:
        _call(session, "c1", {**params.to_json(), "title": "From the arguments"})
        session.append(jr.PAYLOAD, jr.payload_entry(params, "c1", CREATED))
        broken = {**jr.payload_entry(params, "c1", CREATED), "params": {"questions": []}}
        session.append(jr.PAYLOAD, broken)
        branch = session.branch()
    call = jr.find_interrupted_call(branch, revalidate=_revalidate)
    assert call is not None and call.params.title == "Plan"


def test_a_call_that_cannot_be_shown_again_gives_way_to_an_older_one(tmp_path: Path) -> None:
    with SessionFile.open(tmp_path / "s.pias") as session:
        _call(session, "c1", _params().to_json())
        _call(session, "c2", {"questions": "not a list"})
        branch = session.branch()
    call = jr.find_interrupted_call(branch, revalidate=_revalidate)
    assert call is not None and call.tool_call_id == "c1"


def test_an_interrupted_call_is_shown_in_the_foreground_as_it_was_asked(tmp_path: Path) -> None:
    background = _params(background=True)
    assert background.background is True
    with SessionFile.open(tmp_path / "s.pias") as session:
        _call(session, "c1", background.to_json())
        session.append(jr.PAYLOAD, jr.payload_entry(background, "c1", CREATED))
        branch = session.branch()
    fold, load = jr.fold_branch(branch)
    call = jr.interrupted_call(fold, load, revalidate=_revalidate)
    assert call is not None and call.params.background is False
    # The keyword's default presents each question as it was asked.
    assert [q.effective_type for q in call.params.questions] == ["single", "multi"]
    multi = jr.interrupted_call(fold, load, revalidate=_revalidate, present_single_as_multi=True)
    assert multi is not None
    assert [q.effective_type for q in multi.params.questions] == ["multi", "multi"]


def test_an_interrupted_call_keeps_its_request_key_and_time(tmp_path: Path) -> None:
    params = _params()
    with SessionFile.open(tmp_path / "s.pias") as session:
        _call(session, "c1", params.to_json())
        session.append(
            jr.HISTORY_REQUEST,
            jr.history_request_entry(AskRequest("r1", params, False, CREATED, "c1")),
        )
        branch = session.branch()
    call = jr.find_interrupted_call(branch, revalidate=_revalidate)
    assert call is not None
    assert (call.request_id, call.created_at, call.recorded) == ("r1", CREATED, None)
    with SessionFile.open(tmp_path / "odd.pias") as session:
        _call(session, "c1", params.to_json())
        data = jr.history_request_entry(AskRequest("r1", params, False, CREATED, "c1"))
        session.append(jr.HISTORY_REQUEST, {**data, "createdAt": 17})
        odd = session.branch()
    call = jr.find_interrupted_call(odd, revalidate=_revalidate)
    assert call is not None and (call.request_id, call.created_at) == ("r1", None)


@pytest.mark.parametrize("completion", [{}, {"error": "ui failed"}])
def test_a_call_completed_without_an_answer_is_asked_again_under_a_new_key(
    tmp_path: Path, completion: dict[str, Any]
) -> None:
    params = _params()
    with SessionFile.open(tmp_path / "s.pias") as session:
        _call(session, "c1", params.to_json())
        session.append(
            jr.HISTORY_REQUEST,
            jr.history_request_entry(AskRequest("r1", params, False, CREATED, "c1")),
        )
        session.append(jr.HISTORY_COMPLETED, {"version": 1, "requestId": "r1", **completion})
        branch = session.branch()
    call = jr.find_interrupted_call(branch, revalidate=_revalidate)
    assert call is not None
    assert (call.tool_call_id, call.request_id, call.recorded) == ("c1", None, None)
    assert call.created_at == CREATED


# ---- what the writers record ----------------------------------------------------------------


def test_a_history_request_records_each_question_s_presentation_only_when_it_differs() -> None:
    params = _params(present_single_as_multi=True)
    request = AskRequest("r1", params, False, CREATED, "c1")
    data = jr.history_request_entry(request, shared=params.to_json())
    first, second = data["questions"]
    assert first == {**params.questions[0].to_json(), "presentedType": "multi"}
    assert second == params.questions[1].to_json() and "presentedType" not in second
    assert data["presentedTypes"] == ["multi", "multi"]
    assert data["params"] == params.to_json() and data["source"] == "tool"


def test_recovery_presents_the_interrupted_call_as_the_runtime_asks(tmp_path: Path) -> None:
    params = _params()
    with SessionFile.open(tmp_path / "s.pias", projection=JOURNAL) as session:
        _call(session, "c1", params.to_json())
        session.append(jr.PAYLOAD, jr.payload_entry(params, "c1", CREATED))
        for multi, expected in ((False, ["single", "multi"]), (True, ["multi", "multi"])):
            _, call = jr.recover(session, revalidate=_revalidate, present_single_as_multi=multi)
            assert call is not None
            assert [q.effective_type for q in call.params.questions] == expected
        _, none = jr.recover(session, revalidate=_revalidate, interrupted=False)
        assert none is None


def test_a_queued_entry_says_whether_a_single_question_is_shown_as_multi() -> None:
    plain, multi = _params(), _params(present_single_as_multi=True)
    assert jr.queued_entry(AskRequest("r1", plain, True, CREATED))["presentSingleAsMulti"] is False
    data = jr.queued_entry(AskRequest("r1", multi, True, CREATED))
    assert data["presentSingleAsMulti"] is True
    assert data["presentedTypes"] == ["multi", "multi"]
    # A multi question shown as multi is not a single one shown as multi.
    only_multi = validate_ask_params({"questions": [question("b", "multi")]}).params
    assert only_multi is not None
    assert (
        jr.queued_entry(AskRequest("r1", only_multi, True, CREATED))["presentSingleAsMulti"]
        is False
    )
