"""The desk's board (one form on display, FIFO by show time across agents) and its journals."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.desk.board import SEP, AgentSurface, Board
from pi_agent_ask.desk.web.view import ENDED_TEXT, ended_text, ending_text
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.types import AskParams, Option, Question
from pi_agent_ask.mcp_common.journals import (
    InvalidKey,
    check_key,
    journal_name,
    journal_path,
    known_keys,
    record_key,
)


def form(label: str, *, background: bool = True) -> fs.FormState:
    question = Question(
        id="q", label=label, prompt=f"{label}?", type="single", options=[Option("a", "A")]
    )
    return fs.new_form(AskParams(questions=(question,)), background=background)


@pytest.fixture
def channel() -> trio.MemorySendChannel:
    send, _receive = trio.open_memory_channel(1)
    return send


def test_the_display_shows_the_earliest_shown_form_across_agents(channel) -> None:
    display = NullSurface()
    board = Board(display=display)
    alpha, beta = AgentSurface(board, "alpha"), AgentSurface(board, "beta")
    beta.show("f1", form("B1"), channel)
    alpha.show("f1", form("A1"), channel)
    assert board.current is not None and board.current.key == "beta"
    assert display.shown == ["beta" + SEP + "f1"]

    # Beta's answer: its next form is shown after alpha's, so alpha's turn comes first.
    beta.hide("f1")
    beta.show("f2", form("B2"), channel)
    assert board.current is not None and (board.current.key, board.current.flow_id) == (
        "alpha",
        "f1",
    )
    alpha.hide("f1")
    assert board.current is not None and board.current.key == "beta"
    assert display.shown == ["beta" + SEP + "f1", "alpha" + SEP + "f1", "beta" + SEP + "f2"]
    beta.hide("f2")
    assert board.current is None


def test_updates_of_a_waiting_form_keep_its_place_and_snapshot(channel) -> None:
    board = Board(display=NullSurface())
    board.show("alpha", "f", form("A"), channel)
    board.show("beta", "f", form("B"), channel)
    newer = form("B-newer")
    board.update("beta", "f", newer)
    board.hide("alpha", "f")
    assert board.current is not None and board.current.state is newer


def test_blocked_marks_foreground_forms_and_waiting_agents(channel) -> None:
    board = Board(display=NullSurface())
    board.show("alpha", "f", form("A"), channel)
    board.show("beta", "f", form("B", background=False), channel)
    rows = {row.key: row for row in board.agents()}
    assert not rows["alpha"].blocked and rows["beta"].blocked
    assert rows["beta"].pending == 1  # a foreground form counts as pending
    board.wait_started("alpha")
    rows = {row.key: row for row in board.agents()}
    assert rows["alpha"].blocked and rows["alpha"].waiting and rows["alpha"].displayed
    board.wait_ended("alpha")
    assert not {row.key: row for row in board.agents()}["alpha"].blocked


@pytest.mark.parametrize("ended", ["submitted", "cancelled", "withdrawn", "deferred", "failed"])
def test_what_became_of_a_form_names_it_as_the_terminal_does(channel, ended) -> None:
    """A page reads what became of a form above the next one: every ending names the form
    (its title, else its first question's label, agent text neutralised), where "This form"
    read as the next one."""
    board = Board(display=NullSurface())
    untitled = form("Colour")
    hostile = "Deploy\x1b[2J"  # an agent's title with an escape sequence in it
    titled = attrs.evolve(untitled, params=attrs.evolve(untitled.params, title=hostile))
    board.show("alpha", "t", titled, channel)
    board.show("alpha", "u", form("  Colour  "), channel)
    board.hide("alpha", "t", ended)
    board.hide("alpha", "u", ended)
    said = {flow_id: ending_text(ending) for _key, flow_id, ending in board.endings()}
    assert said["t"].startswith("“Deploy") and "\x1b" not in said["t"], said
    assert said["u"] == f"“Colour” {ENDED_TEXT[ended]}", said
    assert ended_text(board, "alpha/u") == said["u"]


async def test_wait_for_returns_once_the_board_changed(channel) -> None:
    board = Board(display=NullSurface())
    async with trio.open_nursery() as nursery:
        seen = trio.Event()

        async def waiter() -> None:
            await board.wait_for(lambda b: b.current is not None)
            seen.set()

        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert not seen.is_set()
        board.show("alpha", "f", form("A"), channel)
        await seen.wait()


def test_journal_names_are_safe_and_distinct(tmp_path: Path) -> None:
    keys = ["alpha", "../../etc/passwd", "a/b", "a b", "ünïcode", "x" * 200, "alpha "]
    names = [journal_name(key) for key in keys]
    assert len(set(names)) == len(keys)
    for name in names:
        assert "/" not in name and not name.startswith(".")
        assert journal_path(tmp_path, "k").parent == tmp_path


def test_known_keys_come_back_and_tampered_ones_do_not(tmp_path: Path) -> None:
    record_key(tmp_path, "alpha")
    record_key(tmp_path, "beta/../x")
    (tmp_path / (journal_name("gamma") + ".key")).write_text("not gamma")
    assert sorted(known_keys(tmp_path)) == ["alpha", "beta/../x"]
    fresh = tmp_path / "new" / "state"
    record_key(fresh, "alpha")
    assert fresh.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("key", ["", "   ", "a\x1b[2J", "x" * 201, "tab\there"])
def test_bad_keys_are_refused(key: str) -> None:
    with pytest.raises(InvalidKey):
        check_key(key)


def test_the_desk_package_names_resolve_lazily() -> None:
    import subprocess
    import sys

    import pi_agent_ask.desk as desk

    for name in desk.__all__:
        assert getattr(desk, name) is not None
    with pytest.raises(AttributeError):
        _ = desk.no_such_name  # type: ignore[attr-defined]
    # Building the command line parser (every command does) loads neither server nor SDK.
    probe = (
        "import sys; from pi_agent_ask.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('hypercorn', 'mcp', 'starlette') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@given(
    origin=st.one_of(st.none(), st.text(max_size=40), st.sampled_from(["http://evil.example"])),
    host=st.one_of(st.none(), st.text(max_size=30), st.just("127.0.0.1:4000")),
    authorization=st.one_of(
        st.none(), st.text(max_size=60), st.just("Bearer tok"), st.just("bearer  tok ")
    ),
)
def test_a_request_passes_only_with_the_token_an_own_origin_and_a_loopback_host(
    origin: str | None, host: str | None, authorization: str | None
) -> None:
    from pi_agent_ask.desk.http import DeskApp, Listen

    app = DeskApp(manager=None, token="tok", listen=Listen("127.0.0.1", 0), pid=1, port=4000)  # type: ignore[arg-type]
    headers = [
        (name, value.encode("latin-1", "replace"))
        for name, value in ((b"origin", origin), (b"host", host), (b"authorization", authorization))
        if value is not None
    ]
    refusal = app.refusal({"type": "http", "headers": headers})
    own_origins = {"http://127.0.0.1:4000", "http://localhost:4000", "http://[::1]:4000"}
    passes = (
        (origin is None or origin.encode("latin-1", "replace").decode("latin-1") in own_origins)
        and host == "127.0.0.1:4000"
        and authorization is not None
        and authorization.split(" ", 1)[0].lower() == "bearer"
        and authorization.split(" ", 1)[1:] != []
        and authorization.split(" ", 1)[1].strip() == "tok"
    )
    assert (refusal is None) == passes
    if origin is not None and origin not in own_origins:
        assert refusal is not None and refusal[0] == 403
