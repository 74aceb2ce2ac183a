"""The questions a history request stored, read back as values.

Shared by the history (which builds records from them) and the journal projection (which
counts the records a request makes while it folds the branch), below both: one rule of what a
well-formed stored question is, for both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pi_agent_ask.form.types import QUESTION_TYPES, Option, Question


def stored_questions(request_id: object, raw_questions: object) -> tuple[Question, ...] | None:
    """The questions of a stored history request; ``None`` when it is not well-formed (it
    then makes no record)."""
    if not isinstance(request_id, str) or not request_id:
        return None
    if not isinstance(raw_questions, list | tuple) or not raw_questions:
        return None
    questions: list[Question] = []
    for raw in raw_questions:
        question = question_of(raw)
        if question is None:
            return None
        questions.append(question)
    return tuple(questions)


def question_of(raw: object) -> Question | None:
    if not isinstance(raw, Mapping):
        return None
    qid, label, prompt = raw.get("id"), raw.get("label"), raw.get("prompt")
    if not (isinstance(qid, str) and isinstance(label, str) and isinstance(prompt, str)):
        return None
    kind = question_type(raw.get("type", "single"))
    if kind is None:
        return None
    presented = raw.get("presentedType")
    presented_type = question_type(presented) if presented is not None else None
    context = raw.get("context")
    raw_options = raw.get("options")
    if not isinstance(raw_options, list | tuple):
        return None
    options: list[Option] = []
    for raw_option in raw_options:
        option = option_of(raw_option)
        if option is None:
            return None
        options.append(option)
    return Question(
        id=qid,
        label=label,
        prompt=prompt,
        type=kind,
        options=tuple(options),
        context=context if isinstance(context, str) else None,
        presented_type=presented_type if presented_type != kind else None,
    )


def question_type(value: object) -> Any:
    if value in QUESTION_TYPES:
        return value
    # Saved forms of older releases: a preview question is a single-select one (000).
    return "single" if value == "preview" else None


def option_of(raw: object) -> Option | None:
    if not isinstance(raw, Mapping):
        return None
    value, label = raw.get("value"), raw.get("label")
    if not isinstance(value, str) or not isinstance(label, str):
        return None
    description = raw.get("description")
    recommended = raw.get("recommended")
    return Option(
        value=value,
        label=label,
        description=description if isinstance(description, str) else None,
        recommended=recommended if isinstance(recommended, bool) else None,
    )
