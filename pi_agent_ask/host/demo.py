"""The demo: a scripted agent that asks in the background and keeps working.

The story, in turns:

1. The agent researches, queues two background forms (deployment region, checks), keeps
   working; answers given during the turn arrive at its boundary.
2. Idle: the next answer wakes the agent, which plans with it, queues a third form and calls
   ``wait_for_answers`` to collect what is still outstanding, then reports.

Headless (``--headless``): no terminal; a scripted answerer plays the person through the
remote ``pi-agent-ask:submit`` events, choosing the recommended option (or the first) and
adding a note to the second form. The transcript is printed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from pi_agent_ask import events as ev
from pi_agent_ask.actors.form import NullSurface, Surface
from pi_agent_ask.form.result import BackgroundOutcome
from pi_agent_ask.form.transcript import line_text
from pi_agent_ask.host.local import Line, LocalHost
from pi_agent_ask.ui.runtime import open_runtime

REGION = {
    "title": "Deployment plan",
    "background": True,
    "questions": [
        {
            "id": "region",
            "label": "Region",
            "prompt": "Where should the service run first?",
            "options": [
                {
                    "value": "eu-west",
                    "label": "EU West",
                    "description": "Closest to most users",
                    "recommended": True,
                },
                {"value": "us-east", "label": "US East"},
                {"value": "ap-south", "label": "AP South"},
            ],
        }
    ],
}
CHECKS = {
    "title": "Release checks",
    "background": True,
    "questions": [
        {
            "id": "checks",
            "label": "Checks",
            "prompt": "Which checks must pass before the rollout?",
            "type": "multi",
            "context": "Unit tests take 4 minutes; the soak test takes 40.",
            "options": [
                {"value": "unit", "label": "Unit tests", "recommended": True},
                {"value": "soak", "label": "Soak test", "description": "Slow but catches leaks"},
                {"value": "canary", "label": "Canary"},
            ],
        }
    ],
}
WINDOW = {
    "title": "Rollout window",
    "background": True,
    "questions": [
        {
            "id": "window",
            "label": "Window",
            "prompt": "When may the rollout start?",
            "options": [
                {"value": "now", "label": "Right away"},
                {"value": "tonight", "label": "Tonight", "recommended": True},
                {"value": "monday", "label": "Monday morning"},
            ],
        }
    ],
}


async def scripted_agent(host: LocalHost, pace: float = 1.0) -> None:
    """The demo agent's turns."""

    async def research(h: LocalHost) -> None:
        h.say("● Planning the deployment of the billing service.", "accent")
        await h.work("reading the service manifest", 0.6 * pace)
        await h.call("ask_user", REGION)
        await h.work("estimating capacity while the question waits", 1.2 * pace)
        await h.call("ask_user", CHECKS)
        await h.work("drafting the rollout steps", 0.4 * pace)
        h.say("● Draft ready; waiting for the remaining answers.", "accent")

    await host.turn(research)
    if not _answered_all(host, 2):
        await host.next_wakeup()

    async def follow_up(h: LocalHost) -> None:
        h.say("● Got an answer; planning the window.", "accent")
        await h.call("ask_user", WINDOW)
        await h.work("writing the change request", 0.6 * pace)
        waited = await h.call("wait_for_answers", {})
        if waited.get("details", {}).get("status") == "deferred":
            # A deferred wait is not an answer: the questions stay queued; do not wait again.
            h.say(
                "● The questions were put aside; I will pick the answers up when they come.",
                "accent",
            )
            return
        h.say("● Done: every answer is in. Summary of what I received:", "accent")
        for outcome in received_outcomes(h.context):
            h.say("  " + outcome_summary(outcome), "muted")

    await host.turn(follow_up)


RESUMED_TEXT = (
    "● Resumed the session: {count} form(s) from the earlier run are still pending; "
    "the script is not run again."
)


