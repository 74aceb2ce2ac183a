"""Validation and normalisation of ``ask_user`` arguments.

The pipeline, in this order (each stage runs only when the previous one found nothing):

1. **Legacy conversion.** Calls and saved forms of older releases are rewritten: ``type:
   "preview"`` becomes ``"single"``; option ``preview`` text and absolute ``previewFile`` paths
   are taken off the options and later become the question's ``context`` (see
   :func:`_compose_context` for how several options combine).
2. **Label derivation.** A missing or blank option ``label`` is derived from a string ``value``
   (``"follow_up"`` → ``"Follow up"``), so the schema's required ``label`` does not reject it.
3. **JSON Schema** (:mod:`pi_agent_ask.form.schemas`). A failure is the host's tool error, not
   ``invalid_input``: ``Validation(schema_error=True)``, rendered by :func:`schema_error_text`.
   A compiled check of the same schema accepts valid arguments quickly; jsonschema reports
   the errors of everything else.
4. **Semantic checks**, all collected, per question in the order type → id → duplicate id →
   prompt → options, then per option value → duplicate value → label → legacy preview fields
   (both ``preview`` and ``previewFile``; a relative ``previewFile``).
5. **Context files**, only when 4 found nothing: a single-line absolute path is read as a text
   file (:func:`load_context_file`) and its raw text replaces the path.
6. **Normalisation** into :class:`AskParams`: text trimmed, blank optional fields omitted,
   labels ``Q1``, ``Q2``..., ``presentSingleAsMulti`` and background-only mode applied.

Untrusted arguments (:func:`validate_ask_params`) first pass the boundary
(``untrusted.check``); a refusal is a schema issue at the refused value's path.

**The one pass.** Those stages, run one after the other, walk the arguments five times and
build intermediate copies; they remain the definition (:func:`_in_stages`). Arguments of the
current shape, which is every call a model makes, are validated instead by
:func:`_one_pass`: one walk that applies the boundary's bounds, checks the schema's types,
derives labels, collects the semantic issues and builds the normalised params together, and
gives up (leaving the input to the stages) on anything whose outcome is not a semantic issue
or valid params: a refusal, a schema error, legacy fields, unusual types. Its outcome is the
stages' exactly (``tests/test_validate_one_pass.py`` holds the two together on generated
calls); it is about three times faster.

Nothing here raises on JSON-shaped input, and the input is never mutated.
"""

from __future__ import annotations

import functools
import itertools
import json
import numbers
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NotRequired, TypedDict

import attrs

from pi_agent_ask.form import schemas, untrusted
from pi_agent_ask.form.tools import (
    ASK_USER,
    EXPORT_ASK_HISTORY,
    LIST_ASK_HISTORY,
    READ_ASK_HISTORY,
    WAIT_FOR_ANSWERS,
)
from pi_agent_ask.form.types import (
    QUESTION_TYPES,
    AskParams,
    Issue,
    Option,
    Question,
    QuestionType,
    Validation,
    new_instance,
    slot_builder,
)

if TYPE_CHECKING:  # jsonschema is imported when arguments fail the compiled check (cold start)
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

CONTEXT_FILE_MAX_BYTES = 1024 * 1024
"""Largest context file accepted (1 MiB).

A context is read beside the options in a terminal panel, and the loaded text is copied into the
session journal (payload, history request, queue entry) and into history reads and exports. A
mebibyte is far more than anyone reads in a form, yet bounds what one careless path (a log, a
data dump) can add to every one of those copies and to memory.
"""

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
    # The boundary too (untrusted arguments only; saved parameters were checked when they
    # came in, and their loaded contexts may exceed the bound for arguments).
    if present_single_as_multi is False and background_only is False:
        mode = _CALL_MODE  # the defaults: no bool() calls, no key to build
    else:
        mode = _MODES[True, True, bool(present_single_as_multi), bool(background_only)]
    done = _one_pass(arguments, mode)
    return done if done is not None else _in_stages(arguments, mode)


def validate_bounded_params(
    arguments: object,
    *,
    present_single_as_multi: bool = False,
    background_only: bool = False,
) -> Validation:
    """``validate_ask_params`` for arguments that already passed the boundary
    (``untrusted.check``, as ``Runtime.call_tool`` checks every call's arguments first): the
    same stages after it, without walking the arguments a second time."""
    if present_single_as_multi is False and background_only is False:
        mode = _BOUNDED_MODE
    else:
        mode = _MODES[False, True, bool(present_single_as_multi), bool(background_only)]
    done = _one_pass(arguments, mode)
    return done if done is not None else _in_stages(arguments, mode)


