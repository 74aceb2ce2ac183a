"""The tool definitions a model sees: name, description, input schema, output schema.

A description is a one-line index entry followed by when to use the tool, and nothing else: the
package adds no system-prompt rules. Situational guidance (what a receipt means, not to repeat a
deferred wait) travels in tool results instead.
"""

from __future__ import annotations

from typing import Any, Literal

from pi_agent_ask.form import schemas

ASK_USER = "ask_user"
WAIT_FOR_ANSWERS = "wait_for_answers"
LIST_ASK_HISTORY = "list_ask_history"
READ_ASK_HISTORY = "read_ask_history"
EXPORT_ASK_HISTORY = "export_ask_history"

HISTORY_TOOLS = (LIST_ASK_HISTORY, READ_ASK_HISTORY, EXPORT_ASK_HISTORY)
TOOL_NAMES = (ASK_USER, WAIT_FOR_ANSWERS, *HISTORY_TOOLS)

QuestionMode = Literal["standard", "background-only"]
QUESTION_MODES: tuple[QuestionMode, ...] = ("standard", "background-only")

ToolDefinition = dict[str, Any]


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
    """One dict per exposed tool: ``name``, ``description``, ``inputSchema`` and, for
    ``ask_user`` and ``wait_for_answers``, ``outputSchema``.

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
    return tools
