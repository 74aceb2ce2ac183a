"""Every text the ask tools show the agent, built from results. Pure.

Tool result ``content`` blocks, background-answer messages, wait results, the invalid-payload
and non-TUI fallback texts, the queued receipt. These keep the agent's text verbatim (the model
should read exactly what the person wrote) and carry image content blocks. The transcript's
rows and cards are :mod:`pi_agent_ask.form.transcript`.

Option labels: a result records the labels of *selected* options only. Notes on unselected
options are shown with their option's label when the caller passes the form's ``params``;
without them the option value stands in (the contract's wording: ``<value> (not selected)``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

from pi_agent_ask.form.result import (
    AnswerResult,
    AskResult,
    BackgroundOutcome,
    QuestionMeta,
    fallback_result,
)
from pi_agent_ask.form.types import JSON, AskParams, Image, Issue, Question

__all__ = [
    "BACKGROUND_ANSWER_TYPE",
    "CANCELLED_TEXT",
    "EMPTY_WAIT_TEXT",
    "SUBMITTED_TEXT",
    "WAIT_BUSY_TEXT",
    "WAIT_HIDDEN_TEXT",
    "WAIT_INTERRUPTED_TEXT",
    "WAIT_NON_TUI_TEXT",
    "background_answer_message",
    "background_answer_text",
    "fallback_text",
    "fallback_tool_result",
    "image_blocks",
    "image_marker",
    "invalid_text",
    "presentation_note",
    "receipt_text",
    "receipt_tool_result",
    "result_text",
    "summary_lines",
    "tool_result",
    "wait_complete_result",
    "wait_deferred_result",
    "wait_text",
]

BACKGROUND_ANSWER_TYPE = "ask:background-answer"
CANCELLED_TEXT = "User cancelled the ask flow"
SUBMITTED_TEXT = "User submitted the ask flow"
EMPTY_WAIT_TEXT = (
    "No outstanding background answers. Previously delivered answers are already in context."
)
# wait_for_answers' refusals and interruption (``actors/wait_state.py``); here so that the
# runtime names them without importing the waiter before a wait.
WAIT_BUSY_TEXT = "Another wait_for_answers call is already waiting."
WAIT_NON_TUI_TEXT = "wait_for_answers requires interactive TUI mode."
WAIT_INTERRUPTED_TEXT = "Question wait interrupted"
WAIT_HIDDEN_TEXT = "wait_for_answers is not available in background-only mode."
FALLBACK_HEAD = (
    "Needs user input: ask_user requires interactive TUI mode.\n"
    "Run same tool call in interactive TUI mode, or ask user these questions manually:"
)
FALLBACK_TAIL = (
    "details.questions contains normalized pending questions. "
    "details.answers stays empty until user responds."
)

TextBlock = dict[str, JSON]
"""A content block: ``{"type": "text", "text": ...}`` or ``{"type": "image", ...}``."""


# --------------------------------------------------------------------------------------------
# Shared pieces
# --------------------------------------------------------------------------------------------


def image_marker(count: int) -> str:
    """``[1 image]`` / ``[N images]``; empty for none."""
    if count <= 0:
        return ""
    return "[1 image]" if count == 1 else f"[{count} images]"


def with_marker(text: str, count: int) -> str:
    """``text`` followed by the image marker of ``count`` images."""
    marker = image_marker(count)
    if not marker:
        return text
    return f"{text} {marker}" if text else marker


def option_label(
    answer: AnswerResult, value: str, options: Mapping[str, str] | None
) -> tuple[str, bool]:
    """The label of option ``value`` and whether it is selected in ``answer``."""
    selected = dict(zip(answer.selected_values, answer.selected_labels, strict=True))
    if value in selected:
        return selected[value], True
    if options is not None and value in options:
        return options[value], False
    return value, False


class _OptionIndex:
    """Option labels by question id and option value, when the form's params are known.

    Built once per rendering call, so a form of n questions renders in O(n), not O(n²); each
    question's labels only when they are first asked for (the only use is notes on options),
    so a form without option notes costs nothing.
    """

    __slots__ = ("_labels", "_params", "_questions")

    def __init__(self, params: AskParams) -> None:
        self._params = params
        self._questions: dict[str, Question] | None = None
        self._labels: dict[str, dict[str, str] | None] = {}

    def of(self, question_id: str) -> Mapping[str, str] | None:
        labels = self._labels
        if question_id in labels:
            return labels[question_id]
        if self._questions is None:
            self._questions = {q.id: q for q in self._params.questions}
        question = self._questions.get(question_id)
        found = None if question is None else {o.value: o.label for o in question.options}
        labels[question_id] = found
        return found


OptionIndex = _OptionIndex | None
"""Option labels by question id and option value, when the form's params are known."""


