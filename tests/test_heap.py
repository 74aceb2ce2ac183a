"""The heap is the host's: an embedded runtime leaves CPython's cyclic collector as the host set
it (on or off, with or without objects frozen) and never calls it. Only the installed command,
a process of its own, settles its heap, in one place (``cli.settled_heap``).

Frozen objects are still freed by reference counting, so with objects frozen the count may only
fall: what the host froze stays frozen, and nothing is frozen on top.

Each runtime here journals into a session file, opens it again (decoded in a worker thread) and
draws a form on a terminal, answered by keys: the places where a library could be tempted to
switch the collector off, collect or freeze.
"""

from __future__ import annotations

import ast
import asyncio
import gc
import importlib.util
import inspect
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from prompt_toolkit.input import create_pipe_input

import pi_agent_ask
import pi_agent_ask.aio as aio
from pi_agent_ask import cli
from pi_agent_ask.ui.testing import asking

from .aio_support import AsyncTerminal, run
from .runtime_support import payload, settings_file

PACKAGE = str(Path(pi_agent_ask.__file__).parent)
COLLECTOR_CALLS = ("disable", "enable", "collect", "freeze", "unfreeze", "set_threshold")


class HostHeap:
    """The collector as a host set it: on, off, or on with the host's objects frozen."""

    def __init__(self, kind: str) -> None:
        self.kept = [[] for _ in range(1000)]  # the host's objects, alive throughout
        if kind == "off":
            gc.disable()
        if kind == "frozen":
            gc.freeze()
        self.enabled = gc.isenabled()
        self.frozen = gc.get_freeze_count()

    def check(self) -> None:
        """The collector as the host left it."""
        assert gc.isenabled() == self.enabled
        if self.frozen == 0:
            assert gc.get_freeze_count() == 0
        else:
            assert 0 < gc.get_freeze_count() <= self.frozen
            assert not any(item is self.kept[0] for item in gc.get_objects())  # still frozen


@pytest.fixture(params=["on", "off", "frozen"])
def host_heap(request: pytest.FixtureRequest) -> Iterator[HostHeap]:
    gc.unfreeze()
    try:
        yield HostHeap(request.param)
    finally:
        gc.enable()
        gc.unfreeze()


