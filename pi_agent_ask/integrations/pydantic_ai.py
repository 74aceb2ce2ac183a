"""pydantic-ai: the tools as a toolset, and background answers at every model request.

```python
from pydantic_ai import Agent
import pi_agent_ask.aio
from pi_agent_ask.integrations.pydantic_ai import AskToolset, boundary_capability, run_turn

async with pi_agent_ask.aio.open_runtime(session="s.pas") as rt:
    agent = Agent(model, toolsets=[AskToolset(rt)], capabilities=[boundary_capability(rt)])
    result = await run_turn(agent, rt, "Set up the test suite.")
```

- :class:`AskToolset` lists the tools the runtime exposes now (they follow the question mode),
  with the contract's JSON Schemas, and runs each call through ``rt.call_tool`` with
  pydantic-ai's tool call id. A tool returns its ``structuredContent`` (the contract's output
  schema); a tool error is a ``ToolFailed`` (the model sees the text, no retry budget is used).
  The runtime validates the arguments itself, so pydantic-ai passes them through unchanged.
- :func:`boundary_processor` is a history processor: before each model request it marks the
  agent as working and adds the background answers of ``rt.turn_boundary()`` to the end of
  the request, each exactly once. pydantic-ai keeps the processed history, so an answer stays
  in the conversation after it was delivered. :func:`boundary_capability` wraps it as the
  ``ProcessHistory`` capability an ``Agent`` takes.
- :func:`run_turn` is one agent run between ``agent_started`` and ``agent_settled``; with
  ``pi_agent_ask.aio.run_on_wakeups`` it is the idle-wake loop (``docs/frameworks.md``).
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

from pi_agent_ask.integrations._results import error_text, message_parts, require, structured

require("pydantic_ai", "pydantic-ai", "pydantic-ai")

from pydantic_ai.capabilities import ProcessHistory  # noqa: E402
from pydantic_ai.exceptions import ToolFailed  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    BinaryContent,
    ModelMessage,
    ModelRequest,
    UserContent,
    UserPromptPart,
)
from pydantic_ai.tools import RunContext, ToolDefinition  # noqa: E402
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool  # noqa: E402
from pydantic_core import SchemaValidator, core_schema  # noqa: E402

__all__ = [
    "AskToolset",
    "boundary_capability",
    "boundary_processor",
    "message_to_prompt_part",
    "run_turn",
]

_PASS_THROUGH = SchemaValidator(core_schema.dict_schema())
"""The runtime checks arguments against the schema itself, with the contract's error texts."""


class AskToolset(AbstractToolset[Any]):
    """The tools of an asyncio runtime (``pi_agent_ask.aio.Runtime``) as a pydantic-ai toolset."""

    def __init__(self, runtime: Any, *, id: str = "pi-agent-ask") -> None:
        self.runtime = runtime
        self._id = id

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools: dict[str, ToolsetTool[Any]] = {}
        for tool in self.runtime.tool_definitions():
            schema = {k: v for k, v in tool["inputSchema"].items() if k != "$schema"}
            definition = ToolDefinition(
                name=tool["name"],
                description=tool["description"],
                parameters_json_schema=schema,
                strict=False,  # optional properties and unknown keys: not strict-compatible
                metadata={"pi-agent-ask": tool["x-pi-agent-ask"]},
            )
            tools[tool["name"]] = ToolsetTool(
                toolset=self, tool_def=definition, max_retries=0, args_validator=_PASS_THROUGH
            )
        return tools

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        result = await self.runtime.call_tool(name, tool_args, tool_call_id=ctx.tool_call_id)
        failure = error_text(result)
        if failure is not None:
            raise ToolFailed(failure)
        return structured(result)


def message_to_prompt_part(message: dict[str, Any]) -> UserPromptPart:
    """A boundary or wake message as a user prompt part (its text, and its images)."""
    content: list[UserContent] = []
    for part in message_parts(message):
        if part[0] == "text":
            content.append(part[1])
        else:
            content.append(BinaryContent(data=base64.b64decode(part[2]), media_type=part[1]))
    if len(content) == 1 and isinstance(content[0], str):
        return UserPromptPart(content=content[0])
    return UserPromptPart(content=content)


def boundary_processor(runtime: Any) -> Any:
    """A history processor delivering background answers at each model request."""

    async def deliver_background_answers(messages: list[ModelMessage]) -> list[ModelMessage]:
        runtime.agent_started()  # a model request: the agent is working
        delivered = await runtime.turn_boundary()
        if not delivered:
            return messages
        parts = [message_to_prompt_part(message) for message in delivered]
        if messages and isinstance(messages[-1], ModelRequest):
            last = messages[-1]
            return [*messages[:-1], dataclasses.replace(last, parts=[*last.parts, *parts])]
        return [*messages, ModelRequest(parts=parts)]

    return deliver_background_answers


def boundary_capability(runtime: Any) -> ProcessHistory[Any]:
    """:func:`boundary_processor` as the capability an ``Agent(capabilities=[...])`` takes."""
    return ProcessHistory(boundary_processor(runtime))


async def run_turn(agent: Any, runtime: Any, user_prompt: Any = None, **kwargs: Any) -> Any:
    """``await agent.run(user_prompt, **kwargs)`` as one agent turn: the runtime knows the agent
    is working until it returns, then idle (so a later answer wakes it, ``rt.wakeups``)."""
    runtime.agent_started()
    try:
        return await agent.run(user_prompt, **kwargs)
    finally:
        runtime.agent_settled()
