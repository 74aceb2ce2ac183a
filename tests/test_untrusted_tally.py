"""The boundary's two walks (``form/untrusted.py``): ``_tally``, which passes a bounded JSON
value of the exact JSON types without spelling out a path for each value, agrees with
``_scan``, which names the first refusal; and a value as honest clients send it is decided by
``_tally`` alone."""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import event, given, settings
from hypothesis import strategies as st

from pi_agent_ask import events as ev
from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.actors.runtime import open_runtime
from pi_agent_ask.form import untrusted

from .runtime_support import answer, payload, settings_file, settle, submit


class _Text(str):
    pass


class _Number(enum.IntEnum):
    ONE = 1


class _Map(Mapping[str, Any]):
    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


TEXT = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["", "ok", json.loads('"\\ud800"'), "a\udfffb", "\u202e\x00", "é"]),
)
KEYS = st.one_of(TEXT, TEXT.map(_Text), st.integers(0, 3), st.just(b"k"))
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    TEXT,
    TEXT.map(_Text),
    st.just(_Number.ONE),
    st.just(b"bytes"),
    st.just({1, 2}),
)
VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(TEXT, children, max_size=4),
        st.dictionaries(KEYS, children, max_size=3),
        st.dictionaries(TEXT, children, max_size=2).map(_Map),
    ),
    max_leaves=16,
)


def _plain(value: Any) -> bool:
    """Whether ``value`` is of the exact JSON types all through (what ``_tally`` decides)."""
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if kind is list or kind is tuple:
        return all(_plain(v) for v in value)
    return value is None or kind in (str, bool, int, float)


@settings(max_examples=600)
@given(
    value=VALUES,
    depth=st.integers(0, 4),
    max_depth=st.integers(0, 6),
    max_text_chars=st.integers(0, 40),
    max_values=st.integers(1, 30),
)
def test_the_walk_without_paths_passes_what_the_walk_with_paths_passes(
    value: Any, depth: int, max_depth: int, max_text_chars: int, max_values: int
) -> None:
    """``_tally`` gives ``_scan``'s counts for each value ``_scan`` passes and that is of the
    exact JSON types, and ``None`` for every other (``_scan`` then decides)."""
    bounds = (depth, max_depth, max_text_chars, max_values)
    scanned = untrusted._scan(value, *bounds)
    tallied = untrusted._tally(value, *bounds)
    passes = not isinstance(scanned, untrusted.Refusal)
    event(f"passes: {passes}, tallied: {tallied is not None}")
    if passes and _plain(value) and type(value) in (dict, list):
        assert tallied == scanned
    else:
        assert tallied is None or tallied == scanned
        assert passes or tallied is None


@settings(max_examples=300)
@given(value=VALUES)
def test_check_and_measure_say_what_the_walk_with_paths_says(value: Any) -> None:
    scanned = untrusted._scan(value, 0, untrusted.MAX_DEPTH, untrusted.MAX_TEXT_CHARS, 1000)
    refused = isinstance(scanned, untrusted.Refusal)
    assert untrusted.check(value, max_values=1000) == (scanned if refused else None)
    if not refused:
        measured = untrusted.measure(value, depth=0)
        assert measured == untrusted._scan(
            value, 0, untrusted.MAX_DEPTH, untrusted.MAX_TEXT_CHARS, untrusted.MAX_VALUES
        )


def test_the_bounds_are_kept_by_the_walk_without_paths() -> None:
    """At each bound exactly, ``_tally`` passes; one past it, it leaves the value to ``_scan``."""
    deep: Any = "x"
    for _ in range(untrusted.MAX_DEPTH):
        deep = [deep]
    assert untrusted._tally(deep, 0, untrusted.MAX_DEPTH, 10, 1000) == (1, 65)
    assert untrusted._tally([deep], 0, untrusted.MAX_DEPTH, 10, 1000) is None
    assert untrusted._tally({"ab": ["cd", 1]}, 0, 64, 4, 4) == (4, 4)
    assert untrusted._tally({"ab": ["cd", 1]}, 0, 64, 3, 4) is None
    assert untrusted._tally({"ab": ["cd", 1]}, 0, 64, 4, 3) is None
    assert untrusted._tally({"ab": ["c\ud800", 1]}, 0, 64, 9, 9) is None
    assert untrusted._tally({_Text("ab"): 1}, 0, 64, 9, 9) is None


async def test_a_background_form_asked_and_answered_is_never_walked_with_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The arguments of an ``ask_user`` call and the response of a submission, as clients send
    them, pass the boundary without the walk that spells out paths (``_scan``)."""
    walked: list[object] = []
    scan = untrusted._scan

    def counted(value: object, *bounds: int) -> Any:
        walked.append(value)
        return scan(value, *bounds)

    monkeypatch.setattr(untrusted, "_scan", counted)
    completed = trio.Event()
    with trio.fail_after(30):
        async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
            rt.agent_started()
            rt.events.on(ev.COMPLETED, lambda _payload: completed.set())
            arguments = payload("a", background=True)
            arguments["extra"] = {"free": ["form", 1, None]}  # measured, not validated
            result = await rt.call_tool("ask_user", arguments, "c0")
            assert not result.get("isError")
            await rt.show_queue()
            visible = (await rt.statistics()).visible
            assert visible == "tool:c0"
            response = answer({"a": ["a1"]})
            response["answers"]["a"].update(note="a note", optionNotes={"a1": "why"})
            submit(rt.events, visible, response)
            await completed.wait()
            await settle()
    assert walked == []
