"""pydantic-ai end to end, no network: a ``FunctionModel`` agent asks in the background, keeps
working, gets the answer at a turn boundary, asks two more and waits for them.

The cases of ``test_integrations_pydantic_ai`` (which see): a module of its own, imported only
when one of them runs, because pydantic-ai takes seconds to import and every test worker
collects every test module."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

import pi_agent_ask
import pi_agent_ask.aio as aio
from pi_agent_ask.integrations.pydantic_ai import (
    AskToolset,
    boundary_capability,
    message_to_prompt_part,
    run_turn,
)

from .aio_support import Flows, run, settings_file, settle
from .runtime_support import payload


def prompts(message: ModelMessage) -> list[str]:
    if not isinstance(message, ModelRequest):
        return []
    return [
        part.content
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]


def returns(message: ModelMessage) -> list[ToolReturnPart]:
    if not isinstance(message, ModelRequest):
        return []
    return [part for part in message.parts if isinstance(part, ToolReturnPart)]


class PersonAnswersDuringTheWait(AskToolset):
    """The toolset, with the person answering every open form once ``wait_for_answers`` is
    waiting (so both answers are the wait's, none goes to a boundary)."""

    def __init__(self, runtime: Any, flows: Flows) -> None:
        super().__init__(runtime)
        self.flows = flows

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any, tool: Any) -> Any:
        if name != "wait_for_answers":
            return await super().call_tool(name, tool_args, ctx, tool)
        call = asyncio.create_task(super().call_tool(name, tool_args, ctx, tool))
        await settle(self.runtime)
        assert (await self.runtime.statistics()).waiting
        for _ in range(2):
            started = await self.flows.next()
            self.flows.answer(
                started["flowId"], **{q["id"]: [f"{q['id']}1"] for q in started["questions"]}
            )
        return await call


