"""The fold keeps each pending request's encoded item between checkpoints
(``JournalFold.live_cbor``): what a checkpoint holds must be the bytes a fresh encode of the
live part gives, whatever was folded between two checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cbor2
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pi_agent_ask.persistence import codec
from pi_agent_ask.persistence.projection import (
    JOURNAL,
    JournalFold,
    PendingRequest,
    history_fields,
)
from pi_agent_ask.persistence.session_file import CHECKPOINT_MAGIC, Entry, SessionFile
from tests.test_append_fast import ENTRIES
from tests.test_checkpoint_rule import frames
from tests.test_checkpoints import write_form

_QUEUED = ("ask:queued", {"requestId": "r1", "toolCallId": "c9"})


@settings(max_examples=400, deadline=None)
@given(items=ENTRIES)
# Each change the fold makes to a kept request, at least once whatever the generator draws.
@example(items=[_QUEUED, ("ask:draft", {"requestId": "r1", "form": {}})])
@example(items=[_QUEUED, ("ask:background-answer", {"details": {"requestId": "r1"}})])
@example(items=[_QUEUED, ("ask:queue-completed", {"requestId": "r1", "error": "x"})])
@example(
    items=[
        _QUEUED,
        ("ask:queue-completed", {"requestId": "r1", "result": {}}),
        ("ask:background-answer", {"details": {"requestId": "r1"}}),
        _QUEUED,
    ]
)
def test_the_kept_encoding_is_a_fresh_encode_of_the_live_part(
    items: list[tuple[str, Any]],
) -> None:
    """Encoded after every entry (so a kept item meets every change the fold makes to a
    request right after it was kept: draft, outcome, delivery, settling, queued again), the
    live part's bytes are always those ``cbor2.dumps`` gives the plain live part."""
    fold = JournalFold()
    assert fold.live_cbor() == cbor2.dumps(fold.live())
    for n, (entry_type, data) in enumerate(items):
        # Locations of several sizes, so items differ in length too.
        fold.step(Entry(f"{n:016x}", None, entry_type, 0.0, data), (n * 977, n % 3 - 2))
        assert fold.live_cbor() == cbor2.dumps(fold.live())
    restored = JOURNAL.restore(fold.live())
    assert restored.live_cbor() == fold.live_cbor()


# Every head size's edges, both signs, and beyond 64 bits.
EDGES = [e for n in (24, 2**8, 2**16, 2**32, 2**64) for e in (n - 1, n, -n, -n - 1)]
INTS = st.one_of(st.sampled_from(EDGES), st.integers(-30, 300), st.integers(-(2**70), 2**70))
LOCS = st.tuples(INTS, INTS)


@settings(max_examples=500, deadline=None)
@given(
    rid=st.one_of(st.text(max_size=30), st.text(min_size=250, max_size=300), st.just("é" * 12)),
    queued=LOCS,
    draft=st.none() | LOCS,
    outcome=st.none() | LOCS,
    delivered=st.booleans(),
)
def test_a_request_item_is_what_cbor2_writes(
    rid: str, queued: Any, draft: Any, outcome: Any, delivered: bool
) -> None:
    """The request items ``live_cbor`` writes itself (lengths and integers of every head size,
    negative ones, text of any code points, integers beyond 64 bits that ``cbor2`` writes as
    big numbers) are the bytes ``cbor2`` writes for the plain item."""
    fold = JournalFold()
    fold.requests[rid] = PendingRequest(queued, draft, outcome, delivered)
    assert fold.live_cbor() == cbor2.dumps(fold.live())


def test_array_heads_of_every_length_class() -> None:
    fold = JournalFold()
    for count in (0, 23, 24, 255, 256, 65_536):
        fold.requests = {f"r{n}": fold.requests.get(f"r{n}") or _pending(n) for n in range(count)}
        assert fold.live_cbor() == cbor2.dumps(fold.live())


def _pending(n: int) -> PendingRequest:
    return PendingRequest((n, 0))


def test_checkpoints_written_from_kept_encodings_are_those_a_fresh_encode_writes(
    tmp_path: Path,
) -> None:
    """A file written as the runtime writes it, with many forms pending and changing between
    checkpoints (drafts, answers, deliveries): every checkpoint frame is byte for byte what
    encoding its map afresh (live part included) gives."""
    path = tmp_path / "s.pias"
    with SessionFile.open(path, projection=JOURNAL, checkpoint_every=20) as session:
        for n in range(150):
            write_form(session, n, answered=n % 4 > 0, delivered=n % 4 > 1)
        offsets: list[int] = []
        prev = session.log_prev
        while prev is not None:
            offsets.append(prev)
            prev = session.checkpoint_at(prev, live=False)["prev"]
        assert len(offsets) >= 5
        for offset in offsets:
            value = session.checkpoint_at(offset)
            assert list(value)[-1] == "live" and value["live"]["requests"]
            written = path.read_bytes()[offset + 8 :]
            fresh, _ = codec.encode_checkpoint_sized(value, CHECKPOINT_MAGIC)
            assert written[: len(fresh)] == fresh


def _history_from_disk(session: SessionFile, offset: int) -> Any:
    """The history index of the checkpoint at ``offset`` as its writer computes it, every
    older checkpoint read from the file."""
    value = session.checkpoint_at(offset, live=False)
    read = lambda at: session.checkpoint_at(at, live=False)  # noqa: E731
    return history_fields(value["log"], value["prev"], read)


def test_the_history_index_read_from_the_last_checkpoint_in_memory_is_the_one_on_disk(
    tmp_path: Path,
) -> None:
    """Each checkpoint's history index (which reads the previous checkpoint, kept in memory
    when this session wrote it) is what reading every older checkpoint from the file gives:
    through merged runs (more than 16 checkpoints), a move to another branch and back, and a
    reopen."""
    path = tmp_path / "s.pias"
    with SessionFile.open(path, projection=JOURNAL, checkpoint_every=8) as session:
        for n in range(20):
            write_form(session, n, answered=True, delivered=n % 2 == 0)
        fork_point = session.leaf_id
        for n in range(20, 40):
            write_form(session, n, answered=True, delivered=True)
        session.move_leaf(fork_point)
        for n in range(40, 50):
            write_form(session, n, answered=n % 3 > 0, delivered=True)
    with SessionFile.open(path, projection=JOURNAL, checkpoint_every=8) as session:
        for n in range(50, 70):
            write_form(session, n, answered=True, delivered=True)
        checkpoints = [f.offset for f in frames(path) if f.checkpoint is not None]
        assert len(checkpoints) > 20
        levels = set()
        for offset in checkpoints:
            stored = session.checkpoint_at(offset, live=False)["history"]
            levels.add(stored["level"])
            assert stored == _history_from_disk(session, offset)
        assert levels >= {0, 1}
