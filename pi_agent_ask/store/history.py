"""A team desk's history: the history records of an agent's requests and outcomes in the store.

The records are the history tools' own (``persistence/history_records.py``), so the web page and
the Markdown export render them as they render a desk of files' journal, with one more field:
``answered_by``, the person (``desk --as``) whose outcome it is.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from pi_agent_ask.form.result import AskResult
from pi_agent_ask.form.validate import params_from_saved
from pi_agent_ask.persistence.history_records import HistoryRecord, Request, outcome_records

__all__ = ["team_records"]


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
            outcome_records(request, _result(row["result"]), answered_by=row["answered_by"])
        )
    return records
