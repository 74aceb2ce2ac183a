"""Checkpoints and the session's small accessors: what the other session suites left unpinned,
found by mutation testing (``docs/mutation-persistence.md``, "checkpoints and accessors").

Sessions are real files in ``tmp_path``. Files no writer of this program produces (a version 1
map frame after a checkpoint, a checkpoint of odd content) are written as bytes with valid
checksums, so only the reader's checks can refuse them. A counting projection (``Counter``)
shows what a fold is fed and what it is restored from.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import cbor2
import pytest

from pi_agent_ask.persistence import codec
from pi_agent_ask.persistence import session_file as sf
from pi_agent_ask.persistence.session_file import SessionFile, encode_frame

# ---- helpers --------------------------------------------------------------------------------


class CounterFold:
    def __init__(self, owner: Counter, live: int = 0) -> None:
        self.owner = owner
        self.count = live
        self.log: list[Any] = []

    def step(self, entry: sf.Entry, loc: sf.Loc) -> None:
        self.owner.fed.append(entry.id)
        self.count += 1
        self.log.append(entry.id)

    def live(self) -> int:
        return self.count


class Counter:
    """A projection whose live state is the number of entries folded; its log holds their ids.
    ``fed`` lists every entry a fold was given, ``restored`` every live state restored."""

    name = "counter/1"

    def __init__(self) -> None:
        self.fed: list[str] = []
        self.restored: list[Any] = []

    def empty(self) -> CounterFold:
        return CounterFold(self)

    def restore(self, live: Any) -> CounterFold:
        self.restored.append(live)
        if type(live) is not int:
            raise ValueError("not a count")
        return CounterFold(self, live)


def frames(path: Path) -> list[tuple[int, bytes]]:
    """``(offset, payload)`` of every frame after the header, parsed independently."""
    data = path.read_bytes()
    out, pos = [], 8 + int.from_bytes(data[:4], "big")
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        out.append((pos, data[pos + 8 : pos + 8 + length]))
        pos += 8 + length
    return out


def checkpoints(path: Path) -> list[int]:
    return [offset for offset, payload in frames(path) if payload[0] == codec.KIND_CHECKPOINT]


def append_frame(path: Path, payload: bytes) -> int:
    """Append a frame (its checksum holds) by hand; its offset."""
    offset = path.stat().st_size
    with path.open("ab") as file:
        file.write(encode_frame(payload))
    return offset


def checkpointed(path: Path, entries: int = 4, every: int = 3) -> list[str]:
    """A session of ``entries`` entries in a line, a checkpoint after each ``every``."""
    with SessionFile.open(path, projection=Counter(), checkpoint_every=every) as session:
        ids = [session.append("t", {"n": n}).id for n in range(entries)]
        session.fold()
    return ids


def v1_map(entry_id: str, parent_id: str | None) -> dict[str, Any]:
    return {"id": entry_id, "parentId": parent_id, "type": "old", "timestamp": 2.0, "data": {}}


# ---- version 1 frames after a checkpoint (only a hand-made writer produces them) -------------


def test_a_version_1_batch_after_a_checkpoint_naming_an_older_entry_indexes_the_whole_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.pias"
    ids = checkpointed(path)
    assert len(checkpoints(path)) == 1
    batch = {"batch": [v1_map("x", ids[0]), v1_map("y", "x")]}
    append_frame(path, cbor2.dumps(batch))
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        assert session.report.ok
        assert session.report.checkpoint is None  # the batch reaches back before it
        assert session.report.notes == ()  # the checkpoint was usable, the tail was not
        assert session.indexed == len(session) == 6
        assert session.leaf_id == "y"
        assert session.branch_ids() == (ids[0], "x", "y")


def test_a_version_1_leaf_move_after_a_checkpoint_to_an_older_entry_indexes_the_whole_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.pias"
    ids = checkpointed(path)
    append_frame(path, cbor2.dumps({"leaf": ids[1]}))
    with SessionFile.open(path, projection=Counter(), readonly=True) as session:
        assert session.report.ok and session.report.checkpoint is None
        assert session.leaf_id == ids[1]
        assert session.branch_ids() == tuple(ids[:2])


# ---- the sidecar of a damaged tail -----------------------------------------------------------


def test_a_file_shrinking_while_its_tail_is_saved_keeps_what_was_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Someone truncates the file while the damaged tail is copied to its sidecar: the copy
    stops at the new end and still names the sidecar."""
    path = tmp_path / "s.pias"
    with SessionFile.open(path) as session:
        session.append("t", {})
    good = path.stat().st_size
    torn = encode_frame(b"\x01" + b"z" * 40)[:-10]
    with path.open("ab") as file:
        file.write(torn)
    monkeypatch.setattr(sf, "_READ_WINDOW", 16)  # the copy takes several reads
    real_write_all = sf._write_all
    shrunk: list[int] = []

    def write_all(fd: int, data: bytes) -> None:
        real_write_all(fd, data)
        if ".cut-" in str(Path(f"/proc/self/fd/{fd}").readlink()) and not shrunk:
            os.truncate(path, good + len(data))
            shrunk.append(len(data))

    monkeypatch.setattr(sf, "_write_all", write_all)
    with SessionFile.open(path) as session:
        report = session.report
    assert shrunk == [16]
    assert report.cut
    assert report.saved_to == tmp_path / f"s.pias.cut-{good}"
    assert report.saved_to.read_bytes() == torn[:16]
    assert path.stat().st_size == good
