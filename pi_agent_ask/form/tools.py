"""The tool definitions a model sees: name, description, input schema, output schema.

A description is a one-line index entry followed by when to use the tool, and nothing else: the
package adds no system-prompt rules. Situational guidance (what a receipt means, not to repeat a
deferred wait) travels in tool results instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pi_agent_ask.form import schemas

ASK_USER = "ask_user"
WAIT_FOR_ANSWERS = "wait_for_answers"
LIST_ASK_HISTORY = "list_ask_history"
READ_ASK_HISTORY = "read_ask_history"
EXPORT_ASK_HISTORY = "export_ask_history"

HISTORY_TOOLS = (LIST_ASK_HISTORY, READ_ASK_HISTORY, EXPORT_ASK_HISTORY)
TOOL_NAMES = (ASK_USER, WAIT_FOR_ANSWERS, *HISTORY_TOOLS)


def waits_for_person(name: str, arguments: Any) -> bool:
    """Whether a call waits for the person to answer: ``wait_for_answers``, and an
    ``ask_user`` not asked in the background (its answer is its result)."""
    if name == WAIT_FOR_ANSWERS:
        return True
    return (
        name == ASK_USER
        and isinstance(arguments, Mapping)
        and arguments.get("background") is not True
    )


QuestionMode = Literal["standard", "background-only"]
QUESTION_MODES: tuple[QuestionMode, ...] = ("standard", "background-only")

ToolDefinition = dict[str, Any]

Format = Literal["generic", "anthropic", "openai", "openai-chat", "mcp"]
FORMATS: tuple[Format, ...] = ("generic", "anthropic", "openai", "openai-chat", "mcp")

Exposure = Literal["any", "model-only"]
EXPOSURE_KEY = "x-pi-agent-ask"
"""The project's own field on a generic definition: ``{"exposure": "any" | "model-only"}``."""
MCP_EXPOSURE_KEY = "pi-agent-ask/exposure"
"""The same marking on an MCP definition, as a ``_meta`` key."""

# The contract marks wait_for_answers model-only: only the model calls it, a host never offers
# it as a command of its own. Every other tool may also be called on the person's behalf.
_EXPOSURE: dict[str, Exposure] = {WAIT_FOR_ANSWERS: "model-only"}

# MCP tool annotations (hints for clients; none of them is a promise). No tool reaches outside
# the session and its person; only the export writes a file, and it never replaces one.
_ANNOTATIONS: dict[str, dict[str, Any]] = {
    ASK_USER: {
        "title": "Ask the user",
        "readOnlyHint": True,
        "idempotentHint": False,
        "openWorldHint": False,
    },
    WAIT_FOR_ANSWERS: {
        "title": "Wait for answers",
        "readOnlyHint": True,
        "idempotentHint": False,
        "openWorldHint": False,
    },
    LIST_ASK_HISTORY: {
        "title": "List asked questions",
        "readOnlyHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
    },
    READ_ASK_HISTORY: {
        "title": "Read an asked question",
        "readOnlyHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
    },
    EXPORT_ASK_HISTORY: {
        "title": "Export asked questions",
        "readOnlyHint": False,
        "destructiveHint": False,
        "idempotentHint": False,
        "openWorldHint": False,
    },
}


def exposure_of(name: str) -> Exposure:
    """``"model-only"`` for a tool only the model calls (``wait_for_answers``), else ``"any"``."""
    return _EXPOSURE.get(name, "any")


def _decorated(tool: ToolDefinition) -> ToolDefinition:
    name = tool["name"]
    return tool | {
        "annotations": dict(_ANNOTATIONS[name]),
        EXPOSURE_KEY: {"exposure": exposure_of(name)},
    }


def _ask_user_description(background_only: bool) -> str:
    index = "Ask the user structured questions in a form and get their answers."
    when = (
        "Use it when you need something only the user can provide: information you could not "
        "find, an opinion or preference, or a choice between options."
    )
    if background_only:
        how = (
            "Every form is queued: the call returns a receipt at once, and the answers arrive "
            "later as messages."
        )
        return f"{index}\n{when} {how}"
    return f"{index}\n{when}"


_DESCRIPTIONS = {
    WAIT_FOR_ANSWERS: (
        "Wait for the answers to pending background ask_user forms.\n"
        "Use it when no other work is left and you need those answers to continue."
    ),
    LIST_ASK_HISTORY: (
        "List the questions asked with ask_user in this session and their outcomes.\n"
        "Use it to find an earlier question, or its requestId and questionId, before reading "
        "or exporting it."
    ),
    READ_ASK_HISTORY: (
        "Read one recorded ask_user question in full: its options, context, answer, notes "
        "and status.\n"
        "Use it when you need the exact earlier answer to a question found with "
        "list_ask_history."
    ),
    EXPORT_ASK_HISTORY: (
        "Write recorded ask_user questions and answers to a new Markdown file.\n"
        "Use it when the user wants the questions and answers saved to a file."
    ),
}


