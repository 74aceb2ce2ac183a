"""Tests that kill mutants of ``persistence/stored_questions.py`` that the other suites let live
(docs/mutation-persistence.md, "stored_questions.py"): the stored presentation type, the
``preview`` alias of older releases, and the optional fields that read as missing when they
are not of their type. Each reads stored questions the way the history and the journal's fold
read them, and through the history for the fields its records show."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pi_agent_ask.form.types import Option, Question
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.history import build_records
from pi_agent_ask.persistence.session_file import SessionFile
from pi_agent_ask.persistence.stored_questions import (
    question_of,
    question_type,
    stored_questions,
)

OPTIONS = [{"value": "a1", "label": "A1"}, {"value": "a2", "label": "A2"}]


def _raw(**fields: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "id": "a",
        "label": "A",
        "prompt": "Pick",
        "type": "single",
        "options": OPTIONS,
    }
    raw.update(fields)
    return raw


def _question(**fields: Any) -> Question:
    question = question_of(_raw(**fields))
    assert question is not None
    return question


def test_the_stored_presentation_type_is_kept_only_when_it_differs() -> None:
    assert _question(presentedType="multi").presented_type == "multi"
    assert _question(type="multi", presentedType="single").presented_type == "single"
    assert _question(type="multi", presentedType="preview").presented_type == "single"
    for same in ({"presentedType": "single"}, {"type": "multi", "presentedType": "multi"}):
        assert _question(**same).presented_type is None
    for missing in ({}, {"presentedType": None}, {"presentedType": "bogus"}):
        assert _question(**missing).presented_type is None
    assert _question(presentedType="multi") == Question(
        id="a",
        label="A",
        prompt="Pick",
        type="single",
        options=(Option("a1", "A1"), Option("a2", "A2")),
        presented_type="multi",
    )


def test_a_preview_question_of_an_older_release_is_single_select() -> None:
    assert question_type("preview") == "single"
    assert question_type("single") == "single" and question_type("multi") == "multi"
    for other in ("bogus", "Preview", "", None, 1):
        assert question_type(other) is None
    assert _question(type="preview").type == "single"
    assert question_of(_raw(type="bogus")) is None
    assert stored_questions("r1", [_raw(type="preview")]) == (_question(type="single"),)
    assert stored_questions("r1", [_raw(type="bogus")]) is None


def test_optional_fields_of_the_wrong_type_read_as_missing() -> None:
    assert _question(context="file text").context == "file text"
    assert _question(context=5).context is None
    [option] = _question(
        options=[{"value": "v", "label": "V", "description": "why", "recommended": True}]
    ).options
    assert option == Option("v", "V", description="why", recommended=True)
    [odd] = _question(
        options=[{"value": "v", "label": "V", "description": 5, "recommended": "yes"}]
    ).options
    assert odd == Option("v", "V")


def test_a_waiting_record_shows_the_stored_presentation_and_drops_odd_fields(
    tmp_path: Path,
) -> None:
    question = _raw(
        type="preview",
        presentedType="multi",
        context=["not", "text"],
        options=[{"value": "v", "label": "V", "description": 5, "recommended": 1}],
    )
    with SessionFile.open(tmp_path / "s.pias") as session:
        session.append(
            jr.HISTORY_REQUEST,
            {"version": 1, "requestId": "r1", "createdAt": "t", "questions": [question]},
        )
        branch = session.branch()
    [record] = build_records(branch)
    assert record.status == "waiting"
    assert record.question_json() == {
        "id": "a",
        "label": "A",
        "prompt": "Pick",
        "type": "single",
        "presentedType": "multi",
        "options": [{"value": "v", "label": "V"}],
    }
