"""Crash safety: a writer killed with SIGKILL at random moments never loses an acknowledged entry.

Each round a writer process appends through the persistence actor and prints every
acknowledged id; meanwhile this test opens the file read-only again and again (a concurrent
reader must always succeed and see whole entries only), then kills the writer with SIGKILL at a
random moment and checks that every acknowledged entry is in the file. All rounds use the same
file, so each writer first recovers whatever the previous kill left behind.

Starting Python and importing the package takes most of a second, so a small launcher script
imports everything once and forks one writer per round (the launcher runs no threads, so the
fork is safe); the writer is a separate process, killed like any other.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from pi_agent_ask.persistence.session_file import SessionFile

LAUNCHER = textwrap.dedent(
    """
    import os, random, sys
    import trio
    from pi_agent_ask.actors.persistence import run_persistence
    from pi_agent_ask.persistence.session_file import SessionFile

    async def write(path, seed, big):
        rng = random.Random(seed)
        session = SessionFile.open(path)
        damage = session.report.damage
        print("open", len(session), damage.reason if damage else "-", flush=True)
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
                    print("big", flush=True)
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
                print("ack", *(e.id for e in entries), flush=True)
                known.append(entries[-1].id)
                await trio.sleep(0.0005)

    path = sys.argv[1]
    for line in sys.stdin:
        seed, big = line.split()
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            try:
                trio.run(write, path, int(seed), big == "big")
            except BaseException as exc:
                print("error", repr(exc), flush=True)
            finally:
                os._exit(1)
        print("pid", pid, flush=True)
        os.waitpid(pid, 0)
        print("done", flush=True)
    """
)

ROUNDS = 36


def test_sigkill_never_loses_an_acknowledged_entry(tmp_path: Path) -> None:
    path = tmp_path / "crash.pias"
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER)
    SessionFile.open(path).close()
    rng = random.Random(20261130)
    acknowledged: list[str] = []
    recovered: list[str] = []
    reader_opens = 0
    with subprocess.Popen(
        [sys.executable, str(script), str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as launcher:
        assert launcher.stdin is not None and launcher.stdout is not None
        writer = 0  # the pid of the running writer; 0 once the launcher has reaped it
        try:
            for round_number in range(ROUNDS):
                # Every third round the kill aims at a large write in progress.
                big = round_number % 3 == 2
                launcher.stdin.write(f"{round_number} {'big' if big else 'small'}\n")
                launcher.stdin.flush()
                lines = []
                while not (line := launcher.stdout.readline()).startswith("pid "):
                    assert line, f"the launcher died: {lines}"
                    lines.append(line)
                writer = int(line.split()[1])
                if big:
                    while (line := launcher.stdout.readline()) != "big\n":
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
                while (line := launcher.stdout.readline()) != "done\n":
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
            # On failure, leave no writer or launcher running (the launcher waits for its writer).
            if writer:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(writer, signal.SIGKILL)
            launcher.kill()

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