def option_index(params: AskParams | None) -> OptionIndex:
    """The option labels of ``params`` (``None`` without them)."""
    return None if params is None else _OptionIndex(params)


def options_of(index: OptionIndex, question_id: str) -> Mapping[str, str] | None:
    """The option labels of one question by value, when they are known."""
    return None if index is None else index.of(question_id)


def noted_values(answer: AnswerResult, options: Mapping[str, str] | None) -> list[str]:
    """Option values with a note or note images, in option order when it is known."""
    return _in_option_order(_noted_keys(answer), options)


def _noted_keys(answer: AnswerResult) -> list[str]:
    """Option values with a note or note images, notes first."""
    if not answer.option_note_images:
        return list(answer.option_notes)
    return list(dict.fromkeys([*answer.option_notes, *answer.option_note_images]))


def _in_option_order(noted: list[str], options: Mapping[str, str] | None) -> list[str]:
    if options is None or len(noted) <= 1:
        return noted
    order = {value: i for i, value in enumerate(options)}
    return sorted(noted, key=lambda v: order.get(v, len(order)))


def answer_text(answer: AnswerResult) -> str:
    """An answer's labels, with the marker of its custom images."""
    return with_marker(", ".join(answer.labels), len(answer.custom_images))


def presentation_note(result: AskResult) -> str | None:
    """The compact note shown when an answered question was presented with another type."""
    shown = {
        meta.presented_type
        for meta in result.questions
        if meta.presented_type is not None
        and meta.presented_type != meta.type
        and (answer := result.answers.get(meta.id)) is not None
        and answer.has_answer
    }
    return _presentation_text(shown) if shown else None


def _presentation_text(shown: Collection[str]) -> str:
    """The presentation note for the presented types ``shown`` (not empty)."""
    if shown == {"multi"}:
        kind = "as multi-select"
    elif shown == {"single"}:
        kind = "as single-select"
    else:
        kind = "with a different selection type"
    return f"Note: Some questions were presented {kind} by user preference."


# --------------------------------------------------------------------------------------------
# Agent-facing text
# --------------------------------------------------------------------------------------------


def summary_lines(
    result: AskResult, *, params: AskParams | None = None, with_ids: bool = False
) -> list[str]:
    """The answer summary, one line per fact, in question order.

    ``with_ids`` rewrites each label as ``<label> [<qid>]`` (background answers and waits).
    """
    if result.cancelled:
        return [CANCELLED_TEXT]
    found = _texts(result, params)
    lines = [_name(meta, with_ids) + fact for meta, facts in found.facts for fact in facts]
    if found.presented:
        lines.append(found.presented)
    return lines or [SUBMITTED_TEXT]


def _name(meta: QuestionMeta, with_ids: bool) -> str:
    return f"{meta.label} [{meta.id}]" if with_ids else meta.label


_Captioned = tuple[str, str, str, str]
"""An image of a result: ``(id, caption, mime type, data)``."""


@attrs.frozen(repr=False)
class _Texts:
    """What the agent-facing texts of one result read, for one params (option labels come from
    them). ``facts`` is the summary without its question names: per question, the text after
    the name on each of its lines (``": (skipped)"``, ``" note: ..."``); ``presented`` the
    presentation note; ``images`` each image once by id."""

    facts: tuple[tuple[QuestionMeta, tuple[str, ...]], ...]
    presented: str | None
    images: tuple[_Captioned, ...]


def _texts(result: AskResult, params: AskParams | None) -> _Texts:
    if result.cancelled:
        return _Texts((), None, ())
    index = option_index(params)
    skipped = set(result.skipped_question_ids)
    with_images = result.issues is None
    facts: list[tuple[QuestionMeta, tuple[str, ...]]] = []
    images: list[_Captioned] = []
    seen: set[str] = set()
    for meta in result.questions:
        answer = result.answers.get(meta.id)
        if meta.id in skipped:
            facts.append((meta, (": (skipped)",)))
        elif answer is None:
            facts.append((meta, (": (no answer)",)))
        else:
            facts.append((meta, _answer_facts(answer, _noted_options(answer, index, meta.id))))
        if answer is not None and with_images:
            _add_images(images, seen, meta, answer, None, index)
    return _Texts(tuple(facts), presentation_note(result), tuple(images))