def tool_definitions_for(
    *, question_mode: str = "standard", history_tools: bool = False
) -> list[ToolDefinition]:
    """One dict per exposed tool: ``name``, ``description``, ``inputSchema``, for ``ask_user``
    and ``wait_for_answers`` ``outputSchema``, MCP-style ``annotations`` and the project's
    ``"x-pi-agent-ask": {"exposure": "any" | "model-only"}``.

    ``question_mode`` is ``"standard"`` or ``"background-only"`` (no ``background`` input, no
    ``wait_for_answers``); ``history_tools`` adds the three history tools. Every call returns
    new dicts. Raises ``ValueError`` for an unknown mode.
    """
    if question_mode not in QUESTION_MODES:
        raise ValueError(
            f"unknown question mode {question_mode!r}; expected one of {QUESTION_MODES}"
        )
    background_only = question_mode == "background-only"
    tools: list[ToolDefinition] = [
        {
            "name": ASK_USER,
            "description": _ask_user_description(background_only),
            "inputSchema": schemas.ask_user_input_schema(background=not background_only),
            "outputSchema": schemas.ask_user_output_schema(),
        }
    ]
    if not background_only:
        tools.append(
            {
                "name": WAIT_FOR_ANSWERS,
                "description": _DESCRIPTIONS[WAIT_FOR_ANSWERS],
                "inputSchema": schemas.wait_for_answers_input_schema(),
                "outputSchema": schemas.wait_for_answers_output_schema(),
            }
        )
    if history_tools:
        history_schemas = {
            LIST_ASK_HISTORY: schemas.list_ask_history_input_schema,
            READ_ASK_HISTORY: schemas.read_ask_history_input_schema,
            EXPORT_ASK_HISTORY: schemas.export_ask_history_input_schema,
        }
        tools.extend(
            {
                "name": name,
                "description": _DESCRIPTIONS[name],
                "inputSchema": history_schemas[name](),
            }
            for name in HISTORY_TOOLS
        )
    return [_decorated(tool) for tool in tools]


def _bare_schema(schema: dict[str, Any]) -> dict[str, Any]:
    # The model APIs take the schema itself; the dialect is 2020-12 either way.
    return {key: value for key, value in schema.items() if key != "$schema"}


def in_format(tools: list[ToolDefinition], format: str) -> list[ToolDefinition]:
    """Generic definitions (``tool_definitions_for``) in the shape an API takes.

    - ``"generic"``: unchanged;
    - ``"anthropic"``: the Messages API's ``{name, description, input_schema}``;
    - ``"openai"``: the Responses API's function tools
      ``{type: "function", name, description, parameters, strict: false}``;
    - ``"openai-chat"``: the Chat Completions nesting
      ``{type: "function", function: {name, description, parameters, strict: false}}``;
    - ``"mcp"``: an MCP ``Tool``: ``{name, title, description, inputSchema, outputSchema?,
      annotations, _meta: {"pi-agent-ask/exposure": ...}}``.

    The model APIs refuse unknown keys, so only ``generic`` and ``mcp`` carry the exposure.
    ``strict`` is off because the schemas have optional properties and allow unknown keys.
    Raises ``ValueError`` for an unknown format.
    """
    if format not in FORMATS:
        raise ValueError(
            f"unknown tool definition format {format!r}; expected one of "
            + ", ".join(repr(name) for name in FORMATS)
        )
    out: list[ToolDefinition] = []
    for tool in tools:
        name, description = tool["name"], tool["description"]
        if format == "generic":
            out.append(tool)
        elif format == "anthropic":
            out.append(
                {
                    "name": name,
                    "description": description,
                    "input_schema": _bare_schema(tool["inputSchema"]),
                }
            )
        elif format == "openai":
            out.append(
                {
                    "type": "function",
                    "name": name,
                    "description": description,
                    "parameters": _bare_schema(tool["inputSchema"]),
                    "strict": False,
                }
            )
        elif format == "openai-chat":
            function = {
                "name": name,
                "description": description,
                "parameters": _bare_schema(tool["inputSchema"]),
                "strict": False,
            }
            out.append({"type": "function", "function": function})
        else:
            mcp: ToolDefinition = {
                "name": name,
                "title": tool["annotations"]["title"],
                "description": description,
                "inputSchema": tool["inputSchema"],
            }
            if "outputSchema" in tool:
                mcp["outputSchema"] = tool["outputSchema"]
            mcp["annotations"] = tool["annotations"]
            mcp["_meta"] = {MCP_EXPOSURE_KEY: tool[EXPOSURE_KEY]["exposure"]}
            out.append(mcp)
    return out
