"""The heap is settled once a form's first frame is on screen (``ui/heap.py``): what start-up
made is frozen out of the collector's full passes, and cycles an earlier application froze are
freed by the next one."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from pi_agent_ask.heap import settle_heap
from pi_agent_ask.ui.testing import asking

QUESTION = {
    "id": "goal",
    "label": "Goal",
    "prompt": "What should I optimize for?",
    "options": [{"value": "speed", "label": "Speed"}, {"value": "size", "label": "Size"}],
}


class _Node:
    """A weak-referenceable object to build a reference cycle with."""

    def __init__(self) -> None:
        self.other: object = self


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    """Each test starts and ends with nothing frozen and the collector on."""
    gc.unfreeze()
    gc.enable()
    yield
    gc.enable()
    gc.unfreeze()


def _is_walked(value: object) -> bool:
    """Whether the collector's generations (not the permanent one) hold ``value``."""
    return any(item is value for item in gc.get_objects())


async def _answer_one_form(tmp_path: Path) -> None:
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    with trio.fail_after(30):
        async with asking({"questions": [QUESTION]}, settings) as ask:
            await ask.wait("What should I optimize for?")
            ask.send("1")
            await ask.wait("Review your answers")
            ask.send("1", "1")
            status, _result = await ask.finished()
            assert status == 0


async def test_what_start_up_made_is_frozen_once_the_first_frame_is_drawn(
    tmp_path: Path,
) -> None:
    before_start = [object()]
    assert _is_walked(before_start)
    await _answer_one_form(tmp_path)
    assert gc.get_freeze_count() > 0
    assert not _is_walked(before_start)


async def test_a_cycle_frozen_by_an_earlier_application_is_freed_by_the_next(
    tmp_path: Path,
) -> None:
    node = _Node()
    ref = weakref.ref(node)
    assert settle_heap()
    del node
    gc.collect()
    assert ref() is not None  # frozen: the collector does not see it
    await _answer_one_form(tmp_path)
    assert ref() is None


def test_a_host_that_turned_the_collector_off_keeps_its_heap() -> None:
    gc.disable()
    assert not settle_heap()
    assert gc.get_freeze_count() == 0
    assert not gc.isenabled()
