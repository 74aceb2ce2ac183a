"""OpenAI Agents SDK end to end, no network: an offline ``Model`` asks in the background, keeps
working, gets the answer in its next model input, asks two more and waits for them.

The cases of ``test_integrations_openai_agents`` (which see): a module of its own, imported
only when one of them runs, because the SDK takes seconds to import and every test worker
collects every test module."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents import Agent, Model, ModelResponse, RunConfig, function_tool
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import pi_agent_ask
import pi_agent_ask.aio as aio
from pi_agent_ask.integrations.openai_agents import (
    BoundaryFilter,
    ask_tools,
    message_to_input_item,
    run_turn,
)

from .aio_support import Flows, run, settings_file, settle
from .runtime_support import payload

Decide = Callable[[int, list[Any], list[Any]], list[Any]]


class OfflineModel(Model):
    """A model that answers with ``decide(step, input, tools)``: no network, no keys."""

    def __init__(self, decide: Decide) -> None:
        self.decide = decide
        self.inputs: list[list[Any]] = []

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        *,
        previous_response_id: Any = None,
        conversation_id: Any = None,
        prompt: Any = None,
    ) -> ModelResponse:
        items = [input] if isinstance(input, str) else list(input)
        self.inputs.append(items)
        output = self.decide(len(self.inputs) - 1, items, list(tools))
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("offline model: Runner.run only")


def call(name: str, arguments: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", name=name, arguments=json.dumps(arguments), call_id=call_id
    )


def say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg-1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def outputs(items: list[Any]) -> dict[str, Any]:
    return {
        item["call_id"]: item["output"]
        for item in items
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def user_texts(items: list[Any]) -> list[str]:
    return [
        item["content"]
        for item in items
        if isinstance(item, dict)
        and item.get("role") == "user"
        and isinstance(item["content"], str)
    ]


OFFLINE = RunConfig(tracing_disabled=True)


def an_openai_agent_asks_works_on_and_waits(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    async def main() -> Any:
        # An in-memory session: no file I/O threads, so ``settle`` is exact.
        async with aio.open_runtime(
            settings=settings_file(tmp_path), surface=pi_agent_ask.NullSurface()
        ) as rt:
            flows = Flows(rt.events)
            first_completed = asyncio.Event()
            rt.events.on(pi_agent_ask.events.COMPLETED, lambda _p: first_completed.set())

            @function_tool
            async def run_checks() -> str:
                """Run the project's checks."""
                started = await flows.next()  # the person answers while the agent works
                flows.answer(started["flowId"], browser=["browser1"])
                await first_completed.wait()
                return "checks passed"

            def decide(step: int, items: list[Any], tools: list[Any]) -> list[Any]:
                seen.setdefault("tools", sorted(tool.name for tool in tools))
                if step == 0:
                    return [call("ask_user", payload("browser", background=True), "call-ask-1")]
                if step == 1:
                    seen["receipt"] = json.loads(outputs(items)["call-ask-1"])
                    return [call("run_checks", {}, "call-work")]
                if step == 2:
                    seen["boundary"] = user_texts(items)
                    return [
                        call("ask_user", payload("tone", background=True), "call-2"),
                        call("ask_user", payload("scope", background=True), "call-3"),
                    ]
                if step == 3:
                    return [call("wait_for_answers", {}, "call-w")]
                seen["wait"] = json.loads(outputs(items)["call-w"])
                seen["final_input"] = user_texts(items)
                return [say("All set.")]

            model = OfflineModel(decide)
            tools = ask_tools(rt)
            wait_tool = next(tool for tool in tools if tool.name == "wait_for_answers")
            plain_invoke = wait_tool.on_invoke_tool

            async def person_answers_during_the_wait(ctx: Any, arguments: str) -> Any:
                waiting = asyncio.create_task(plain_invoke(ctx, arguments))
                await settle(rt)
                assert (await rt.statistics()).waiting
                for _ in range(2):
                    started = await flows.next()
                    answers = {q["id"]: [f"{q['id']}1"] for q in started["questions"]}
                    flows.answer(started["flowId"], **answers)
                return await waiting

            wait_tool.on_invoke_tool = person_answers_during_the_wait
            agent = Agent(name="helper", model=model, tools=[*tools, run_checks])
            boundary = BoundaryFilter(rt)
            result = await run_turn(
                agent, rt, "Set up the test suite.", boundary=boundary, run_config=OFFLINE
            )
            assert await rt.turn_boundary() == []
            assert (await rt.statistics()).pending == ()
            return result.final_output, boundary.delivered

    output, delivered = run(main)
    assert output == "All set."
    assert seen["tools"] == ["ask_user", "run_checks", "wait_for_answers"]
    assert seen["receipt"]["status"] == "queued"
    [answer] = seen["boundary"][1:]
    assert seen["boundary"][0] == "Set up the test suite."
    assert "Question browser?" in answer and "Option browser1" in answer
    assert delivered == [{"role": "user", "content": answer}]
    # Kept in every later model input, once, though the SDK rebuilds the input each call.
    assert seen["final_input"] == ["Set up the test suite.", answer]
    wait = seen["wait"]
    assert wait["status"] == "complete"
    answered = {
        qid: entry["result"]["answers"][qid]["values"]
        for entry in wait["results"]
        for qid in entry["result"]["answers"]
    }
    assert answered == {"tone": ["tone1"], "scope": ["scope1"]}


