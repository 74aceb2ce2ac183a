"""JSON Schemas (draft 2020-12) of the tools' inputs and of their ``structuredContent``.

These dicts are what a model reads when it decides how to call a tool, so every property carries
a short ``description``. Each function builds a fresh dict on every call: callers may keep or
change what they get without affecting anyone else, and the module holds no mutable state.

The schemas check structure only (required fields, types, the ``type`` enum). Everything that
needs a sentence of its own — blank text, duplicate ids and values, empty ``questions`` or
``options``, context files — is a semantic check in :mod:`pi_agent_ask.form.validate`, which
reports it as a structured ``invalid_input`` issue with an exact path and message. That is why
``questions`` and ``options`` carry no ``minItems``.

Objects do not set ``additionalProperties: false``: unknown keys are ignored and dropped by
normalisation (as in the original, whose schemas allowed them). This is what lets calls and saved
forms from older releases (``preview``, ``previewFile``, ``required``) reach the legacy
conversion, and a stale ``background`` key pass in background-only mode. The one exception is
``wait_for_answers``, which takes no arguments and never took any: a key given to it is an
agent expecting something the call does not do (``timeout``: the wait has no time limit), so
it is refused in words rather than ignored.
"""

from __future__ import annotations

from typing import Any

JSONSchema = dict[str, Any]

DIALECT = "https://json-schema.org/draft/2020-12/schema"

HISTORY_DEFAULT_LIMIT = 50
HISTORY_MAX_LIMIT = 200


def _string(description: str) -> JSONSchema:
    return {"type": "string", "description": description}


def _strings(description: str) -> JSONSchema:
    return {"type": "array", "items": {"type": "string"}, "description": description}


def _object(
    description: str, properties: dict[str, JSONSchema], required: list[str] | None = None
) -> JSONSchema:
    out: JSONSchema = {"type": "object", "description": description, "properties": properties}
    if required:
        out["required"] = required
    return out


def _root(schema: JSONSchema) -> JSONSchema:
    return {"$schema": DIALECT, **schema}


# --------------------------------------------------------------------------------------------
# ask_user input
# --------------------------------------------------------------------------------------------


def _option_schema() -> JSONSchema:
    return _object(
        "One answer the user can pick. A 'Type your own' answer is always added after these.",
        {
            "value": _string(
                "Machine-readable value returned when this option is chosen; unique within "
                "the question."
            ),
            "label": _string(
                "Text shown for the option. If empty, it is derived from value (hyphens and "
                "underscores become spaces, first letter capitalised)."
            ),
            "description": _string("Optional one-line explanation shown after the label."),
            "recommended": {
                "type": "boolean",
                "description": (
                    "Mark the option as recommended. Shown as '(recommended)'; never "
                    "preselected. Any number of options may set it."
                ),
            },
        },
        ["value", "label"],
    )


def _question_schema() -> JSONSchema:
    return _object(
        "One question shown as a tab of the form.",
        {
            "id": _string(
                "Stable identifier of the question, unique within this call; answers are keyed "
                "by it."
            ),
            "label": _string("Short tab label. Defaults to Q1, Q2, ... by position."),
            "prompt": _string("The full question shown to the user."),
            "context": _string(
                "Optional background shown beside the options, the same for every option. "
                "A single-line absolute path (starting with /) is read as a UTF-8 text file "
                "and its text shown instead; anything else is shown as text."
            ),
            "type": {
                "type": "string",
                "enum": ["single", "multi"],
                "default": "single",
                "description": (
                    "'single': pick one option; 'multi': pick any number. Default 'single'."
                ),
            },
            "options": {
                "type": "array",
                "items": _option_schema(),
                "description": "The answers to choose from; at least one.",
            },
        },
        ["id", "prompt", "options"],
    )


def ask_user_input_schema(*, background: bool = True) -> JSONSchema:
    """The ``ask_user`` input schema.

    ``background=False`` builds the schema of background-only mode, which has no ``background``
    property (every call is queued; see :func:`pi_agent_ask.form.validate.validate_ask_params`).
    """
    properties: dict[str, JSONSchema] = {
        "title": _string("Optional title of the form."),
    }
    if background:
        properties["background"] = {
            "type": "boolean",
            "default": False,
            "description": (
                "Queue the form and return a receipt at once instead of waiting for the "
                "answers. The receipt is not an answer; answers arrive later as messages, or "
                "through wait_for_answers."
            ),
        }
    properties["questions"] = {
        "type": "array",
        "items": _question_schema(),
        "description": "The questions, shown as tabs in this order; at least one.",
    }
    return _root(
        _object("Structured questions to show the user as one form.", properties, ["questions"])
    )


# --------------------------------------------------------------------------------------------
# Other tools' input
# --------------------------------------------------------------------------------------------