def _answer_facts(answer: AnswerResult, noted: Sequence[tuple[str, str, bool]]) -> tuple[str, ...]:
    """The lines of one answer after the question's name: the answer, its note, its option
    notes (``noted``: ``(value, label, selected)``)."""
    if answer.custom_images:
        lines = [": " + answer_text(answer)]
    elif answer.values or answer.custom_text is not None:
        lines = [": " + ", ".join(answer.labels)]
    else:
        lines = [": (no answer)"]
    if answer.note_images:
        lines.append(" note: " + with_marker(answer.note or "", len(answer.note_images)))
    elif answer.note is not None:
        lines.append(" note: " + answer.note)
    for value, label, selected in noted:
        text = answer.option_notes.get(value, "")
        if answer.option_note_images:
            text = with_marker(text, len(answer.option_note_images.get(value, ())))
        shown = label if selected else f"{label} (not selected)"
        lines.append(f" / {shown} note: {text}")
    return tuple(lines)


def _noted_options(
    answer: AnswerResult, index: OptionIndex, qid: str
) -> list[tuple[str, str, bool]]:
    """``(value, label, selected)`` of each option with a note or note images, in option order
    when it is known."""
    if not answer.option_notes and not answer.option_note_images:
        return []
    selected = dict(zip(answer.selected_values, answer.selected_labels, strict=True))
    options = options_of(index, qid)
    out = []
    for value in noted_values(answer, options):
        if value in selected:
            out.append((value, selected[value], True))
        else:
            label = options.get(value, value) if options is not None else value
            out.append((value, label, False))
    return out


def _add_images(
    out: list[_Captioned],
    seen: set[str],
    meta: QuestionMeta,
    answer: AnswerResult,
    noted: Sequence[tuple[str, str, bool]] | None,
    index: OptionIndex,
) -> None:
    """The images of one answer: custom, question note, then option notes (``noted``, or
    looked up when ``None``)."""

    def add(what: str, images: Iterable[Image]) -> None:
        for image in images:
            if image.id not in seen:
                seen.add(image.id)
                caption = f"Image for [{meta.id}] {meta.prompt} — {what}:"
                out.append((image.id, caption, image.mime_type, image.data))

    add("custom answer", answer.custom_images)
    add("question note", answer.note_images)
    option_images = answer.option_note_images
    if not option_images:
        return
    if noted is None:
        noted = _noted_options(answer, index, meta.id)
    for value, label, _ in noted:
        add(f"option note for {label}", option_images.get(value, ()))


def invalid_text(issues: Iterable[Issue]) -> str:
    """``Invalid ask_user payload:`` and one ``- <path>: <message>`` line per issue."""
    return "\n".join(["Invalid ask_user payload:", *(f"- {i.path}: {i.message}" for i in issues)])


def result_text(result: AskResult, *, params: AskParams | None = None) -> str:
    """The text block of a normal (foreground) tool result."""
    if result.issues is not None:
        return invalid_text(result.issues)
    return _result_text(result, _texts(result, params))


def _result_text(result: AskResult, found: _Texts) -> str:
    body = _summary_text(result, found, with_ids=False)
    return body if result.request_id is None else f"ask_user [{result.request_id}]\n{body}"


def _summary_text(result: AskResult, found: _Texts, *, with_ids: bool) -> str:
    """``"\n".join(summary_lines(...))`` from the result's texts."""
    if result.cancelled:
        return CANCELLED_TEXT
    lines = [_name(meta, with_ids) + fact for meta, facts in found.facts for fact in facts]
    if found.presented:
        lines.append(found.presented)
    return "\n".join(lines) if lines else SUBMITTED_TEXT


def image_blocks(result: AskResult, *, params: AskParams | None = None) -> list[TextBlock]:
    """The image content blocks of a result, each preceded by a text block naming its question
    and answer or note. Each image appears once (by id). None for cancelled or error results."""
    if result.cancelled or result.issues is not None:
        return []
    return _blocks(_texts(result, params).images, set())


def _image_blocks(result: AskResult, params: AskParams | None, seen: set[str]) -> list[TextBlock]:
    if result.cancelled or result.issues is not None:
        return []
    return _blocks(_texts(result, params).images, seen)


def _blocks(images: Iterable[_Captioned], seen: set[str]) -> list[TextBlock]:
    """A caption block and an image block for each image not ``seen`` yet."""
    blocks: list[TextBlock] = []
    for image_id, caption, mime_type, data in images:
        if image_id in seen:
            continue
        seen.add(image_id)
        blocks.append({"type": "text", "text": caption})
        blocks.append({"type": "image", "mimeType": mime_type, "data": data})
    return blocks


