"""Cold start: from process start to the first frame of ``pi-agent-ask ask``, and the import.

The command runs on a pseudo-terminal of its own (``pty.fork``), as a person would start it;
the clock stops when the question's prompt first appears in what it wrote. Each run journals
into a fresh session file in a temporary directory (what a person's first ``ask`` does; the
per-user history file is left alone). Each figure is the median of several runs.

Byte code: the main figure is an installed command's start, with byte code cached (``pip
install`` compiles it, and a first run writes it); the benchmark removes
``PYTHONDONTWRITEBYTECODE`` from the child's environment and runs once first to write the
cache. The second figure has no byte-code cache at all (``PYTHONDONTWRITEBYTECODE=1`` and an
empty ``-X pycache_prefix``, so every module, the standard library's included, is compiled from
source on every start): what a checkout run from a shell that sets that variable pays.

It also reports the CPU time (user and system) the command used by its first frame, which a
busy machine moves less than the wall clock, and counts the modules imported before the first
frame (a run with ``-X importtime``, its log on a file: every module the interpreter imported,
those of the package apart).

The floor: ``FLOOR`` is a program of a few lines that draws the same prompt with the libraries
a form cannot do without (trio, trio-asyncio and prompt_toolkit, and attrs, cbor2 and
fastjsonschema, which the package builds on) and no code of the package. It runs alternately
with ``ask``, timed the same way; what ``ask`` takes above it is the package's own start-up (its
modules, its classes, the runtime's wiring, the session file), the part this project can shrink.

Run: ``.venv/bin/python -m benchmarks cold``. Prints; asserts nothing.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

PROMPT = "Which region first?"
PAYLOAD = {
    "questions": [
        {
            "id": "region",
            "prompt": PROMPT,
            "options": [{"value": "eu", "label": "EU"}, {"value": "us", "label": "US"}],
        }
    ]
}
ROUNDS = 5
FLOOR = """
import attrs, cbor2, fastjsonschema  # the package builds on these in any case
import trio
import trio_asyncio
from prompt_toolkit.application import Application
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.layout import FormattedTextControl, Layout, Window

keys = KeyBindings()
keys.add("c-c")(lambda event: event.app.exit())
text = FormattedTextControl(PROMPT + "\\n 1. EU\\n 2. US")
app = Application(layout=Layout(Window(text)), key_bindings=keys)


async def main():
    async with trio_asyncio.open_loop():
        await trio_asyncio.aio_as_trio(app.run_async)()


