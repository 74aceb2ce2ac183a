"""Session file speed and memory. Prints figures, asserts nothing.

- append throughput: acknowledged entries per second through the persistence actor (the real
  path: request, write, reply), with the default durability (the frame reached the OS) and with
  ``fsync=True`` (each frame flushed to the disk before the reply); plain ``SessionFile.append``
  for comparison;
- open + branch: time to open a session of 10k, 100k and 1M entries (one long branch with a
  side branch every 100 entries) and to decode its active branch, and the peak of Python memory
  (tracemalloc) for the open alone (the index) and for open + branch (the decoded entries too),
  in separate runs because tracing slows everything down;
- the ratio of the 1M figures to the 100k ones (10 is linear).

Run: ``.venv/bin/python -m benchmarks.bench_session``.
"""

from __future__ import annotations

import gc
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from pi_agent_ask.actors.persistence import run_persistence
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.session_file import (
    Entry,
    Header,
    SessionFile,
    encode_frame,
)

SIZES = (10_000, 100_000, 1_000_000)


def _data(n: int) -> dict[str, Any]:
    return {"text": f"message number {n} with a little text", "n": n, "tags": ["a", "b"]}


def _actor_appends(path: Path | None, count: int, *, fsync: bool) -> float:
    """Seconds for ``count`` acknowledged appends through the actor, one after another."""

    async def run() -> float:
        session = SessionFile.in_memory() if path is None else SessionFile.open(path, fsync=fsync)
        async with trio.open_nursery() as nursery:
            journal = await nursery.start(run_persistence, session)
            async with journal:
                start = time.perf_counter()
                for n in range(count):
                    await journal.append("message", _data(n))
                return time.perf_counter() - start

    return trio.run(run)


def _plain_appends(path: Path, count: int) -> float:
    with SessionFile.open(path) as session:
        start = time.perf_counter()
        for n in range(count):
            session.append("message", _data(n))
        return time.perf_counter() - start


def _write_session(path: Path, count: int) -> None:
    """A session file written frame by frame (faster than appending): a branch of ``count``
    entries, plus a side entry every 100, so the file is a tree (the active branch is the long
    one, ending at the last entry written).
    """
    with path.open("wb") as out:
        out.write(encode_frame(Header.new().to_cbor()))
        parent: str | None = None
        buffer = bytearray()
        for n in range(count):
            entry_id = f"{n:016x}"
            if n % 100 == 99 and parent is not None:
                # A sibling of ``entry_id`` off the branch; the branch continues from ``entry_id``.
                side = Entry(f"s{n:015x}", parent, "side", 1.0e9 + n, {"n": n})
                buffer += encode_frame(side.to_cbor())
            entry = Entry(entry_id, parent, "message", 1.0e9 + n, _data(n))
            buffer += encode_frame(entry.to_cbor())
            parent = entry_id
            if len(buffer) > 1 << 20:
                out.write(buffer)
                buffer.clear()
        out.write(buffer)


def _open_and_branch(path: Path) -> tuple[float, float, int]:
    start = time.perf_counter()
    session = SessionFile.open(path, readonly=True)
    opened = time.perf_counter()
    branch = session.branch()
    done = time.perf_counter()
    session.close()
    return opened - start, done - opened, len(branch)


def _rebuild(path: Path) -> float:
    """What a runtime does after opening: rebuild the queue and look for an interrupted call."""
    with SessionFile.open(path, readonly=True) as session:
        branch = session.branch()
    start = time.perf_counter()
    jr.rebuild_queue(branch)
    jr.find_interrupted_call(branch, revalidate=lambda _arguments: None)
    return time.perf_counter() - start


def _open_only(path: Path) -> None:
    SessionFile.open(path, readonly=True).close()


def _peak_memory(work: Callable[[], object]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    """Print the session file figures."""
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        print("append throughput (acknowledged entries/s):")
        count = 20_000
        rate = count / _actor_appends(root / "os.pias", count, fsync=False)
        print(f"  actor, written to the OS (default)  {rate:>10,.0f}/s  ({count:,} appends)")
        count = 300
        rate = count / _actor_appends(root / "disk.pias", count, fsync=True)
        print(f"  actor, fsync=True (flushed to disk) {rate:>10,.0f}/s  ({count:,} appends)")
        count = 20_000
        rate = count / _actor_appends(None, count, fsync=False)
        print(f"  actor, in-memory session            {rate:>10,.0f}/s  ({count:,} appends)")
        rate = count / _plain_appends(root / "plain.pias", count)
        print(f"  SessionFile.append, no actor        {rate:>10,.0f}/s  ({count:,} appends)")

        print("open + branch (read-only open, then decode the active branch):")
        figures: dict[int, tuple[float, int]] = {}
        for size in SIZES:
            path = root / f"s{size}.pias"
            _write_session(path, size)
            megabytes = path.stat().st_size / 1e6
            open_s, branch_s, length = _open_and_branch(path)
            open_peak = _peak_memory(lambda path=path: _open_only(path))  # type: ignore[misc]
            peak = _peak_memory(lambda path=path: _open_and_branch(path))  # type: ignore[misc]
            rebuild_s = _rebuild(path)
            figures[size] = (open_s + branch_s + rebuild_s, peak)
            print(
                f"  {size:>9,} entries ({megabytes:6.1f} MB): open {open_s:6.2f} s "
                f"(peak {open_peak / 1e6:6.1f} MB), branch of {length:,} {branch_s:6.2f} s "
                f"(peak with the decoded branch {peak / 1e6:6.1f} MB), rebuild {rebuild_s:6.2f} s"
            )
            path.unlink()
        small, large = figures[100_000], figures[1_000_000]
        print(
            f"  1M / 100k: time x{large[0] / small[0]:.1f}, peak memory x{large[1] / small[1]:.1f}"
        )


if __name__ == "__main__":
    main()