def _text_block(text: str) -> TextBlock:
    return {"type": "text", "text": text}


def tool_result(result: AskResult, *, params: AskParams | None = None) -> dict[str, JSON]:
    """The whole ``ask_user`` tool result: ``content`` (text, then image blocks),
    ``details`` (full) and ``structuredContent`` (compact)."""
    content: list[TextBlock]
    if result.issues is not None:
        content = [_text_block(invalid_text(result.issues))]
    else:
        found = _texts(result, params)
        content = [_text_block(_result_text(result, found)), *_blocks(found.images, set())]
    return {
        "content": content,
        "details": result.to_details(),
        "structuredContent": result.to_structured(),
    }


def fallback_text(params: AskParams, request_id: str | None) -> str:
    """The non-TUI fallback text: the pending questions, to be asked some other way."""
    lines: list[str] = []
    if request_id is not None:
        lines.append(f"ask_user [{request_id}]")
    lines.append(FALLBACK_HEAD)
    for number, question in enumerate(params.questions, start=1):
        lines.append(f"{number}. {question.label}: {question.prompt}")
        lines.extend(f"   - {option.label} [{option.value}]" for option in question.options)
        lines.append("   - Type your own [custom]")
    lines.append(FALLBACK_TAIL)
    return "\n".join(lines)


def fallback_tool_result(params: AskParams, request_id: str | None) -> dict[str, JSON]:
    """The cancelled non-TUI tool result with the fallback text."""
    result = fallback_result(params, request_id)
    return {
        "content": [_text_block(fallback_text(params, request_id))],
        "details": result.to_details(),
        "structuredContent": result.to_structured(),
    }


def receipt_text(request_id: str, pending_requests: int, *, background_only: bool = False) -> str:
    """The queued receipt text. In background-only mode ``wait_for_answers`` does not exist, so
    the receipt says how the answers will arrive instead of pointing at it."""
    head = (
        f"Queued ask_user [{request_id}]. {pending_requests} form(s) pending. "
        "This is not an answer. Continue independent work; "
    )
    if background_only:
        return head + "the answers will arrive as a background-answer message."
    return head + "call wait_for_answers when answers are needed."


def receipt_tool_result(
    request_id: str,
    question_ids: Sequence[str],
    pending_requests: int,
    *,
    background_only: bool = False,
) -> dict[str, JSON]:
    """The tool result of a queued background call; details = structuredContent."""
    text = receipt_text(request_id, pending_requests, background_only=background_only)
    details: dict[str, JSON] = {
        "status": "queued",
        "requestId": request_id,
        "questionIds": list(question_ids),
        "pendingRequests": pending_requests,
    }
    return {
        "content": [_text_block(text)],
        "details": details,
        "structuredContent": _copy_wait(details),
    }


def background_answer_text(outcome: BackgroundOutcome, *, params: AskParams | None = None) -> str:
    """The agent-facing text of a finished background request (also used by waits)."""
    result = outcome.result
    if result is None or result.issues is not None:
        error = outcome.error
        if error is None:
            error = invalid_text(result.issues or ()) if result else "No form result available."
        return f"Background answer [{outcome.request_id}]:\nQuestion form failed: {error}"
    return _background_text(outcome.request_id, result, _texts(result, params))


def _background_text(request_id: str, result: AskResult, found: _Texts) -> str:
    questions = "".join(f"- [{meta.id}] {meta.label}: {meta.prompt}\n" for meta in result.questions)
    response = _summary_text(result, found, with_ids=True)
    body = f"Questions:\n{questions}Response:\n{response}"
    if result.title:
        return f"Background answer [{request_id}] — {result.title}:\n{body}"
    return f"Background answer [{request_id}]:\n{body}"


def has_image_blocks(message: Mapping[str, Any]) -> bool:
    """Whether a custom message's ``content`` is a list holding an image block (what
    ``background_answer_message`` builds for an answer with images)."""
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(block, Mapping) and block.get("type") == "image" for block in content
    )


def background_answer_message(
    outcome: BackgroundOutcome, *, params: AskParams | None = None
) -> dict[str, JSON]:
    """The ``ask:background-answer`` custom message: ``content`` is the text, or a list of the
    text block and the image blocks when the answer has images."""
    result = outcome.result
    content: JSON
    if result is None or result.issues is not None:
        content = background_answer_text(outcome, params=params)
        return {
            "customType": BACKGROUND_ANSWER_TYPE,
            "content": content,
            "details": outcome.to_json(),
        }
    found = _texts(result, params)
    content = _background_text(outcome.request_id, result, found)
    if found.images and not result.cancelled:
        content = [_text_block(content), *_blocks(found.images, set())]
    return {
        "customType": BACKGROUND_ANSWER_TYPE,
        "content": content,
        "details": outcome.to_json(),
    }


