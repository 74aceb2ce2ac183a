"""Tests that kill mutants of ``persistence/projection.py`` that the other suites let live
(docs/mutation-persistence.md, "projection.py"): the journal fold keeps only what is still
open (what ``live()`` puts into every checkpoint), and what it forgets never takes along what
another open call still needs. Each folds real entries through ``journal.fold_branch``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pi_agent_ask.form.result import build_result
from pi_agent_ask.form.types import Draft
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.projection import JOURNAL, LogColumns
from pi_agent_ask.persistence.records import AskRequest, Outcome
from pi_agent_ask.persistence.session_file import Entry, SessionFile

from .runtime_support import payload

CREATED = "2026-12-01T00:00:00.000Z"
_VALID = validate_ask_params(payload("a")).params
assert _VALID is not None
PARAMS = _VALID

EMPTY = {
    "requests": [],
    "panel": True,
    "calls": [],
    "payloads": [],
    "callRequests": [],
    "completions": [],
    "dismissed": [],
    "returned": [],
}


def _branch(*items: tuple[str, dict[str, Any]]) -> list[Entry]:
    return [Entry(f"e{n}", None, kind, 1.0, data) for n, (kind, data) in enumerate(items)]


def _fold(*items: tuple[str, dict[str, Any]]) -> Any:
    return jr.fold_branch(_branch(*items))[0]


def _call(call_id: str) -> tuple[str, dict[str, Any]]:
    return jr.TOOL_CALL, {"toolCallId": call_id, "name": "ask_user", "arguments": payload("a")}


def _request(request_id: str, call_id: str) -> tuple[str, dict[str, Any]]:
    request = AskRequest(request_id, PARAMS, False, CREATED, call_id)
    return jr.HISTORY_REQUEST, jr.history_request_entry(request)


def _answered(request_id: str) -> tuple[str, dict[str, Any]]:
    assert PARAMS is not None
    result = build_result(PARAMS, [Draft(selected=(0,))], request_id=request_id)
    [entry, *_] = jr.completion_entries(Outcome(request_id, result=result), background=False)
    return entry


def _result(call_id: str) -> tuple[str, dict[str, Any]]:
    return jr.TOOL_RESULT, jr.tool_result_entry(call_id, "ask_user", {"content": []})


def _dismissed(call_id: str) -> tuple[str, dict[str, Any]]:
    return jr.PENDING_DISMISSED, {"toolCallId": call_id}


def test_a_call_with_its_result_leaves_nothing_behind() -> None:
    assert PARAMS is not None
    items = (
        _call("c1"),
        (jr.PAYLOAD, jr.payload_entry(PARAMS, "c1", CREATED)),
        _request("r1", "c1"),
        _answered("r1"),
    )
    open_fold = _fold(*items)
    assert [c for c, _ in open_fold.calls] == ["c1"] and list(open_fold.payloads) == ["c1"]
    assert open_fold.live()["callRequests"] == [["c1", "r1", [2, -2]]]
    assert open_fold.live()["completions"] == [["r1", [3, -2]]]
    branch = _branch(*items, _result("c1"))
    fold, load = jr.fold_branch(branch)
    assert fold.live() == EMPTY
    # A call answered through its result is not a dismissed form whose answer is owed.
    assert jr.rebuilt_queue(fold, load).recovered_answers == ()


def test_a_history_request_of_a_call_that_is_not_open_is_not_kept() -> None:
    assert _fold(_request("r1", "elsewhere")).live()["callRequests"] == []
    assert _fold(_call("c1"), _result("c1"), _request("r1", "c1")).live() == EMPTY


def test_a_call_asked_again_under_a_new_key_forgets_the_old_request() -> None:
    failed = (jr.HISTORY_COMPLETED, {"version": 1, "requestId": "r1", "error": "ui failed"})
    fold = _fold(_call("c1"), _request("r1", "c1"), failed, _request("r2", "c1"))
    assert fold.live()["callRequests"] == [["c1", "r2", [3, -2]]]
    assert fold.live()["completions"] == []


def test_a_dismissed_call_keeps_its_request_until_its_answer_is_delivered() -> None:
    items = (_call("c1"), _request("r1", "c1"), _answered("r1"), _dismissed("c1"))
    fold = _fold(*items)
    assert fold.live()["dismissed"] == ["c1"] and fold.live()["calls"] == []
    assert fold.live()["callRequests"] == [["c1", "r1", [1, -2]]]
    # A later result for the call (the reopened form's) leaves the owed answer alone.
    later = _fold(*items, _result("c1"))
    assert later.live()["dismissed"] == ["c1"]
    assert later.live()["callRequests"] == [["c1", "r1", [1, -2]]]
    assert later.live()["completions"] == [["r1", [2, -2]]]
    delivered = (jr.RESUME_ANSWER, {"customType": "x", "details": {"requestId": "r1"}})
    assert _fold(*items, delivered).live() == EMPTY


def test_a_delivered_answer_passes_over_a_dismissed_call_without_a_request() -> None:
    delivered = (jr.RESUME_ANSWER, {"customType": "x", "details": {"requestId": "r9"}})
    fold = _fold(_call("c1"), _dismissed("c1"), delivered)
    assert fold.live()["dismissed"] == ["c1"]


def test_forgetting_one_call_keeps_the_completion_another_call_still_names() -> None:
    branch = _branch(
        _call("c1"),
        _call("c2"),
        _request("r1", "c1"),
        _request("r1", "c2"),
        _answered("r1"),
        _result("c1"),
    )
    fold, load = jr.fold_branch(branch)
    assert fold.live()["completions"] == [["r1", [4, -2]]]
    call = jr.interrupted_call(
        fold, load, revalidate=lambda arguments: validate_ask_params(arguments).params
    )
    assert call is not None and (call.tool_call_id, call.request_id) == ("c2", "r1")
    assert call.recorded is not None and call.recorded.result is not None


# ---- reading a checkpoint back --------------------------------------------------------------


def test_the_live_part_of_a_session_file_s_fold_restores_to_the_same_fold(
    tmp_path: Path,
) -> None:
    with SessionFile.open(tmp_path / "s.pias", projection=JOURNAL) as session:
        for entry_type, data in (_call("c1"), _request("r1", "c1"), _answered("r1")):
            session.append(entry_type, data)
        session.append_chains([[_call("c2"), _request("r2", "c2")]])
        live = session.fold().live()
    assert [c for c, _ in live["calls"]] == ["c1", "c2"]
    assert JOURNAL.restore(live).live() == live


@pytest.mark.parametrize("loc", [[1, 2, 3], (5, -1), [5], ["5", -1], [-5, -1], [5, True]])
def test_a_checkpoint_with_a_malformed_location_is_refused(loc: Any) -> None:
    live = {**EMPTY, "calls": [["c1", loc]]}
    with pytest.raises(ValueError, match=r"^checkpoint state does not fit the journal: "):
        JOURNAL.restore(live)
    # Place -1: the one entry of a version 1 frame.
    assert JOURNAL.restore({**EMPTY, "calls": [["c1", [5, -1]]]}).calls == [("c1", (5, -1))]


def _run() -> dict[str, Any]:
    columns = LogColumns()
    columns.add_items([["q", "r1", 10, -1, 2], ["c", "r1", 20, -1], ["c", "r0", 30, 0]])
    return columns.pack()


def test_a_history_run_with_ids_that_are_not_arrays_of_text_is_refused_with_its_reason() -> None:
    whole = LogColumns.unpack(_run())
    assert (whole.qids, whole.cids) == (["r1"], ["r1", "r0"])
    for field, value, reason in (
        ("c", (), "ids are not arrays"),
        ("q", ("r1",), "ids are not arrays"),
        ("q", [1], "an id is not text"),
        ("c", ["r0", 2], "an id is not text"),
    ):
        with pytest.raises(ValueError, match=f"^malformed history run: {reason}$"):
            LogColumns.unpack({**_run(), field: value})


def _queued(request_id: str) -> tuple[str, dict[str, Any]]:
    assert PARAMS is not None
    request = AskRequest(request_id, PARAMS, True, CREATED, f"call-{request_id}")
    return jr.QUEUED, jr.queued_entry(request)


def test_a_background_answer_without_details_marks_nothing() -> None:
    fold = _fold(_queued("r1"), (jr.BACKGROUND_ANSWER, {"customType": jr.BACKGROUND_ANSWER}))
    assert fold.live()["requests"] == [["r1", [0, -2], None, None, False]]


def test_a_queued_request_without_a_draft_rebuilds_with_none() -> None:
    fold, load = jr.fold_branch(_branch(_queued("r1")))
    [rebuilt] = jr.rebuilt_queue(fold, load).requests
    assert rebuilt.draft is None and rebuilt.outcome is None and rebuilt.delivered is False


def test_a_checkpoint_restores_every_part_of_the_fold_it_holds() -> None:
    """What only a written checkpoint holds (a request marked before its outcome, payloads
    and dismissed calls): read back as the fold had it."""
    live = {
        **EMPTY,
        "requests": [["r1", [0, -2], None, None, True]],
        "payloads": [["c1", [[1, 0], [2, 0]]]],
        "dismissed": ["c2"],
    }
    fold = JOURNAL.restore(live)
    assert fold.requests["r1"].delivered is True
    assert fold.payloads == {"c1": [(1, 0), (2, 0)]}
    assert fold.dismissed == {"c2": None}
    assert fold.live() == live


FULL = {
    "requests": [
        ["r1", [10, -1], [11, 0], [12, 1], True],
        ["r2", [0, -2], None, None, False],
        ["r3", [13, 2], None, [14, -1], False],
    ],
    "panel": False,
    "calls": [["c1", [0, -2]], ["c2", [15, 3]]],
    "payloads": [["c1", [[16, 0], [17, -1]]]],
    "callRequests": [["c1", "r1", [18, -2]], ["c3", "r9", [19, 0]]],
    "completions": [["r1", [20, 1]]],
    "dismissed": ["c3", "c4"],
    "returned": [
        ["ask:background-answer", "r5", [21, -1], 0],
        ["ask:resume-answer", "r6", [22, 0], 3],
    ],
}


def test_every_field_of_a_checkpoint_s_live_part_reads_back_as_written() -> None:
    """Every part filled, with places from 0 (an in-memory branch's) and every slot kind."""
    assert JOURNAL.restore(FULL).live() == FULL
    shown = JOURNAL.restore({**FULL, "panel": True})
    assert shown.panel_visible is True and shown.live() == {**FULL, "panel": True}
    # Anything but ``false`` shows the panel; only ``true`` marks a request delivered.
    assert JOURNAL.restore({**FULL, "panel": None}).panel_visible is True
    odd = {**FULL, "requests": [["r1", [10, -1], None, None, 1]]}
    assert JOURNAL.restore(odd).requests["r1"].delivered is False


def test_the_fold_of_an_in_memory_branch_restores_from_its_live_part() -> None:
    fold = _fold(_call("c1"), _request("r1", "c1"), _queued("r2"))
    live = fold.live()
    assert live["calls"] == [["c1", [0, -2]]]
    assert JOURNAL.restore(live).live() == live


def test_a_checkpoint_written_before_give_backs_restores_without_them() -> None:
    old = {key: value for key, value in FULL.items() if key != "returned"}
    fold = JOURNAL.restore(old)
    assert fold.returned == {}
    assert fold.live() == {**old, "returned": []}


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("calls", [[7, [1, 0]]], "malformed id"),
        ("dismissed", [None], "malformed id"),
        ("callRequests", [["c1", 5, [1, 0]]], "malformed id"),
        ("calls", [["c1", [1, 0, 0]]], "malformed entry location"),
        ("requests", [["r1", [1, 0], [2], None, False]], "malformed entry location"),
        ("requests", [["r1", [1, 0], None, "x", False]], "malformed entry location"),
        ("returned", [["ask:resume-answer", "r1", [1, 0], -1]], "malformed message index"),
        ("returned", [["ask:resume-answer", "r1", [1, 0], True]], "malformed message index"),
        ("returned", [["ask:resume-answer", "r1", [1, 0], "0"]], "malformed message index"),
        ("returned", [[None, "r1", [1, 0], 0]], "malformed id"),
        ("returned", [["ask:resume-answer", None, [1, 0], 0]], "malformed id"),
    ],
)
def test_a_malformed_part_is_refused_with_its_reason(field: str, value: Any, reason: str) -> None:
    with pytest.raises(ValueError, match=f"^checkpoint state does not fit the journal: {reason}$"):
        JOURNAL.restore({**FULL, field: value})


def test_a_message_index_of_zero_is_read() -> None:
    live = {**EMPTY, "returned": [["ask:resume-answer", "r1", [1, 0], 0]]}
    assert JOURNAL.restore(live).returned == {("ask:resume-answer", "r1"): ((1, 0), 0)}
