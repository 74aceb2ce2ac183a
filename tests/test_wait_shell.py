"""The waiter's shell (``actors/wait.py``) on a real runtime: it performs the reducer's effects
with the real queue and journal.

- A wait cancelled at any point (a Trio instrument cancels the waiter's scope just before the
  n-th task step of the run once the waiter started, for every n until the wait runs to its
  end) delivers the answer exactly once: in the wait's result, or at the next turn boundary,
  and its call has one tool result on the branch. In particular a wait the queue already
  answered, cancelled before its result is written, gives the answer back, and a cut during
  the (shielded) result write neither loses the result nor adds an "aborted" one.
- The wait's result names options through the requests' parameters the shell looks up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

from pi_agent_ask import NullSurface, open_runtime
from pi_agent_ask import events as ev
from pi_agent_ask.actors.records import Outcome
from pi_agent_ask.form import text as texts
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.session_file import SessionFile

from .runtime_support import answer, payload, settings_file, submit


@attrs.define(eq=False)
class CutAt(trio.abc.Instrument):
    """Cancels ``scope`` just before the ``step``-th task step of the run, counted from the
    first step of the task named ``name``: the cut lands wherever that task is then, running
    or blocked (in a send to the queue, a receive, a journal write)."""

    name: str
    step: int
    scope: trio.CancelScope
    seen: int = 0
    fired: bool = False

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.seen == 0 and task.name != self.name:
            return
        self.seen += 1
        if self.seen == self.step:
            self.fired = True
            self.scope.cancel()


@attrs.frozen
class Cut:
    fired: bool
    delivered: int
    """How often the answer reached the agent: wait result and turn boundaries."""
    returned: bool
    """The wait returned its result (the answer)."""
    wait_results: int
    """``tool-result`` entries of the wait's call on the branch."""


async def _wait_cut_at(tmp_path: Path, step: int) -> Cut:
    session = tmp_path / f"cut-{step}.pas"
    async with open_runtime(
        session=session, settings=settings_file(tmp_path), surface=NullSurface(), cwd=tmp_path
    ) as rt:
        rt.agent_started()  # busy: an answer waits for the boundary instead of a wake
        started: list[dict[str, Any]] = []
        rt.events.on(ev.STARTED, started.append)
        receipt = await rt.call_tool("ask_user", payload("a", background=True), "c1")
        request_id = receipt["details"]["requestId"]
        await trio.testing.wait_all_tasks_blocked()
        [flow] = started
        scope = trio.CancelScope()
        out: dict[str, Any] = {}

        async def waiter() -> None:
            with scope:
                out["result"] = await rt.call_tool("wait_for_answers", {}, "w1")

        cut = CutAt("waiter", step, scope)
        trio.lowlevel.add_instrument(cut)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(waiter, name="waiter")
                await trio.testing.wait_all_tasks_blocked()
                submit(rt.events, flow["flowId"], answer({"a": ["a1"]}))
        finally:
            trio.lowlevel.remove_instrument(cut)
        await trio.testing.wait_all_tasks_blocked()
        messages = await rt.turn_boundary()
        messages += await rt.turn_boundary()  # nothing twice
    result = out.get("result")
    returned = result is not None and not result.get("isError")
    delivered = sum(m["details"]["requestId"] == request_id for m in messages)
    if returned:
        assert result is not None
        delivered += sum(
            r["requestId"] == request_id for r in result["structuredContent"]["results"]
        )
    with SessionFile.open(session, readonly=True) as file:
        wait_results = sum(
            e.type == jr.TOOL_RESULT and e.data["toolCallId"] == "w1" for e in file.branch()
        )
    return Cut(cut.fired, delivered, returned, wait_results)


async def test_a_wait_cut_off_at_any_step_delivers_its_answer_once(tmp_path: Path) -> None:
    step, returned = 1, []
    while True:
        cut = await _wait_cut_at(tmp_path, step)
        assert cut.delivered == 1, f"cut before step {step}: delivered {cut.delivered} times"
        # A journaled call has one result, never two (the wait's own and an "aborted" one).
        assert cut.wait_results <= 1, f"cut before step {step}: {cut.wait_results} results"
        if not cut.fired:
            break  # the wait ran to its end before the step came: every step was tried
        returned.append(cut.returned)
        step += 1
    # The cuts landed on both sides of the answer: some waits returned it, some gave it back.
    assert cut.returned and True in returned and False in returned


async def test_the_wait_result_names_options_through_the_request_parameters(
    tmp_path: Path,
) -> None:
    arguments = payload("a", background=True)
    params = validate_ask_params(arguments).params
    assert params is not None
    response = {
        "kind": "answer",
        "answers": {"a": {"values": ["a1"], "optionNotes": {"a2": "not this one"}}},
    }
    async with open_runtime(
        settings=settings_file(tmp_path), surface=NullSurface(), cwd=tmp_path
    ) as rt:
        # Busy: an answer that comes before the wait starts is not woken, the wait returns it.
        rt.agent_started()
        rt.events.on(ev.STARTED, lambda started: submit(rt.events, started["flowId"], response))
        receipt = await rt.call_tool("ask_user", arguments, "c1")
        result = await rt.call_tool("wait_for_answers", {}, "w1")
    request_id = receipt["details"]["requestId"]
    outcomes = [Outcome.from_json(r) for r in result["structuredContent"]["results"]]
    expected = texts.wait_complete_result([request_id], outcomes, params={request_id: params})
    assert result["content"] == expected["content"]
    blind = texts.wait_complete_result([request_id], outcomes, params=None)
    assert blind["content"] != expected["content"]  # the lookup is what names the option
