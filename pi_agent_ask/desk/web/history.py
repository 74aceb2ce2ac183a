"""The web desk's history: each agent's questions and answers, searched, and the Markdown export.

The records and the Markdown are the history tools' own (``persistence/history.py``: the same
records, the same search text, the same export rendering), read through the agent's runtime
where its journal is. Nothing is written on the server: the export is the response body.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Protocol

import attrs

from pi_agent_ask.form.sanitize import sanitize_line, sanitize_text
from pi_agent_ask.persistence.history import (
    HistoryRecord,
    render_markdown,
    source_of_session,
    source_records,
)

__all__ = [
    "AgentHistories",
    "RecordView",
    "RegistryHistories",
    "agent_records",
    "export_markdown",
    "matching",
    "newest_first",
    "record_view",
    "utc_label",
]

MAX_SHOWN = 200
"""Newest records a history page lists (the export has them all)."""


@attrs.frozen
class RecordView:
    title: str | None
    label: str
    prompt: str
    created_at: str
    """When it was asked: the journal's ISO 8601 UTC stamp (the ``<time>``'s ``datetime``)."""
    created_utc: str
    """The same instant for people, marked as UTC (the page's script shows local time)."""
    answered_at: str | None
    """When its outcome was recorded (answered, skipped, cancelled), as ``created_at``;
    ``None`` while it waits. The status says what happened, this time when."""
    answered_utc: str | None
    status: str
    answer: str
    note: str
    answered_by: str | None = None
    option_notes: tuple[tuple[str, str], ...] = ()
    """The notes on options (selected or not): each option's label and its note, in the
    options' order."""


class AgentHistories(Protocol):
    """Where the page reads each agent's history."""

    async def keys(self) -> list[str]:
        """The agents with a history, sorted."""
        ...

    async def records(self, key: str) -> list[HistoryRecord] | None:
        """The agent's records, oldest first; ``None``: no such agent."""
        ...


@attrs.frozen
class RegistryHistories:
    """A desk of files' histories: each agent's journal, through its runtime."""

    registry: Any
    """The desk's ``AgentRegistry``."""

    async def keys(self) -> list[str]:
        return sorted(self.registry.keys)

    async def records(self, key: str) -> list[HistoryRecord] | None:
        agent = self.registry.get(key)
        return None if agent is None else await agent_records(agent.runtime)


async def agent_records(runtime: Any) -> list[HistoryRecord]:
    """Every history record of the agent's current branch, oldest first."""
    records: list[HistoryRecord] = await runtime.read_journal(
        lambda session: source_records(source_of_session(session))
    )
    return records


def matching(records: list[HistoryRecord], query: str) -> list[HistoryRecord]:
    """The records whose text holds ``query`` (case-insensitive; the history tools' rule)."""
    needle = query.strip().lower()
    if not needle:
        return records
    return [record for record in records if needle in record.search_text()]


def newest_first(records: list[HistoryRecord]) -> list[HistoryRecord]:
    """The forms newest first, each form's questions in the order they were asked (a form's
    records are consecutive, oldest form first)."""
    forms: list[list[HistoryRecord]] = []
    for record in records:
        if forms and forms[-1][0].request_id == record.request_id:
            forms[-1].append(record)
        else:
            forms.append([record])
    return [record for form in reversed(forms) for record in form]


def record_view(record: HistoryRecord) -> RecordView:
    answer = record.answer
    parts: list[str] = []
    note = ""
    option_notes: list[tuple[str, str]] = []
    if answer is not None:
        parts.extend(answer.selected_labels)
        if answer.custom_text is not None:
            parts.append(answer.custom_text)
        note = answer.note or ""
        option_notes = [
            (sanitize_line(option.label), sanitize_text(answer.option_notes[option.value]))
            for option in record.question.options
            if answer.option_notes.get(option.value)
        ]
    return RecordView(
        title=sanitize_line(record.title) if record.title else None,
        label=sanitize_line(record.question.label),
        prompt=sanitize_text(record.question.prompt),
        created_at=record.created_at,
        created_utc=utc_label(record.created_at),
        answered_at=record.answered_at,
        answered_utc=None if record.answered_at is None else utc_label(record.answered_at),
        status=record.status,
        answer=sanitize_text(", ".join(parts)),
        note=sanitize_text(note),
        answered_by=sanitize_line(record.answered_by) if record.answered_by else None,
        option_notes=tuple(option_notes),
    )


def utc_label(stamp: str) -> str:
    """An ISO 8601 stamp as a person reads it, in UTC: ``2026-05-01 14:03 UTC``. A stamp
    without an offset is UTC (the journal's); one that is not a time is shown as it is."""
    try:
        moment = dt.datetime.fromisoformat(stamp)
    except ValueError:
        return sanitize_line(stamp)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def export_markdown(records: list[HistoryRecord]) -> str:
    return render_markdown(records)
