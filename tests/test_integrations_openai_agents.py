"""OpenAI Agents SDK end to end, no network: an offline ``Model`` asks in the background, keeps
working, gets the answer in its next model input, asks two more and waits for them.

The cases are in ``openai_agents_cases``, imported by the first of them that runs: the SDK
takes seconds to import, and every test worker collects this module where one runs it."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def cases() -> ModuleType:
    pytest.importorskip("agents")
    from tests import openai_agents_cases

    return openai_agents_cases


def test_an_openai_agent_asks_works_on_and_waits(cases: ModuleType, tmp_path: Path) -> None:
    cases.an_openai_agent_asks_works_on_and_waits(tmp_path)


def test_delivered_answers_keep_their_place_in_later_runs(
    cases: ModuleType, tmp_path: Path
) -> None:
    cases.delivered_answers_keep_their_place_in_later_runs(tmp_path)


def test_a_tool_error_is_the_tool_output(cases: ModuleType, tmp_path: Path) -> None:
    cases.a_tool_error_is_the_tool_output(tmp_path)


def test_images_become_input_images(cases: ModuleType) -> None:
    cases.images_become_input_images()
