"""The package's public names (API.md) are there and behave as documented."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pi_agent_ask


def test_public_names_resolve() -> None:
    for name in pi_agent_ask.__all__:
        assert getattr(pi_agent_ask, name) is not None
    with pytest.raises(AttributeError):
        _ = pi_agent_ask.no_such_name  # type: ignore[attr-defined]


def test_validate_ask_params_reports_issues_with_paths() -> None:
    validation = pi_agent_ask.validate_ask_params({"questions": []})
    assert validation.ok is False and validation.params is None
    assert validation.issues == (
        pi_agent_ask.Issue("questions", "At least one question is required"),
    )
    ok = pi_agent_ask.validate_ask_params(
        {"questions": [{"id": "a", "prompt": "P?", "options": [{"value": "follow_up"}]}]}
    )
    assert ok.ok and ok.params is not None
    assert ok.params.questions[0].label == "Q1"
    assert ok.params.questions[0].options[0].label == "Follow up"


@pytest.mark.parametrize(
    ("behaviour", "names"),
    [
        ({}, ["ask_user", "wait_for_answers"]),
        ({"questionMode": "background-only"}, ["ask_user"]),
        (
            {"historyTools": True},
            [
                "ask_user",
                "wait_for_answers",
                "list_ask_history",
                "read_ask_history",
                "export_ask_history",
            ],
        ),
    ],
)
def test_tool_definitions_follow_the_settings(
    tmp_path: Path, behaviour: dict[str, object], names: list[str]
) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"schemaVersion": 6, "behaviour": behaviour}))
    tools = pi_agent_ask.tool_definitions(settings)
    assert [tool["name"] for tool in tools] == names
    ask = tools[0]
    assert ask["inputSchema"]["required"] == ["questions"]
    assert ("background" in ask["inputSchema"]["properties"]) is (
        behaviour.get("questionMode") != "background-only"
    )
    assert "outputSchema" in ask