trio.run(main)
""".replace("PROMPT", repr(PROMPT))


def first_frame_seconds(
    payload: Path,
    settings: Path,
    *,
    session: Path | None = None,
    byte_code: bool = True,
    import_log: Path | None = None,
) -> float:
    """Seconds from process start to the first frame of ``ask`` on ``payload``; ``session``
    is the file it journals into (``None``: a fresh one next to ``payload``); ``byte_code``
    False compiles every module from source (see the module's docstring); ``import_log``: run
    with ``-X importtime``, its log written there."""
    return first_frame(
        payload, settings, session=session, byte_code=byte_code, import_log=import_log
    )[0]


def first_frame(
    payload: Path,
    settings: Path,
    *,
    session: Path | None = None,
    byte_code: bool = True,
    import_log: Path | None = None,
) -> tuple[float, float]:
    """``first_frame_seconds``, and the CPU seconds (user and system) the command used by then:
    steadier than the wall clock on a shared machine, since waiting for a busy core is not in
    it. It includes the little the command does between drawing the frame and being killed."""
    if session is None:
        session = payload.with_name(f"history-{uuid.uuid4().hex}.pias")
    env = _child_env()
    options: list[str] = []
    if not byte_code:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        options = ["-X", f"pycache_prefix={payload.with_name('no-byte-code-cache')}"]
    if import_log is not None:
        options = [*options, "-X", "importtime"]
    command = [
        sys.executable,
        *options,
        "-m",
        "pi_agent_ask",
        "ask",
        str(payload),
        "--settings",
        str(settings),
        "--session",
        str(session),
    ]
    return _until_prompt(command, env, import_log=import_log)


def floor_frame(program: Path) -> tuple[float, float]:
    """``first_frame`` of ``FLOOR`` (written to ``program``): the wall and CPU seconds."""
    program.write_text(FLOOR)
    return _until_prompt([sys.executable, str(program)], _child_env())


def _until_prompt(
    command: list[str], env: dict[str, str], *, import_log: Path | None = None
) -> tuple[float, float]:
    """Wall and CPU seconds from starting ``command`` on a pseudo-terminal of its own until
    ``PROMPT`` is on its screen; ``import_log``: its standard error goes there."""
    start = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty is its controlling terminal
        if import_log is not None:
            os.dup2(os.open(import_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
        os.execve(sys.executable, command, env)
    seen = b""
    try:
        while PROMPT.encode() not in seen:
            ready, _, _ = select.select([fd], [], [], 30)
            if not ready:
                raise TimeoutError("no first frame within 30 s")
            seen += os.read(fd, 65536)
        wall = time.perf_counter() - start
    finally:
        os.kill(pid, signal.SIGKILL)
        _, _, usage = os.wait4(pid, 0)
        os.close(fd)
    return wall, usage.ru_utime + usage.ru_stime


def modules_before_first_frame(payload: Path, settings: Path) -> tuple[int, int]:
    """How many modules ``ask`` imported by its first frame, and how many of them are the
    package's (``-X importtime``'s log; a module imported just after the frame may be in it)."""
    log = payload.with_name("importtime.log")
    first_frame_seconds(payload, settings, import_log=log)
    names = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", log.read_text(), re.MULTILINE)
    return len(names), sum(1 for name in names if name.split(".")[0] == "pi_agent_ask")


def _child_env() -> dict[str, str]:
    """The environment of an installed command: byte code is cached, as ``pip install`` and a
    first run leave it (a development shell may set ``PYTHONDONTWRITEBYTECODE``, which makes
    every start compile the package from source and measures the compiler, not the start)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def import_seconds(module: str = "pi_agent_ask") -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True, env=_child_env())
    return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        payload = Path(tmp) / "payload.json"
        payload.write_text(json.dumps(PAYLOAD))
        settings = Path(tmp) / "settings.json"
        floor_program = Path(tmp) / "floor.py"
        first_frame_seconds(payload, settings)  # warm-up: writes the byte-code cache
        floor_frame(floor_program)
        runs = []
        floor_runs = []
        for _ in range(ROUNDS):  # alternately, so that both see the same machine
            runs.append(first_frame(payload, settings))
            floor_runs.append(floor_frame(floor_program))
        frames = [wall for wall, _ in runs]
        cpu = [used for _, used in runs]
        uncached = [first_frame_seconds(payload, settings, byte_code=False) for _ in range(3)]
        imports = [import_seconds() for _ in range(ROUNDS)]
        ui = [import_seconds("pi_agent_ask.ui.commands") for _ in range(ROUNDS)]
        modules, ours = modules_before_first_frame(payload, settings)
    print(f"process start -> first frame of `ask`: median {statistics.median(frames) * 1e3:.0f} ms")
    print(f"  CPU (user + system) by then: median {statistics.median(cpu) * 1e3:.0f} ms")
    floor_wall = statistics.median(wall for wall, _ in floor_runs)
    floor_cpu = statistics.median(used for _, used in floor_runs)
    print(
        f"  the floor (FLOOR: the libraries alone draw the prompt): median "
        f"{floor_wall * 1e3:.0f} ms, {floor_cpu * 1e3:.0f} ms CPU; ask above it: "
        f"{(statistics.median(frames) - floor_wall) * 1e3:+.0f} ms, "
        f"{(statistics.median(cpu) - floor_cpu) * 1e3:+.0f} ms CPU"
    )
    print(
        "  the same with no byte-code cache (every module compiled from source): "
        f"median {statistics.median(uncached) * 1e3:.0f} ms"
    )
    print(f"  modules imported before the first frame: {modules} ({ours} of the package)")
    print(
        f"python -c 'import pi_agent_ask':        median {statistics.median(imports) * 1e3:.0f} ms"
    )
    print(
        f"python -c 'import pi_agent_ask.ui.commands': median {statistics.median(ui) * 1e3:.0f} ms"
    )


if __name__ == "__main__":
    main()
