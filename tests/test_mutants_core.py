"""Tests that kill mutants of the journal and the queue reducer that the other suites let live
(docs/mutation.md, "persistence/journal.py"). Each drives a module function with real entries
on a real session file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from pi_agent_ask.actors import queue_state as qs
from pi_agent_ask.actors.records import AskRequest, Outcome
from pi_agent_ask.form import state as fs
from pi_agent_ask.form import text as texts
from pi_agent_ask.form.result import build_result
from pi_agent_ask.form.types import Draft
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.session_file import SessionFile

from .runtime_support import Box, payload


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


# -- the queue reducer (actors/queue_state.py) --------------------------------------------------


def _reduce(state: qs.QueueState, message: Any) -> tuple[qs.QueueState, list[Any]]:
    """One message and the ``Continue`` transitions it asks for, each committed, as the shell
    runs them; all their effects."""
    state, effects = qs.reduce(state, message)
    state = state.commit()
    done: list[Any] = []
    for effect in effects:
        done.append(effect)
        if isinstance(effect, qs.Continue):
            state, more = _reduce(state, effect.message)
            done += more
    return state, done


def _queued(rid: str = "r1") -> tuple[qs.QueueState, Any, Any]:
    params = validate_ask_params(payload("a", background=True)).params
    assert params is not None
    form = fs.new_form(params)
    request = AskRequest(rid, params, background=True, created_at="t")
    state, _ = qs.reduce(qs.initial_state(), qs.Enqueue(request, form, Box()))
    return state.commit(), params, form


def test_a_table_sees_its_own_sets_and_deletes() -> None:
    table: qs.Table[str, int] = qs.Table({"a": 1, "b": 2})
    table.set("c", 3)
    table.delete("a")
    assert "c" in table and "b" in table and "a" not in table
    assert sorted(table.keys()) == ["b", "c"]
    table.commit()
    assert sorted(table.keys()) == ["b", "c"]
    assert "a" not in table


def test_stats_name_the_params_of_each_pending_request() -> None:
    state, params, _ = _queued()
    assert state.stats().params == (("r1", params),)


def test_a_changed_draft_is_written_with_its_form_after_one_scheduled_flush() -> None:
    state, _, form = _queued()
    typed = attrs.evolve(form, drafts=(Draft(selected=(1,), note="typed"),))
    assert fs.state_to_json(typed) != fs.state_to_json(form)
    effects: list[Any] = []
    for _ in range(2):
        state, step = _reduce(state, qs.DraftChanged("r1", state.epoch, typed))
        effects += step
    assert sum(isinstance(e, qs.ScheduleFlush) for e in effects) == 1
    state, step = _reduce(state, qs.FlushDrafts())
    appends = [e for e in step if isinstance(e, qs.Append)]
    assert appends == [
        qs.Append((("ask:draft", {"requestId": "r1", "form": fs.state_to_json(typed)}),))
    ]


def test_a_delivered_answer_carries_the_text_its_params_give() -> None:
    state, params, form = _queued()
    # A note on an option not chosen: only the params name that option.
    draft = Draft(selected=(0,), option_notes={"a2": "not this"})
    result = build_result(params, [draft], request_id="r1")
    outcome = Outcome("r1", result=result)
    state, effects = _reduce(state, qs.FormStopped("r1", state.epoch, form, outcome))
    state, more = _reduce(state, qs.TurnBoundary(Box()))
    effects += more
    marks = [e for e in effects if isinstance(e, qs.MarkDelivered)]
    expected = texts.background_answer_message(outcome, params=params)
    assert expected != texts.background_answer_message(outcome)
    assert marks == [qs.MarkDelivered((("ask:background-answer", expected),))]


def test_a_draft_of_an_unknown_request_or_an_old_epoch_changes_nothing() -> None:
    state, _, form = _queued()
    for message in (
        qs.DraftChanged("no-such-request", state.epoch, form),
        qs.DraftChanged("r1", state.epoch - 1, form),
    ):
        after, effects = _reduce(state, message)
        assert effects == []
        assert after.stats() == state.stats()


def test_an_interrupted_form_writes_the_draft_it_stopped_with() -> None:
    state, _, form = _queued()
    typed = attrs.evolve(form, drafts=(Draft(selected=(1,), note="typed"),))
    _, effects = _reduce(state, qs.FormStopped("r1", state.epoch, typed, None))
    appends = [e for e in effects if isinstance(e, qs.Append)]
    assert appends == [
        qs.Append((("ask:draft", {"requestId": "r1", "form": fs.state_to_json(typed)}),))
    ]


def test_a_form_stop_of_an_old_epoch_records_nothing() -> None:
    state, _, form = _queued()
    outcome = Outcome("r1", error="the surface broke")
    after, _ = _reduce(state, qs.FormStopped("r1", state.epoch - 1, form, outcome))
    assert after.stats().completed == 0
    assert after.stats().pending == ("r1",)
