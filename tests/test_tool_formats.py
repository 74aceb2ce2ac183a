"""``tool_definitions(format=...)``: the same tools in the shapes the model APIs and MCP take,
and the contract's model-only marking of ``wait_for_answers``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

import pi_agent_ask
from pi_agent_ask.form import schemas
from pi_agent_ask.form.tools import FORMATS, in_format, tool_definitions_for

ALL = ["ask_user", "wait_for_answers", "list_ask_history", "read_ask_history", "export_ask_history"]


def _settings(tmp_path: Path, **behaviour: Any) -> Path:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"schemaVersion": 6, "behaviour": behaviour}))
    return path


def _generic() -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in tool_definitions_for(history_tools=True)}


def test_generic_definitions_keep_their_keys_and_add_the_exposure() -> None:
    tools = _generic()
    assert list(tools) == ALL
    assert tools["ask_user"]["inputSchema"] == schemas.ask_user_input_schema()
    assert tools["wait_for_answers"]["outputSchema"] == schemas.wait_for_answers_output_schema()
    assert tools["wait_for_answers"]["x-pi-agent-ask"] == {"exposure": "model-only"}
    for name in ALL:
        assert {"name", "description", "inputSchema"} <= set(tools[name])
        if name != "wait_for_answers":
            assert tools[name]["x-pi-agent-ask"] == {"exposure": "any"}
        assert tools[name]["annotations"]["openWorldHint"] is False
    assert tools["export_ask_history"]["annotations"]["readOnlyHint"] is False
    assert tools["export_ask_history"]["annotations"]["destructiveHint"] is False
    assert tools["read_ask_history"]["annotations"]["readOnlyHint"] is True


def test_anthropic_shape(tmp_path: Path) -> None:
    tools = pi_agent_ask.tool_definitions(_settings(tmp_path, historyTools=True), "anthropic")
    generic = _generic()
    assert [tool["name"] for tool in tools] == ALL
    for tool in tools:
        assert set(tool) == {"name", "description", "input_schema"}
        expected = dict(generic[tool["name"]]["inputSchema"])
        del expected["$schema"]
        assert tool["input_schema"] == expected
        assert tool["description"] == generic[tool["name"]]["description"]
        Draft202012Validator.check_schema(tool["input_schema"])


def test_openai_responses_and_chat_shapes(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    responses = pi_agent_ask.tool_definitions(settings, format="openai")
    chat = pi_agent_ask.tool_definitions(settings, format="openai-chat")
    assert [tool["name"] for tool in responses] == ["ask_user", "wait_for_answers"]
    for flat, nested in zip(responses, chat, strict=True):
        assert set(flat) == {"type", "name", "description", "parameters", "strict"}
        assert flat["type"] == "function" and flat["strict"] is False
        assert "$schema" not in flat["parameters"]
        assert flat["parameters"]["type"] == "object"
        assert nested == {
            "type": "function",
            "function": {key: flat[key] for key in ("name", "description", "parameters", "strict")},
        }


def test_mcp_shape_carries_output_schemas_annotations_and_exposure(tmp_path: Path) -> None:
    tools = {
        tool["name"]: tool
        for tool in pi_agent_ask.tool_definitions(_settings(tmp_path, historyTools=True), "mcp")
    }
    generic = _generic()
    assert list(tools) == ALL
    assert tools["ask_user"]["outputSchema"] == schemas.ask_user_output_schema()
    assert "outputSchema" not in tools["list_ask_history"]
    for name, tool in tools.items():
        assert tool["inputSchema"] == generic[name]["inputSchema"]
        assert tool["annotations"] == generic[name]["annotations"]
        assert tool["title"] == generic[name]["annotations"]["title"]
    assert tools["wait_for_answers"]["_meta"] == {"pi-agent-ask/exposure": "model-only"}
    assert tools["ask_user"]["_meta"] == {"pi-agent-ask/exposure": "any"}


def test_background_only_mode_offers_no_wait_in_any_format(tmp_path: Path) -> None:
    settings = _settings(tmp_path, questionMode="background-only")
    for format in FORMATS:
        tools = pi_agent_ask.tool_definitions(settings, format=format)
        assert len(tools) == 1
        json.dumps(tools)


def test_an_unknown_format_names_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'gemini'.*'generic', 'anthropic', 'openai'"):
        pi_agent_ask.tool_definitions(_settings(tmp_path), format="gemini")
    with pytest.raises(ValueError, match="'mcp'"):
        in_format(tool_definitions_for(), "MCP")


def test_formats_return_fresh_dicts() -> None:
    first = in_format(tool_definitions_for(), "anthropic")
    first[0]["input_schema"]["properties"].clear()
    assert in_format(tool_definitions_for(), "anthropic")[0]["input_schema"]["properties"]


def test_null_surface_is_exported() -> None:
    from pi_agent_ask.actors.form import NullSurface

    assert pi_agent_ask.NullSurface is NullSurface
    assert "NullSurface" in pi_agent_ask.__all__
