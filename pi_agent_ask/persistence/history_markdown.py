"""The Markdown export of history records (``export_ask_history``)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from pi_agent_ask.form.result import AnswerResult
from pi_agent_ask.form.sanitize import escape_visibly
from pi_agent_ask.form.types import Image, Option
from pi_agent_ask.persistence.history_records import HistoryRecord

_MIME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$")
_BACKTICKS_RE = re.compile(r"`+")


def _literal(text: str) -> str:
    """A fenced ``text`` block holding ``text`` verbatim: the fence is one backtick longer than
    the longest backtick run inside (at least three), so nothing inside can close it. Controls
    and invisible format characters are written as ``<U+XXXX>``: ``cat`` on an export never
    runs an escape sequence (``docs/history.md``)."""
    text = escape_visibly(text)
    longest = max((len(run) for run in _BACKTICKS_RE.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _field(label: str, text: str | None) -> str:
    return "" if not text else f"### {label}\n\n{_literal(text)}"


def _images(label: str, images: Sequence[Image]) -> list[str]:
    parts = []
    for number, image in enumerate(images, start=1):
        name = f"{label} image {number}"
        # The MIME type is written into a URI: anything unexpected there could break the link.
        mime = image.mime_type if _MIME_RE.match(image.mime_type) else "application/octet-stream"
        data = "".join(image.data.split())
        parts.append(f"### {name}\n\n![{name}](data:{mime};base64,{data})")
    return parts


def _bool(value: bool) -> str:
    return "true" if value else "false"


def render_markdown(records: Sequence[HistoryRecord]) -> str:
    """The export file: ``# Ask history`` then one section per record, ending with a newline.

    Every text field is a literal fenced block, so Markdown punctuation and line breaks stay
    exactly as recorded; blocks are separated by one blank line and empty fields are omitted.
    """
    parts = ["# Ask history"]
    parts.extend(_render_record(record, number) for number, record in enumerate(records, 1))
    return "\n\n".join(parts) + "\n"


def _render_record(record: HistoryRecord, number: int) -> str:
    question = record.question
    parts = [
        f"## Question {number}",
        f"Status: {record.status}",
        f"Created: {record.created_at}",
        f"Background: {_bool(record.background)}",
        _field("Request key", record.request_id),
        _field("Question key", record.question_id),
        _field("Form title", record.title),
        _field("Label", question.label),
        _field("Question", question.prompt),
        _field("Context", question.context),
        f"Type: {question.type}",
        f"Presented type: {question.presented_type or question.type}",
    ]
    parts.extend(_render_option(option, n) for n, option in enumerate(question.options, 1))
    if record.answer is None:
        parts.append("No committed answer.")
    else:
        parts.extend(_render_answer(record.answer))
    parts.append(_field("Error", record.error))
    parts.append(_field("Answered by", record.answered_by))
    return "\n\n".join(part for part in parts if part)


def _render_option(option: Option, number: int) -> str:
    parts = [
        f"### Option {number}",
        _field("Value", option.value),
        _field("Label", option.label),
        _field("Description", option.description),
    ]
    if option.recommended is not None:
        parts.append(f"Recommended: {_bool(option.recommended)}")
    return "\n\n".join(part for part in parts if part)


def _render_answer(answer: AnswerResult) -> list[str]:
    positions = json.dumps(list(answer.indices), separators=(",", ":"))
    parts = [f"### Answer\n\nSelected positions: {positions}"]
    parts.extend(_field(f"Selected value {n}", v) for n, v in enumerate(answer.values, 1))
    parts.extend(_field(f"Selected label {n}", v) for n, v in enumerate(answer.labels, 1))
    parts.append(_field("Custom answer", answer.custom_text))
    parts.extend(_images("Custom answer", answer.custom_images))
    parts.append(_field("Question note", answer.note))
    parts.extend(_images("Question note", answer.note_images))
    for value, images in answer.option_note_images.items():
        if images:
            parts.append(_field("Image note option value", value))
            parts.extend(_images("Option note", images))
    for value, note in answer.option_notes.items():
        parts.append(_field("Noted option value", value))
        parts.append(_field("Option note", note))
    return parts
