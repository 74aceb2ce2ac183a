"""Helpers for driving a desk in tests and benchmarks: MCP clients and submit events.

:func:`desk_client` connects the official SDK client (``mcp.client.streamable_http``) to a
desk with a token and an agent key. :func:`answer_displayed` answers the form on the desk's
display through a ``pi-agent-ask:submit`` event on that form's own runtime, the way a remote
answerer would, and returns which agent's form it was. :func:`yes_no_form` is the one-question
form the tests and benchmarks ask.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import trio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from pi_agent_ask import events as ev
from pi_agent_ask.desk.board import Shown
from pi_agent_ask.desk.run import Desk, run_desk
from pi_agent_ask.mcp_common.connection import KEY_HEADER, DeskAddress, key_header_value

__all__ = [
    "SDK_CLIENT_WARNINGS",
    "answer_displayed",
    "desk_client",
    "open_desk",
    "submit",
    "yes_no_form",
]

_ids = itertools.count(1)


def yes_no_form(label: str, *, background: bool) -> dict[str, Any]:
    """``ask_user`` arguments: one question ``q`` labelled ``label``, "yes" or "no"."""
    return {
        "questions": [
            {
                "id": "q",
                "label": label,
                "prompt": f"{label}?",
                "options": [{"value": "yes", "label": "Yes"}, {"value": "no", "label": "No"}],
            }
        ],
        "background": background,
    }


@asynccontextmanager
async def desk_client(
    address: DeskAddress,
    key: str | None,
    *,
    token: str | None = None,
    headers: Mapping[str, str] | None = None,
    read_timeout: float | None = None,
) -> AsyncIterator[ClientSession]:
    """An initialised SDK client session on the desk, as agent ``key`` (``None``: no key
    header, the desk uses the MCP session id)."""
    bearer = f"Bearer {token if token is not None else address.token}"
    sent = {b"authorization": bearer.encode("latin-1")}
    if key is not None:
        sent[KEY_HEADER.encode("ascii")] = key_header_value(key)
    sent.update(
        {
            name.lower().encode("latin-1"): value.encode("latin-1")
            for name, value in (headers or {}).items()
        }
    )
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=sent, timeout=timeout) as http,
        streamable_http_client(address.url, http_client=http) as (read, write),
        ClientSession(read, write, read_timeout_seconds=read_timeout) as session,
    ):
        await session.initialize()
        yield session


async def submit(runtime: Any, flow_id: str, response: Mapping[str, Any]) -> dict[str, Any]:
    """Emit one ``pi-agent-ask:submit`` on ``runtime`` and return its ``submit-result``."""
    request_id = f"desk-test-{next(_ids)}"
    done = trio.Event()
    result: dict[str, Any] = {}

    def on_result(payload: Any) -> None:
        if isinstance(payload, Mapping) and payload.get("requestId") == request_id:
            result.update(payload)
            done.set()

    unsubscribe = runtime.events.on(ev.SUBMIT_RESULT, on_result)
    try:
        runtime.events.emit(
            ev.SUBMIT,
            {"version": 1, "requestId": request_id, "flowId": flow_id, "response": dict(response)},
        )
        await done.wait()
    finally:
        unsubscribe()
    return result


async def answer_displayed(desk: Desk, answers: Mapping[str, Any] | None = None) -> Shown:
    """Wait for a form on the display and answer it through a submit event on its runtime.

    ``answers`` defaults to the first option of every question. Returns the answered form
    (``key`` tells whose it was); raises ``AssertionError`` when the submit was refused."""
    await desk.board.wait_for(lambda board: board.current is not None)
    shown = desk.board.current
    assert shown is not None
    agent = desk.registry.get(shown.key)
    assert agent is not None
    if answers is None:
        answers = {
            question.id: {"values": [question.options[0].value]}
            for question in shown.state.params.questions
        }
    outcome = await submit(agent.runtime, shown.flow_id, {"kind": "answer", "answers": answers})
    assert outcome.get("ok") is True, outcome
    return shown


@asynccontextmanager
async def open_desk(base: Path, **options: Any) -> AsyncIterator[Desk]:
    """A desk for a test or a benchmark: state, settings and connection file under ``base``,
    headless unless ``headless=False`` is passed; cancelled when the block ends."""
    options.setdefault("headless", True)
    options.setdefault("state_dir", base / "state")
    options.setdefault("settings", base / "settings.json")
    options.setdefault("desk_file", base / "desk.json")
    async with trio.open_nursery() as nursery:
        desk: Desk = await nursery.start(functools.partial(run_desk, **options))
        try:
            yield desk
        finally:
            desk.cancel()


SDK_CLIENT_WARNINGS = (
    "ignore:Async generator 'httpx2:ResourceWarning",
    "ignore:Async generator 'httpcore2:ResourceWarning",
    "ignore:Exception ignored in.*async_generator object "
    "(EventSource|Response|PoolByteStream):pytest.PytestUnraisableExceptionWarning",
)
"""Warning filters for tests using the SDK's HTTP client under Trio: when a client session
closes, the SDK abandons the async generators of its open SSE streams (httpx2), and Trio's
finaliser reports each one as a ResourceWarning. Nothing of ours is left open."""