async def resume_agent(host: LocalHost, pending: int) -> None:
    """A rerun on a session with forms still pending: wait for those answers instead of
    asking everything again on top of them."""
    host.say(RESUMED_TEXT.format(count=pending), "accent")

    async def collect(h: LocalHost) -> None:
        await h.call("wait_for_answers", {})
        h.say("● Summary of what I received:", "accent")
        for outcome in received_outcomes(h.context):
            h.say("  " + outcome_summary(outcome), "muted")

    await host.turn(collect)


def received_outcomes(context: list[Any]) -> list[BackgroundOutcome]:
    """Every finished request the agent was told about, once each, in the order it learnt of
    them: background-answer messages and the results a ``wait_for_answers`` returned."""
    seen: dict[str, BackgroundOutcome] = {}
    for item in context:
        if not isinstance(item, dict):
            continue
        details = item.get("details")
        if not isinstance(details, dict):
            continue
        found: list[Any] = []
        if item.get("customType") == "ask:background-answer":
            found = [details]
        elif isinstance(details.get("results"), list):
            found = details["results"]
        for data in found:
            try:
                outcome = BackgroundOutcome.from_json(data)
            except ValueError:
                continue
            seen.setdefault(outcome.request_id, outcome)
    return list(seen.values())


def outcome_summary(outcome: BackgroundOutcome) -> str:
    """One line: the form's title and each question's answer."""
    result = outcome.result
    if result is None:
        return f"{outcome.request_id}: failed ({outcome.error or 'no result'})"
    title = result.title or "Questions"
    if result.cancelled:
        return f"{title}: cancelled"
    parts = []
    for meta in result.questions:
        answer = result.answers.get(meta.id)
        if meta.id in result.skipped_question_ids:
            parts.append(f"{meta.label}: skipped")
        elif answer is None or not answer.labels:
            parts.append(f"{meta.label}: unanswered")
        else:
            parts.append(f"{meta.label}: {', '.join(answer.labels)}")
    return f"{title} · " + "; ".join(parts)


def _answered_all(host: LocalHost, count: int) -> bool:
    delivered = [i for i in host.context if isinstance(i, dict) and "customType" in i]
    return len(delivered) >= count


def scripted_answerer(runtime_events: ev.EventBus, nursery: trio.Nursery, pace: float) -> None:
    """Play the person: answer each form shortly after it opens (headless demo and tests)."""

    async def answer(started: dict[str, Any]) -> None:
        await trio.sleep(0.8 * pace)
        answers: dict[str, Any] = {}
        for question in started["questions"]:
            options = question["options"]
            chosen = next((o for o in options if o.get("recommended")), options[0])
            answers[question["id"]] = {"values": [chosen["value"]]}
            if question["type"] == "multi":
                answers[question["id"]]["note"] = "canary too if time allows"
        runtime_events.emit(
            ev.SUBMIT,
            {
                "version": 1,
                "requestId": f"answer-{started['flowId']}",
                "flowId": started["flowId"],
                "response": {"kind": "answer", "answers": answers},
            },
        )

    runtime_events.on(ev.STARTED, lambda payload: nursery.start_soon(answer, payload))


async def run_demo(
    *,
    session: Path | None,
    settings: Path | None,
    headless: bool,
    emit: Callable[[Line], None] | None = None,
    surface: Surface | None = None,
    pace: float = 1.0,
) -> int:
    """Run the demo; headless when asked (a scripted answerer plays the person)."""
    if emit is None:

        def emit(line: Line) -> None:
            print(line_text(line), flush=True)

    async with open_runtime(
        session=session, mode="tui", settings=settings, surface=surface or NullSurface()
    ) as runtime:
        host = LocalHost(runtime, emit)
        async with trio.open_nursery() as nursery:
            if headless:
                scripted_answerer(runtime.events, nursery, pace)
            pending = (await runtime.statistics()).pending
            if pending:
                await resume_agent(host, len(pending))
            else:
                await scripted_agent(host, pace)
            nursery.cancel_scope.cancel()
    return 0


def main_headless(session: Path | None, settings: Path | None) -> int:
    return trio.run(lambda: run_demo(session=session, settings=settings, headless=True))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main_headless(None, None))
