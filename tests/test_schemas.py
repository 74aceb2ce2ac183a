"""The tools' JSON Schemas and definitions: valid schemas, the contract's shapes, per-mode tools."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from pi_agent_ask.form import schemas
from pi_agent_ask.form.tools import tool_definitions_for

INPUT_BUILDERS: dict[str, Callable[[], dict[str, Any]]] = {
    "ask_user": schemas.ask_user_input_schema,
    "ask_user (background-only)": lambda: schemas.ask_user_input_schema(background=False),
    "wait_for_answers": schemas.wait_for_answers_input_schema,
    "list_ask_history": schemas.list_ask_history_input_schema,
    "read_ask_history": schemas.read_ask_history_input_schema,
    "export_ask_history": schemas.export_ask_history_input_schema,
}
OUTPUT_BUILDERS: dict[str, Callable[[], dict[str, Any]]] = {
    "ask_user": schemas.ask_user_output_schema,
    "wait_for_answers": schemas.wait_for_answers_output_schema,
    "AskResult": schemas.ask_result_schema,
}
ALL_BUILDERS = {**{f"in:{k}": v for k, v in INPUT_BUILDERS.items()}}
ALL_BUILDERS.update({f"out:{k}": v for k, v in OUTPUT_BUILDERS.items()})


def _properties(schema: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every (path, property schema) pair anywhere in ``schema``."""
    if isinstance(schema, dict):
        for name, sub in schema.get("properties", {}).items():
            yield f"{path}.{name}", sub
        for key, sub in schema.items():
            if key == "properties":
                for name, prop in sub.items():
                    yield from _properties(prop, f"{path}.{name}")
            else:
                yield from _properties(sub, f"{path}/{key}")
    elif isinstance(schema, list):
        for index, sub in enumerate(schema):
            yield from _properties(sub, f"{path}[{index}]")


def _find(schema: Any, key: str) -> Iterator[Any]:
    if isinstance(schema, dict):
        if key in schema:
            yield schema[key]
        for sub in schema.values():
            yield from _find(sub, key)
    elif isinstance(schema, list):
        for sub in schema:
            yield from _find(sub, key)


@pytest.mark.parametrize("name", sorted(ALL_BUILDERS))
def test_every_schema_is_a_valid_draft_2020_12_schema(name: str) -> None:
    schema = ALL_BUILDERS[name]()
    Draft202012Validator.check_schema(schema)
    json.dumps(schema)  # plain JSON, nothing Python-only


@pytest.mark.parametrize("name", sorted(INPUT_BUILDERS))
def test_input_schemas_declare_the_dialect_and_describe_every_property(name: str) -> None:
    schema = INPUT_BUILDERS[name]()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["type"] == "object"
    for path, prop in _properties(schema):
        assert isinstance(prop.get("description"), str), path
        assert prop["description"].strip(), path


@pytest.mark.parametrize("name", sorted(OUTPUT_BUILDERS))
def test_output_schemas_describe_every_property(name: str) -> None:
    for path, prop in _properties(OUTPUT_BUILDERS[name]()):
        assert prop.get("description", "").strip(), path


@pytest.mark.parametrize("name", sorted(ALL_BUILDERS))
def test_each_call_returns_a_fresh_dict(name: str) -> None:
    first = ALL_BUILDERS[name]()
    expected = json.loads(json.dumps(first))
    first["mutated"] = True
    first.setdefault("properties", {}).clear()
    assert ALL_BUILDERS[name]() == expected


def test_ask_user_input_shape() -> None:
    schema = schemas.ask_user_input_schema()
    assert list(schema["properties"]) == ["title", "background", "questions"]
    assert schema["required"] == ["questions"]
    questions = schema["properties"]["questions"]
    question = questions["items"]
    assert question["required"] == ["id", "prompt", "options"]
    assert list(question["properties"]) == ["id", "label", "prompt", "context", "type", "options"]
    assert question["properties"]["type"]["enum"] == ["single", "multi"]
    options = question["properties"]["options"]
    assert options["items"]["required"] == ["value", "label"]
    assert list(options["items"]["properties"]) == ["value", "label", "description", "recommended"]
    # Counts are semantic checks with their own messages, not schema errors.
    assert "minItems" not in questions
    assert "minItems" not in options
    assert not list(_find(schema, "additionalProperties"))


def test_background_only_input_has_no_background() -> None:
    standard = schemas.ask_user_input_schema()
    background_only = schemas.ask_user_input_schema(background=False)
    assert "background" not in background_only["properties"]
    assert background_only["required"] == ["questions"]
    del standard["properties"]["background"]
    assert background_only == standard


