from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
from hypothesis import HealthCheck, Phase, settings

from tests.pg import cluster_or_skip

# The cases of the agent SDKs' tests live in modules of their own (imported when they run):
# their asserts report as a test module's do.
pytest.register_assert_rewrite("tests.openai_agents_cases", "tests.pydantic_ai_cases")

# No explain phase: it replays a failing example under a line tracer, which for the runtime
# property suite (real Trio scheduling) takes hours; the shrunk example and its error are the
# report. Shrinking itself stops after five minutes (Hypothesis's own limit).
PHASES = [phase for phase in Phase if phase is not Phase.explain]
settings.register_profile(
    "ci",
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=PHASES,
    print_blob=True,
)
settings.register_profile("dev", max_examples=50, deadline=None, phases=PHASES, print_blob=True)
# `mutate`: for mutmut, where a failure only has to be seen, not shrunk (a shrink of a stateful
# run can take minutes per killed mutant).
settings.register_profile(
    "mutate",
    parent=settings.get_profile("ci"),
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

TRIO_TEST_DEADLINE = float(os.environ.get("PI_AGENT_ASK_TEST_DEADLINE", "120"))
"""Real seconds a Trio test may run. A test that is still running then is cancelled and fails
with the place every task was blocked at, instead of stalling the run. (Tests on a mock clock
keep their virtual time to themselves: the deadline would be virtual too, so they have none;
pytest-timeout, configured in pyproject.toml, is the backstop for every test.)"""


TRIO_SOURCES = str(Path(trio.__file__).parent)


class TrioTestTimeout(AssertionError):
    """A Trio test outlived ``TRIO_TEST_DEADLINE``."""


def _task_tree(task: trio.lowlevel.Task, depth: int = 0) -> Iterator[str]:
    pad = "  " * depth
    frames = [
        f"{frame.f_code.co_filename}:{lineno} in {frame.f_code.co_name}"
        for frame, lineno in task.iter_await_frames()
        if TRIO_SOURCES not in frame.f_code.co_filename
    ]
    yield f"{pad}- {task.name}"
    for line in frames[-4:]:
        yield f"{pad}    {line}"
    for nursery in task.child_nurseries:
        for child in nursery.child_tasks:
            yield from _task_tree(child, depth + 1)


def run_with_deadline(
    fn: Callable[[], Any],
    *,
    clock: trio.abc.Clock | None = None,
    instruments: Any = (),
    config: pytest.Config | None = None,
) -> Any:
    """``trio.run`` with a real-time deadline around the test (see ``TRIO_TEST_DEADLINE``)."""
    if clock is not None:
        return trio.run(fn, clock=clock, instruments=instruments)

    async def guarded() -> Any:
        tree: list[str] = []
        with trio.move_on_after(TRIO_TEST_DEADLINE) as scope:
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    await trio.sleep(TRIO_TEST_DEADLINE - 0.5)
                    tree.extend(_task_tree(trio.lowlevel.current_root_task()))
                    # Also at once, past pytest's capture: a hang that cancellation cannot
                    # break (a shielded wait) never raises, and pytest-timeout ends the worker
                    # later, taking the captured output with it.
                    report = "\n".join(["a Trio test is past its deadline; its tasks:", *tree])
                    capture = config.pluginmanager.getplugin("capturemanager") if config else None
                    if capture is None:
                        print(report, file=sys.stderr)
                    else:
                        with capture.global_and_fixture_disabled():
                            print(report, file=sys.stderr)

                nursery.start_soon(watch)
                result = await fn()
                nursery.cancel_scope.cancel()
                return result
        if scope.cancelled_caught:
            raise TrioTestTimeout(
                f"the test ran longer than {TRIO_TEST_DEADLINE:g} s; its tasks were at:\n"
                + "\n".join(tree)
            )
        raise AssertionError("unreachable")  # pragma: no cover

    return trio.run(guarded, instruments=instruments)


LONGEST_FIRST = (
    "test_runtime_properties.py",
    "test_team_failover.py",
    "test_team_properties.py",
    "test_hostile_properties.py",
    "test_mcp_typescript.py",
    "test_team_hook.py",
    "test_mcp_agent_keys.py",
    "test_web_browser_outages.py",
    "test_validate_boundary.py",
    "test_codec.py",
    "test_queue_model.py",
    "test_web_browser.py",
    "test_web_browser_recovery.py",
    "test_checkpoint_rule.py",
    "test_mcp_stdio.py",
)
"""Modules whose tests run longest (up to a minute each, or in all, under ``-n 2``), run
first: xdist hands tests out in this order, and one of them handed out last kept a worker
busy alone at the end of the suite (a worker that runs out of tests takes the last ones of
the other's queue, ``pytest_cmdline_main``, never one that is running). Order only; every
other module keeps its place after them."""


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """With ``-n N`` and no ``--dist``, xdist's work-stealing scheduler: a worker whose queue
    runs out takes half of the other's. The default (``load``) never moves a test once sent:
    the first batch it sent a worker, hundreds of tests, stayed there, and in a full run one
    worker ran the rest of it (the end-to-end tests among them) for 157 s after the other had
    run out. Here, not in ``addopts``: ``-p no:xdist`` would refuse an unknown ``--dist``.
    (Runs before xdist's own hook, which turns ``-n`` without ``--dist`` into ``load``.)"""
    if config.getoption("numprocesses", None) and config.getoption("dist", None) == "no":
        config.option.dist = "worksteal"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: n for n, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest stay
    # pytest-trio (trio_mode) marks every async test; a marker added in front names the runner.
    for item in items:
        if item.get_closest_marker("trio") is not None:
            run = functools.partial(run_with_deadline, config=item.config)
            item.add_marker(pytest.mark.trio(run=run), append=False)


@pytest.fixture(autouse=True)
def _private_agent_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: Any) -> None:
    """Commands started by tests keep their default files (settings, the default history
    session) in a directory of the test run, never in the person's ``~/.pi/agent``."""
    if "PI_CODING_AGENT_DIR" not in os.environ:
        monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path_factory.getbasetemp() / "agent"))


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Any]:
    """One throwaway PostgreSQL cluster per test process, for every team store test
    (``tests/store_support.py``). Defined here, not imported into each module: a fixture
    imported into a module is that module's own, so each module started (and kept until the
    end) a cluster of its own, two seconds or more each."""
    yield from cluster_or_skip()
