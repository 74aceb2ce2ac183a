"""Property test: arbitrary JSON-like values thrown at every public entry through the real
runtime on a real session file (issue 10).

Each example opens one runtime (``tui`` with the headless surface, or ``rpc`` with an external
UI provider), then:

- calls every tool with generated arguments: arbitrary values (any Unicode including lone
  surrogates, NUL, C0/C1 controls; nesting far past the bound; strings past the size bound)
  and near-valid ``ask_user`` calls whose text fields are such values;
- answers every form that opens with generated ``pi-agent-ask:submit`` payloads (envelopes and
  responses), then one valid cancel, so every call ends;
- in ``rpc`` mode the provider answers with a generated response.

Invariants: every call returns a result or a tool error (``isError: true``, one text block);
every submit gets exactly one ``submit-result``; the runtime stays up (a last call works);
the session file reopens undamaged and holds the journaled result of every call that was not
refused whole at the boundary, equal to what the call returned.
"""

from __future__ import annotations

import json
import reprlib
import tempfile
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pi_agent_ask import events as ev
from pi_agent_ask import open_runtime
from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.form import untrusted
from pi_agent_ask.persistence.session_file import SessionFile

from .runtime_support import settings_file

EXAMPLE_DEADLINE = 30.0
HUGE = "h" * (untrusted.MAX_TEXT_CHARS + 1)
TOOLS = ("ask_user", "wait_for_answers", "list_ask_history", "read_ask_history")


def nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value] if depth % 2 else {"k": value}
    return value


SPECIAL_TEXT = st.sampled_from(
    [
        "\ud800",
        "a\udfffb",
        "\x00",
        "\x1b[2J\x1b]0;t\x07",
        "\x9b31m\x9d",
        "\u202e\u2066\u2028\u2029\x7f",
        "",
        " ",
        "ok",
    ]
)
TEXT = st.one_of(
    st.text(st.characters(blacklist_categories=()), max_size=30),  # every code point
    SPECIAL_TEXT,
    st.just(None).map(lambda _: HUGE),  # past the bound: refused whole
    st.integers(1_000, 200_000).map(lambda n: "x" * n),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    TEXT,
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(TEXT, children, max_size=4),
    ),
    max_leaves=12,
)
DEEP = st.builds(nested, st.integers(60, 3_000), VALUES)
ANY = st.one_of(VALUES, DEEP)


@st.composite
def ask_arguments(draw: st.DrawFn) -> Any:
    """Mostly ``ask_user`` calls that are valid but for at most one hostile field (a third are
    wholly valid, so forms open), sometimes anything at all."""
    if draw(st.integers(0, 4)) == 0:
        return draw(ANY)
    fields = ["id", "prompt", "value", "label", "description", "title", "type", "extra", "none"]
    hostile = draw(st.sampled_from([*fields, "none", "none"]))

    def text(field: str, fine: str) -> Any:
        return draw(st.one_of(TEXT, ANY)) if hostile == field else fine

    question: dict[str, Any] = {
        "id": text("id", "a"),
        "prompt": text("prompt", "Pick one \x1b[31m\u202e"),
        "options": [
            {"value": text("value", "a1"), "label": text("label", "One")},
            {"value": "b", "label": "Two", "description": text("description", "\x9b2J")},
        ],
        "type": text("type", draw(st.sampled_from(["single", "multi"]))),
    }
    body: dict[str, Any] = {"questions": [question], "background": draw(st.booleans())}
    body["title"] = text("title", "Title")
    if hostile == "extra":
        body[draw(TEXT)] = draw(ANY)
    return body


@st.composite
def responses(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 3)) == 0:
        return draw(ANY)
    answer: dict[str, Any] = {"values": draw(st.one_of(st.just(["b"]), ANY))}
    for key in ("note", "customText"):
        if draw(st.booleans()):
            answer[key] = draw(st.one_of(TEXT, ANY))
    if draw(st.booleans()):
        answer["optionNotes"] = {draw(TEXT): draw(TEXT)}
    return {"kind": draw(st.sampled_from(["answer", "cancel", "other"])), "answers": {"a": answer}}


@st.composite
def submits(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 4)) == 0:
        return draw(ANY)
    return {
        "version": draw(st.sampled_from([1, 1, 1, 2])),
        "requestId": draw(st.one_of(st.just("r"), TEXT)),
        "flowId": None,  # filled in with the flow that opened (or left as drawn)
        "response": draw(responses()),
        "_flow": draw(st.one_of(st.just(None), TEXT)),
    }


@attrs.frozen(repr=False)
class Example:
    mode: str
    calls: tuple[tuple[str, Any], ...]
    submits: tuple[Any, ...]
    provider_response: Any

    def __repr__(self) -> str:
        # Generated strings can be megabytes long: a failure report shows their start.
        shown = reprlib.Repr(maxstring=80, maxother=80, maxlevel=8)
        fields = (self.mode, self.calls, self.submits, self.provider_response)
        return "Example(" + ", ".join(shown.repr(field) for field in fields) + ")"


EXAMPLES = st.builds(
    Example,
    mode=st.sampled_from(["tui", "tui", "rpc"]),
    calls=st.lists(
        st.one_of(
            st.tuples(st.just("ask_user"), ask_arguments()),
            st.tuples(st.sampled_from(TOOLS), ANY),
            st.tuples(st.just("export_ask_history"), st.fixed_dictionaries({"path": TEXT})),
        ),
        min_size=1,
        max_size=4,
    ).map(tuple),
    submits=st.lists(submits(), max_size=3).map(tuple),
    provider_response=responses(),
)


