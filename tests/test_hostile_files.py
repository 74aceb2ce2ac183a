"""Odd files where settings and sessions are expected: FIFOs, devices, links to ``/dev/zero``
(issue 10, items 4-6). Each case runs in a child process with a timeout and a memory limit, so
a regression is a failed test, never a hung or exhausted test run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .runtime_support import settings_file

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 30.0
MEMORY_LIMIT = 1024 * 1024 * 1024  # the child may not grow past 1 GiB


def run_child(code: str, *, cwd: Path, env: dict[str, str] | None = None) -> dict[str, object]:
    """Run ``code`` in a child Python; it prints one JSON object on its last line."""
    prelude = textwrap.dedent(
        f"""
        import json, resource, sys
        resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT}, {MEMORY_LIMIT}))
        """
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", prelude + textwrap.dedent(code)],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            # This checkout's package, whatever the child's working directory is.
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung for {TIMEOUT} s")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def odd_file(path: Path, kind: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()


LOAD = """
    from pathlib import Path
    from pi_agent_ask.persistence.settings import load_settings
    loaded = load_settings(Path({settings!r}), project_dir=Path.cwd())
    print(json.dumps({{"notices": list(loaded.notices)}}))
"""


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_an_untrusted_project_file_is_never_read(tmp_path: Path, kind: str) -> None:
    settings = settings_file(tmp_path)
    project = tmp_path / "project"
    odd_file(project / ".pi" / "extensions" / "pi-agent-ask.json", kind)
    out = run_child(LOAD.format(settings=str(settings)), cwd=project)
    [notice] = out["notices"]
    assert "is not listed in trustedProjects" in notice


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_trusted_project_file_that_is_not_a_regular_file_is_a_notice(
    tmp_path: Path, kind: str
) -> None:
    project = tmp_path / "project"
    odd_file(project / ".pi" / "extensions" / "pi-agent-ask.json", kind)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"schemaVersion": 6, "trustedProjects": [str(project)]}))
    out = run_child(LOAD.format(settings=str(settings)), cwd=project)
    [notice] = out["notices"]
    assert notice == (
        f"Ignored project ask config at {project / '.pi/extensions/pi-agent-ask.json'}: "
        "it could not be read (not a regular file)."
    )


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_global_settings_file_that_is_not_a_regular_file_loads_defaults(
    tmp_path: Path, kind: str
) -> None:
    settings = tmp_path / "settings.json"
    odd_file(settings, kind)
    out = run_child(LOAD.format(settings=str(settings)), cwd=tmp_path)
    [notice] = out["notices"]
    assert notice.startswith(f"Unable to read ask config at {settings}: not a regular file.")


def test_a_huge_settings_file_is_refused(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"schemaVersion": 6, "pad": "x" * (2 * 1024 * 1024)}))
    out = run_child(LOAD.format(settings=str(settings)), cwd=tmp_path)
    [notice] = out["notices"]
    assert "larger than 1048576 bytes" in notice


def test_tool_definitions_and_open_runtime_do_not_hang_on_a_fifo_project(tmp_path: Path) -> None:
    settings = settings_file(tmp_path)
    project = tmp_path / "project"
    odd_file(project / ".pi" / "extensions" / "pi-agent-ask.json", "fifo")
    code = f"""
        import trio, pi_agent_ask
        names = [t["name"] for t in pi_agent_ask.tool_definitions({str(settings)!r})]
        async def main():
            async with pi_agent_ask.open_runtime(settings={str(settings)!r}, mode="print") as rt:
                return rt.tool_names()
        print(json.dumps({{"names": names, "runtime": list(trio.run(main))}}))
    """
    out = run_child(code, cwd=project)
    assert out["names"][0] == "ask_user" and out["runtime"][0] == "ask_user"
