"""pydantic-ai end to end, no network: a ``FunctionModel`` agent asks in the background, keeps
working, gets the answer at a turn boundary, asks two more and waits for them.

The cases are in ``pydantic_ai_cases``, imported by the first of them that runs: pydantic-ai
takes seconds to import, and every test worker collects this module where one runs it."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest


@pytest.fixture(scope="module")
def cases() -> ModuleType:
    pytest.importorskip("pydantic_ai")
    from tests import pydantic_ai_cases

    return pydantic_ai_cases


def test_a_pydantic_ai_agent_asks_works_on_and_waits(cases: ModuleType, tmp_path: Path) -> None:
    cases.a_pydantic_ai_agent_asks_works_on_and_waits(tmp_path)


def test_tool_errors_reach_the_model_without_a_retry(cases: ModuleType, tmp_path: Path) -> None:
    cases.tool_errors_reach_the_model_without_a_retry(tmp_path)


def test_images_in_a_boundary_message_become_binary_content(cases: ModuleType) -> None:
    cases.images_in_a_boundary_message_become_binary_content()


def test_an_answer_given_while_idle_runs_the_agent_again(cases: ModuleType, tmp_path: Path) -> None:
    cases.an_answer_given_while_idle_runs_the_agent_again(tmp_path)
