"""An OpenAI Agents SDK agent that asks its person with pi-agent-ask (an offline model: no key).

    pip install 'pi-agent-ask[openai-agents]'
    python examples/openai_agents_agent.py             # forms open on this terminal
    python examples/openai_agents_agent.py --scripted  # headless, answered by script

The agent asks in the background, keeps working (``run_checks``), gets the answer in its next
model input (the run's ``call_model_input_filter``), asks two more questions and waits for them.
Then it is idle: one more question is answered while it waits for nothing, and the idle-wake
loop (``run_on_wakeups``) runs it again with that answer as the new input. With a real model,
drop ``model=OfflineModel()`` (the SDK's default OpenAI model) and set ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
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
import pi_agent_ask.aio
from pi_agent_ask.integrations.openai_agents import (
    BoundaryFilter,
    ask_tools,
    message_to_input_item,
    run_turn,
)


def _line(*parts: object) -> str:
    return " ".join(str(part) for part in parts)


def question(qid: str, prompt: str, *options: str) -> dict[str, Any]:
    return {"id": qid, "prompt": prompt, "options": [{"value": option} for option in options]}


def call(name: str, arguments: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", name=name, arguments=json.dumps(arguments), call_id=call_id
    )


def say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


class OfflineModel(Model):
    """What a model might do, step by step; it never leaves this process."""

    def __init__(self) -> None:
        self.step = 0

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.step += 1
        output: list[Any]
        if self.step == 1:
            ask = {
                "background": True,
                "questions": [question("runner", "Which test runner?", "pytest", "unittest")],
            }
            output = [call("ask_user", ask, "call-1")]
        elif self.step == 2:
            output = [call("run_checks", {}, "call-2")]
        elif self.step == 3:
            tone = {
                "background": True,
                "questions": [question("tone", "Docs tone?", "formal", "casual")],
            }
            scope = {
                "background": True,
                "questions": [question("scope", "Cover?", "essentials", "all")],
            }
            output = [call("ask_user", tone, "call-3"), call("ask_user", scope, "call-4")]
        elif self.step == 4:
            output = [call("wait_for_answers", {}, "call-5")]
        elif self.step == 5:
            later = {
                "background": True,
                "questions": [question("release", "Release today?", "yes", "no")],
            }
            output = [call("ask_user", later, "call-6")]
        else:
            last = input[-1] if isinstance(input, list) and input else {}
            text = last.get("content") if isinstance(last, dict) else None
            output = [say(f"Noted: {str(text).splitlines()[-1]}" if text else "Done.")]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("offline model: Runner.run only")


def answer(rt: pi_agent_ask.aio.Runtime, started: dict[str, Any]) -> None:
    """Answer a form with the first option of each question, as a person could."""
    answers = {q["id"]: {"values": [q["options"][0]["value"]]} for q in started["questions"]}
    rt.events.emit(
        "pi-agent-ask:submit",
        {
            "version": 1,
            "requestId": f"script-{started['flowId']}",
            "flowId": started["flowId"],
            "response": {"kind": "answer", "answers": answers},
        },
    )


def answer_every_form(rt: pi_agent_ask.aio.Runtime, later: asyncio.Queue[dict[str, Any]]) -> None:
    """The headless person: answers each form as it opens, but the release question, which
    goes to ``later`` (it is answered once the agent is idle)."""

    def on_started(started: dict[str, Any]) -> None:
        if started["questions"][0]["id"] == "release":
            later.put_nowait(started)
        else:
            answer(rt, started)

    rt.events.on("pi-agent-ask:started", on_started)


async def main(scripted: bool, session: Path, report: list[str]) -> None:
    surface = pi_agent_ask.NullSurface() if scripted else None
    offline = RunConfig(tracing_disabled=True)  # no trace upload either
    async with pi_agent_ask.aio.open_runtime(session=session, surface=surface) as rt:
        later: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        if scripted:
            answer_every_form(rt, later)

        @function_tool
        async def run_checks() -> str:
            """Run the project's checks."""
            await asyncio.sleep(0.5)
            return "all checks passed"

        agent = Agent(name="helper", model=OfflineModel(), tools=[*ask_tools(rt), run_checks])
        boundary = BoundaryFilter(rt)  # one per conversation
        result = await run_turn(
            agent, rt, "Set up the test suite.", boundary=boundary, run_config=offline
        )
        report.append(_line("first run:", result.final_output))
        history = result.to_input_list()

        async def run_again(message: dict[str, Any]) -> None:
            nonlocal history
            history = [*history, message_to_input_item(message)]
            woken = await run_turn(agent, rt, history, boundary=boundary, run_config=offline)
            history = woken.to_input_list()
            report.append(_line("woken run:", woken.final_output))
            if "Noted" in str(woken.final_output):
                done.set()

        # A question asked at the end of the first run is answered while the agent is idle:
        # the answer wakes it, and it runs again with the answer as its input.
        done = asyncio.Event()
        waking = asyncio.create_task(pi_agent_ask.aio.run_on_wakeups(rt, run_again))
        if scripted:
            answer(rt, await later.get())
        await done.wait()
        waking.cancel()
        report.append(_line("answers delivered by the filter:", len(boundary.delivered)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scripted", action="store_true", help="answer headless, by script")
    parser.add_argument("--session", type=Path, help="session file (default: a temporary one)")
    args = parser.parse_args()
    # Printed once the runtime is closed: while it is open, its forms own the terminal.
    report: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(args.scripted, args.session or Path(tmp) / "session.pas", report))
    print("\n".join(report))
