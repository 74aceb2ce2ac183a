"""Property test: external UI calls (non-TUI foreground ``ask_user`` answered by a provider).

Each example opens an ``rpc`` runtime on a session file and starts a few foreground calls one
after the other. Each call gets a provider with its own behaviour (answer, cancel, a malformed
response, raising, hanging until a ``pi-agent-ask:submit`` answers the flow, hanging until the
agent aborts the call) or no provider at all (the non-TUI fallback). The invariants:

- the providers share one FIFO input lock: never two open at once, opened in call order;
- every call ends the way its provider says, and a hanging ``open`` is cancelled when the
  call ends without it;
- ``pi-agent-ask:completed`` once per flow that had a provider;
- in the journal, exactly one outcome per request and one tool result per call that ran.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_agent_ask import events as ev
from pi_agent_ask import open_runtime
from pi_agent_ask.persistence.session_file import SessionFile

from .runtime_support import RecordingSurface, answer, payload, settings_file, submit

Behaviour = Literal["answer", "cancel", "invalid", "raise", "submit", "abort", "none"]


@attrs.define(eq=False)
class Provider:
    behaviour: Behaviour
    log: list[tuple[str, str]]
    id: str = "test-ui"
    version: int = 1
    opened: bool = False
    cancelled: bool = False

    async def open(self, request: dict[str, Any]) -> Any:
        flow = request["flowId"]
        self.opened = True
        self.log.append(("open", flow))
        try:
            if self.behaviour in ("submit", "abort"):
                await trio.sleep_forever()
            await trio.lowlevel.checkpoint()
        except trio.Cancelled:
            self.cancelled = True
            raise
        finally:
            self.log.append(("close", flow))
        match self.behaviour:
            case "answer":
                return answer({"a": ["a2"]})
            case "cancel":
                return {"kind": "cancel"}
            case "invalid":
                return {"kind": "weird"}
            case _:
                raise ConnectionError("the UI went away")


@attrs.define(eq=False)
class Run:
    provider: Provider | None
    call_id: str
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    result: dict[str, Any] | None = None
    done: bool = False


async def run_calls(behaviours: list[Behaviour], directory: Path) -> None:
    session = directory / "s.pas"
    log: list[tuple[str, str]] = []
    runs = [
        Run(None if b == "none" else Provider(b, log), f"c{i}") for i, b in enumerate(behaviours)
    ]
    by_call = {run.call_id: run for run in runs}
    completed: Counter[str] = Counter()
    async with (
        open_runtime(
            session=session,
            mode="rpc",
            settings=settings_file(directory),
            surface=RecordingSurface(),
            cwd=directory,
        ) as rt,
        trio.open_nursery() as nursery,
    ):

        def offer(connection: dict[str, Any]) -> None:
            provider = by_call[connection["toolCallId"]].provider
            if provider is not None:
                assert connection["connect"](provider)

        rt.events.on(ev.EXTERNAL_UI, offer)
        rt.events.on(ev.COMPLETED, lambda p: completed.update([p["flowId"]]))

        async def call(run: Run) -> None:
            with run.scope:
                run.result = await rt.call_tool("ask_user", payload("a"), tool_call_id=run.call_id)
            run.done = True

        for run in runs:
            nursery.start_soon(call, run)
            await trio.testing.wait_all_tasks_blocked()
        # Serve the open providers in order: answer a "submit" flow, abort an "abort" call.
        for _ in range(len(runs) + 1):
            await trio.testing.wait_all_tasks_blocked()
            open_now = [flow for kind, flow in log if kind == "open"]
            closed = [flow for kind, flow in log if kind == "close"]
            assert len(open_now) - len(closed) <= 1, f"two providers open at once: {log}"
            waiting = [flow for flow in open_now if flow not in closed]
            if not waiting:
                continue
            run = by_call[waiting[0].removeprefix("tool:")]
            assert run.provider is not None
            if run.provider.behaviour == "submit":
                submit(rt.events, waiting[0], answer({"a": ["a1"]}))
            else:
                run.scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert all(run.done or run.scope.cancel_called for run in runs)
    # Providers opened in call order.
    opened = [flow.removeprefix("tool:") for kind, flow in log if kind == "open"]
    assert opened == [run.call_id for run in runs if run.provider is not None], opened
    for run in runs:
        provider = run.provider
        behaviour = "none" if provider is None else provider.behaviour
        result = run.result
        match behaviour:
            case "answer" | "submit":
                assert result is not None
                expected = "a2" if behaviour == "answer" else "a1"
                assert result["structuredContent"]["answers"]["a"]["values"] == [expected]
            case "cancel":
                assert result is not None and result["structuredContent"]["cancelled"] is True
            case "invalid" | "raise":
                assert result is not None and result["isError"] is True
            case "abort":
                assert result is None and provider is not None and provider.cancelled
            case "none":
                assert result is not None and "structuredContent" in result
        if provider is not None and behaviour in ("submit", "abort"):
            assert provider.cancelled, f"{run.call_id}: open was not cancelled"
        if provider is not None:
            assert completed[f"tool:{run.call_id}"] <= 1, completed
    with SessionFile.open(session, readonly=True) as opened_session:
        branch = opened_session.branch()
    requests = [e.data["requestId"] for e in branch if e.type == "ask:history-request"]
    outcomes = Counter(e.data["requestId"] for e in branch if e.type == "ask:history-completed")
    assert len(requests) == len(runs)
    assert all(outcomes[rid] == 1 for rid in requests), outcomes
    results = Counter(e.data["toolCallId"] for e in branch if e.type == "tool-result")
    assert all(results[run.call_id] == 1 for run in runs), results


@pytest.mark.timeout(600)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    behaviours=st.lists(
        st.sampled_from(["answer", "cancel", "invalid", "raise", "submit", "abort", "none"]),
        min_size=1,
        max_size=4,
    )
)
def test_external_ui_calls_keep_their_invariants(behaviours: list[Behaviour]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        trio.run(run_calls, behaviours, Path(directory))
