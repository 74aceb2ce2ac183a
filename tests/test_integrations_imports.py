"""Without its framework, an integration module says which extra to install."""

from __future__ import annotations

import importlib
import sys

import pytest


@pytest.mark.parametrize(
    ("module", "framework", "extra"),
    [
        ("pi_agent_ask.integrations.pydantic_ai", "pydantic_ai", "pydantic-ai"),
        ("pi_agent_ask.integrations.openai_agents", "agents", "openai-agents"),
    ],
)
def test_a_missing_framework_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, module: str, framework: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, framework, None)  # what an absent package looks like
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ImportError, match=rf"pip install 'pi-agent-ask\[{extra}\]'"):
        importlib.import_module(module)


def test_the_asyncio_runtime_does_not_import_the_terminal_ui() -> None:
    """``import pi_agent_ask.aio`` must leave asyncio alone: the terminal UI imports
    trio-asyncio, whose import changes what later ``asyncio.run`` calls create."""
    import subprocess

    code = "import sys, pi_agent_ask.aio; print('trio_asyncio' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
