"""The checked mode of actor ownership (``actors/owner.py``): each actor records its task, and
every change of its state checks that it runs there. Real Trio tasks, a real runtime."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.actors.owner import NotOwner, Owner
from pi_agent_ask.actors.queue import QueueActor
from pi_agent_ask.actors.runtime import Runtime, open_runtime

from .runtime_support import payload, settings_file, settle


async def test_a_change_in_the_owners_task_passes_and_in_any_other_fails() -> None:
    owner = Owner("test", checked=True)
    failures: list[str] = []

    async def elsewhere() -> None:
        try:
            owner.check()
        except NotOwner as error:
            failures.append(str(error))

    async def actor(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        owner.enter()
        owner.check()  # its own task
        async with trio.open_nursery() as nursery:
            nursery.start_soon(owner.detached(elsewhere))  # a task it spawns owns nothing
            task_status.started()

    async with trio.open_nursery() as nursery:
        await nursery.start(actor)
        nursery.start_soon(elsewhere)  # an unrelated task
    assert failures == ["the test actor's state was changed outside its task"] * 2
    with pytest.raises(NotOwner):
        owner.check()  # the test's own task


async def test_an_unchecked_owner_checks_nothing() -> None:
    owner = Owner("test")
    owner.check()  # never entered, another task: unchecked, so nothing is raised


def _queue_of(rt: Runtime) -> QueueActor:
    flow_commands = rt._flow_commands
    assert flow_commands is not None
    actor = getattr(flow_commands, "__self__", None)
    assert isinstance(actor, QueueActor)
    return actor


@pytest.mark.parametrize("checked", [True, False])
async def test_the_queues_state_changed_from_another_task_fails_in_checked_mode(
    tmp_path: Path, checked: bool
) -> None:
    async with open_runtime(
        settings=settings_file(tmp_path), surface=NullSurface(), check_actors=checked
    ) as rt:
        rt.agent_started()
        await rt.call_tool("ask_user", payload("a", background=True), "b1")
        await settle()
        queue = _queue_of(rt)
        # The queue's own changes pass (the call above was enqueued in its task) ...
        assert (await rt.statistics()).pending == queue.state.stats().pending
        # ... a change from this task fails, and leaves the state as it was.
        before = queue.state
        if checked:
            with pytest.raises(NotOwner, match="queue actor"):
                queue.state = queue.state.commit()
            assert queue.state is before
        else:
            queue.state = queue.state.commit()
