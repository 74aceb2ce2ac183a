"""The JSON Schema check of every tool's input, and the host tool error it produces.

A schema failure is the host's tool error, not ``invalid_input`` (``SPEC-NOTES.md``): its
text is :func:`schema_error_text`, one ``<path>: <message>`` line per issue. Two libraries,
each doing what it does well: fastjsonschema compiles the schema once and decides whether
arguments pass (the question every call asks); jsonschema, imported only when they fail,
lists every error with its path, which the issues report. Neither knows anything the other
does not: they read the same schema (:mod:`pi_agent_ask.form.schemas`). Were they ever to
disagree about a value, jsonschema's empty list of errors wins.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import fastjsonschema

from pi_agent_ask.form import schemas
from pi_agent_ask.form.tools import (
    ASK_USER,
    EXPORT_ASK_HISTORY,
    LIST_ASK_HISTORY,
    READ_ASK_HISTORY,
    WAIT_FOR_ANSWERS,
)
from pi_agent_ask.form.types import Issue

if TYPE_CHECKING:  # jsonschema is imported when arguments fail the check (cold start)
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError


def schema_issues(
    tool_name: str, arguments: object, *, background_only: bool = False
) -> tuple[Issue, ...]:
    """Check ``arguments`` against the input schema of ``tool_name`` only.

    For the tools other than ``ask_user`` this is all their argument validation; for
    ``ask_user`` use :func:`validate_ask_params`, which converts legacy calls and derives
    labels first. ``background_only`` selects the ``ask_user`` schema without ``background``.
    Raises ``KeyError`` for an unknown tool name.
    """
    return check_schema(tool_name, arguments, background=not background_only)


def schema_refusal(tool_name: str, arguments: object) -> str | None:
    """The host tool error's text when ``arguments`` fail the input schema of ``tool_name``
    (a tool other than ``ask_user``), else ``None``."""
    issues = schema_issues(tool_name, arguments)
    return schema_error_text(tool_name, issues) if issues else None


def schema_error_text(tool_name: str, issues: Sequence[Issue]) -> str:
    """The host tool-error text for a schema failure.

    ::

        Validation failed for tool "ask_user":
          - questions[0].options[1].label: must have required property 'label'
    """
    prefix = schema_prefix(tool_name)
    lines = [prefix.rstrip()]
    lines.extend(f"  - {issue.path}: {issue.message.removeprefix(prefix)}" for issue in issues)
    return "\n".join(lines)


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
def _passes(tool_name: str, *, background: bool) -> Callable[[object], object]:
    """The compiled check of one tool's input schema: returns, or raises on the first error.
    ``use_default=False``: the check never writes the schema's defaults into the arguments.
    ``detailed_exceptions=False``: its error only says that the arguments fail (jsonschema
    lists the issues), so the code compiled for it holds no error messages."""
    return fastjsonschema.compile(
        _input_schema(tool_name, background=background),
        use_default=False,
        detailed_exceptions=False,
    )


@functools.cache
def _validator(tool_name: str, *, background: bool) -> Draft202012Validator:
    """A validator for one tool's input schema, which lists every error.

    Cached because building one prepares the schema; the key space is five tools times two
    modes, and the validator is never handed out, so its schema dict cannot be changed.
    """
    from jsonschema import Draft202012Validator

    return Draft202012Validator(_input_schema(tool_name, background=background))


def check_schema(tool_name: str, arguments: object, *, background: bool) -> tuple[Issue, ...]:
    """The schema issues of ``arguments`` for ``tool_name`` (``background``: the ``ask_user``
    schema with its ``background`` property); empty when they pass."""
    try:
        _passes(tool_name, background=background)(arguments)
    except (ValueError, TypeError, RecursionError):
        # JsonSchemaValueException is a ValueError; the others come from values no JSON
        # document holds, which jsonschema then reports as an issue.
        return _jsonschema_issues(
            tool_name, _validator(tool_name, background=background), arguments
        )
    return ()


def schema_prefix(tool_name: str) -> str:
    """What every schema issue's message of ``tool_name`` starts with."""
    return f"Validation failed for tool {json.dumps(tool_name)}: "


def _jsonschema_issues(
    tool_name: str, validator: Draft202012Validator, arguments: object
) -> tuple[Issue, ...]:
    prefix = schema_prefix(tool_name)
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
    if keyword == "additionalProperties" and isinstance(error.instance, dict):
        known = list(error.schema.get("properties", {})) if isinstance(error.schema, dict) else []
        unknown = [key for key in error.instance if key not in known]
        # A tool's arguments are the root object: "argument" is the word an agent uses.
        what = "argument" if not path else "property"
        none = "the tool takes none" if not path else "the object takes none"
        allowed = f"known: {', '.join(known)}" if known else none
        if len(unknown) == 1:
            path.append(unknown[0])
            return path, f"is not a known {what} ({allowed})"
        listed = ", ".join(json.dumps(key, ensure_ascii=False) for key in unknown)
        return path, f"has {what}s that are not known: {listed} ({allowed})"
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