def wait_for_answers_input_schema() -> JSONSchema:
    """``wait_for_answers`` takes no arguments (any given is refused: module docstring)."""
    return _root(
        {
            **_object("No arguments. The wait has no time limit.", {}),
            "additionalProperties": False,
        }
    )


def list_ask_history_input_schema() -> JSONSchema:
    """``list_ask_history({query?, answeredOnly?, offset?, limit?})``."""
    return _root(
        _object(
            "Filter and page through the questions recorded on the current branch.",
            {
                "query": _string(
                    "Case-insensitive text to search for in every recorded field (prompts, "
                    "options, answers, notes, ids, status)."
                ),
                "answeredOnly": {
                    "type": "boolean",
                    "default": False,
                    "description": "Only list questions that have a committed answer.",
                },
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "default": 0,
                    "description": "Number of matching records to skip.",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": HISTORY_MAX_LIMIT,
                    "default": HISTORY_DEFAULT_LIMIT,
                    "description": (
                        f"Maximum records to return (default {HISTORY_DEFAULT_LIMIT}, at most "
                        f"{HISTORY_MAX_LIMIT}). Follow nextOffset for more."
                    ),
                },
            },
        )
    )


def _question_key_schema(description: str) -> JSONSchema:
    return _object(
        description,
        {
            "requestId": _string("The requestId of the ask_user call."),
            "questionId": _string("The id of the question within that call."),
        },
        ["requestId", "questionId"],
    )


def read_ask_history_input_schema() -> JSONSchema:
    """``read_ask_history({requestId, questionId})``."""
    return _root(_question_key_schema("The key of one recorded question."))


def export_ask_history_input_schema() -> JSONSchema:
    """``export_ask_history({path, keys?})``; ``keys`` has at least one item when given."""
    return _root(
        _object(
            "Write recorded questions and answers to a new Markdown file.",
            {
                "path": _string(
                    "Destination file, absolute or relative to the working directory. Its "
                    "directory must exist; an existing file is never replaced."
                ),
                "keys": {
                    "type": "array",
                    "minItems": 1,
                    "items": _question_key_schema("The key of one recorded question."),
                    "description": (
                        "Questions to export. Omit to export the whole history of the current "
                        "branch."
                    ),
                },
            },
            ["path"],
        )
    )


# --------------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------------


def _issues_schema() -> JSONSchema:
    return {
        "type": "array",
        "description": "What is wrong with the arguments, one entry per problem.",
        "items": _object(
            "One problem.",
            {
                "path": _string("Where, e.g. questions[0].options[1].value."),
                "message": _string("What is wrong."),
            },
            ["path", "message"],
        ),
    }


def _compact_images_schema() -> JSONSchema:
    return {
        "type": "array",
        "description": "Images the user attached to this answer or its notes.",
        "items": _object(
            "One image.",
            {
                "mimeType": _string("Image type, e.g. image/png."),
                "data": _string("Base64 bytes, without a data: URI prefix."),
            },
            ["mimeType", "data"],
        ),
    }


def _note_map_schema(description: str) -> JSONSchema:
    return {
        "type": "object",
        "description": description,
        "additionalProperties": {"type": "string"},
    }


def _compact_answer_schema() -> JSONSchema:
    return _object(
        "The answer to one question.",
        {
            "values": _strings(
                "Chosen option values in option order, then the typed answer if any. Always an "
                "array, also for single-select."
            ),
            "labels": _strings("Labels matching values."),
            "customText": _string("The answer the user typed, if any."),
            "note": _string("The user's note on the question."),
            "optionNotes": _note_map_schema("Notes on options by option value, selected or not."),
            "images": _compact_images_schema(),
        },
        ["values", "labels"],
    )


def _compact_result_schema() -> JSONSchema:
    return _object(
        "The user's answers.",
        {
            "requestId": _string("Id of this ask_user request, for the history tools."),
            "cancelled": {
                "type": "boolean",
                "description": (
                    "True when the user dismissed the form, no UI was available, or the "
                    "arguments were invalid. Not an answer."
                ),
            },
            "answers": {
                "type": "object",
                "description": (
                    "Answers by question id. Unanswered questions without notes are absent."
                ),
                "additionalProperties": _compact_answer_schema(),
            },
            "skippedQuestionIds": _strings(
                "Questions the user explicitly skipped, in question order. Skipping is not "
                "approval."
            ),
            "error": _object(
                "Present when the arguments were invalid.",
                {"issues": _issues_schema()},
                ["issues"],
            ),
        },
        ["cancelled", "answers"],
    )


def _receipt_schema() -> JSONSchema:
    return _object(
        "A background form was queued. This is not an answer.",
        {
            "status": {"const": "queued", "description": "Always 'queued'."},
            "requestId": _string("Id of the queued request."),
            "questionIds": _strings("Ids of the queued questions."),
            "pendingRequests": {
                "type": "integer",
                "minimum": 0,
                "description": "Background forms still waiting for the user, this one included.",
            },
        },
        ["status", "requestId", "questionIds", "pendingRequests"],
    )


