"""Session files written by an earlier release still open, read back the same entries and fold,
and take appends in their own format.

``tests/data/session-v2-journal.pias`` is a version 2 file written as the runtime writes it
(the journal's entries for 46 background forms, chains written together, checkpoints every 64
entries, a leaf move and a side branch, data of every CBOR kind the journal stores);
``tests/data/session-v1.pias`` a version 1 file (one map per entry, batches, leaf moves, a
second root). ``tests/data/session-fixtures.json`` holds what that release read from them:
the entry count and a digest of every entry, sample entries, the leaf, the active branch, the
checkpoint an open starts from, the journal fold's live part and the length of its log.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pi_agent_ask.persistence.projection import JOURNAL
from pi_agent_ask.persistence.session_file import SessionFile

DATA = Path(__file__).parent / "data"
EXPECTED: dict[str, Any] = json.loads((DATA / "session-fixtures.json").read_text())
NAMES = sorted(EXPECTED)


def jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$bytes": value.hex()}
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    return value


def read_back(session: SessionFile) -> dict[str, Any]:
    entries = [[e.id, e.parent_id, e.type, e.timestamp, e.data] for e in session.entries]
    canonical = json.dumps(jsonable(entries), sort_keys=True).encode()
    return {
        "count": len(entries),
        "sha256": hashlib.sha256(canonical).hexdigest(),
        "samples": {
            e[0]: jsonable(e) for e in entries if e[2] in ("note", "custom", "root", "a", "b", "c")
        },
        "leaf": session.leaf_id,
        "branch": list(session.branch_ids()),
    }


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("projection", [JOURNAL, None])
def test_a_file_of_an_earlier_release_reads_back_as_it_did(name: str, projection: Any) -> None:
    expected = EXPECTED[name]
    with SessionFile.open(DATA / name, readonly=True, projection=projection) as session:
        assert session.header.version == expected["version"]
        assert session.report.ok and not session.report.notes
        if projection is not None:
            assert session.report.checkpoint == expected["checkpoint"]
            assert jsonable(session.fold().live()) == expected["live"]
            assert len(session.log()) == expected["log"]
        got = read_back(session)
    assert got == {key: expected[key] for key in got}


@pytest.mark.parametrize("name", NAMES)
def test_a_file_of_an_earlier_release_takes_appends_in_its_format(
    tmp_path: Path, name: str
) -> None:
    path = tmp_path / name
    shutil.copyfile(DATA / name, path)
    expected = EXPECTED[name]
    with SessionFile.open(path, projection=JOURNAL) as session:
        first = session.append("note", {"after": "upgrade"})
        chains = session.append_chains([[("a", {"n": 1}), ("b", {"n": 2})], [("c", {})]])
        moved_to = expected["branch"][-2]
        session.move_leaf(moved_to)
        side = session.append_many([("side", {"n": [1, 2]})])
    with SessionFile.open(path, readonly=True, projection=JOURNAL) as session:
        assert session.header.version == expected["version"]
        assert session.report.ok
        assert session.leaf_id == side[0].id
        assert session.branch_ids() == (*expected["branch"][:-1], side[0].id)
        assert len(session) == expected["count"] + 5
        assert session.get(first.id) == first
        assert [session.get(e.id) for chain in chains for e in chain] == [
            e for chain in chains if not isinstance(chain, Exception) for e in chain
        ]
        assert jsonable(session.get(moved_to).data) == jsonable(
            SessionFile.open(DATA / name, readonly=True).get(moved_to).data
        )
        payload = path.read_bytes()[len((DATA / name).read_bytes()) :]
    # A version 1 file gets version 1 frames (maps: first payload byte 0xa0..0xbf), a version
    # 2 file version 2 frames (a kind byte).
    first_payload_byte = payload[8]
    if expected["version"] == 1:
        assert 0xA0 <= first_payload_byte <= 0xBF
    else:
        assert first_payload_byte == 0x01


@pytest.mark.parametrize("name", NAMES)
def test_a_file_of_an_earlier_release_forks_into_the_current_format(
    tmp_path: Path, name: str
) -> None:
    expected = EXPECTED[name]
    with SessionFile.open(DATA / name, readonly=True, projection=JOURNAL) as session:
        branch = session.branch()
        forked = session.fork(tmp_path / "forked.pias")
    with forked:
        assert forked.header.version == 2
        assert forked.branch() == branch
        # The same pending requests and open calls (their locations are the new file's).
        live = forked.fold().live()
        assert [r[0] for r in live["requests"]] == [r[0] for r in expected["live"]["requests"]]
        assert [c[0] for c in live["calls"]] == [c[0] for c in expected["live"]["calls"]]