def validate_checked_params(
    arguments: object,
    *,
    present_single_as_multi: bool = False,
    background_only: bool = False,
) -> Validation | None:
    """``validate_ask_params``'s outcome when one walk decides it, the boundary included: a
    ``Validation`` here means the arguments also passed ``untrusted.check``. ``None`` for
    every other input (a boundary refusal among them): check the boundary, then
    ``validate_bounded_params``. For ``Runtime.call_tool``, so a call's arguments are walked
    once, not once for the boundary and again for validation."""
    if present_single_as_multi is False and background_only is False:
        mode = _CALL_MODE
    else:
        mode = _MODES[True, True, bool(present_single_as_multi), bool(background_only)]
    return _one_pass(arguments, mode)


def params_from_saved(data: object, *, present_single_as_multi: bool = False) -> AskParams | None:
    """Re-validate normalised parameters saved in the journal; ``None`` when they are invalid.

    No file is read: a saved ``context`` is always text (the file was loaded before saving),
    even if that text happens to look like a path, and it is kept untrimmed so the loaded
    snapshot survives exactly. Saved forms of older releases are converted like calls (inline
    ``preview`` text); a saved ``previewFile`` would need a file read and makes the form invalid.
    """
    mode = _MODES[False, False, bool(present_single_as_multi), False]
    validation = _one_pass(data, mode)
    if validation is None:
        validation = _in_stages(data, mode)
    return validation.params if validation.ok else None


def schema_issues(
    tool_name: str, arguments: object, *, background_only: bool = False
) -> tuple[Issue, ...]:
    """Check ``arguments`` against the input schema of ``tool_name`` only.

    For the tools other than ``ask_user`` this is all their argument validation; for
    ``ask_user`` use :func:`validate_ask_params`, which converts legacy calls and derives
    labels first. ``background_only`` selects the ``ask_user`` schema without ``background``.
    Raises ``KeyError`` for an unknown tool name.
    """
    return _schema_issues(tool_name, arguments, background=not background_only)


def schema_error_text(tool_name: str, issues: Sequence[Issue]) -> str:
    """The host tool-error text for a schema failure.

    ::

        Validation failed for tool "ask_user":
          - questions[0].options[1].label: must have required property 'label'
    """
    prefix = _schema_prefix(tool_name)
    lines = [prefix.rstrip()]
    lines.extend(f"  - {issue.path}: {issue.message.removeprefix(prefix)}" for issue in issues)
    return "\n".join(lines)


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


def is_context_path(context: str) -> bool:
    """Whether a (trimmed) context names a file: a single line starting with ``/``."""
    return context.startswith("/") and "\n" not in context and "\r" not in context


