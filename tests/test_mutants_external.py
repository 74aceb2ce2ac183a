"""The external UI bridge, as mutation testing of ``actors/external.py`` found it unpinned.

``docs/mutation-actors.md`` lists the mutants each test kills. Everything goes through the
public runtime: a non-TUI runtime, a provider connected from the ``pi-agent-ask:external-ui``
event, ``pi-agent-ask:submit`` events and the tool results.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from pi_agent_ask import events as ev
from pi_agent_ask import open_runtime
from pi_agent_ask.form import state as fs
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.session_file import SessionFile
from pi_agent_ask.persistence.settings import load_settings

from .runtime_support import (
    EventLog,
    RecordingSurface,
    answer,
    payload,
    settings_file,
    settle,
    submit,
)

GUARD = 30  # seconds; only stops a hang
PREFIX = "External ask UI returned an invalid response: "


class Provider:
    """An external UI: ``open`` returns ``response``, raises ``error``, or (``hang``) waits
    until it is cancelled. Attributes can be left out or replaced to make it unacceptable."""

    def __init__(
        self,
        response: Any = None,
        *,
        error: Exception | None = None,
        hang: bool = False,
        **overrides: Any,
    ) -> None:
        self.id = "test-ui"
        self.version = 1
        self.response = response
        self.error = error
        self.hang = hang
        self.requests: list[dict[str, Any]] = []
        for name, value in overrides.items():
            setattr(self, name, value)

    async def open(self, request: dict[str, Any]) -> Any:
        self.requests.append(request)
        if self.hang:
            await trio.sleep_forever()
        await trio.lowlevel.checkpoint()
        if self.error is not None:
            raise self.error
        return self.response


class Bare:
    """A provider missing every attribute but the ones given."""

    def __init__(self, **attributes: Any) -> None:
        for name, value in attributes.items():
            setattr(self, name, value)


async def _open(request: dict[str, Any]) -> Any:
    return {"kind": "cancel"}


async def ask(
    tmp_path: Path, provider: Provider, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    with trio.fail_after(GUARD):
        async with open_runtime(
            mode="rpc", settings=settings_file(tmp_path), surface=RecordingSurface()
        ) as rt:
            rt.events.on(ev.EXTERNAL_UI, lambda offer: offer["connect"](provider))
            result: dict[str, Any] = await rt.call_tool("ask_user", body or payload("a"), "c1")
            return result


# -- negotiation ---------------------------------------------------------------------------------


async def test_the_offer_and_which_providers_it_accepts(tmp_path: Path) -> None:
    unacceptable = [
        Bare(version=1, open=_open),  # no id
        Bare(id="ui", open=_open),  # no version
        Bare(id="ui", version=1),  # no open
        Provider(version=2),
        Provider(id=None),
        Provider(id=7),
        Provider(id="   "),
        Provider(open="not callable"),
    ]
    answers: list[bool] = []
    offers: list[dict[str, Any]] = []
    good, second = Provider({"kind": "cancel"}), Provider({"kind": "cancel"})

    def offer(connection: dict[str, Any]) -> None:
        offers.append(connection)
        answers.extend(connection["connect"](p) for p in unacceptable)
        answers.append(connection["connect"](good))
        answers.append(connection["connect"](second))

    async with open_runtime(
        mode="rpc", settings=settings_file(tmp_path), surface=RecordingSurface()
    ) as rt:
        rt.events.on(ev.EXTERNAL_UI, offer)
        result = await rt.call_tool("ask_user", payload("a"), "c1")
    assert answers == [False] * len(unacceptable) + [True, False]
    [connection] = offers
    assert {k: v for k, v in connection.items() if k != "connect"} == {
        "version": 1,
        "mode": "rpc",
        "toolCallId": "c1",
    }
    assert good.requests and not second.requests
    assert result["structuredContent"]["cancelled"] is True
    # After the emit returned, the offer is closed.
    assert connection["connect"](Provider({"kind": "cancel"})) is False


async def test_a_late_connect_is_refused_when_nobody_connected_in_time(tmp_path: Path) -> None:
    offers: list[dict[str, Any]] = []
    async with open_runtime(
        mode="rpc", settings=settings_file(tmp_path), surface=RecordingSurface()
    ) as rt:
        rt.events.on(ev.EXTERNAL_UI, offers.append)
        result = await rt.call_tool("ask_user", payload("a"), "c1")
    assert "ask_user [" in result["content"][0]["text"]  # the non-TUI fallback
    [connection] = offers
    assert connection["connect"](Provider({"kind": "cancel"})) is False


async def test_the_provider_gets_the_questions_with_their_types_and_the_title(
    tmp_path: Path,
) -> None:
    provider = Provider({"kind": "cancel"})
    await ask(tmp_path, provider, payload("a", "b", title="Plan"))
    [request] = provider.requests
    assert request["version"] == 1
    assert request["flowId"] == "tool:c1"
    assert request["toolCallId"] == "c1"
    assert request["title"] == "Plan"
    assert [(q["id"], q["type"]) for q in request["questions"]] == [
        ("a", "single"),
        ("b", "single"),
    ]
    untitled = Provider({"kind": "cancel"})
    await ask(tmp_path, untitled)
    assert "title" not in untitled.requests[0]


# -- endings -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "text"),
    [
        (Provider(["answer"]), PREFIX + "Submit response must be an object."),
        (
            Provider({"kind": "later"}),
            PREFIX + 'Submit response kind must be "answer" or "cancel".',
        ),
        (
            Provider({"kind": "answer", "answers": {"a": {"values": ["zz"]}}}),
            PREFIX + 'Unknown option value "zz" for question "a".',
        ),
        (Provider(error=ConnectionError("disconnected")), "disconnected"),
        (Provider(error=ConnectionError()), "ConnectionError"),
    ],
    ids=["not-an-object", "kind", "answer", "error", "error-without-message"],
)
async def test_a_provider_failure_is_a_tool_error_with_its_reason(
    tmp_path: Path, provider: Provider, text: str
) -> None:
    result = await ask(tmp_path, provider)
    assert result == {"content": [{"type": "text", "text": text}], "isError": True}


async def test_an_external_flow_ignores_commands_and_settings_and_takes_a_valid_submit(
    tmp_path: Path,
) -> None:
    provider = Provider(hang=True)
    (tmp_path / "other").mkdir()
    other = settings_file(tmp_path / "other", confirmDismissWhenDirty=False)
    out: dict[str, Any] = {}
    with trio.fail_after(GUARD):
        async with (
            open_runtime(
                mode="rpc", settings=settings_file(tmp_path), surface=RecordingSurface()
            ) as rt,
            trio.open_nursery() as nursery,
        ):
            log = EventLog()
            log.attach(rt.events)
            rt.events.on(ev.EXTERNAL_UI, lambda offer: offer["connect"](provider))

            async def call() -> None:
                out["result"] = await rt.call_tool("ask_user", payload("a"), "c1")

            nursery.start_soon(call)
            await settle()
            await rt.send_command("tool:c1", fs.NextOption())
            rt.apply_settings(load_settings(other))
            await settle()
            submit(rt.events, "tool:c1", answer({"a": ["zz"]}), request_id="bad")
            await settle()
            submit(rt.events, "tool:c1", answer({"a": ["a2"]}), request_id="good")
    bad, good = log.of(ev.SUBMIT_RESULT)
    assert bad["ok"] is False and bad["requestId"] == "bad"
    assert bad["error"] == "invalid_answer"
    assert bad["message"] == 'Unknown option value "zz" for question "a".'
    assert good["ok"] is True and good["requestId"] == "good"
    assert out["result"]["details"]["answers"]["a"]["values"] == ["a2"]


# -- what the host and the journal see -------------------------------------------------------


async def journaled(tmp_path: Path, provider: Provider, **settings: Any) -> dict[str, Any]:
    """The call's result, its started event, its aborts and its session file's entries."""
    session = tmp_path / "s.pas"
    with trio.fail_after(GUARD):
        async with open_runtime(
            session=session,
            mode="rpc",
            settings=settings_file(tmp_path, **settings),
            surface=RecordingSurface(),
        ) as rt:
            log = EventLog()
            log.attach(rt.events)
            rt.events.on(ev.EXTERNAL_UI, lambda offer: offer["connect"](provider))
            result = await rt.call_tool("ask_user", payload("a", "b", title="Plan"), "c1")
            aborts = []
            while True:
                try:
                    aborts.append(rt.aborts.receive_nowait())
                except trio.WouldBlock:
                    break
    branch = SessionFile.open(session, readonly=True).branch()
    return {
        "result": result,
        "started": log.of(ev.STARTED),
        "aborts": aborts,
        "types": [e.type for e in branch],
        "completed": [e.data for e in branch if e.type == jr.HISTORY_COMPLETED],
    }


async def test_the_started_event_of_an_external_flow(tmp_path: Path) -> None:
    seen = await journaled(tmp_path, Provider({"kind": "cancel"}))
    [started] = seen["started"]
    request_id = seen["result"]["details"]["requestId"]
    created = started.pop("createdAt")
    assert isinstance(created, str) and created.endswith("Z")
    assert started == {
        "version": 1,
        "flowId": "tool:c1",
        "askRequestId": request_id,
        "source": "tool",
        "questions": started["questions"],
        "toolCallId": "c1",
        "title": "Plan",
    }
    assert [q["id"] for q in started["questions"]] == ["a", "b"]


async def test_the_provider_sees_the_presented_types(tmp_path: Path) -> None:
    provider = Provider({"kind": "cancel"})
    await journaled(tmp_path, provider, presentSingleAsMulti=True)
    [request] = provider.requests
    assert [q["type"] for q in request["questions"]] == ["multi", "multi"]


async def test_a_provider_failure_is_journaled_as_a_foreground_error(tmp_path: Path) -> None:
    seen = await journaled(tmp_path, Provider(error=ConnectionError("disconnected")))
    [completed] = seen["completed"]
    assert completed["error"] == "disconnected"
    assert "result" not in completed
    assert jr.QUEUE_COMPLETED not in seen["types"]


async def test_an_external_answer_is_journaled_and_names_an_unselected_noted_option(
    tmp_path: Path,
) -> None:
    response = {
        "kind": "answer",
        "answers": {"a": {"values": ["a1"], "optionNotes": {"a2": "close second"}}},
    }
    seen = await journaled(tmp_path, Provider(response))
    [completed] = seen["completed"]
    assert list(completed["result"]["answers"]["a"]["values"]) == ["a1"]
    assert " / Option a2 (not selected) note: close second" in seen["result"]["content"][0]["text"]
    assert seen["aborts"] == []


async def test_an_external_cancel_is_reported_as_an_abort(tmp_path: Path) -> None:
    seen = await journaled(tmp_path, Provider({"kind": "cancel"}))
    assert seen["aborts"] == [seen["result"]["details"]["requestId"]]
    [completed] = seen["completed"]
    assert completed["result"]["cancelled"] is True
