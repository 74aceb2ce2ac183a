"""Crash safety: a writer killed with SIGKILL at random moments never loses an acknowledged entry.

Each round a writer process appends through the persistence actor and prints every
acknowledged id; meanwhile this test opens the file read-only again and again (a concurrent
reader must always succeed and see whole entries only), then kills the writer with SIGKILL at a
random moment and checks that every acknowledged entry is in the file. All rounds use the same
file, so each writer first recovers whatever the previous kill left behind.

Starting Python and importing the package takes most of a second, so a small launcher script
imports everything once and forks one writer per round (the launcher runs no threads, so the
fork is safe); the writer is a separate process, killed like any other.

Launcher and writer share one stdout pipe, so each line is written with a single ``write``
(``say``): a pipe write of up to ``PIPE_BUF`` bytes is atomic, so their lines never interleave
and a kill never leaves half a line (``print`` writes each word separately when
``PYTHONUNBUFFERED`` is set). Every wait for a line is bounded: on a stall the test fails with
the lines seen so far and the state of the writer and the launcher instead of hanging.
"""

from __future__ import annotations

import contextlib
import os
import queue
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from pi_agent_ask.persistence.session_file import SessionFile

LAUNCHER = textwrap.dedent(
    """
    import os, random, sys
    import trio
    from pi_agent_ask.actors.persistence import run_persistence
    from pi_agent_ask.persistence.session_file import SessionFile

    def say(*words):
        # One write per line, at most PIPE_BUF (4096) bytes: atomic on the shared pipe.
        os.write(1, (" ".join(map(str, words))[:1000] + "\\n").encode())

    async def write(path, seed, big):
        rng = random.Random(seed)
        session = SessionFile.open(path)
        damage = session.report.damage
        say("open", len(session), damage.reason if damage else "-")
        known = list(session.branch_ids())
        async with trio.open_nursery() as nursery:
            journal = await nursery.start(run_persistence, session)
            n = 0
            while True:
                n += 1
                roll = rng.random()
                # Some entries span many pages, so a kill can land inside a write.
                pad = "x" * rng.choices([0, 100, 2_000, 70_000], [40, 40, 17, 3])[0]
                if big and n == 20:
                    # Announce a write that takes milliseconds: the kill comes during it.
                    say("big")
                    pad = "x" * 8_000_000
                if roll < 0.6:
                    entries = [await journal.append("message", {"n": n, "pad": pad})]
                elif roll < 0.85:
                    items = [("part", {"n": n, "i": i, "pad": pad}) for i in range(3)]
                    entries = list(await journal.append_many(items))
                elif known:
                    await journal.move_leaf(rng.choice(known))
                    continue
                else:
                    continue
                say("ack", *(e.id for e in entries))
                known.append(entries[-1].id)
                await trio.sleep(0.0005)

    path = sys.argv[1]
    for line in sys.stdin:
        seed, big = line.split()
        pid = os.fork()
        if pid == 0:
            try:
                trio.run(write, path, int(seed), big == "big")
            except BaseException as exc:
                say("error", repr(exc))
            finally:
                os._exit(1)
        say("pid", pid)
        os.waitpid(pid, 0)
        say("done")
    """
)

ROUNDS = 36
LINE_TIMEOUT = 30.0
"""Seconds to wait for the launcher's next line before failing: a writer acknowledges every
few milliseconds and a round takes well under a second, so only a stall reaches this."""


def _process_state(pid: int) -> str:
    """``pid``'s state letter and kernel wait channel from /proc, or ``gone``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return "gone"
    return f"{stat.rpartition(')')[2].split()[0]} in {wchan or '-'}"


class LauncherOutput:
    """The launcher's stdout, read by a thread, so that every wait for a line is bounded."""

    def __init__(self, stream: IO[str], describe: Callable[[], str]) -> None:
        self._lines: queue.Queue[str] = queue.Queue()
        self._describe = describe
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream: IO[str]) -> None:
        while line := stream.readline():
            self._lines.put(line)
        self._lines.put("")  # end of file: every holder of the pipe is gone

    def readline(self, waiting_for: str, seen: list[str]) -> str:
        try:
            return self._lines.get(timeout=LINE_TIMEOUT)
        except queue.Empty:
            raise AssertionError(
                f"no line from the launcher for {LINE_TIMEOUT} s while waiting for "
                f"{waiting_for!r}; {self._describe()}; last lines: {seen[-5:]}"
            ) from None


