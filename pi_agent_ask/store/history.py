"""A team desk's history: the history records of an agent's requests and outcomes in the store.

The records are the history tools' own (``persistence/history_records.py``), so the web page and
the Markdown export render them as they render a desk of files' journal, with one more field:
``answered_by``, the person (``desk --as``) whose outcome it is.

:func:`history_tool` answers an agent's ``list_ask_history`` and ``read_ask_history`` over the
records of its own requests (read under its own key: ``Store.requests_of(..., as_agent=True)``,
where row-level security admits no other agent's rows), with the results a desk of files gives.
``export_ask_history`` writes a file where the desk runs, which for an agent on another host is
the wrong machine: a team desk does not offer it (the page's History has the Markdown export).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

import mcp.types as types

from pi_agent_ask.form import tools as tool_names
from pi_agent_ask.form.result import AskResult
from pi_agent_ask.form.schema_check import schema_error_text, schema_issues
from pi_agent_ask.form.schemas import HISTORY_DEFAULT_LIMIT
from pi_agent_ask.form.validate import params_from_saved
from pi_agent_ask.mcp_common.tools import call_tool_result, error_result
from pi_agent_ask.persistence.history import list_records, read_result_content, tool_text
from pi_agent_ask.persistence.history_records import (
    HistoryError,
    HistoryRecord,
    Request,
    find_record,
    outcome_records,
)

__all__ = ["TEAM_HISTORY_TOOLS", "history_tool", "team_records"]

TEAM_HISTORY_TOOLS = (tool_names.LIST_ASK_HISTORY, tool_names.READ_ASK_HISTORY)
"""The history tools a team desk offers (``behaviour.historyTools`` in its settings)."""


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _result(raw: object) -> AskResult | None:
    if not isinstance(raw, Mapping):
        return None
    try:
        return AskResult.from_details(raw)
    except ValueError:
        return None


def team_records(rows: Iterable[Mapping[str, Any]]) -> list[HistoryRecord]:
    """The history records of ``Store.requests_of`` rows, oldest first. A request whose stored
    questions are no longer valid has no record (as a malformed journal entry has none)."""
    records: list[HistoryRecord] = []
    for row in rows:
        params = params_from_saved(row["params"])
        if params is None:
            continue
        request = Request(
            request_id=row["request_id"],
            created_at=_iso(row["created_at"]),
            background=bool(row["background"]),
            title=params.title if params.title and params.title.strip() else None,
            questions=tuple(params.questions),
        )
        records.extend(
            outcome_records(
                request,
                _result(row["result"]),
                answered_by=row["answered_by"],
                answered_at=None if row["answered_at"] is None else _iso(row["answered_at"]),
            )
        )
    return records


def history_tool(name: str, arguments: Any, records: list[HistoryRecord]) -> types.CallToolResult:
    """One ``list_ask_history`` or ``read_ask_history`` call over ``records`` (the agent's own,
    oldest first); a bad argument or an unknown key is the tool's error result, in words."""
    issues = schema_issues(name, arguments)
    if issues:
        return error_result(schema_error_text(name, issues))
    content: list[dict[str, Any]] | None = None
    data: dict[str, Any]
    if name == tool_names.LIST_ASK_HISTORY:
        data = list_records(
            records,
            arguments.get("query"),
            bool(arguments.get("answeredOnly", False)),
            arguments.get("offset", 0),
            arguments.get("limit", HISTORY_DEFAULT_LIMIT),
        )
    else:
        try:
            record = find_record(records, arguments["requestId"], arguments["questionId"])
        except HistoryError as error:
            return error_result(str(error))
        data = {"record": record.to_json()}
        content = read_result_content(record)
    return call_tool_result(
        {
            "content": content
            if content is not None
            else [{"type": "text", "text": tool_text(data)}],
            "structuredContent": data,
        }
    )