def load_context_file(path: str, *, max_bytes: int = CONTEXT_FILE_MAX_BYTES) -> str:
    """Read a context file as raw UTF-8 text; raise :class:`ContextFileError` with the reason.

    The path is ``stat``-ed before anything opens it, so a FIFO, socket or device is refused
    without blocking; the file is then opened non-blocking and checked again through its
    descriptor, which closes the window where the path is swapped between the two steps.
    """
    try:
        info = Path(path).stat()
    except (OSError, ValueError) as error:  # ValueError: a NUL or lone surrogate in the path
        raise ContextFileError(_os_reason(error)) from None
    if not stat.S_ISREG(info.st_mode):
        raise ContextFileError("Expected a regular text file")
    if info.st_size > max_bytes:
        raise ContextFileError(f"Context file is larger than {max_bytes} bytes")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        raise ContextFileError(_os_reason(error)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ContextFileError("Expected a regular text file")
        chunks: list[bytes] = []
        size = 0
        # Read one byte past the cap so a file that grew after stat is still refused.
        while size <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as error:
        raise ContextFileError(_os_reason(error)) from None
    finally:
        os.close(fd)
    if size > max_bytes:
        raise ContextFileError(f"Context file is larger than {max_bytes} bytes")
    return _decode_text(b"".join(chunks), empty="Context file is empty")


class ContextFileError(Exception):
    """A context file cannot be used; ``reason`` is the text after the path in the issue."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --------------------------------------------------------------------------------------------
# Pipeline
# --------------------------------------------------------------------------------------------


@attrs.frozen
class _LegacyPreview:
    """An option's preview fields from an older release, taken off the option.

    ``text`` and ``file`` are trimmed; blank values are ``None``.
    """

    text: str | None
    file: str | None


# question index -> option index -> its legacy preview fields
_LegacyTable = Mapping[int, Mapping[int, _LegacyPreview]]


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


@attrs.frozen
class _Mode:
    """How one call validates: ``checked``: apply the boundary (``untrusted.check``) first;
    ``load_files``: read context and preview files (calls) or not (saved forms)."""

    checked: bool
    load_files: bool
    present_single_as_multi: bool
    background_only: bool


_MODES: Final = {flags: _Mode(*flags) for flags in itertools.product((False, True), repeat=4)}
"""Every mode, by its fields in order (built once: a lookup is cheaper than a constructor)."""
_CALL_MODE: Final = _MODES[True, True, False, False]
_BOUNDED_MODE: Final = _MODES[False, True, False, False]


def _in_stages(arguments: object, mode: _Mode) -> Validation:
    """The reference pipeline: each stage in turn over the whole arguments (module docstring).

    Every input the one pass leaves alone comes here, and its outcome is the definition the
    one pass is tested against."""
    if mode.checked:
        refusal = untrusted.check(arguments)
        if refusal is not None:
            issue = Issue(refusal.path or "root", _schema_prefix(ASK_USER) + refusal.message)
            return Validation(params=None, issues=(issue,), schema_error=True)
    if not isinstance(arguments, dict) and isinstance(arguments, Mapping):
        arguments = dict(arguments)
    arguments, legacy = _convert_legacy(arguments)
    arguments = _derive_labels(arguments)
    if mode.background_only and isinstance(arguments, dict) and "background" in arguments:
        # Background-only mode queues every call; a stale key (even `false`) is not an error.
        arguments = {key: value for key, value in arguments.items() if key != "background"}
    issues = _schema_issues(ASK_USER, arguments, background=not mode.background_only)
    if issues:
        return Validation(params=None, issues=issues, schema_error=True)
    # The schema guarantees the shapes the code below relies on.
    assert isinstance(arguments, dict)
    questions: list[_QuestionArguments] = arguments["questions"]
    issues = _semantic_issues(questions, legacy)
    if issues:
        return Validation(params=None, issues=issues)
    contexts, issues = _resolve_contexts(questions, legacy, load_files=mode.load_files)
    if issues:
        return Validation(params=None, issues=issues)
    params = AskParams(
        title=_optional_text(arguments.get("title")),
        background=True if mode.background_only else arguments.get("background") is True,
        questions=tuple(
            _normalise_question(index, question, contexts[index], mode.present_single_as_multi)
            for index, question in enumerate(questions)
        ),
    )
    return Validation(params=params)


# --------------------------------------------------------------------------------------------
# The one pass
# --------------------------------------------------------------------------------------------

# The fields the one pass reads, per object. Every other key is ignored as the schema ignores
# it (and measured for the boundary), except the legacy fields the stages convert.
_ROOT_FIELDS = frozenset({"title", "background", "questions"})
_BACKGROUND_ONLY_ROOT_FIELDS = frozenset({"title", "questions"})
_QUESTION_FIELDS = frozenset({"id", "label", "prompt", "context", "type", "options"})
_OPTION_FIELDS = frozenset({"value", "label", "description", "recommended"})
_LEGACY_OPTION_FIELDS = frozenset({"preview", "previewFile"})
_NO_FIELDS: frozenset[str] = frozenset()
_STR = frozenset({str})
_ROOT_KEY_CHARS = sum(map(len, _ROOT_FIELDS))
_QUESTION_KEY_CHARS = sum(map(len, _QUESTION_FIELDS))
_OPTION_KEY_CHARS = sum(map(len, _OPTION_FIELDS))


def _one_pass(arguments: object, mode: _Mode) -> Validation | None:
    """The stages' outcome for arguments of the current shape, in one walk; ``None`` for any
    other input, which :func:`_in_stages` then validates.

    The walk reads each field once and, as it goes, checks the schema's types (exact ``dict``,
    ``list``, ``str``, ``bool``), derives labels, collects the semantic issues in the stages'
    order and builds the normalised questions. It gives up, leaving the input to the stages,
    on anything a stage would report or rewrite other than a semantic issue: a schema error
    (whose report is jsonschema's), legacy fields, a subclass of ``str`` or ``dict``, a non-dict
    mapping, and when ``mode.checked`` a refusal at the boundary (whose path is
    ``untrusted.check``'s). Context files are read after the walk, only when it found no
    issue, as the stages read them after the semantic checks.

    The boundary (``mode.checked``) is applied to the whole value at the end: the strings the
    walk read are collected and joined, so one length and one search for a lone surrogate
    cover them all; keys and values are counted per container with ``len`` (one value per
    node, as ``untrusted.check`` counts); keys the walk does not read are measured with
    ``untrusted.measure``.
    """
    if type(arguments) is not dict:
        return None
    checked = mode.checked
    load_files = mode.load_files
    as_multi = mode.present_single_as_multi
    questions = arguments.get("questions")
    title = arguments.get("title")
    background = None if mode.background_only else arguments.get("background")
    if type(questions) is not list:
        return None
    read = 1
    if title is not None:
        if type(title) is not str:
            return None
        read += 1
    if background is not None:
        if type(background) is not bool:
            return None
        read += 1
    # The boundary's tally: the strings read and the objects walked (both taken in at the
    # end), the options, and what unread keys hold.
    texts: list[str | None] = [title]
    objects: list[dict[Any, Any]] = [arguments]
    keys_seen = len(arguments)  # the keys of every object walked (one value each)
    values = 1
    option_count = 0
    extra_chars = 0
    if read != len(arguments):
        # Unknown keys, and in background-only mode the stale `background` key.
        fields = _BACKGROUND_ONLY_ROOT_FIELDS if mode.background_only else _ROOT_FIELDS
        extra = _extra_fields(arguments, fields, _NO_FIELDS, 1, checked)
        if extra is None:
            return None
        extra_chars += extra[0]
        values += extra[1]
    if title is not None:
        title = title.strip() or None

    issues: list[Issue] = []
    seen_ids: set[str] = set()
    normalised: list[Question] = []
    files: list[tuple[int, str]] = []  # (question index, path): contexts to read at the end
    for q_index, question in enumerate(questions):
        if type(question) is not dict:
            return None
        question_id = question.get("id")  # method calls, as for the options below
        prompt = question.get("prompt")
        options = question.get("options")
        label = question.get("label")
        context = question.get("context")
        question_type = question.get("type")
        if type(question_id) is not str or type(prompt) is not str or type(options) is not list:
            return None
        read = 3
        if label is not None:
            if type(label) is not str:
                return None
            read += 1
        if context is not None:
            if type(context) is not str:
                return None
            read += 1
        requested: QuestionType = "single"
        if question_type is not None:
            if type(question_type) is not str or question_type not in QUESTION_TYPES:
                return None  # "preview" (legacy) or a schema error
            if question_type == "multi":
                requested = "multi"
            read += 1
        size = len(question)
        keys_seen += size
        if read != size:
            extra = _extra_fields(question, _QUESTION_FIELDS, _NO_FIELDS, 3, checked)
            if extra is None:
                return None
            extra_chars += extra[0]
            values += extra[1]
        if checked:
            texts += question_id, prompt, label, context, question_type

        question_id = question_id.strip()
        if not question_id:
            issues.append(_question_issue(q_index, "id", "id is required"))
        elif question_id in seen_ids:
            what = f"duplicate question id {_js_json(question_id)}"
            issues.append(_question_issue(q_index, "id", what))
        else:
            seen_ids.add(question_id)
        prompt = prompt.strip()
        if not prompt:
            issues.append(_question_issue(q_index, "prompt", "prompt is required"))
        if not options:
            issues.append(_question_issue(q_index, "options", "at least one option is required"))

        seen_values: set[str] = set()
        built: list[Option] = []
        for option in options:  # its position, for an issue, is len(built)
            if type(option) is not dict:
                return None
            value = option.get("value")  # no bound method kept: a method call each is less
            option_label = option.get("label")
            description = option.get("description")
            recommended = option.get("recommended")
            if type(value) is not str:
                return None
            read = 1
            if option_label is None:
                # Missing (or null, which the read count catches): derived from the value.
                shown = derive_label(value)
                if shown is None:
                    return None  # the schema's required label
                shown = shown.strip()
            elif type(option_label) is not str:
                return None
            else:
                read += 1
                shown = option_label.strip()
                if not shown:
                    shown = (derive_label(value) or "").strip()
            if description is not None:
                if type(description) is not str:
                    return None
                read += 1
            if recommended is not None:
                if type(recommended) is not bool:
                    return None
                read += 1
            size = len(option)
            keys_seen += size
            if read != size:
                extra = _extra_fields(option, _OPTION_FIELDS, _LEGACY_OPTION_FIELDS, 5, checked)
                if extra is None:
                    return None
                extra_chars += extra[0]
                values += extra[1]
            if checked:
                texts += value, option_label, description

            value = value.strip()
            if not value:
                issues.append(_option_issue(q_index, len(built), "value", "value is required"))
            elif value in seen_values:
                what = f"duplicate option value {_js_json(value)}"
                issues.append(_option_issue(q_index, len(built), "value", what))
            else:
                seen_values.add(value)
            if not shown:
                issues.append(_option_issue(q_index, len(built), "label", "label is required"))
            if description is not None:
                description = description.strip() or None
            # Option(value, shown, description, recommended), as a plain object that then
            # becomes an Option (types.slot_builder).
            built_option = new_instance(_OPTION_BUILDER)
            built_option.value = value
            built_option.label = shown
            built_option.description = description
            built_option.recommended = recommended
            built_option.__class__ = Option
            built.append(built_option)
        if checked:
            objects.append(question)
            objects += options
            option_count += len(options)

        if context is not None:
            text = context.strip()
            if not text:
                context = None
            elif load_files:
                # A single-line absolute path names a file (is_context_path), read at the end.
                if text[0] == "/" and "\n" not in text and "\r" not in text:
                    files.append((q_index, text))
                context = text
            # else: a saved context is the loaded snapshot: kept exactly, whitespace included.
        # Question(...), the same way (types.slot_builder).
        built_question = new_instance(_QUESTION_BUILDER)
        built_question.id = question_id
        built_question.label = (label.strip() if label is not None else "") or f"Q{q_index + 1}"
        built_question.prompt = prompt
        built_question.type = requested
        built_question.options = tuple(built)
        built_question.context = context
        built_question.presented_type = "multi" if as_multi and requested == "single" else None
        built_question.__class__ = Question
        normalised.append(built_question)

    if checked:
        # Lone surrogates cannot arise from joining (they are code points, not halves of
        # bytes), so searching the joined text is searching each string.
        text = "".join(filter(None, texts))
        # The keys the walk read are counted at their longest (every field present): a value
        # within that margin of the bound is left to the stages, which count exactly.
        keys = _ROOT_KEY_CHARS + _QUESTION_KEY_CHARS * len(questions)
        keys += _OPTION_KEY_CHARS * option_count
        # One value per node: the root, and one per item of every container.
        values += len(questions) + option_count + keys_seen
        if (
            # The boundary wants keys of type str exactly (not a subclass such as a StrEnum).
            not _STR.issuperset(map(type, chain.from_iterable(objects)))
            or len(text) + keys + extra_chars > untrusted.MAX_TEXT_CHARS
            or values > untrusted.MAX_VALUES
            or (not text.isascii() and untrusted.has_surrogate(text))  # ASCII: no call
        ):
            return None
    if not questions:
        return Validation(None, (Issue("questions", "At least one question is required"),))
    if issues:
        return Validation(None, tuple(issues))
    for q_index, path in files:
        try:
            text = load_context_file(path)
        except ContextFileError as error:
            issues.append(
                Issue(
                    f"questions[{q_index}].context",
                    f"Cannot load context file {_js_json(path)}: {error.reason}",
                )
            )
            continue
        normalised[q_index] = attrs.evolve(normalised[q_index], context=text)
    if issues:
        return Validation(None, tuple(issues))
    # valid(ask_params_of(tuple(normalised), title, background)), without the two calls.
    params = new_instance(_PARAMS_BUILDER)
    params.questions = tuple(normalised)
    params.title = title
    params.background = mode.background_only or background is True
    params._derived = None
    params._texts = None
    params.__class__ = AskParams
    validation = new_instance(_VALIDATION_BUILDER)
    validation.params = params
    validation.issues = ()
    validation.schema_error = False
    validation.__class__ = Validation
    return validation  # type: ignore[no-any-return]


_OPTION_BUILDER: Final = slot_builder(Option)
_QUESTION_BUILDER: Final = slot_builder(Question)
_PARAMS_BUILDER: Final = slot_builder(AskParams)
_VALIDATION_BUILDER: Final = slot_builder(Validation)


def _question_issue(q_index: int, field: str, what: str) -> Issue:
    return Issue(f"questions[{q_index}].{field}", f"Question {q_index + 1}: {what}")


def _option_issue(q_index: int, o_index: int, field: str, what: str) -> Issue:
    where, who = _option_at(f"questions[{q_index}]", q_index + 1, o_index)
    return Issue(f"{where}.{field}", f"{who}: {what}")


def _extra_fields(
    mapping: dict[Any, object],
    fields: frozenset[str],
    legacy: frozenset[str],
    depth: int,
    checked: bool,
) -> tuple[int, int] | None:
    """What the values of the keys of ``mapping`` that are not ``fields`` hold beyond one value
    each: ``(characters of text, values)``; ``None`` when the stages must decide: a field
    present as ``null`` (a schema error), a ``legacy`` field, or (when ``checked``) a key or
    value the boundary refuses. ``depth`` is the nesting of the values; the keys' own lengths
    count as text."""
    chars = values = 0
    for key, value in mapping.items():
        if key in fields:
            if value is None:
                return None
            continue
        if key in legacy:
            return None
        if not checked:
            continue
        if type(key) is not str or untrusted.has_surrogate(key):
            return None
        tally = untrusted.measure(value, depth=depth)
        if tally is None:
            return None
        chars += len(key) + tally[0]
        values += tally[1] - 1
    return chars, values


# --------------------------------------------------------------------------------------------
# 1. Legacy conversion
# --------------------------------------------------------------------------------------------


def _convert_legacy(arguments: object) -> tuple[object, _LegacyTable]:
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
    legacy: dict[int, dict[int, _LegacyPreview]] = {}
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
                    preview = _LegacyPreview(
                        text=_optional_text(option.get("preview")),
                        file=_optional_text(option.get("previewFile")),
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
# 2. Label derivation
# --------------------------------------------------------------------------------------------


def _needs_label(option: Mapping[Any, Any]) -> bool:
    if "label" not in option:
        return True
    label = option["label"]
    return isinstance(label, str) and not label.strip()


def _derive_labels(arguments: object) -> object:
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


# --------------------------------------------------------------------------------------------
# 3. JSON Schema
# --------------------------------------------------------------------------------------------

_INPUT_SCHEMAS = {
    WAIT_FOR_ANSWERS: schemas.wait_for_answers_input_schema,
    LIST_ASK_HISTORY: schemas.list_ask_history_input_schema,
    READ_ASK_HISTORY: schemas.read_ask_history_input_schema,
    EXPORT_ASK_HISTORY: schemas.export_ask_history_input_schema,
}


def _input_schema(tool_name: str, *, background: bool) -> dict[str, Any]:
    if tool_name == ASK_USER:
        return schemas.ask_user_input_schema(background=background)
    return _INPUT_SCHEMAS[tool_name]()


@functools.cache
def _validator(tool_name: str, *, background: bool) -> Draft202012Validator:
    """A validator for one tool's input schema: the authority on schema errors.

    Cached because building one prepares the schema; the key space is five tools times two
    modes, and the validator is never handed out, so its schema dict cannot be changed.
    """
    from jsonschema import Draft202012Validator

    return Draft202012Validator(_input_schema(tool_name, background=background))


@functools.cache
def _accepts(tool_name: str, *, background: bool) -> Callable[[object], bool]:
    """A fast yes/no check of the same schema, compiled to closures (see :func:`_compile`)."""
    return _compile(_input_schema(tool_name, background=background))


def _schema_issues(tool_name: str, arguments: object, *, background: bool) -> tuple[Issue, ...]:
    # jsonschema walks a payload at roughly 20 µs per schema node, which made a 100-question
    # form take a third of a second. Valid arguments, the common case, are accepted by the
    # compiled check instead; jsonschema still produces every reported error. The two agree
    # (a property test checks it); if they ever did not, jsonschema's empty error list wins.
    if _accepts(tool_name, background=background)(arguments):
        return ()
    return _jsonschema_issues(tool_name, _validator(tool_name, background=background), arguments)


_Check = Callable[[object], bool]

# Keywords that never affect validity.
_ANNOTATIONS = frozenset({"$schema", "description", "default", "title"})


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def _is_integer(value: object) -> bool:
    if isinstance(value, float):
        return value.is_integer()
    return isinstance(value, int) and not isinstance(value, bool)


# The JSON types as jsonschema's draft 2020-12 type checker defines them.
_TYPE_CHECKS: dict[str, _Check] = {
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "number": _is_number,
    "integer": _is_integer,
}


def _compile(schema: Mapping[str, Any]) -> _Check:
    """Compile the keyword subset the input schemas use into one predicate.

    Supported: ``type`` (one name), ``properties``, ``required``, ``items``, ``enum`` of
    strings, ``minItems``, ``minimum``, ``maximum``. Any other keyword raises ``ValueError``
    when the schema is compiled, so a schema change that needs more fails loudly in the tests
    instead of being accepted silently. Objects and arrays get one closure each (not one per
    keyword): this runs once per node of every payload.
    """
    unknown = set(schema) - _ANNOTATIONS - _COMPILED_KEYWORDS
    kind = schema.get("type")
    enum = schema.get("enum")
    if unknown or not (kind is None or isinstance(kind, str)):
        raise ValueError(f"cannot compile schema keywords {sorted(unknown) or ['type']}")
    if enum is not None and not all(isinstance(option, str) for option in enum):
        raise ValueError("cannot compile a non-string enum")
    type_check = _TYPE_CHECKS[kind] if kind is not None else None
    if kind == "object" and not ({"enum", "items", "minItems", "minimum", "maximum"} & set(schema)):
        return _object_check(
            tuple(schema.get("required", ())),
            tuple((name, _compile(sub)) for name, sub in schema.get("properties", {}).items()),
        )
    if kind == "array" and not (
        {"enum", "properties", "required", "minimum", "maximum"} & set(schema)
    ):
        return _array_check(
            _compile(schema["items"]) if "items" in schema else None, schema.get("minItems", 0)
        )
    if enum is None and set(schema) - _ANNOTATIONS <= {"type"} and type_check is not None:
        return type_check
    return _generic_check(schema, type_check)


_COMPILED_KEYWORDS = frozenset(
    {"type", "properties", "required", "items", "enum", "minItems", "minimum", "maximum"}
)


def _object_check(required: tuple[str, ...], properties: tuple[tuple[str, _Check], ...]) -> _Check:
    # Plain string properties (most of them) are checked inline, the others by their closure;
    # loops, not all() over generators: this runs for every object of every payload.
    is_string = _TYPE_CHECKS["string"]
    strings = tuple(name for name, sub in properties if sub is is_string)
    others = tuple((name, sub) for name, sub in properties if sub is not is_string)

    def check(value: object) -> bool:
        if not isinstance(value, dict):
            return False
        for name in required:
            if name not in value:
                return False
        for name in strings:
            if name in value and not isinstance(value[name], str):
                return False
        for name, sub in others:  # noqa: SIM110 (a loop: see above)
            if name in value and not sub(value[name]):
                return False
        return True

    return check


def _array_check(item: _Check | None, min_items: int) -> _Check:
    def check(value: object) -> bool:
        if not isinstance(value, list) or len(value) < min_items:
            return False
        return item is None or all(map(item, value))

    return check


def _generic_check(schema: Mapping[str, Any], type_check: _Check | None) -> _Check:
    """Keyword by keyword, for the rare schemas that mix keywords of different types."""
    if set(schema) - _ANNOTATIONS == {"type", "enum"} and schema["type"] == "string":
        only = frozenset(schema["enum"])
        return lambda value: isinstance(value, str) and value in only
    checks: list[_Check] = [] if type_check is None else [type_check]
    if "enum" in schema:
        allowed = frozenset(schema["enum"])
        checks.append(lambda value: isinstance(value, str) and value in allowed)
    if "properties" in schema or "required" in schema:
        object_check = _object_check(
            tuple(schema.get("required", ())),
            tuple((name, _compile(sub)) for name, sub in schema.get("properties", {}).items()),
        )
        checks.append(lambda value: not isinstance(value, dict) or object_check(value))
    if "items" in schema or "minItems" in schema:
        array_check = _array_check(
            _compile(schema["items"]) if "items" in schema else None, schema.get("minItems", 0)
        )
        checks.append(lambda value: not isinstance(value, list) or array_check(value))
    if "minimum" in schema:
        low = schema["minimum"]
        checks.append(lambda value: not _is_number(value) or not value < low)
    if "maximum" in schema:
        high = schema["maximum"]
        checks.append(lambda value: not _is_number(value) or not value > high)
    return lambda value: all(check(value) for check in checks)


def _schema_prefix(tool_name: str) -> str:
    return f"Validation failed for tool {json.dumps(tool_name)}: "


def _jsonschema_issues(
    tool_name: str, validator: Draft202012Validator, arguments: object
) -> tuple[Issue, ...]:
    prefix = _schema_prefix(tool_name)
    try:
        errors = list(validator.iter_errors(arguments))
    except (RecursionError, TypeError, ValueError) as failure:
        # Only reachable with values no JSON document holds (absurd nesting, odd objects);
        # the promise is still an issue, never an exception.
        return (Issue("root", f"{prefix}{failure}"),)
    # A value of the wrong type also fails its enum/const; the type error says it all.
    type_errors = {tuple(error.absolute_path) for error in errors if error.validator == "type"}
    issues: list[Issue] = []
    # jsonschema reports in schema order (the order properties are declared, each object's
    # property errors before its missing required properties): deterministic and readable.
    for error in errors:
        if error.validator != "type" and tuple(error.absolute_path) in type_errors:
            continue
        path, what = _describe(error)
        issues.append(Issue(_format_path(path), prefix + what))
    return tuple(issues)


_JSON_TYPE_NAMES = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
    type(None): "null",
}


def _json_type(value: object) -> str:
    for python_type, name in _JSON_TYPE_NAMES.items():
        if type(value) is python_type:
            return name
    return type(value).__name__


def _describe(error: ValidationError) -> tuple[list[int | str], str]:
    """The path (missing properties included) and a short message for one schema error."""
    path: list[int | str] = list(error.absolute_path)
    keyword = error.validator
    expected = error.validator_value
    if keyword == "required":
        # jsonschema puts the missing name only in its message; the params are the schema's.
        missing = _missing_property(error)
        if missing is not None:
            path.append(missing)
            return path, f"must have required property '{missing}'"
    if keyword == "type":
        names = expected if isinstance(expected, list) else [expected]
        return path, f"must be {' or '.join(map(str, names))}, not {_json_type(error.instance)}"
    if keyword == "enum" and isinstance(expected, list):
        allowed = ", ".join(json.dumps(item) for item in expected)
        return path, f"must be one of {allowed}, not {_short_json(error.instance)}"
    if keyword == "const":
        return path, f"must be {json.dumps(expected)}"
    if keyword == "minItems":
        return path, f"must NOT have fewer than {expected} items"
    if keyword == "minimum":
        return path, f"must be >= {expected}"
    if keyword == "maximum":
        return path, f"must be <= {expected}"
    return path, error.message


def _missing_property(error: ValidationError) -> str | None:
    required = error.validator_value
    instance = error.instance
    if isinstance(required, list) and isinstance(instance, dict):
        for name in required:
            if name not in instance and f"'{name}'" in error.message:
                return str(name)
    return None


def _short_json(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")


def _format_path(path: Sequence[int | str]) -> str:
    """``["questions", 0, "id"]`` → ``questions[0].id``; the empty path is ``root``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENTIFIER.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out or "root"


# --------------------------------------------------------------------------------------------
# 4. Semantic checks
# --------------------------------------------------------------------------------------------


def _semantic_issues(
    questions: Sequence[_QuestionArguments], legacy: _LegacyTable
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
# 5. Contexts and files
# --------------------------------------------------------------------------------------------


def _resolve_contexts(
    questions: Sequence[_QuestionArguments], legacy: _LegacyTable, *, load_files: bool
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
                text = _load_preview_file(preview.file)
            except ContextFileError as error:
                issues.append(
                    Issue(
                        f"questions[{q_index}].options[{o_index}].previewFile",
                        f"Cannot load preview file {_js_json(preview.file)}: {error.reason}",
                    )
                )
                continue
            sections.append((label, text))
        contexts.append(_compose_context(context, sections))
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


def _load_preview_file(path: str) -> str:
    try:
        return load_context_file(path)
    except ContextFileError as error:
        if error.reason == "Context file is empty":
            raise ContextFileError("Preview file is empty") from None
        if error.reason.startswith("Context file is larger"):
            raise ContextFileError(
                f"Preview file is larger than {CONTEXT_FILE_MAX_BYTES} bytes"
            ) from None
        raise


def _compose_context(context: str | None, sections: Sequence[tuple[str, str]]) -> str | None:
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


def _decode_text(data: bytes, *, empty: str) -> str:
    # NUL first: most binary formats contain one, and "binary data" says more than the
    # position of the first byte that is not UTF-8.
    if b"\x00" in data:
        raise ContextFileError("Expected UTF-8 text, not binary data")
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as error:
        raise ContextFileError(
            f"Expected UTF-8 text, found an invalid byte at offset {error.start}"
        ) from None
    if not text.strip():
        raise ContextFileError(empty)
    return text


def _os_reason(error: OSError | ValueError) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error)


# --------------------------------------------------------------------------------------------
# 6. Normalisation
# --------------------------------------------------------------------------------------------


def _optional_text(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    text = value.strip()
    return text or None


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
        label=_optional_text(question.get("label")) or f"Q{index + 1}",
        prompt=question["prompt"].strip(),
        type=requested,
        presented_type=presented,
        context=context,
        options=tuple([_normalise_option(option) for option in question["options"]]),
    )


def _normalise_option(option: _OptionArguments) -> Option:
    return Option(
        option["value"].strip(),
        option["label"].strip(),
        _optional_text(option.get("description")),
        option.get("recommended"),
    )
