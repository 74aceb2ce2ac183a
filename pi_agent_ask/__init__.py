"""pi-agent-ask: structured questions from an AI agent to its human, with structured answers.

The public surface is described in ``docs/`` (and bound by ``API.md``): ``tool_definitions``,
``validate_ask_params``, ``open_runtime`` and ``NullSurface``; ``pi_agent_ask.aio`` is the
runtime for asyncio programs, ``pi_agent_ask.integrations`` the framework tools.

Names are imported on first use, so ``import pi_agent_ask.persistence.session_file`` (or the
``validate`` command) does not pay for the Trio runtime and the terminal UI.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pi_agent_ask.actors.form import NullSurface
    from pi_agent_ask.actors.runtime import Runtime
    from pi_agent_ask.events import EventBus
    from pi_agent_ask.form.types import AskParams, Issue, Option, Question, Validation
    from pi_agent_ask.form.validate import validate_ask_params
    from pi_agent_ask.ui.runtime import open_runtime

_LAZY = {
    "Runtime": "pi_agent_ask.actors.runtime",
    "open_runtime": "pi_agent_ask.ui.runtime",
    "EventBus": "pi_agent_ask.events",
    "NullSurface": "pi_agent_ask.actors.form",
    "AskParams": "pi_agent_ask.form.types",
    "Issue": "pi_agent_ask.form.types",
    "Option": "pi_agent_ask.form.types",
    "Question": "pi_agent_ask.form.types",
    "Validation": "pi_agent_ask.form.types",
    "validate_ask_params": "pi_agent_ask.form.validate",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pi_agent_ask' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def tool_definitions(settings: Any = None, format: str = "generic") -> list[dict[str, Any]]:
    """The tool definitions the current settings expose, in the shape ``format`` names.

    ``settings`` is a settings file path, a loaded ``Config`` / ``LoadedSettings``, or ``None``
    for the default settings file (``$PI_CODING_AGENT_DIR/extensions/pi-agent-ask.json``).
    ``format`` is ``"generic"``, ``"anthropic"``, ``"openai"``, ``"openai-chat"`` or ``"mcp"``
    (``docs/tools.md``); another value raises ``ValueError`` before the settings are read.
    """
    from pi_agent_ask.form.tools import FORMATS, in_format, tool_definitions_for
    from pi_agent_ask.persistence.settings import (
        Config,
        LoadedSettings,
        load_settings,
        settings_path,
    )

    if format not in FORMATS:
        in_format([], format)  # raises the ValueError naming the formats
    if isinstance(settings, LoadedSettings):
        config = settings.config
    elif isinstance(settings, Config):
        config = settings
    else:
        path = Path(settings) if settings is not None else settings_path(os.environ)
        config = load_settings(path, project_dir=Path.cwd()).config
    tools = tool_definitions_for(
        question_mode=config.behaviour.question_mode,
        history_tools=config.behaviour.history_tools,
    )
    return in_format(tools, format)


__all__ = [
    "AskParams",
    "EventBus",
    "Issue",
    "NullSurface",
    "Option",
    "Question",
    "Runtime",
    "Validation",
    "open_runtime",
    "tool_definitions",
    "validate_ask_params",
]