def a_pydantic_ai_agent_asks_works_on_and_waits(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    async def main() -> Any:
        # An in-memory session: no file I/O threads, so ``settle`` is exact.
        async with aio.open_runtime(
            settings=settings_file(tmp_path), surface=pi_agent_ask.NullSurface()
        ) as rt:
            flows = Flows(rt.events)
            first_completed = asyncio.Event()
            rt.events.on(pi_agent_ask.events.COMPLETED, lambda _p: first_completed.set())

            def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
                step = sum(isinstance(m, ModelResponse) for m in messages)
                seen.setdefault("tools", [t.name for t in info.function_tools])
                if step == 0:
                    return ModelResponse(
                        parts=[
                            ToolCallPart(
                                "ask_user", payload("browser", background=True), "call-ask-1"
                            )
                        ]
                    )
                if step == 1:
                    [receipt] = returns(messages[-1])
                    seen["receipt"] = receipt.content
                    return ModelResponse(parts=[ToolCallPart("run_checks", {}, "call-work")])
                if step == 2:
                    # The boundary before this request delivered the answer, after the work.
                    seen["boundary"] = prompts(messages[-1])
                    return ModelResponse(
                        parts=[
                            ToolCallPart("ask_user", payload("tone", background=True), "call-2"),
                            ToolCallPart("ask_user", payload("scope", background=True), "call-3"),
                        ]
                    )
                if step == 3:
                    return ModelResponse(parts=[ToolCallPart("wait_for_answers", {}, "call-w")])
                [waited] = returns(messages[-1])
                seen["wait"] = waited.content
                return ModelResponse(parts=[TextPart("All set.")])

            agent = Agent(
                FunctionModel(model),
                toolsets=[PersonAnswersDuringTheWait(rt, flows)],
                capabilities=[boundary_capability(rt)],
            )

            @agent.tool_plain
            async def run_checks() -> str:
                """Run the project's checks."""
                # The person answers the first form while the agent works.
                started = await flows.next()
                flows.answer(started["flowId"], browser=["browser1"])
                await first_completed.wait()
                return "checks passed"

            result = await run_turn(agent, rt, "Set up the test suite.")
            history = result.all_messages()
            stats = await rt.statistics()
            assert stats.pending == () and not stats.waiting
            assert await rt.turn_boundary() == []  # everything was delivered, once
            return result.output, history

    output, history = run(main)
    assert output == "All set."
    assert sorted(seen["tools"]) == ["ask_user", "run_checks", "wait_for_answers"]
    assert seen["receipt"]["status"] == "queued"
    [delivered] = seen["boundary"]
    assert "Question browser?" in delivered and "Option browser1" in delivered
    wait = seen["wait"]
    assert wait["status"] == "complete"
    answered = {
        qid: entry["result"]["answers"][qid]["values"]
        for entry in wait["results"]
        for qid in entry["result"]["answers"]
    }
    assert answered == {"tone": ["tone1"], "scope": ["scope1"]}
    # The delivered answer stays in the conversation, once.
    texts = [text for message in history for text in prompts(message)]
    assert texts.count(delivered) == 1
    assert texts.index(delivered) > texts.index("Set up the test suite.")


def tool_errors_reach_the_model_without_a_retry(tmp_path: Path) -> None:
    seen: list[Any] = []

    async def main() -> None:
        async with aio.open_runtime(
            settings=settings_file(tmp_path), surface=pi_agent_ask.NullSurface()
        ) as rt:

            def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
                if len(messages) == 1:
                    bad = {"questions": [{"id": "a", "prompt": "?", "type": "grid"}]}
                    return ModelResponse(parts=[ToolCallPart("ask_user", bad, "call-bad")])
                seen.extend(returns(messages[-1]))
                return ModelResponse(parts=[TextPart("ok")])

            agent = Agent(FunctionModel(model), toolsets=[AskToolset(rt)])
            await run_turn(agent, rt, "go")

    run(main)
    [failed] = seen
    assert failed.outcome == "failed"
    assert "Validation failed for tool" in str(failed.content)


def images_in_a_boundary_message_become_binary_content() -> None:
    part = message_to_prompt_part(
        {
            "content": [
                {"type": "text", "text": "answer"},
                {"type": "image", "mimeType": "image/png", "data": "aGVsbG8="},
            ]
        }
    )
    text, image = part.content
    assert text == "answer"
    assert image.data == b"hello" and image.media_type == "image/png"


def an_answer_given_while_idle_runs_the_agent_again(tmp_path: Path) -> None:
    """The idle-wake loop with pydantic-ai: the answer is the new prompt, the conversation
    goes on from the first run's messages."""

    async def main() -> list[list[str]]:
        async with aio.open_runtime(
            settings=settings_file(tmp_path), surface=pi_agent_ask.NullSurface()
        ) as rt:
            flows = Flows(rt.events)
            seen: list[list[str]] = []

            def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
                seen.append([text for message in messages for text in prompts(message)])
                if len(messages) == 1:
                    ask = payload("later", background=True)
                    return ModelResponse(parts=[ToolCallPart("ask_user", ask, "call-1")])
                return ModelResponse(parts=[TextPart(f"turn {len(seen)}")])

            agent = Agent(
                FunctionModel(model),
                toolsets=[AskToolset(rt)],
                capabilities=[boundary_capability(rt)],
            )
            first = await run_turn(agent, rt, "Start.")
            history = first.all_messages()
            woken = asyncio.Event()

            async def run_again(message: dict[str, Any]) -> None:
                nonlocal history
                again = await run_turn(agent, rt, aio.wake_text(message), message_history=history)
                history = again.all_messages()
                woken.set()

            waking = asyncio.create_task(aio.run_on_wakeups(rt, run_again))
            await flows.answer_next(later=["later2"])
            await woken.wait()
            waking.cancel()
            return seen

    seen = run(main)
    *_, last = seen
    assert last[0] == "Start." and "Option later2" in last[-1] and len(last) == 2
