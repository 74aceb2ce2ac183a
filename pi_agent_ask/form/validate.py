"""Validation and normalisation of ``ask_user`` arguments.

One pipeline, in this order (each stage runs only when the previous one found nothing):

0. **The boundary** (untrusted arguments only, :func:`validate_ask_params`):
   ``untrusted.check``; a refusal is a schema issue at the refused value's path.
1. **Legacy conversion** and 2. **label derivation** (:mod:`pi_agent_ask.form.prepare`).
3. **JSON Schema** (:mod:`pi_agent_ask.form.schema_check`). A failure is the host's tool
   error, not ``invalid_input``: ``Validation(schema_error=True)``, rendered by
   ``schema_error_text``.
4. **Semantic checks**, all collected, per question in the order type → id → duplicate id →
   prompt → options, then per option value → duplicate value → label → legacy preview fields
   (both ``preview`` and ``previewFile``; a relative ``previewFile``).
5. **Context files**, only when 4 found nothing: a single-line absolute path is read as a text
   file (:mod:`pi_agent_ask.form.context_files`) and its raw text replaces the path.
6. **Normalisation** into :class:`AskParams`: text trimmed, blank optional fields omitted,
   labels ``Q1``, ``Q2``..., ``presentSingleAsMulti`` and background-only mode applied.

Nothing here raises on JSON-shaped input, and the input is never mutated.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import NotRequired, TypedDict

from pi_agent_ask.form import untrusted
from pi_agent_ask.form.context_files import (
    ContextFileError,
    is_context_path,
    load_context_file,
    load_preview_file,
)
from pi_agent_ask.form.prepare import (
    LegacyTable,
    compose_context,
    convert_legacy,
    derive_labels,
    optional_text,
)
from pi_agent_ask.form.schema_check import check_schema, schema_prefix
from pi_agent_ask.form.tools import ASK_USER
from pi_agent_ask.form.types import (
    QUESTION_TYPES,
    AskParams,
    Issue,
    Option,
    Question,
    QuestionType,
    Validation,
)

# --------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------


def validate_ask_params(
    arguments: object,
    *,
    cwd: str | os.PathLike[str] | None = None,
    present_single_as_multi: bool = False,
    background_only: bool = False,
) -> Validation:
    """Validate and normalise ``ask_user`` arguments, loading context files.

    Returns ``Validation(params=...)`` when valid; otherwise ``params`` is ``None`` and
    ``issues`` lists every problem found by the first failing stage. ``schema_error`` is true
    when the arguments failed the JSON Schema (a host tool error rather than ``invalid_input``).

    ``cwd`` is accepted so hosts can pass their working directory uniformly; the current rules
    never resolve a relative path (only absolute paths are read as files), so it is unused.
    ``present_single_as_multi`` presents requested single-select questions as multi-select.
    ``background_only`` forces ``background`` to true: the schema has no ``background`` then,
    and a stale ``background`` key (even ``false``) is dropped before the schema sees it.

    Never raises on JSON-like input; anything that is not an object is a schema issue.
    """
    del cwd  # see docstring: relative paths are text (context) or an issue (previewFile)
    refusal = untrusted.check(arguments)
    if refusal is not None:
        issue = Issue(refusal.path or "root", schema_prefix(ASK_USER) + refusal.message)
        return Validation(params=None, issues=(issue,), schema_error=True)
    return _validate(
        arguments,
        load_files=True,
        present_single_as_multi=present_single_as_multi,
        background_only=background_only,
    )


def validate_bounded_params(
    arguments: object,
    *,
    present_single_as_multi: bool = False,
    background_only: bool = False,
) -> Validation:
    """``validate_ask_params`` for arguments that already passed the boundary
    (``untrusted.check``, as ``Runtime.call_tool`` checks every call's arguments first)."""
    return _validate(
        arguments,
        load_files=True,
        present_single_as_multi=present_single_as_multi,
        background_only=background_only,
    )


def validate_checked_params(
    arguments: object,
    *,
    present_single_as_multi: bool = False,
    background_only: bool = False,
) -> Validation | None:
    """``validate_ask_params``'s outcome for arguments that pass the boundary
    (``untrusted.check``); ``None`` when the boundary refuses them, for the caller to report
    the refusal in its own terms (``Runtime.call_tool``)."""
    if untrusted.check(arguments) is not None:
        return None
    return validate_bounded_params(
        arguments,
        present_single_as_multi=present_single_as_multi,
        background_only=background_only,
    )


def params_from_saved(data: object, *, present_single_as_multi: bool = False) -> AskParams | None:
    """Re-validate normalised parameters saved in the journal; ``None`` when they are invalid.

    No file is read: a saved ``context`` is always text (the file was loaded before saving),
    even if that text happens to look like a path, and it is kept untrimmed so the loaded
    snapshot survives exactly. Saved forms of older releases are converted like calls (inline
    ``preview`` text); a saved ``previewFile`` would need a file read and makes the form invalid.
    """
    validation = _validate(
        data,
        load_files=False,
        present_single_as_multi=present_single_as_multi,
        background_only=False,
    )
    return validation.params if validation.ok else None


# --------------------------------------------------------------------------------------------
# The pipeline
# --------------------------------------------------------------------------------------------


class _OptionArguments(TypedDict):
    """An option of arguments that passed the schema (after legacy conversion and labels)."""

    value: str
    label: str
    description: NotRequired[str]
    recommended: NotRequired[bool]


class _QuestionArguments(TypedDict):
    """A question of arguments that passed the schema."""

    id: str
    prompt: str
    options: list[_OptionArguments]
    label: NotRequired[str]
    context: NotRequired[str]
    type: NotRequired[str]


def _validate(
    arguments: object, *, load_files: bool, present_single_as_multi: bool, background_only: bool
) -> Validation:
    """Stages 1 to 6 (module docstring). ``load_files``: read context and preview files
    (calls) or not (saved forms)."""
    if not isinstance(arguments, dict) and isinstance(arguments, Mapping):
        arguments = dict(arguments)
    arguments, legacy = convert_legacy(arguments)
    arguments = derive_labels(arguments)
    if background_only and isinstance(arguments, dict) and "background" in arguments:
        # Background-only mode queues every call; a stale key (even `false`) is not an error.
        arguments = {key: value for key, value in arguments.items() if key != "background"}
    issues = check_schema(ASK_USER, arguments, background=not background_only)
    if issues:
        return Validation(params=None, issues=issues, schema_error=True)
    # The schema guarantees the shapes the code below relies on.
    assert isinstance(arguments, dict)
    questions: list[_QuestionArguments] = arguments["questions"]
    issues = _semantic_issues(questions, legacy)
    if issues:
        return Validation(params=None, issues=issues)
    contexts, issues = _resolve_contexts(questions, legacy, load_files=load_files)
    if issues:
        return Validation(params=None, issues=issues)
    params = AskParams(
        title=optional_text(arguments.get("title")),
        background=background_only or arguments.get("background") is True,
        questions=tuple(
            _normalise_question(index, question, contexts[index], present_single_as_multi)
            for index, question in enumerate(questions)
        ),
    )
    return Validation(params=params)


# --------------------------------------------------------------------------------------------
# Semantic checks
# --------------------------------------------------------------------------------------------


def _semantic_issues(
    questions: Sequence[_QuestionArguments], legacy: LegacyTable
) -> tuple[Issue, ...]:
    """Every semantic issue, in the catalog's order. Assumes the schema passed."""
    if not questions:
        return (Issue("questions", "At least one question is required"),)
    issues: list[Issue] = []
    seen_ids: set[str] = set()
    for q_index, question in enumerate(questions):
        number = q_index + 1
        at = f"questions[{q_index}]"
        question_type = question.get("type")
        if question_type is not None and question_type not in QUESTION_TYPES:
            issues.append(
                Issue(
                    f"{at}.type",
                    f"Question {number}: invalid type {_js_json(question_type)}; "
                    'expected "single" or "multi"',
                )
            )
        question_id = question["id"].strip()
        if not question_id:
            issues.append(Issue(f"{at}.id", f"Question {number}: id is required"))
        elif question_id in seen_ids:
            issues.append(
                Issue(
                    f"{at}.id",
                    f"Question {number}: duplicate question id {_js_json(question_id)}",
                )
            )
        else:
            seen_ids.add(question_id)
        if not question["prompt"].strip():
            issues.append(Issue(f"{at}.prompt", f"Question {number}: prompt is required"))
        options = question["options"]
        if not options:
            issues.append(
                Issue(f"{at}.options", f"Question {number}: at least one option is required")
            )
        seen_values: set[str] = set()
        previews = legacy.get(q_index, {})
        for o_index, option in enumerate(options):
            # The issue texts are only built for an option that has an issue.
            value = option["value"].strip()
            if not value or value in seen_values:
                where, who = _option_at(at, number, o_index)
                if not value:
                    issues.append(Issue(f"{where}.value", f"{who}: value is required"))
                else:
                    issues.append(
                        Issue(f"{where}.value", f"{who}: duplicate option value {_js_json(value)}")
                    )
            else:
                seen_values.add(value)
            if not option["label"].strip():
                where, who = _option_at(at, number, o_index)
                issues.append(Issue(f"{where}.label", f"{who}: label is required"))
            preview = previews.get(o_index) if previews else None
            if preview is not None and preview.file is not None:
                where, who = _option_at(at, number, o_index)
                if preview.text is not None:
                    issues.append(
                        Issue(
                            f"{where}.previewFile",
                            f"{who}: use either preview or previewFile, not both",
                        )
                    )
                elif not preview.file.startswith("/"):
                    issues.append(
                        Issue(
                            f"{where}.previewFile",
                            f"{who}: previewFile must be an absolute path, not "
                            f"{_js_json(preview.file)}",
                        )
                    )
    return tuple(issues)


def _option_at(at: str, number: int, o_index: int) -> tuple[str, str]:
    """An option's issue path and its name in issue messages."""
    return f"{at}.options[{o_index}]", f"Question {number}, option {o_index + 1}"


def _js_json(value: object) -> str:
    """JSON text as JavaScript's ``JSON.stringify`` writes it (non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False)


# --------------------------------------------------------------------------------------------
# Contexts
# --------------------------------------------------------------------------------------------


def _resolve_contexts(
    questions: Sequence[_QuestionArguments], legacy: LegacyTable, *, load_files: bool
) -> tuple[list[str | None], tuple[Issue, ...]]:
    """Each question's final context text, or the issues of the files that cannot be read.

    All files are tried, so one call reports every unreadable file at once.
    """
    contexts: list[str | None] = []
    issues: list[Issue] = []
    for q_index, question in enumerate(questions):
        context = _question_context(question.get("context"), load_files=load_files)
        if isinstance(context, ContextFileError):
            path = question["context"].strip()
            issues.append(
                Issue(
                    f"questions[{q_index}].context",
                    f"Cannot load context file {_js_json(path)}: {context.reason}",
                )
            )
            context = None
        sections: list[tuple[str, str]] = []
        for o_index, preview in sorted(legacy.get(q_index, {}).items()):
            label = question["options"][o_index]["label"].strip()
            if preview.text is not None:
                sections.append((label, preview.text))
                continue
            if preview.file is None:
                continue
            if not load_files:
                # A saved form never holds a file path; re-reading it would break recovery's
                # promise to use the original snapshot.
                issues.append(
                    Issue(
                        f"questions[{q_index}].options[{o_index}].previewFile",
                        "Saved forms cannot refer to preview files",
                    )
                )
                continue
            try:
                text = load_preview_file(preview.file)
            except ContextFileError as error:
                issues.append(
                    Issue(
                        f"questions[{q_index}].options[{o_index}].previewFile",
                        f"Cannot load preview file {_js_json(preview.file)}: {error.reason}",
                    )
                )
                continue
            sections.append((label, text))
        contexts.append(compose_context(context, sections))
    return contexts, tuple(issues)


def _question_context(value: object, *, load_files: bool) -> str | ContextFileError | None:
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return None
    if not load_files:
        # Saved contexts are the loaded snapshot: keep them exactly, whitespace included.
        return value
    if not is_context_path(text):
        return text
    try:
        return load_context_file(text)
    except ContextFileError as error:
        return error


# Normalisation
# --------------------------------------------------------------------------------------------


def _normalise_question(
    index: int,
    question: _QuestionArguments,
    context: str | None,
    present_single_as_multi: bool,
) -> Question:
    requested: QuestionType = "multi" if question.get("type") == "multi" else "single"
    presented: QuestionType | None = (
        "multi" if present_single_as_multi and requested == "single" else None
    )
    return Question(
        id=question["id"].strip(),
        label=optional_text(question.get("label")) or f"Q{index + 1}",
        prompt=question["prompt"].strip(),
        type=requested,
        presented_type=presented,
        context=context,
        options=tuple(_normalise_option(option) for option in question["options"]),
    )


def _normalise_option(option: _OptionArguments) -> Option:
    return Option(
        option["value"].strip(),
        option["label"].strip(),
        optional_text(option.get("description")),
        option.get("recommended"),
    )