def test_sigkill_never_loses_an_acknowledged_entry(tmp_path: Path) -> None:
    path = tmp_path / "crash.pias"
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER)
    SessionFile.open(path).close()
    rng = random.Random(20261130)
    acknowledged: list[str] = []
    recovered: list[str] = []
    reader_opens = 0
    writer = 0  # the pid of the running writer; 0 once the launcher has reaped it
    with subprocess.Popen(
        [sys.executable, str(script), str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: cleanup reaches the writer too
    ) as launcher:
        assert launcher.stdin is not None and launcher.stdout is not None
        round_number = 0

        def state() -> str:
            return (
                f"round {round_number}, writer {writer or '-'}: "
                f"{_process_state(writer) if writer else '-'}, launcher "
                f"{launcher.pid}: {_process_state(launcher.pid)} (exit {launcher.poll()})"
            )

        output = LauncherOutput(launcher.stdout, state)
        try:
            for round_number in range(ROUNDS):
                # Every third round the kill aims at a large write in progress.
                big = round_number % 3 == 2
                launcher.stdin.write(f"{round_number} {'big' if big else 'small'}\n")
                launcher.stdin.flush()
                lines = []
                while not (line := output.readline("pid", lines)).startswith("pid "):
                    assert line, f"the launcher died: {lines}"
                    lines.append(line)
                writer = int(line.split()[1])
                if big:
                    while (line := output.readline("big", lines)) != "big\n":
                        assert line, f"the launcher died: {lines}"
                        assert line.split()[0] not in ("error", "done"), (line, lines)
                        lines.append(line)
                    time.sleep(rng.uniform(0.0, 0.06))
                # Read concurrently until a random moment, then kill the writer.
                deadline = time.monotonic() + (0.0 if big else rng.uniform(0.0, 0.3))
                while time.monotonic() < deadline:
                    with SessionFile.open(path, readonly=True) as reader:
                        reader_opens += 1
                        damage = reader.report.damage
                        # A reader racing the writer may see the frame being written, nothing else.
                        assert damage is None or damage.reason == "torn", reader.report.describe()
                        assert all(entry_id in reader for entry_id in acknowledged)
                os.kill(writer, signal.SIGKILL)
                while (line := output.readline("done", lines)) != "done\n":
                    assert line, "the launcher died"
                    lines.append(line)
                writer = 0
                for words in (line.split() for line in lines):
                    assert words[0] != "error", lines
                    if words[0] == "ack":
                        acknowledged.extend(words[1:])
                    elif words[0] == "open" and words[2] != "-":
                        recovered.append(words[2])
                with SessionFile.open(path, readonly=True) as after:
                    missing = set(acknowledged) - set(after.ids())
                    assert not missing, (
                        f"round {round_number}: acknowledged entries lost: {missing}"
                    )
                    damage = after.report.damage
                    assert damage is None or damage.reason == "torn", after.report.describe()
        finally:
            # On failure, leave no writer or launcher running: kill the whole process group.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
            output.thread.join(LINE_TIMEOUT)  # at end of file: no process holds the pipe now

    with SessionFile.open(path) as final:
        ids = final.ids()
        # Acknowledged entries are in the file, in the order they were acknowledged.
        position = {entry_id: n for n, entry_id in enumerate(ids)}
        assert [position[a] for a in acknowledged] == sorted(position[a] for a in acknowledged)
        assert final.branch() == final.branch(final.leaf_id)
        assert final.report.damage is None or final.report.damage.reason == "torn"
    assert len(acknowledged) > ROUNDS
    assert reader_opens > ROUNDS
    assert all(reason == "torn" for reason in recovered)
    print(f"{len(acknowledged)} acknowledged, {len(recovered)} torn tails recovered")
