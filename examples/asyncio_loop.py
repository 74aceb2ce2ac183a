"""A hand-written asyncio agent loop on pi-agent-ask, with a scripted stand-in for the model.

Run it on your terminal (the forms open there), or headless with scripted answers:

    python examples/asyncio_loop.py
    python examples/asyncio_loop.py --scripted

The "model" asks one question in the background, keeps working, picks the answer up at the
next turn boundary, asks two more and waits for them. Replace ``ScriptedModel`` with your
model client; ``tools`` is what you would register with it (``format="openai"`` here; also
``"anthropic"``, ``"openai-chat"``, ``"mcp"``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import pi_agent_ask
import pi_agent_ask.aio


def _line(*parts: object) -> str:
    return " ".join(str(part) for part in parts)


def question(qid: str, prompt: str, *options: str) -> dict[str, Any]:
    return {
        "id": qid,
        "prompt": prompt,
        "options": [{"value": option} for option in options],
    }


class ScriptedModel:
    """Stands in for a model: each turn returns tool calls, or ``None`` when it is done."""

    def __init__(self) -> None:
        self.turn = 0
        self.context: list[str] = []

    def next_calls(self) -> list[tuple[str, dict[str, Any]]] | None:
        self.turn += 1
        if self.turn == 1:
            ask = {
                "background": True,
                "questions": [question("runner", "Which test runner?", "pytest", "unittest")],
            }
            return [("ask_user", ask)]
        if self.turn == 2:
            return [("run_checks", {})]  # keeps working while the person answers
        if self.turn == 3:
            tone = question("tone", "Which tone for the docs?", "formal", "casual")
            scope = question("scope", "How much to cover?", "essentials", "everything")
            return [
                ("ask_user", {"background": True, "questions": [tone]}),
                ("ask_user", {"background": True, "questions": [scope]}),
            ]
        if self.turn == 4:
            return [("wait_for_answers", {})]
        return None


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
        tools = rt.tool_definitions(format="openai")  # register these with your model
        report.append(_line("tools:", ", ".join(tool["name"] for tool in tools)))
        model = ScriptedModel()
        rt.agent_started()
        call_number = 0
        while (calls := model.next_calls()) is not None:
            for name, arguments in calls:
                call_number += 1
                if name == "run_checks":
                    await asyncio.sleep(0.5)  # the agent's own work
                    report.append(_line("run_checks: passed"))
                    continue
                result = await rt.call_tool(name, arguments, tool_call_id=f"call-{call_number}")
                report.append(
                    _line(f"{name} ->", json.dumps(result.get("structuredContent", result))[:200])
                )
            for message in await rt.turn_boundary():  # background answers, each once
                model.context.append(pi_agent_ask.aio.wake_text(message))
                report.append(
                    _line("boundary:", pi_agent_ask.aio.wake_text(message).splitlines()[-1])
                )
        rt.agent_settled()
        report.append(_line("done; answers picked up at boundaries:", len(model.context)))


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
