"""Cold start: from process start to the first frame of ``pi-agent-ask ask``, and the import.

The command runs on a pseudo-terminal of its own (``pty.fork``), as a person would start it;
the clock stops when the question's prompt first appears in what it wrote. Each figure is the
median of several runs.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
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


def first_frame_seconds(payload: Path, settings: Path) -> float:
    command = [
        sys.executable,
        "-m",
        "pi_agent_ask",
        "ask",
        str(payload),
        "--settings",
        str(settings),
    ]
    start = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty is its controlling terminal
        os.execve(sys.executable, command, _child_env())
    seen = b""
    try:
        while PROMPT.encode() not in seen:
            ready, _, _ = select.select([fd], [], [], 30)
            if not ready:
                raise TimeoutError("no first frame within 30 s")
            seen += os.read(fd, 65536)
        return time.perf_counter() - start
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)


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
        first_frame_seconds(payload, settings)  # warm-up: writes the byte-code cache
        frames = [first_frame_seconds(payload, settings) for _ in range(ROUNDS)]
        imports = [import_seconds() for _ in range(ROUNDS)]
        ui = [import_seconds("pi_agent_ask.ui.commands") for _ in range(ROUNDS)]
    print(f"process start -> first frame of `ask`: median {statistics.median(frames) * 1e3:.0f} ms")
    print(
        f"python -c 'import pi_agent_ask':        median {statistics.median(imports) * 1e3:.0f} ms"
    )
    print(
        f"python -c 'import pi_agent_ask.ui.commands': median {statistics.median(ui) * 1e3:.0f} ms"
    )


if __name__ == "__main__":
    main()
