"""pi-agent-ask: structured questions from an AI agent to its human, with structured answers."""

from __future__ import annotations

from pi_agent_ask.form.types import AskParams, Issue, Option, Question, Validation

__all__ = [
    "AskParams",
    "Issue",
    "Option",
    "Question",
    "Validation",
]