def delivered_answers_keep_their_place_in_later_runs(tmp_path: Path) -> None:
    async def main() -> tuple[list[list[Any]], list[dict[str, Any]]]:
        async with aio.open_runtime(
            settings=settings_file(tmp_path), surface=pi_agent_ask.NullSurface()
        ) as rt:
            flows = Flows(rt.events)
            completed = asyncio.Event()
            rt.events.on(pi_agent_ask.events.COMPLETED, lambda _p: completed.set())

            @function_tool
            async def run_checks() -> str:
                """Run the project's checks."""
                await flows.answer_next(a=["a1"])
                await completed.wait()
                return "checks passed"

            def decide(step: int, items: list[Any], tools: list[Any]) -> list[Any]:
                if step == 0:
                    return [call("ask_user", payload("a", background=True), "c1")]
                if step == 1:
                    return [call("run_checks", {}, "c2")]
                if step == 4:  # in the third run: a question answered while idle
                    return [call("ask_user", payload("b", background=True), "c3")]
                return [say(f"reply {step}")]

            model = OfflineModel(decide)
            agent = Agent(name="helper", model=model, tools=[*ask_tools(rt), run_checks])
            boundary = BoundaryFilter(rt)
            first = await run_turn(agent, rt, "one", boundary=boundary, run_config=OFFLINE)
            second_input = [*first.to_input_list(), {"role": "user", "content": "two"}]
            second = await run_turn(agent, rt, second_input, boundary=boundary, run_config=OFFLINE)
            third_input = [*second.to_input_list(), {"role": "user", "content": "three"}]
            third = await run_turn(agent, rt, third_input, boundary=boundary, run_config=OFFLINE)
            await flows.answer_next(b=["b2"])
            wake = await rt.wakeups.receive()  # idle: the answer wakes the agent
            fourth_input = [*third.to_input_list(), message_to_input_item(wake)]
            await run_turn(agent, rt, fourth_input, boundary=boundary, run_config=OFFLINE)
            return model.inputs, boundary.delivered

    inputs, delivered = run(main)
    [answer] = [item["content"] for item in delivered]
    assert "Question a?" in answer
    for later in inputs[2:]:
        texts = user_texts(later)
        assert texts[:2] == ["one", answer]  # at its place, after the first prompt, once
        assert texts.count(answer) == 1
    last = user_texts(inputs[-1])
    assert last[2:4] == ["two", "three"] and "Question b?" in last[-1]
    assert len(last) == 5


def a_tool_error_is_the_tool_output(tmp_path: Path) -> None:
    async def main() -> str:
        async with aio.open_runtime(
            settings=settings_file(tmp_path), surface=pi_agent_ask.NullSurface()
        ) as rt:

            def decide(step: int, items: list[Any], tools: list[Any]) -> list[Any]:
                if step == 0:
                    return [call("ask_user", {"questions": "none"}, "c1")]
                return [say(outputs(items)["c1"])]

            agent = Agent(name="helper", model=OfflineModel(decide), tools=ask_tools(rt))
            result = await run_turn(
                agent, rt, "go", boundary=BoundaryFilter(rt), run_config=OFFLINE
            )
            return str(result.final_output)

    assert run(main).startswith('Validation failed for tool "ask_user"')


def images_become_input_images() -> None:
    item = message_to_input_item(
        {
            "content": [
                {"type": "text", "text": "answer"},
                {"type": "image", "mimeType": "image/png", "data": "aGVsbG8="},
            ]
        }
    )
    assert item == {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "answer"},
            {
                "type": "input_image",
                "image_url": "data:image/png;base64,aGVsbG8=",
                "detail": "auto",
            },
        ],
    }
