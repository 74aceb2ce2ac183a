"""The LocalHost and the demo's scripted agent, headless, on the real runtime."""

from __future__ import annotations

from pathlib import Path

from pi_agent_ask.form.transcript import line_text
from pi_agent_ask.host.demo import run_demo
from pi_agent_ask.host.local import Line
from pi_agent_ask.persistence.session_file import SessionFile

from .runtime_support import settings_file


async def test_headless_demo_tells_the_whole_background_story(
    tmp_path: Path, autojump_clock: object
) -> None:
    lines: list[str] = []

    def emit(line: Line) -> None:
        lines.append(line_text(line))

    session = tmp_path / "demo.pas"
    code = await run_demo(
        session=session, settings=settings_file(tmp_path), headless=True, emit=emit
    )
    assert code == 0
    text = "\n".join(lines)
    assert text.count("question(s) queued") == 3
    assert text.count("✓ Answers received") == 3
    assert "→ EU West" in text and "→ Tonight" in text
    assert "note: canary too if time allows" in text
    assert "Received answers for 1 form" in text
    entries = SessionFile.open(session, readonly=True).branch()
    delivered = [e for e in entries if e.type == "ask:background-answer"]
    # Two answers arrive as messages (a boundary and an idle wake), one through the wait.
    assert len(delivered) == 2
    waits = [e for e in entries if e.type == "tool-result" and e.data["name"] == "wait_for_answers"]
    assert len(waits[0].data["result"]["details"]["results"]) == 1


async def test_wait_answers_show_their_card_at_the_call_that_asked(
    tmp_path: Path, autojump_clock: object
) -> None:
    import trio

    from pi_agent_ask import open_runtime
    from pi_agent_ask.actors.form import NullSurface
    from pi_agent_ask.host.demo import scripted_agent, scripted_answerer
    from pi_agent_ask.host.local import LocalHost
    from pi_agent_ask.ui.transcript import Transcript

    transcript = Transcript()
    async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
        host = LocalHost(rt, transcript.append, mark=transcript.mark, place=transcript.insert)
        async with trio.open_nursery() as nursery:
            scripted_answerer(rt.events, nursery, 1.0)
            await scripted_agent(host)
            nursery.cancel_scope.cancel()
    texts = [line_text(line) for line in transcript.lines]
    window_call = texts.index("ask_user 1 question(s) (Window)")
    wait_row = texts.index("  Received answers for 1 form")
    card = texts.index("Rollout window · ✓ Answers received")
    # The card sits under the Window call (after its receipt row), not under the wait row.
    assert window_call < card < wait_row
    assert texts[card - 2].endswith("form(s) pending")
    assert not any("Answers received" in t for t in texts[wait_row:])
    # ... and where the person is looking, a line says where the card went.
    assert texts[wait_row + 1] == "  ↑ Rollout window: answer card added at its question above"


async def test_history_tools_have_empty_transcript_rows(tmp_path: Path) -> None:
    import json

    from pi_agent_ask import open_runtime
    from pi_agent_ask.actors.form import NullSurface
    from pi_agent_ask.host.local import LocalHost

    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"schemaVersion": 6, "behaviour": {"historyTools": True}}))
    lines: list[str] = []
    async with open_runtime(settings=settings, surface=NullSurface()) as rt:
        host = LocalHost(rt, lambda line: lines.append(line_text(line)))
        listed = await host.call("list_ask_history", {})
        failed = await host.call("read_ask_history", {"requestId": "x", "questionId": "y"})
        await host.call("wait_for_answers", {})
    assert listed["details"]["total"] == 0
    assert failed["isError"] is True
    # Only the wait left rows: the two history calls, the error included, left none.
    assert lines == ["wait_for_answers", "  No outstanding answers"]


async def test_an_answer_card_names_options_by_their_labels(
    tmp_path: Path, autojump_clock: object
) -> None:
    # A note on an option the person did not select is shown with the option's label, as
    # Review shows it, never with its value.
    import json

    import trio

    from pi_agent_ask import events as ev
    from pi_agent_ask import open_runtime
    from pi_agent_ask.actors.form import NullSurface
    from pi_agent_ask.host.local import LocalHost

    lines: list[str] = []
    payload = json.loads((Path(__file__).parent.parent / "examples" / "deploy.json").read_text())
    payload["background"] = True
    async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
        host = LocalHost(rt, lambda line: lines.append(line_text(line)))
        rt.agent_started()  # busy, as a model mid-turn: no idle wake takes the answer

        started: list[dict[str, object]] = []
        shown = trio.Event()

        def on_started(payload: dict[str, object]) -> None:
            started.append(payload)
            shown.set()

        rt.events.on(ev.STARTED, on_started)
        await host.call("ask_user", payload)
        # Answered after the receipt: the card comes with the wait (an answer given before
        # the receipt is made rides on the receipt instead).
        with trio.fail_after(30):
            await shown.wait()
        rt.events.emit(
            ev.SUBMIT,
            {
                "version": 1,
                "requestId": "answer-1",
                "flowId": started[0]["flowId"],
                "response": {
                    "kind": "answer",
                    "answers": {
                        "region": {"values": ["eu-west"]},
                        "checks": {"values": ["unit"], "optionNotes": {"soak": "next week"}},
                    },
                },
            },
        )
        with trio.fail_after(30):
            await host.call("wait_for_answers", {})
        # The answer reaches the agent once: through the wait, or (when it was delivered
        # first) as a message at the next turn boundary; either way the person sees its card.
        for message in await rt.turn_boundary():
            host.deliver(message)
    text = "\n".join(lines)
    assert text.count("Soak test (not selected) note: next week") == 1, text
    assert "soak (not selected)" not in text


async def test_a_background_form_cancelled_while_the_agent_is_idle_shows_its_card_now(
    tmp_path: Path,
) -> None:
    """000: a cancellation never wakes the agent and only adds context; the person who
    cancelled sees its card at once (the reference sends it while idle without a turn), not
    at the agent's next turn. That turn's boundary adds the message to the context without a
    second card."""
    import trio

    from pi_agent_ask import open_runtime
    from pi_agent_ask.actors.form import NullSurface
    from pi_agent_ask.desk.testing import submit, yes_no_form
    from pi_agent_ask.host.local import LocalHost

    lines: list[str] = []
    with trio.fail_after(30):
        async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
            host = LocalHost(rt, lambda line: lines.append(line_text(line)))
            flows: list[str] = []
            rt.events.on("pi-agent-ask:started", lambda payload: flows.append(payload["flowId"]))

            async def ask(h: LocalHost) -> None:
                await h.call("ask_user", {**yes_no_form("Deploy", background=True), "title": "Go"})

            await host.turn(ask)  # the agent is idle now
            while not flows:
                await trio.testing.wait_all_tasks_blocked()
            outcome = await submit(rt, flows[0], {"kind": "cancel"})
            assert outcome.get("ok") is True, outcome
            await trio.testing.wait_all_tasks_blocked()
            assert "Go · ? Questions cancelled" in lines
            assert "No approval given." in lines
            assert rt.wakeups.statistics().current_buffer_used == 0  # no turn was started
            cards = lines.count("Go · ? Questions cancelled")

            async def nothing(h: LocalHost) -> None:
                pass

            await host.turn(nothing)  # the next turn: the message enters the context
    assert lines.count("Go · ? Questions cancelled") == cards == 1
    [message] = [m for m in host.context if m.get("customType") == "ask:background-answer"]
    assert message["details"]["result"]["cancelled"] is True
