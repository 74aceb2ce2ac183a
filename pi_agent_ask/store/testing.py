"""Helpers for driving team desks in tests and benchmarks: an answering person, a desk process.

:func:`answering` runs a board on the store (its own listener, no HTTP) whose person answers
every free form as it appears, the first option of every question, through a claim, the way a
person at a desk would; it returns the request ids it answered. :func:`desk_process` starts
``pi-agent-ask desk --store URL --headless`` and returns the process and its URL.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio

from pi_agent_ask.store.board import TeamBoard
from pi_agent_ask.store.db import Claim, FormRow, Store, Submitted
from pi_agent_ask.store.wakes import AsyncStore, Wakes, listen

__all__ = ["answering", "desk_process", "first_options"]


def first_options(row: FormRow) -> dict[str, Any]:
    """The response choosing the first option of every question of ``row``."""
    answers = {
        question["id"]: {"values": [question["options"][0]["value"]]}
        for question in row.params["questions"]
    }
    return {"kind": "answer", "answers": answers}


@asynccontextmanager
async def answering(
    url: str,
    person: str,
    *,
    respond: Callable[[FormRow], Mapping[str, Any]] = first_options,
    answered: list[str] | None = None,
) -> AsyncIterator[TeamBoard]:
    """A person answering every free form on the store at ``url`` until the block ends."""
    store = Store(url)
    await trio.to_thread.run_sync(store.open)
    done = answered if answered is not None else []
    try:
        shared = AsyncStore.of(store)
        wakes = Wakes()
        board = TeamBoard(shared, wakes, person)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(listen, url, wakes)
            await wakes.connected.wait()
            await nursery.start(board.run)

            async def work() -> None:
                while True:
                    await board.wait_for(lambda forms: any(not form.claim_live for form in forms))
                    claim = await board.open()
                    if not isinstance(claim, Claim):
                        await board.refresh()
                        continue
                    outcome = await board.answer(claim.request_id, respond(claim.row))
                    if isinstance(outcome, Submitted):
                        done.append(outcome.request_id)

            nursery.start_soon(work)
            try:
                yield board
            finally:
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(store.close)


async def desk_process(
    url: str, person: str, *extra: str, env: Mapping[str, str] | None = None
) -> tuple[trio.Process, str]:
    """``pi-agent-ask desk --store URL --headless --as PERSON`` and the URL it listens at."""
    command = [sys.executable, "-m", "pi_agent_ask", "desk", "--headless", "--store", url]
    process = await trio.lowlevel.open_process(
        [*command, "--as", person, *extra], stdout=subprocess.PIPE, env=env
    )
    assert process.stdout is not None
    line = b""
    while not line.endswith(b"\n"):
        chunk = await process.stdout.receive_some(1)
        if not chunk:
            raise RuntimeError(f"the desk exited before it listened: {line!r}")
        line += chunk
    return process, line.decode().rsplit(" ", 1)[1].strip()
