"""What the framework integrations share: tool results and boundary messages as plain data."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Literal


def require(module: str, extra: str, framework: str) -> ModuleType:
    """Import ``module`` or raise an ``ImportError`` telling which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"{framework} is not installed; install it with: pip install 'pi-agent-ask[{extra}]'"
        ) from error


def error_text(result: dict[str, Any]) -> str | None:
    """The text of a tool error result (``isError``), else ``None``."""
    if not result.get("isError"):
        return None
    return result_text(result) or "Tool call failed."


def result_text(result: dict[str, Any]) -> str:
    """The text blocks of a tool result's ``content``, joined."""
    return "\n\n".join(
        block["text"]
        for block in result.get("content", ())
        if isinstance(block, dict) and block.get("type") == "text"
    )


def structured(result: dict[str, Any]) -> Any:
    """What a tool returns to the model: its ``structuredContent`` (the contract's output
    schema), or its text when it has none."""
    if "structuredContent" in result:
        return result["structuredContent"]
    return result_text(result)


MessagePart = tuple[Literal["text"], str] | tuple[Literal["image"], str, str]
"""One part of a message: ``("text", text)`` or ``("image", mime_type, base64_data)``."""


def message_parts(message: dict[str, Any]) -> list[MessagePart]:
    """A boundary or wake message's content as ``("text", text)`` and
    ``("image", mime_type, base64_data)`` parts, in order."""
    content = message.get("content")
    if isinstance(content, str):
        return [("text", content)]
    parts: list[MessagePart] = []
    for block in content or ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(("text", str(block.get("text", ""))))
        elif block.get("type") == "image":
            parts.append(("image", str(block.get("mimeType")), str(block.get("data"))))
    return parts
