"""An in-memory session's frames: small entries frames are deflated in groups
(``persistence/memory_frames.py``); every entry reads back as it was appended, whichever group
holds it, in any order, and whatever else the session does with it (fork, a second branch)."""

from __future__ import annotations

import random

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pi_agent_ask.persistence import codec
from pi_agent_ask.persistence.memory_frames import GROUPED_FRAME, MemoryFrames
from pi_agent_ask.persistence.projection import JOURNAL
from pi_agent_ask.persistence.session_file import SessionFile, freeze


def _data(n: int, size: int) -> dict[str, object]:
    return {"n": n, "text": f"answer {n} " * size, "items": [n, [n + 1, {"k": n}]]}


def test_every_entry_reads_back_from_its_group_in_any_order() -> None:
    session = SessionFile.in_memory(projection=JOURNAL)
    appended = []
    for n in range(400):  # about 15 groups, and the last one still open
        appended.extend(session.append_many([("a", _data(n, n % 40)), ("b", {"n": n})]))
    assert session.branch() == tuple(appended)
    shuffled = list(appended)
    random.Random(7).shuffle(shuffled)
    for entry in shuffled:  # every read in another group than the last one, mostly
        assert session.get(entry.id) == entry
        assert entry.data == freeze(
            _data(entry.data["n"], entry.data["n"] % 40) if entry.type == "a" else entry.data
        )


def test_a_large_frame_is_kept_on_its_own_between_grouped_ones() -> None:
    session = SessionFile.in_memory()
    before = session.append("small", {"n": 1})
    large = session.append("large", {"text": "x" * (2 * GROUPED_FRAME)})
    after = session.append("small", {"n": 2})
    assert [e.id for e in session.branch()] == [before.id, large.id, after.id]
    assert session.get(large.id).data["text"] == "x" * (2 * GROUPED_FRAME)
    assert session.get(before.id) == before and session.get(after.id) == after


def test_a_fork_and_another_branch_read_entries_of_closed_and_open_groups() -> None:
    session = SessionFile.in_memory(projection=JOURNAL)
    chain = [session.append("a", _data(n, 30)) for n in range(300)]
    session.move_leaf(chain[10].id)  # another branch, from inside the first group
    side = session.append("side", {"from": chain[10].id})
    assert session.branch() == (*chain[:11], side)
    fork = session.fork(None)
    assert fork.branch() == (*chain[:11], side)
    session.move_leaf(chain[-1].id)
    assert session.branch() == tuple(chain)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=GROUPED_FRAME), min_size=1, max_size=40))
@example([b"x" * GROUPED_FRAME, b"y"])  # the largest frame a group takes
def test_frames_read_back_as_given_whichever_group_holds_them(plains: list[bytes]) -> None:
    frames = MemoryFrames(codec.Packer())
    places = [frames.add_to_group(plain) for plain in plains]
    assert places == list(range(len(plains)))
    for place, plain in enumerate(plains):
        assert frames.read(place) == (True, plain)
    # Read back again from the end: groups are inflated again, in the other order.
    for place in reversed(places):
        assert frames.read(place) == (True, plains[place])
    payload = b"\x01payload"
    assert frames.read(frames.add(payload)) == (False, payload)
    assert len(frames) == len(plains) + 1