ParamsLookup = Callable[[str], AskParams | None] | Mapping[str, AskParams] | None


def _params_for(lookup: ParamsLookup, request_id: str) -> AskParams | None:
    if lookup is None:
        return None
    if isinstance(lookup, Mapping):
        return lookup.get(request_id)
    return lookup(request_id)


def _outcomes_content(
    outcomes: Sequence[BackgroundOutcome], lookup: ParamsLookup, head: str | None
) -> list[TextBlock]:
    texts = [head] if head else []
    texts.extend(
        background_answer_text(o, params=_params_for(lookup, o.request_id)) for o in outcomes
    )
    seen: set[str] = set()
    images: list[TextBlock] = []
    for outcome in outcomes:
        if outcome.result is not None:
            images.extend(
                _image_blocks(outcome.result, _params_for(lookup, outcome.request_id), seen)
            )
    return [_text_block("\n\n".join(texts)), *images]


def wait_text(
    status: Literal["complete", "deferred"],
    *,
    reason: Literal["hidden", "user_message", "mode_changed"] | None = None,
    pending_request_ids: Sequence[str] = (),
    results_count: int = 0,
) -> str | None:
    """The guidance text of a wait result (``None`` for a complete wait with results, whose
    text is the answers themselves)."""
    if status == "complete":
        return EMPTY_WAIT_TEXT if results_count == 0 else None
    pending = ", ".join(f"[{rid}]" for rid in pending_request_ids) or "none"
    if reason == "user_message":
        why = "The user sent a message, so wait_for_answers stopped waiting."
        then = "Read and respond to the user's message"
    elif reason == "mode_changed":
        why = (
            "The user switched to background-only mode, so wait_for_answers stopped waiting "
            "and is no longer available."
        )
        then = "Continue independent work, or end your turn"
    else:
        why = "The user hid the question panel, so wait_for_answers stopped waiting."
        then = "Continue independent work, or end your turn"
    lines = [
        why,
        f"Still pending: {pending}.",
        "This is not an answer, a cancellation, or an approval: the questions and their drafts "
        "stay queued for the user.",
        f"{then}; do not call wait_for_answers again automatically. "
        "Answers will arrive later as background-answer messages.",
    ]
    if results_count:
        lines.append("Answers completed before the wait was released:")
    return "\n".join(lines)


def wait_complete_result(
    request_ids: Sequence[str],
    outcomes: Sequence[BackgroundOutcome],
    *,
    params: ParamsLookup = None,
) -> dict[str, JSON]:
    """The ``wait_for_answers`` result when every awaited form finished.

    ``params`` (a mapping or function from request id) supplies option labels for notes on
    unselected options."""
    details: dict[str, JSON] = {
        "status": "complete",
        "requestIds": list(request_ids),
        "results": [o.to_json() for o in outcomes],
    }
    head = wait_text("complete", results_count=len(outcomes))
    return {
        "content": _outcomes_content(outcomes, params, head),
        "details": details,
        "structuredContent": _copy_wait(details),
    }


def wait_deferred_result(
    reason: Literal["hidden", "user_message", "mode_changed"],
    request_ids: Sequence[str],
    pending_request_ids: Sequence[str],
    outcomes: Sequence[BackgroundOutcome],
    *,
    params: ParamsLookup = None,
) -> dict[str, JSON]:
    """The ``wait_for_answers`` result when hiding the panel or ordinary input released it."""
    details: dict[str, JSON] = {
        "status": "deferred",
        "reason": reason,
        "requestIds": list(request_ids),
        "pendingRequestIds": list(pending_request_ids),
        "results": [o.to_json() for o in outcomes],
    }
    head = wait_text(
        "deferred",
        reason=reason,
        pending_request_ids=pending_request_ids,
        results_count=len(outcomes),
    )
    return {
        "content": _outcomes_content(outcomes, params, head),
        "details": details,
        "structuredContent": _copy_wait(details),
    }


def _copy_wait(details: Mapping[str, JSON]) -> dict[str, JSON]:
    # details and structuredContent hold the same object, as separate copies, so a consumer
    # that edits one cannot change the other (receipts and waits).
    return copy.deepcopy(dict(details))
