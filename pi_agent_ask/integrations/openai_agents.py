"""OpenAI Agents SDK: the tools as function tools; background answers in every model input.

```python
from agents import Agent
import pi_agent_ask.aio
from pi_agent_ask.integrations.openai_agents import BoundaryFilter, ask_tools, run_turn

async with pi_agent_ask.aio.open_runtime(session="s.pas") as rt:
    agent = Agent(name="helper", model=model, tools=ask_tools(rt))
    boundary = BoundaryFilter(rt)  # one per conversation
    result = await run_turn(agent, rt, "Set up the test suite.", boundary=boundary)
```

- :func:`ask_tools` makes one ``FunctionTool`` per tool the runtime exposes, with the contract's
  JSON Schema (``strict_json_schema=False``: the schemas have optional properties and ignore
  unknown keys) and ``output_json_schema``; a call runs through ``rt.call_tool`` with the SDK's
  call id, and its output is the JSON text of the result's ``structuredContent`` (a tool error
  is its text). A tool is enabled while the runtime exposes it (the question mode can hide
  ``wait_for_answers``).
- :class:`BoundaryFilter` is the run's ``call_model_input_filter``: before each model call it
  marks the agent as working and appends the background answers of ``rt.turn_boundary()`` to
  the input as user messages, each exactly once. The SDK rebuilds the input from the run's
  items before every call and never keeps what a filter added, so the filter keeps what it
  delivered and puts it back at the same place in every later call, also in later runs that
  continue from ``result.to_input_list()`` (use one filter per conversation; ``delivered`` has
  the items for your own history).
- :func:`run_turn` is one ``Runner.run`` between ``agent_started`` and ``agent_settled``, with
  the filter installed; with ``pi_agent_ask.aio.run_on_wakeups`` it is the idle-wake loop.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import attrs

from pi_agent_ask.integrations._results import error_text, message_parts, require, structured

require("agents", "openai-agents", "The OpenAI Agents SDK")

from agents import FunctionTool, RunConfig, Runner  # noqa: E402
from agents.run_config import CallModelData, ModelInputData  # noqa: E402
from agents.tool_context import ToolContext  # noqa: E402

__all__ = ["BoundaryFilter", "ask_tools", "message_to_input_item", "run_turn"]


def _bare(schema: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in schema.items() if key != "$schema"}


def ask_tools(runtime: Any) -> list[FunctionTool]:
    """Function tools for the tools an asyncio runtime (``pi_agent_ask.aio``) exposes now.

    Build them again after ``set_question_mode``: ``ask_user``'s schema depends on the mode."""
    return [_function_tool(runtime, tool) for tool in runtime.tool_definitions()]


def _function_tool(runtime: Any, tool: dict[str, Any]) -> FunctionTool:
    name = tool["name"]

    async def invoke(ctx: ToolContext[Any], input_json: str) -> str:
        try:
            arguments = json.loads(input_json) if input_json.strip() else {}
        except json.JSONDecodeError as error:
            return f"Validation failed for tool {json.dumps(name)}: arguments are not JSON: {error}"
        result = await runtime.call_tool(name, arguments, tool_call_id=ctx.tool_call_id)
        failure = error_text(result)
        if failure is not None:
            return failure
        output = structured(result)
        return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)

    def exposed(_ctx: Any, _agent: Any) -> bool:
        return any(t["name"] == name for t in runtime.tool_definitions())

    return FunctionTool(
        name=name,
        description=tool["description"],
        params_json_schema=_bare(tool["inputSchema"]),
        on_invoke_tool=invoke,
        strict_json_schema=False,
        is_enabled=exposed,
    )


def message_to_input_item(message: dict[str, Any]) -> dict[str, Any]:
    """A boundary or wake message as a Responses input item (a user message)."""
    parts = message_parts(message)
    if len(parts) == 1 and parts[0][0] == "text":
        return {"role": "user", "content": parts[0][1]}
    content: list[dict[str, Any]] = []
    for part in parts:
        if part[0] == "text":
            content.append({"type": "input_text", "text": part[1]})
        else:
            url = f"data:{part[1]};base64,{part[2]}"
            content.append({"type": "input_image", "image_url": url, "detail": "auto"})
    return {"role": "user", "content": content}


@attrs.define(eq=False)
class BoundaryFilter:
    """``RunConfig.call_model_input_filter`` delivering background answers (see the module)."""

    runtime: Any
    _deliveries: list[tuple[int, list[dict[str, Any]]]] = attrs.field(factory=list)
    """(position in the SDK's input, the items delivered there), in delivery order."""

    @property
    def delivered(self) -> list[dict[str, Any]]:
        """Every input item this filter delivered, in order."""
        return [item for _position, items in self._deliveries for item in items]

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        self.runtime.agent_started()  # a model call: the agent is working
        items = list(data.model_data.input)
        fresh = [message_to_input_item(m) for m in await self.runtime.turn_boundary()]
        if fresh:
            self._deliveries.append((len(items), fresh))
        return ModelInputData(
            input=self._with_deliveries(items), instructions=data.model_data.instructions
        )

    def _with_deliveries(self, items: list[Any]) -> list[Any]:
        out: list[Any] = []
        taken = 0
        for position, delivered in self._deliveries:
            cut = min(position, len(items))
            out.extend(items[taken:cut])
            taken = max(taken, cut)
            out.extend(delivered)
        out.extend(items[taken:])
        return out


async def run_turn(
    agent: Any,
    runtime: Any,
    input: Any,
    *,
    boundary: BoundaryFilter,
    run_config: RunConfig | None = None,
    **kwargs: Any,
) -> Any:
    """``await Runner.run(agent, input, ...)`` as one agent turn: the runtime knows the agent is
    working until it returns, then idle; ``boundary`` is installed as the input filter."""
    config = run_config if run_config is not None else RunConfig()
    config = dataclasses.replace(config, call_model_input_filter=boundary)
    runtime.agent_started()
    try:
        return await Runner.run(agent, input, run_config=config, **kwargs)
    finally:
        runtime.agent_settled()
