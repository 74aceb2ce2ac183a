"""A team desk's history on a real PostgreSQL: the records and the Markdown export of an
agent's requests name the person who answered each one (``desk --as``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence.history import render_markdown
from pi_agent_ask.store.board import result_of_response
from pi_agent_ask.store.db import Store, Submitted
from pi_agent_ask.store.history import team_records
from pi_agent_ask.web.history import record_view
from tests.store_support import Cluster, desk_url, pg_cluster, store_db  # noqa: F401


@pytest.fixture
def store(desk_url: str) -> Iterator[Store]:  # noqa: F811
    store = Store(desk_url)
    store.open()
    yield store
    store.close()


def _params(label: str) -> dict[str, Any]:
    validation = validate_ask_params(
        {
            "title": "Deploy",
            "questions": [
                {
                    "id": "q",
                    "label": label,
                    "prompt": f"{label}?",
                    "options": [{"value": "yes", "label": "Yes"}, {"value": "no", "label": "No"}],
                }
            ],
        }
    )
    assert validation.params is not None
    return validation.params.to_json()


def test_history_and_export_name_the_answerer(store: Store) -> None:
    answered, _bg, _state = store.ask("a", "c1", _params("Ship"), background=True)
    waiting, _bg, _state = store.ask("a", "c2", _params("Wait"), background=True)
    store.ask("b", "c1", _params("Other"), background=True)
    row = next(r for r in store.board() if r.request_id == answered)
    result = result_of_response(row, {"kind": "answer", "answers": {"q": {"values": ["yes"]}}})
    assert isinstance(result, dict)
    done = store.submit(answered, result, person="alice", desk="d1")
    assert isinstance(done, Submitted)

    assert store.agents() == ["a", "b"]
    records = team_records(store.requests_of("a"))
    assert [(r.request_id, r.status, r.answered_by) for r in records] == [
        (answered, "answered", "alice"),
        (waiting, "waiting", None),
    ]
    assert records[0].title == "Deploy"
    assert records[0].to_json()["answeredBy"] == "alice"
    assert records[0].summary()["answeredBy"] == "alice"
    assert "answeredBy" not in records[1].to_json()
    assert "alice" in records[0].search_text()

    export = render_markdown(records)
    assert "### Answered by\n\n```text\nalice\n```" in export
    assert export.count("Answered by") == 1
    assert record_view(records[0]).answered_by == "alice"
    assert record_view(records[1]).answered_by is None
