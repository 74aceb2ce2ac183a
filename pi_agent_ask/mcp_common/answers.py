"""Background answers as MCP clients see them (no SDK import: the hook command uses this)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def answer_entry(message: Mapping[str, Any]) -> dict[str, Any]:
    """One ``backgroundAnswers`` entry from a turn-boundary message."""
    content = message.get("content")
    if isinstance(content, str):
        text = content
    else:
        text = "\n".join(
            block.get("text", "")
            for block in content or ()
            if isinstance(block, Mapping) and block.get("type") == "text"
        )
    return {
        "customType": message.get("customType"),
        "text": text,
        "details": dict(message.get("details") or {}),
    }
