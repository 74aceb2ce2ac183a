"""What the cyclic collector walks for each background form: the tracked objects that a queued
form, an answered form whose answer waits for delivery, and a delivered one keep alive. Counted
(``gc.collect``, then ``gc.get_objects``: the objects the collector tracks), never timed. Every
full collection walks each of them, so with N forms kept each collection costs N times as
much.

The census runs in an interpreter of its own (this module run as a script): in a test worker,
objects made meanwhile by other tests' threads still ending (a store listener, a worker
thread) would be counted as the forms', and each full collection walks the worker's whole heap
(a second in a fresh interpreter, over a minute in a worker at the end of the suite)."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from pi_agent_ask import events as ev
from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.actors.runtime import Runtime, open_runtime
from pi_agent_ask.form import state as fs
from pi_agent_ask.form import text
from pi_agent_ask.form.result import build_result
from pi_agent_ask.form.types import Draft
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence import history
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.projection import JOURNAL
from pi_agent_ask.persistence.records import AskRequest, Outcome
from pi_agent_ask.persistence.session_file import Entry, SessionFile
from tests.runtime_support import answer, payload, settings_file, settle, submit

FORMS = 200
WARM = 20


def _tracked() -> int:
    gc.collect()
    return len(gc.get_objects())


def _form_states() -> int:
    gc.collect()
    return sum(isinstance(o, fs.FormState) for o in gc.get_objects())


async def _ask(rt: Runtime, names: range, prefix: str) -> None:
    for i in names:
        result = await rt.call_tool("ask_user", payload("a", background=True), f"{prefix}{i}")
        assert not result.get("isError")


def _answer_every_form(rt: Runtime) -> Any:
    """Answer each form as it is shown; returns the unsubscribe function."""
    return rt.events.on(ev.STARTED, lambda p: submit(rt.events, p["flowId"], answer({"a": ["a1"]})))


async def census(tmp_path: Path) -> dict[str, float]:
    """Tracked objects per queued, answered and delivered form, and the form states kept."""
    completed = 0
    all_done = trio.Event()

    def on_completed(_payload: object) -> None:
        nonlocal completed
        completed += 1
        if completed == WARM + FORMS:
            all_done.set()

    with trio.fail_after(60):
        async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
            rt.agent_started()  # busy: nothing wakes, every answer waits for a turn boundary
            rt.events.on(ev.COMPLETED, on_completed)
            # Forms asked and answered first: tables and caches reach their steady sizes.
            stop_answering = _answer_every_form(rt)
            await _ask(rt, range(WARM), "warm")
            await settle()
            assert completed == WARM
            stop_answering()
            states_before = _form_states()
            before = _tracked()
            await _ask(rt, range(FORMS), "c")  # the first one is shown, and left open
            await settle()
            queued = (_tracked() - before) / FORMS
            forms_queued = _form_states() - states_before
            _answer_every_form(rt)
            visible = (await rt.statistics()).visible
            assert visible == "tool:c0"
            submit(rt.events, visible, answer({"a": ["a1"]}))
            await all_done.wait()
            await settle()
            answered = (_tracked() - before) / FORMS
            forms_kept = _form_states() - states_before
            stats = await rt.statistics()
            assert stats.completed == WARM + FORMS and not stats.pending
            assert not stats.delivered
            handed_out = len(await rt.turn_boundary())  # the messages themselves are gone
            await settle()
            delivered = (_tracked() - before) / FORMS
            assert handed_out == WARM + FORMS
            assert (await rt.statistics()).delivered == WARM + FORMS
    return {
        "queued": queued,
        "forms_queued": forms_queued,
        "answered": answered,
        "delivered": delivered,
        "forms_kept": forms_kept,
    }


def test_queued_answered_and_delivered_background_forms_keep_few_tracked_objects(
    tmp_path: Path,
) -> None:
    """A queued form keeps its request (parameters, questions, options), the queue's item and
    the journal's record of it, and no form state until it is shown; an answered one keeps its
    outcome until the answer is delivered, and a delivered one neither the outcome nor the
    journal's record."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.test_collector_census", str(tmp_path)],
        cwd=Path(__file__).parents[1],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    queued, answered, delivered = counts["queued"], counts["answered"], counts["delivered"]
    forms_queued, forms_kept = counts["forms_queued"], counts["forms_kept"]
    # Queued: its request (7: request, parameters, the questions' tuple, the question, the
    # options' tuple, two options), the queue's item and the journal fold's record of the
    # request (its log's entry of it is a tuple, which the collector stops tracking); no form
    # state: the queue's item keeps the settings of its fresh form, made when it is shown.
    assert queued <= 9.5, f"{queued:.2f} tracked objects per queued form"
    assert forms_queued <= 1, f"{forms_queued} form states kept for {FORMS} queued forms"
    # Answered: the request (7), the queue's item, the journal fold's record of the request (its
    # log's entries, of the request and of the answer, are tuples); its outcome (4: outcome,
    # result, answers, one answer) and the result's question metadata (2: the metadata's
    # tuple and one per question).
    assert answered <= 17.5, f"{answered:.2f} tracked objects per answered form"
    # Delivered: as answered, but for the fold's record of the request and the outcome, which
    # go (the queue's item keeps ``DELIVERED`` in its place); no texts of the answer are kept.
    # The actors keep nothing of the messages they handled while they wait for the next (the
    # persistence actor once held the last chain it wrote: a turn boundary's chain holds the
    # data of every answer it delivers).
    assert delivered <= 10.5, f"{delivered:.2f} tracked objects per delivered form"
    # Nothing per form (the queue's task and its form runner hold the last form's, in the last
    # message each took, before and after).
    assert forms_kept <= 0, f"{forms_kept} more form states kept for {FORMS} answered forms"