@pytest.fixture
def package_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every call of a ``gc`` function that changes the collector, made from the package (in any
    thread)."""
    calls: list[str] = []

    def recording(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            frame = inspect.currentframe()
            caller = frame.f_back if frame is not None else None
            if caller is not None and caller.f_code.co_filename.startswith(PACKAGE):
                calls.append(name)
            return original(*args, **kwargs)

        return call

    for name in COLLECTOR_CALLS:
        monkeypatch.setattr(gc, name, recording(name, getattr(gc, name)))
    return calls


async def _answer_on(keys: Any, wait: Callable[[str], Any]) -> None:
    await wait("Question a?")
    keys.send_text("2")
    await wait("Review your answers")
    keys.send_text("11")


async def test_an_embedded_trio_runtime_leaves_the_host_s_collector(
    tmp_path: Path, host_heap: HostHeap, package_calls: list[str]
) -> None:
    session = tmp_path / "session.pias"
    settings = settings_file(tmp_path)
    with trio.fail_after(30):
        for opened in range(2):  # the second time, the session is read back and recovered
            async with pi_agent_ask.open_runtime(
                session=session, settings=settings, surface=pi_agent_ask.NullSurface()
            ) as rt:
                if not opened:
                    await rt.call_tool("ask_user", payload("b", background=True), "c1")
        host_heap.check()

        async with asking(payload("a"), settings, session=tmp_path / "ask.pias") as ask:
            await _answer_on(ask.pipe, ask.wait)
            status, result = await ask.finished()
        assert status == 0
        assert result["details"]["answers"]["a"]["values"] == ["a2"]
    host_heap.check()
    assert package_calls == []


def test_an_embedded_asyncio_runtime_leaves_the_host_s_collector(
    tmp_path: Path, host_heap: HostHeap, package_calls: list[str]
) -> None:
    session = tmp_path / "session.pias"
    settings = settings_file(tmp_path)

    async def main() -> None:
        for opened in range(2):  # the second time, the session is read back and recovered
            async with aio.open_runtime(
                session=session, settings=settings, surface=pi_agent_ask.NullSurface()
            ) as rt:
                if not opened:
                    await rt.call_tool("ask_user", payload("b", background=True), "c1")
        host_heap.check()

        term = AsyncTerminal(100, 30)
        with create_pipe_input() as keys:
            async with aio.open_runtime(
                session=tmp_path / "ask.pias", settings=settings, input=keys, output=term.output
            ) as rt:
                call = asyncio.create_task(rt.call_tool("ask_user", payload("a"), "c2"))
                await _answer_on(keys, term.wait_text)
                result = await call
                assert result["details"]["answers"]["a"]["values"] == ["a2"]

    run(main)
    host_heap.check()
    assert package_calls == []


def _validate_argv(tmp_path: Path) -> list[str]:
    arguments = tmp_path / "payload.json"
    arguments.write_text(json.dumps(payload("a")))
    return ["validate", str(arguments)]


def test_the_command_line_called_as_a_function_leaves_the_host_s_collector(
    tmp_path: Path,
    host_heap: HostHeap,
    package_calls: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(_validate_argv(tmp_path)) == cli.EXIT_OK
    assert json.loads(capsys.readouterr().out)["ok"] is True
    host_heap.check()
    assert package_calls == []


def test_the_installed_command_settles_its_own_heap_once_at_start_up(
    tmp_path: Path,
    package_calls: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr("sys.argv", ["pi-agent-ask", *_validate_argv(tmp_path)])
    gc.unfreeze()
    try:
        with pytest.raises(SystemExit) as exited:
            cli.entry()
        assert exited.value.code == cli.EXIT_OK
        assert json.loads(capsys.readouterr().out)["ok"] is True
        # Off while it started, what start-up made frozen, on again for the command's run.
        assert package_calls == ["disable", "freeze", "enable"]
        assert gc.isenabled()
        assert gc.get_freeze_count() > 0
        assert "pi_agent_ask.form.validate" in cli.RUNS.values()
    finally:
        gc.enable()
        gc.unfreeze()


def test_only_the_command_s_start_up_touches_the_collector() -> None:
    """Every use of ``gc`` in the package is inside ``cli.settled_heap``."""
    users = []
    for path in sorted(Path(PACKAGE).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
        for node in ast.walk(tree):
            imported = isinstance(node, ast.Import | ast.ImportFrom) and any(
                (alias.name if isinstance(node, ast.Import) else node.module) == "gc"
                for alias in node.names
            )
            used = isinstance(node, ast.Name) and node.id == "gc"
            if not (imported or used):
                continue
            inside = [f.name for f in functions if f.lineno <= node.lineno <= (f.end_lineno or 0)]
            where = inside[-1] if inside else "<module>"
            users.append(
                (path.relative_to(PACKAGE).as_posix(), where, "import" if imported else "use")
            )
    assert sorted(set(users)) == [
        ("cli.py", "<module>", "import"),
        ("cli.py", "settled_heap", "use"),
    ]


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_each_command_names_the_module_it_runs(command: str) -> None:
    assert importlib.util.find_spec(cli.RUNS[command]) is not None


@pytest.mark.parametrize(
    ("argv", "imported"),
    [
        (["desk", "--headless"], True),  # the server is in the heap start-up freezes
        (["desk", "login-url"], False),  # asking a running desk for a link needs none of it
    ],
)
def test_the_desk_s_start_up_imports_its_server_and_login_url_does_not(
    argv: list[str], imported: bool
) -> None:
    script = (
        "import sys\n"
        "from pi_agent_ask import cli\n"
        f"cli.prepare({argv!r})\n"
        "print('mcp.server' in sys.modules and 'pi_agent_ask.desk.run' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == str(imported)
