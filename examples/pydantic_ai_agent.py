"""A pydantic-ai agent that asks its person with pi-agent-ask (an offline model: no API key).

    pip install 'pi-agent-ask[pydantic-ai]'
    python examples/pydantic_ai_agent.py             # forms open on this terminal
    python examples/pydantic_ai_agent.py --scripted  # headless, answered by script

The agent asks in the background, keeps working (``run_checks``), gets the answer at the next
model request (the history processor), asks two more questions and waits for them. With a real
model, replace ``FunctionModel(scripted_model)`` with e.g. ``"openai:gpt-5"``; nothing else
changes. After the run, the idle-wake loop (``run_on_wakeups``) would run the agent again for
answers that arrive while it is idle; here the run ends once everything is answered.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import pi_agent_ask
import pi_agent_ask.aio
from pi_agent_ask.integrations.pydantic_ai import AskToolset, boundary_capability, run_turn


def _line(*parts: object) -> str:
    return " ".join(str(part) for part in parts)


def question(qid: str, prompt: str, *options: str) -> dict[str, Any]:
    return {"id": qid, "prompt": prompt, "options": [{"value": option} for option in options]}


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """What a model might do, step by step (counted by its earlier responses)."""
    step = sum(isinstance(message, ModelResponse) for message in messages)
    if step == 0:
        ask = {
            "background": True,
            "questions": [question("runner", "Which test runner?", "pytest", "unittest")],
        }
        return ModelResponse(parts=[ToolCallPart("ask_user", ask, "call-1")])
    if step == 1:
        return ModelResponse(parts=[ToolCallPart("run_checks", {}, "call-2")])
    if step == 2:
        tone = {
            "background": True,
            "questions": [question("tone", "Docs tone?", "formal", "casual")],
        }
        scope = {
            "background": True,
            "questions": [question("scope", "Cover?", "essentials", "all")],
        }
        return ModelResponse(
            parts=[
                ToolCallPart("ask_user", tone, "call-3"),
                ToolCallPart("ask_user", scope, "call-4"),
            ]
        )
    if step == 3:
        return ModelResponse(parts=[ToolCallPart("wait_for_answers", {}, "call-5")])
    return ModelResponse(parts=[TextPart("Set up with the answers given.")])


def answer_every_form(rt: pi_agent_ask.aio.Runtime) -> None:
    """The headless person: answers each form with its first option, as it opens."""

    def on_started(started: dict[str, Any]) -> None:
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

    rt.events.on("pi-agent-ask:started", on_started)


async def main(scripted: bool, session: Path, report: list[str]) -> None:
    surface = pi_agent_ask.NullSurface() if scripted else None
    async with pi_agent_ask.aio.open_runtime(session=session, surface=surface) as rt:
        if scripted:
            answer_every_form(rt)
        agent = Agent(
            FunctionModel(scripted_model),
            toolsets=[AskToolset(rt)],
            capabilities=[boundary_capability(rt)],
        )

        @agent.tool_plain
        async def run_checks() -> str:
            """Run the project's checks."""
            await asyncio.sleep(0.5)
            return "all checks passed"

        result = await run_turn(agent, rt, "Set up the test suite.")
        for message in result.all_messages():
            for part in getattr(message, "parts", ()):
                shown = str(getattr(part, "content", getattr(part, "args", "")))
                report.append(_line(f"{type(part).__name__}: {shown.splitlines()[-1][:100]}"))
        report.append(_line("output:", result.output))


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