async def test_a_text_only_turn_boundary_makes_each_answers_texts_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A background answer keeps no texts (they are made for its one message): a turn boundary
    that hands out text only, which looks at each message for images first, makes each
    message, and so each answer's texts, once."""
    made: list[Any] = []
    derive = text._texts

    def counted(result: Any, params: Any) -> Any:
        made.append(result)
        return derive(result, params)

    monkeypatch.setattr(text, "_texts", counted)
    with trio.fail_after(60):
        async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
            rt.agent_started()
            _answer_every_form(rt)
            await _ask(rt, range(3), "c")
            await settle()
            assert (await rt.statistics()).completed == 3
            messages = await rt.turn_boundary(text_only=True)
    assert len(messages) == 3
    assert len(made) == 3, f"texts made {len(made)} times for 3 answers"


def _history_entries(request_id: str) -> list[tuple[str, dict[str, Any]]]:
    params = validate_ask_params(payload("a")).params
    assert params is not None
    request = AskRequest(request_id, params, True, "2026-12-01T00:00:00.000Z", f"call-{request_id}")
    result = build_result(params, [Draft(selected=(0,))], request_id=request_id)
    completed = jr.completion_entries(Outcome(request_id, result=result), background=True)
    return [(jr.HISTORY_REQUEST, jr.history_request_entry(request)), *completed]


def test_the_journal_fold_keeps_its_history_log_out_of_the_collector(tmp_path: Path) -> None:
    """The fold keeps a log item per history request and per completion, for as long as the
    session has no checkpoint (an in-memory session: all of them): none of them stays in the
    collector's care. Read as ``log`` they are the lists a checkpoint holds, and a session file
    whose checkpoints hold them reads back the same log and history."""
    entries = [entry for n in range(30) for entry in _history_entries(f"r{n}")]
    fold, _load = jr.fold_branch(
        [Entry(f"e{n}", None, t, 1.0, d) for n, (t, d) in enumerate(entries)]
    )
    assert len(fold.log_items()) == 60
    gc.collect()
    assert not [item for item in fold.log_items() if gc.is_tracked(item)]
    log = fold.log
    assert log[:2] == [["q", "r0", 0, -2, 1], ["c", "r0", 1, -2]]
    assert fold.log is log and len(log) == 60  # read as lists once, in place
    with SessionFile.open(tmp_path / "s.pias", projection=JOURNAL, checkpoint_every=7) as session:
        for entry_type, data in entries[:31]:
            session.append(entry_type, data)
        session.append_chains([entries[31:]])
        written = session.log()
        index = history.source_of_session(session)
    assert [item[:2] for item in written] == [item[:2] for item in log]
    with SessionFile.open(tmp_path / "s.pias", projection=JOURNAL, checkpoint_every=7) as session:
        assert session.log() == written
        again = history.source_of_session(session)
    assert (list(again.ids), list(again.nums), list(again.cnum), again.key) == (
        list(index.ids),
        list(index.nums),
        list(index.cnum),
        index.key,
    )
    assert index.key == (30, 30)


if __name__ == "__main__":
    print(json.dumps(trio.run(census, Path(sys.argv[1]))))