def test_ask_user_input_accepts_and_rejects() -> None:
    validator = Draft202012Validator(schemas.ask_user_input_schema())
    good = {
        "title": "T",
        "background": True,
        "questions": [
            {
                "id": "q",
                "prompt": "p",
                "context": "c",
                "type": "multi",
                "options": [{"value": "v", "label": "l", "recommended": True}],
            }
        ],
    }
    assert validator.is_valid(good)
    assert validator.is_valid({"questions": []})  # the semantic check reports this one
    for bad in (
        {},
        {"questions": [{"id": "q", "prompt": "p", "type": "preview", "options": []}]},
        {"questions": [{"id": "q", "prompt": "p", "options": [{"value": "v"}]}]},
        {"questions": [{"id": "q", "options": []}]},
        {"questions": [], "background": "yes"},
    ):
        assert not validator.is_valid(bad), bad


def test_wait_for_answers_input_is_empty() -> None:
    schema = schemas.wait_for_answers_input_schema()
    assert schema["properties"] == {}
    assert "required" not in schema
    assert Draft202012Validator(schema).is_valid({})
    # It takes none: a key given is refused (an agent expecting a timeout), not ignored.
    assert not Draft202012Validator(schema).is_valid({"timeout": 1})


def test_history_input_schemas() -> None:
    listing = schemas.list_ask_history_input_schema()
    assert list(listing["properties"]) == ["query", "answeredOnly", "offset", "limit"]
    assert "required" not in listing
    limit = listing["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, 200, 50)
    assert listing["properties"]["offset"]["minimum"] == 0

    read = schemas.read_ask_history_input_schema()
    assert read["required"] == ["requestId", "questionId"]

    export = schemas.export_ask_history_input_schema()
    assert export["required"] == ["path"]
    keys = export["properties"]["keys"]
    assert keys["minItems"] == 1
    assert keys["items"]["required"] == ["requestId", "questionId"]
    validator = Draft202012Validator(export)
    assert validator.is_valid({"path": "a.md"})
    assert validator.is_valid({"path": "a.md", "keys": [{"requestId": "r", "questionId": "q"}]})
    assert not validator.is_valid({"path": "a.md", "keys": []})


IMAGE = {"mimeType": "image/png", "data": "iVBORw0KGgo="}


@pytest.mark.parametrize(
    "content",
    [
        {"requestId": "r1", "cancelled": False, "answers": {}},
        {
            "requestId": "r1",
            "cancelled": False,
            "answers": {
                "goal": {
                    "values": ["speed", "Something else"],
                    "labels": ["Speed", "Something else"],
                    "customText": "Something else",
                    "note": "n",
                    "optionNotes": {"speed": "fast", "size": "not selected note"},
                    "images": [IMAGE],
                },
                "noted": {"values": [], "labels": [], "note": "only a note"},
            },
            "skippedQuestionIds": ["tone"],
        },
        {
            "cancelled": True,
            "answers": {},
            "error": {"issues": [{"path": "questions", "message": "At least one question"}]},
        },
        {"status": "queued", "requestId": "r2", "questionIds": ["a", "b"], "pendingRequests": 2},
    ],
)
def test_ask_user_output_schema_accepts_the_contract_shapes(content: dict[str, Any]) -> None:
    assert Draft202012Validator(schemas.ask_user_output_schema()).is_valid(content)


@pytest.mark.parametrize(
    "content",
    [
        {"answers": {}},
        {"cancelled": False, "answers": {"q": {"values": ["a"]}}},
        {"cancelled": False, "answers": {"q": {"values": [1], "labels": ["A"]}}},
        {"cancelled": False, "answers": {"q": {"values": [], "labels": [], "images": [{}]}}},
        {"cancelled": True, "answers": {}, "error": {"issues": [{"path": "x"}]}},
        {"status": "done", "requestId": "r", "questionIds": [], "pendingRequests": 0},
        {"status": "queued", "requestId": "r", "questionIds": [], "pendingRequests": -1},
        {"status": "queued", "requestId": "r", "questionIds": []},
    ],
)
def test_ask_user_output_schema_rejects_other_shapes(content: dict[str, Any]) -> None:
    assert not Draft202012Validator(schemas.ask_user_output_schema()).is_valid(content)


ASK_RESULT = {
    "requestId": "r1",
    "title": "Plan",
    "cancelled": False,
    "questions": [
        {
            "id": "goal",
            "label": "Goal",
            "prompt": "Why?",
            "type": "single",
            "presentedType": "multi",
        }
    ],
    "skippedQuestionIds": [],
    "answers": {
        "goal": {
            "values": ["speed"],
            "labels": ["Speed"],
            "indices": [1],
            "optionNotes": {"speed": "x"},
            "customImages": [{"id": "i1", **IMAGE}],
            "optionNoteImages": {"speed": [{"id": "i2", **IMAGE}]},
        }
    },
}


@pytest.mark.parametrize(
    "content",
    [
        {"status": "complete", "requestIds": [], "results": []},
        {
            "status": "complete",
            "requestIds": ["r1", "r2"],
            "results": [
                {"requestId": "r1", "parentToolCallId": "call-1", "result": ASK_RESULT},
                {"requestId": "r2", "error": "UI failed"},
            ],
        },
        {
            "status": "deferred",
            "reason": "hidden",
            "requestIds": ["r1"],
            "pendingRequestIds": ["r1"],
            "results": [],
        },
        {
            "status": "deferred",
            "reason": "user_message",
            "requestIds": ["r1", "r2"],
            "pendingRequestIds": ["r2"],
            "results": [{"requestId": "r1", "result": ASK_RESULT}],
        },
    ],
)
def test_wait_output_schema_accepts_complete_and_deferred(content: dict[str, Any]) -> None:
    assert Draft202012Validator(schemas.wait_for_answers_output_schema()).is_valid(content)


@pytest.mark.parametrize(
    "content",
    [
        {"status": "complete", "requestIds": []},
        {
            "status": "deferred",
            "reason": "bored",
            "requestIds": [],
            "pendingRequestIds": [],
            "results": [],
        },
        {"status": "deferred", "reason": "hidden", "requestIds": [], "results": []},
        {"status": "complete", "requestIds": [], "results": [{"result": ASK_RESULT}]},
        {
            "status": "complete",
            "requestIds": ["r"],
            "results": [{"requestId": "r", "result": {**ASK_RESULT, "questions": [{"id": "q"}]}}],
        },
    ],
)
def test_wait_output_schema_rejects_other_shapes(content: dict[str, Any]) -> None:
    assert not Draft202012Validator(schemas.wait_for_answers_output_schema()).is_valid(content)


# --------------------------------------------------------------------------------------------
# Tool definitions
# --------------------------------------------------------------------------------------------


def _names(tools: list[dict[str, Any]]) -> list[str]:
    return [tool["name"] for tool in tools]


def test_standard_mode_exposes_ask_user_and_wait_for_answers() -> None:
    tools = tool_definitions_for()
    assert _names(tools) == ["ask_user", "wait_for_answers"]
    ask_user, wait = tools
    assert ask_user["inputSchema"] == schemas.ask_user_input_schema()
    assert ask_user["outputSchema"] == schemas.ask_user_output_schema()
    assert wait["inputSchema"] == schemas.wait_for_answers_input_schema()
    assert wait["outputSchema"] == schemas.wait_for_answers_output_schema()


def test_background_only_mode_hides_wait_and_background() -> None:
    tools = tool_definitions_for(question_mode="background-only")
    assert _names(tools) == ["ask_user"]
    assert "background" not in tools[0]["inputSchema"]["properties"]
    assert "queued" in tools[0]["description"]
    assert "queued" not in tool_definitions_for()[0]["description"]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("standard", ["ask_user", "wait_for_answers"]),
        ("background-only", ["ask_user"]),
    ],
)
def test_history_tools_only_when_enabled(mode: str, expected: list[str]) -> None:
    history = ["list_ask_history", "read_ask_history", "export_ask_history"]
    assert _names(tool_definitions_for(question_mode=mode)) == expected
    tools = tool_definitions_for(question_mode=mode, history_tools=True)
    assert _names(tools) == expected + history
    for tool in tools[len(expected) :]:
        assert set(tool) == {"name", "description", "inputSchema", "annotations", "x-pi-agent-ask"}
    by_name = {tool["name"]: tool for tool in tools}
    assert by_name["export_ask_history"]["inputSchema"]["properties"]["keys"]["minItems"] == 1