def ask_user_output_schema() -> JSONSchema:
    """The schema of ``ask_user``'s ``structuredContent``: compact answers or a queued receipt."""
    return _root(
        {
            "description": "The user's answers, or the receipt of a queued background form.",
            "anyOf": [_compact_result_schema(), _receipt_schema()],
        }
    )


def _full_images_schema(description: str) -> JSONSchema:
    return {
        "type": "array",
        "description": description,
        "items": _object(
            "One image.",
            {
                "id": _string("Image id."),
                "mimeType": _string("Image type, e.g. image/png."),
                "data": _string("Base64 bytes, without a data: URI prefix."),
            },
            ["id", "mimeType", "data"],
        ),
    }


def ask_result_schema() -> JSONSchema:
    """The full ``AskResult`` (an ``ask_user`` result's ``details``), as carried by waits."""
    question_type = {"type": "string", "enum": ["single", "multi"]}
    answer = _object(
        "The answer to one question.",
        {
            "values": _strings("Chosen option values, then the typed answer if any."),
            "labels": _strings("Labels matching values."),
            "indices": {
                "type": "array",
                "items": {"type": "integer", "minimum": 1},
                "description": "1-based positions of the chosen options.",
            },
            "customText": _string("The answer the user typed, if any."),
            "note": _string("The user's note on the question."),
            "optionNotes": _note_map_schema("Notes on options by option value."),
            "customImages": _full_images_schema("Images of the typed answer."),
            "noteImages": _full_images_schema("Images of the question note."),
            "optionNoteImages": {
                "type": "object",
                "description": "Images of option notes by option value.",
                "additionalProperties": _full_images_schema("Images of one option note."),
            },
        },
        ["values", "labels", "indices"],
    )
    return _object(
        "The outcome of one ask_user form.",
        {
            "requestId": _string("Id of the ask_user request."),
            "title": _string("Title of the form, when it had one."),
            "cancelled": {"type": "boolean", "description": "The form was not submitted."},
            "error": _object(
                "Present when the arguments were invalid.",
                {
                    "kind": {"const": "invalid_input", "description": "Always 'invalid_input'."},
                    "issues": _issues_schema(),
                },
                ["kind", "issues"],
            ),
            "questions": {
                "type": "array",
                "description": "The questions of the form.",
                "items": _object(
                    "One question.",
                    {
                        "id": _string("Question id."),
                        "label": _string("Question label."),
                        "prompt": _string("Question prompt."),
                        "type": {**question_type, "description": "The requested type."},
                        "presentedType": {
                            **question_type,
                            "description": "How it was finally presented, when different.",
                        },
                    },
                    ["id", "label", "prompt", "type"],
                ),
            },
            "skippedQuestionIds": _strings("Questions the user explicitly skipped."),
            "answers": {
                "type": "object",
                "description": "Answers by question id.",
                "additionalProperties": answer,
            },
        },
        ["cancelled", "questions", "answers"],
    )


def _wait_item_schema() -> JSONSchema:
    return _object(
        "The outcome of one background request.",
        {
            "requestId": _string("Id of the request."),
            "parentToolCallId": _string("Tool call that started the request, when known."),
            "result": ask_result_schema(),
            "error": _string("Why the form failed, when it did. Never an answer."),
        },
        ["requestId"],
    )


def wait_for_answers_output_schema() -> JSONSchema:
    """The schema of ``wait_for_answers``'s ``structuredContent``: complete or deferred."""
    results = {
        "type": "array",
        "items": _wait_item_schema(),
        "description": "Completed outcomes not delivered before.",
    }
    complete = _object(
        "Every outstanding background form is complete.",
        {
            "status": {"const": "complete", "description": "Always 'complete'."},
            "requestIds": _strings("The requests this wait covered."),
            "results": results,
        },
        ["status", "requestIds", "results"],
    )
    deferred = _object(
        "The user released the wait; questions stay pending. Do not wait again automatically.",
        {
            "status": {"const": "deferred", "description": "Always 'deferred'."},
            "reason": {
                "type": "string",
                "enum": ["hidden", "user_message", "mode_changed"],
                "description": (
                    "The panel was hidden, the user sent a message, or the user switched to "
                    "background-only mode."
                ),
            },
            "requestIds": _strings("The requests this wait covered."),
            "pendingRequestIds": _strings("Requests still waiting for the user."),
            "results": results,
        },
        ["status", "reason", "requestIds", "pendingRequestIds", "results"],
    )
    return _root(
        {
            "description": "The outcome of waiting for background answers.",
            "anyOf": [complete, deferred],
        }
    )
