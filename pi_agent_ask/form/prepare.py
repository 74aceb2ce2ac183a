"""What ``ask_user`` arguments are rewritten into before the schema sees them.

- **Legacy conversion.** Calls and saved forms of older releases are rewritten: ``type:
  "preview"`` becomes ``"single"``; option ``preview`` text and absolute ``previewFile`` paths
  are taken off the options and later become the question's ``context``
  (:func:`compose_context` says how several options combine).
- **Label derivation.** A missing or blank option ``label`` is derived from a string ``value``
  (``"follow_up"`` → ``"Follow up"``), so the schema's required ``label`` does not reject it.

Both copy only what they change and never mutate their input; shapes they do not understand
pass through for the schema to judge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs


def derive_label(value: str) -> str | None:
    """The label derived from an option ``value``, or ``None`` when nothing is left.

    Runs of ``-``/``_`` become one space, whitespace collapses, the ends are trimmed and the
    first character is upper-cased (the rest is untouched).
    """
    # split() with no argument collapses every whitespace run (and the separators turned into
    # spaces) and drops the ends: the same as the regex rules, without regexes.
    text = " ".join(value.replace("-", " ").replace("_", " ").split())
    if not text:
        return None
    return text[0].upper() + text[1:]


def optional_text(value: object) -> str | None:
    """A string trimmed, or ``None`` for anything else and for blank text."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    return text or None


@attrs.frozen(repr=False)
class LegacyPreview:
    """An option's preview fields from an older release, taken off the option.

    ``text`` and ``file`` are trimmed; blank values are ``None``.
    """

    text: str | None
    file: str | None


# question index -> option index -> its legacy preview fields
LegacyTable = Mapping[int, Mapping[int, LegacyPreview]]


# --------------------------------------------------------------------------------------------
# Legacy conversion
# --------------------------------------------------------------------------------------------


def convert_legacy(arguments: object) -> tuple[object, LegacyTable]:
    """Rewrite older-release fields; returns the new arguments and the previews taken off.

    Copies only what it changes. Shapes it does not understand pass through for the schema to
    judge. Non-string ``preview``/``previewFile`` values are dropped with the other legacy
    fields: the old schema rejected them, and the current one never sees them.
    """
    if not isinstance(arguments, dict):
        return arguments, {}
    questions = arguments.get("questions")
    if not isinstance(questions, list):
        return arguments, {}
    legacy: dict[int, dict[int, LegacyPreview]] = {}
    new_questions: list[object] = []
    changed = False
    for q_index, question in enumerate(questions):
        if not isinstance(question, dict):
            new_questions.append(question)
            continue
        new_question = question
        if question.get("type") == "preview":
            new_question = {**question, "type": "single"}
        options = question.get("options")
        if isinstance(options, list):
            new_options: list[object] = []
            for o_index, option in enumerate(options):
                if isinstance(option, dict) and ("preview" in option or "previewFile" in option):
                    preview = LegacyPreview(
                        text=optional_text(option.get("preview")),
                        file=optional_text(option.get("previewFile")),
                    )
                    if preview.text is not None or preview.file is not None:
                        legacy.setdefault(q_index, {})[o_index] = preview
                    option = {
                        key: value
                        for key, value in option.items()
                        if key not in ("preview", "previewFile")
                    }
                    if new_question is question:
                        new_question = dict(question)
                new_options.append(option)
            if new_question is not question:
                new_question["options"] = new_options
        changed = changed or new_question is not question
        new_questions.append(new_question)
    if not changed:
        return arguments, {}
    return {**arguments, "questions": new_questions}, legacy


# --------------------------------------------------------------------------------------------
# Label derivation
# --------------------------------------------------------------------------------------------


def _needs_label(option: Mapping[Any, Any]) -> bool:
    if "label" not in option:
        return True
    label = option["label"]
    return isinstance(label, str) and not label.strip()


def derive_labels(arguments: object) -> object:
    """Fill missing or blank option labels from string values; copies only what it changes."""
    if not isinstance(arguments, dict):
        return arguments
    questions = arguments.get("questions")
    if not isinstance(questions, list):
        return arguments
    new_questions: list[object] = []
    changed = False
    for question in questions:
        options = question.get("options") if isinstance(question, dict) else None
        if isinstance(options, list) and any(
            isinstance(option, dict) and _needs_label(option) for option in options
        ):
            question = {**question, "options": [_with_derived_label(o) for o in options]}
            changed = True
        new_questions.append(question)
    if not changed:
        return arguments
    return {**arguments, "questions": new_questions}


def _with_derived_label(option: object) -> object:
    if not isinstance(option, dict) or not _needs_label(option):
        return option
    value = option.get("value")
    label = derive_label(value) if isinstance(value, str) else None
    return option if label is None else {**option, "label": label}


def compose_context(context: str | None, sections: Sequence[tuple[str, str]]) -> str | None:
    """The question context with legacy option previews appended.

    Older releases showed a preview per option; the current form shows one context for the
    whole question. So each option's preview becomes a section headed by the option's label
    on a line of its own (``<label>:``), sections separated by a blank line, in option order,
    after the question's own context if it had one. Section bodies lose trailing whitespace
    so the blank-line separators stay regular.
    """
    if not sections:
        return context
    parts = [] if context is None else [context.rstrip()]
    parts.extend(f"{label}:\n{text.rstrip()}" for label, text in sections)
    return "\n\n".join(parts)