@pytest.mark.parametrize("history", [False, True])
@pytest.mark.parametrize("mode", ["standard", "background-only"])
def test_descriptions_are_an_index_line_then_when_to_use(mode: str, history: bool) -> None:
    for tool in tool_definitions_for(question_mode=mode, history_tools=history):
        index, _, when = tool["description"].partition("\n")
        assert index.strip() and index.endswith("."), tool["name"]
        assert when.startswith("Use it "), tool["name"]
        Draft202012Validator.check_schema(tool["inputSchema"])
        json.dumps(tool)


def test_ask_user_description_says_when_to_use_it() -> None:
    description = tool_definitions_for()[0]["description"]
    assert description.splitlines()[0] == (
        "Ask the user structured questions in a form and get their answers."
    )
    assert "only the user can provide" in description
    wait = tool_definitions_for()[1]["description"]
    assert "no other work is left" in wait


def test_definitions_are_fresh_each_call() -> None:
    first = tool_definitions_for(history_tools=True)
    first[0]["inputSchema"]["properties"].clear()
    first.pop()
    assert tool_definitions_for(history_tools=True)[0]["inputSchema"] == (
        schemas.ask_user_input_schema()
    )
    assert len(tool_definitions_for(history_tools=True)) == 5


def test_unknown_question_mode() -> None:
    with pytest.raises(ValueError, match="unknown question mode 'queued-only'"):
        tool_definitions_for(question_mode="queued-only")
