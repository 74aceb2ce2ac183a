"""A team desk's history on a real PostgreSQL: the records and the Markdown export of an
agent's requests name the person who answered each one (``desk --as``); agents on a desk whose
settings turn the history tools on list and read their own history (and nothing of another
agent's) through the official MCP SDK client over ``pi-agent-ask mcp --desk URL``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from pi_agent_ask.desk.web.history import record_view
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence.history import render_markdown
from pi_agent_ask.store.board import result_of_response
from pi_agent_ask.store.db import Store, Submitted
from pi_agent_ask.store.history import team_records
from tests.store_support import (  # noqa: F401
    YES,
    Cluster,
    agent,
    ask,
    desk_url,
    store_db,
    team_desk,
)


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


async def test_agents_list_and_read_only_their_own_history_over_mcp(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"schemaVersion": 6, "behaviour": {"historyTools": True}}))
    admin = pg_cluster.url(store_db)
    alpha_token, beta_token = Store.new_token(admin, "alpha"), Store.new_token(admin, "beta")
    with trio.fail_after(90):
        async with (
            team_desk(desk_url, "ann", settings=settings) as desk,
            agent([desk.url], alpha_token) as alpha,
            agent([desk.url], beta_token) as beta,
        ):
            tools = [tool.name for tool in (await alpha.list_tools()).tools]
            assert tools == ["ask_user", "wait_for_answers", "list_ask_history", "read_ask_history"]
            shipped = await alpha.call_tool("ask_user", ask("Ship", background=True))
            waiting = await alpha.call_tool("ask_user", ask("Wait", background=True))
            secret = await beta.call_tool("ask_user", ask("Secret", background=True))
            shipped_id = shipped.structured_content["requestId"]
            secret_id = secret.structured_content["requestId"]
            await desk.board.wait_for(lambda forms: len(forms) == 3)
            assert isinstance(await desk.board.answer(shipped_id, YES), Submitted)

            listed = await alpha.call_tool("list_ask_history", {})
            assert not listed.is_error, listed
            data = listed.structured_content
            assert data["total"] == 2 and data["offset"] == 0 and "nextOffset" not in data
            assert [r["requestId"] for r in data["records"]] == [
                shipped_id,
                waiting.structured_content["requestId"],
            ]
            assert data["records"][0]["answeredBy"] == "ann"
            assert json.loads(listed.content[0].text) == {
                k: v for k, v in data.items() if k != "backgroundAnswers"
            }
            # The answer rides on the agent's next tool result, as on a desk of files.
            assert [a["details"]["requestId"] for a in data["backgroundAnswers"]] == [shipped_id]
            paged = await alpha.call_tool("list_ask_history", {"limit": 1})
            assert paged.structured_content["nextOffset"] == 1
            found = await alpha.call_tool(
                "list_ask_history", {"query": "ship", "answeredOnly": True}
            )
            assert [r["requestId"] for r in found.structured_content["records"]] == [shipped_id]
            # Another agent's questions are not in this agent's history, by search or by key.
            other = await alpha.call_tool("list_ask_history", {"query": "Secret"})
            assert other.structured_content["total"] == 0
            refused = await alpha.call_tool(
                "read_ask_history", {"requestId": secret_id, "questionId": "q"}
            )
            assert refused.is_error and secret_id in refused.content[0].text
            read = await alpha.call_tool(
                "read_ask_history", {"requestId": shipped_id, "questionId": "q"}
            )
            record = read.structured_content["record"]
            assert record["answeredBy"] == "ann" and record["status"] == "answered"
            assert record["answer"]["values"] == ["yes"]
            beta_sees = await beta.call_tool("list_ask_history", {})
            assert [r["requestId"] for r in beta_sees.structured_content["records"]] == [secret_id]

            bad = await alpha.call_tool("list_ask_history", {"limit": 0})
            assert bad.is_error and "limit" in bad.content[0].text
            export = await alpha.call_tool("export_ask_history", {"path": "h.md"})
            assert export.is_error and "not offered by a team desk" in export.content[0].text