class Provider:
    id = "hostile"
    version = 1

    def __init__(self, response: Any) -> None:
        self.response = response

    async def open(self, request: dict[str, Any]) -> Any:
        await trio.lowlevel.checkpoint()
        return self.response


def is_tool_result(result: Any) -> bool:
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        return False
    if result.get("isError") is True:
        [block] = result["content"]
        return block["type"] == "text" and isinstance(block["text"], str)
    return "details" in result


def plain(value: Any) -> Any:
    return json.loads(json.dumps(value))


async def scenario(example: Example, directory: Path) -> None:
    session = directory / "s.pas"
    settings = settings_file(directory, historyTools=True)
    provider = Provider(example.provider_response)
    results: list[tuple[str, str, Any, Any]] = []
    submitted: list[Any] = []
    answered: list[Any] = []
    requests: dict[str, str] = {}
    with trio.fail_after(EXAMPLE_DEADLINE):
        async with open_runtime(
            session=session,
            mode=example.mode,  # type: ignore[arg-type]
            settings=settings,
            surface=NullSurface(),
            cwd=directory,
        ) as rt:
            rt.agent_started()
            rt.events.on(ev.SUBMIT_RESULT, answered.append)
            rt.events.on(ev.EXTERNAL_UI, lambda offer: offer["connect"](provider))

            def on_started(started: dict[str, Any]) -> None:
                event(f"a {example.mode} form opened")
                requests[started["flowId"]] = started["askRequestId"]
                # The generated submissions first, then one valid cancel: every form ends.
                for raw in example.submits:
                    payload = raw
                    if isinstance(raw, dict) and "_flow" in raw:
                        payload = {k: v for k, v in raw.items() if k != "_flow"}
                        payload["flowId"] = raw["_flow"] or started["flowId"]
                    submitted.append(payload)
                    rt.events.emit(ev.SUBMIT, payload)
                cancel = {"kind": "cancel"}
                final = {"version": 1, "requestId": "end", "flowId": started["flowId"]}
                submitted.append(final)
                rt.events.emit(ev.SUBMIT, final | {"response": cancel})

            rt.events.on(ev.STARTED, on_started)
            for number, (name, arguments) in enumerate(example.calls):
                call_id = f"call-{number}"
                result = await rt.call_tool(name, arguments, call_id)
                assert is_tool_result(result), result
                event(f"{name}: {'tool error' if result.get('isError') else 'result'}")
                results.append((call_id, name, arguments, result))
                await trio.testing.wait_all_tasks_blocked()
            # Still up: a plain call works, and the queue answers.
            last = await rt.call_tool("list_ask_history", {}, "last")
            assert "isError" not in last, last
            await rt.statistics()
            await trio.testing.wait_all_tasks_blocked()
    assert len(answered) == len(submitted)
    with SessionFile.open(session, readonly=True) as reopened:
        assert reopened.report.ok, reopened.report.describe()
        branch = reopened.branch()
    journaled = {e.data["toolCallId"]: e.data["result"] for e in branch if e.type == "tool-result"}
    completed = {e.data["requestId"] for e in branch if e.type == "ask:history-completed"}
    # Every acknowledged submission ended its form, and that outcome is in the file.
    for ack in answered:
        if ack["ok"]:
            assert requests[ack["flowId"]] in completed
    for call_id, name, arguments, result in results:
        refused = untrusted.check(arguments) is not None
        event(f"refused at the boundary: {refused}")
        if refused:
            assert call_id not in journaled
        else:
            assert plain(journaled[call_id]) == plain(result), name
    assert "last" in journaled


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(example=EXAMPLES)
def test_hostile_values_end_as_results_or_tool_errors_and_nothing_is_lost(
    example: Example,
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        trio.run(scenario, example, Path(directory))


_FLAT_VALUES = st.one_of(
    st.none(),
    st.text(),  # lone surrogates included
    st.integers(),
    st.lists(st.text(), max_size=2),
)


@given(values=st.lists(_FLAT_VALUES, max_size=3), pad=st.integers(0, 3))
@settings(max_examples=300, deadline=None)
def test_flat_fields_that_pass_without_the_walk_pass_the_walk(values: list[Any], pad: int) -> None:
    # ``passes_flat`` lets a call's name and ids, and a submit's ids, skip the walk: it may
    # only say yes where ``check`` of the same map says yes. Keys of the same total length.
    keys = [f"k{i}" + "x" * pad for i in range(len(values))]
    key_chars = sum(len(key) for key in keys)
    if untrusted.passes_flat(tuple(values), key_chars):
        assert untrusted.check(dict(zip(keys, values, strict=True))) is None


def test_flat_fields_pass_without_the_walk_up_to_the_text_bound() -> None:
    keys = ("name", "toolCallId")
    room = untrusted.MAX_TEXT_CHARS - sum(len(key) for key in keys)
    assert untrusted.passes_flat(("ask_user", "c1"), 14)
    assert untrusted.passes_flat(("ask_user", None), 14)
    longest = ("a" * (room - 2), "bb")
    assert untrusted.passes_flat(longest, 14)
    assert untrusted.check(dict(zip(keys, longest, strict=True))) is None
    over = ("a" * (room - 1), "bb")
    assert not untrusted.passes_flat(over, 14)
    assert untrusted.check(dict(zip(keys, over, strict=True))) is not None
    assert not untrusted.passes_flat(("a\ud800", None), 14)
