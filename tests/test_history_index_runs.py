"""The history index in checkpoints: a page or a read through it equals one built by reading
the whole branch.

Differential: every page (offsets and limits across request boundaries), the filtered lists
and every read through ``source_of_session`` (the newest checkpoint's spine of merged runs, then
the fold's own log) equal the same built from ``session.branch()`` (every entry decoded, no
checkpoint involved), on a journal with the odd shapes the rules cover (a request id asked
twice, a request completed twice, a completion before its request or without one, a malformed
request), across merged runs of both levels, branches reaching back before checkpoints or
continuing from one in the middle of a chain, a fork, a damaged checkpoint inside the spine,
a damaged newest checkpoint, and files whose checkpoints carry no index. What a page reads is
counted (checkpoint frames, indexed entries), not timed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pi_agent_ask.persistence import history as h
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence import projection as pj
from pi_agent_ask.persistence.projection import JOURNAL
from pi_agent_ask.persistence.session_file import SessionFile
from tests.test_checkpoints import checkpoint_offsets, write_form

EVERY = 2
"""Entries per checkpoint: small, so that runs of both levels are merged on a few hundred
(with no bytes rule: ``checkpoint_ratio=0``, a checkpoint after every two entries)."""


def odd_entries(session: SessionFile, ids: list[str], n: int) -> None:
    """Entries the runtime never writes but the history rules define."""
    question = {"id": "q", "label": "Q", "prompt": f"Again {n}?", "type": "single", "options": []}
    # A request id asked again: its first entry wins, the second makes no record.
    session.append(jr.HISTORY_REQUEST, {"requestId": ids[n // 2], "questions": [question]})
    # A second completion of an old request: the latest one is its outcome.
    session.append(jr.HISTORY_COMPLETED, {"requestId": ids[n // 3], "error": f"late failure {n}"})
    # A completion recorded before its request, and a request completed before it was asked.
    early = f"early-{n}"
    session.append(jr.HISTORY_COMPLETED, {"requestId": early, "error": "before"})
    session.append(jr.HISTORY_REQUEST, {"requestId": early, "questions": [question]})
    # A malformed request (no questions): no record, never guessed at.
    session.append(jr.HISTORY_REQUEST, {"requestId": f"bad-{n}", "questions": []})


def fill(session: SessionFile, forms: range, ids: list[str]) -> None:
    for n in forms:
        ids.append(write_form(session, n, answered=n % 5 != 4, delivered=n % 7 != 6))
        if n % 9 == 8:
            odd_entries(session, ids, n)


def journal_file(path: Path, forms: int) -> list[str]:
    ids: list[str] = []
    with SessionFile.open(
        path, projection=JOURNAL, checkpoint_every=EVERY, checkpoint_ratio=0
    ) as session:
        fill(session, range(forms), ids)
    return ids


def counting(session: SessionFile) -> list[int]:
    """Count the checkpoint frames the session's history reads (by wrapping its reader),
    each read without its pending forms (``live``), which the history never needs."""
    reads: list[int] = []
    real: Callable[..., Any] = session.checkpoint_at

    def checkpoint_at(offset: int, *, live: bool = True) -> Any:
        assert not live, "the history decoded a checkpoint's pending forms"
        reads.append(offset)
        return real(offset, live=live)

    session.checkpoint_at = checkpoint_at  # type: ignore[method-assign]
    return reads


def assert_same_history(session: SessionFile) -> h.HistorySource:
    """Every page, filter and read through the index equals the same from the branch."""
    source = h.source_of_session(session)
    # The branch folded once: each call below would fold it again from its entries.
    full = h.source_of_branch(session.branch())
    assert (source.total, source.key) == (full.total, full.key)
    total = source.total
    # Offsets on and around request boundaries (two records per form), limits across them.
    for offset in sorted({0, 1, 2, 3, total // 3, total // 2 + 1, total - 2, total - 1, total}):
        for limit in (1, 2, 3, 20):
            got = h.list_history(source, offset=max(offset, 0), limit=limit)
            assert got == h.list_history(full, offset=max(offset, 0), limit=limit), (
                offset,
                limit,
            )
    for query in ("again", "late failure", "note 1"):
        assert h.list_history(source, query=query) == h.list_history(full, query=query)
    assert h.list_history(source, answered_only=True, limit=50) == h.list_history(
        full, answered_only=True, limit=50
    )
    keys = [(r["requestId"], r["questionId"]) for r in h.list_history(full, limit=100)["records"]]
    for offset in range(100, total, 100):
        page = h.list_history(full, offset=offset, limit=100)["records"]
        keys += [(r["requestId"], r["questionId"]) for r in page]
    assert len(keys) == total
    for request_id, question_id in keys[:: max(1, len(keys) // 40)] + keys[-3:]:
        assert h.read_history(source, request_id, question_id) == h.read_history(
            full, request_id, question_id
        )
    return source


def spine(session: SessionFile) -> list[list[int]]:
    prev = session.log_prev
    assert prev is not None
    index = session.checkpoint_at(prev)["history"]
    return [*index["spine"], [prev, index["level"]]]


def test_pages_through_merged_runs_equal_the_branch(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    journal_file(path, 190)
    checkpoints = len(checkpoint_offsets(path))
    assert checkpoints > pj.MERGE**pj.TOP_LEVEL  # a run of the top level was merged
    with SessionFile.open(path, projection=JOURNAL, readonly=True) as session:
        levels = [level for _offset, level in spine(session)]
        assert levels[0] == pj.TOP_LEVEL and pj.TOP_LEVEL - 1 in levels and 0 in levels
        reads = counting(session)
        indexed = session.indexed
        source = h.source_of_session(session)
        # The index is read from the spine's checkpoints (one frame each, plus the newest
        # checkpoint once more for its spine), not from every checkpoint of the chain.
        assert len(reads) == len(levels) + 1 < checkpoints // 8
        h.list_history(source, limit=20)
        assert len(reads) == len(levels) + 1  # a page reads entries, no checkpoint
        # Memory bounded by what is pending: the page decoded its own entries only, the
        # session's index still holds the entries after the checkpoint only.
        assert session.indexed == indexed <= EVERY + 8
        assert_same_history(session)


def test_branches_and_forks_keep_the_index_exact(tmp_path: Path) -> None:
    path = tmp_path / "s.pias"
    ids = journal_file(path, 70)
    with SessionFile.open(
        path, projection=JOURNAL, checkpoint_every=EVERY, checkpoint_ratio=0
    ) as session:
        main_leaf = session.leaf_id
        # Back a few entries: the branch still descends from the newest checkpoint's leaf or
        # from one just before it, and the chain goes on from a checkpoint in its middle.
        back = session.branch_ids()[-6]
        session.move_leaf(back)
        fill(session, range(70, 80), ids)
        side_leaf = session.leaf_id
        assert_same_history(session)
        # Far back, before most checkpoints: the whole branch is folded again.
        session.move_leaf(session.branch_ids()[40])
        fill(session, range(80, 100), ids)
        far_leaf = session.leaf_id
        assert_same_history(session)
    with SessionFile.open(
        path, projection=JOURNAL, checkpoint_every=EVERY, checkpoint_ratio=0
    ) as session:
        for leaf in (main_leaf, side_leaf, far_leaf):
            session.move_leaf(leaf)
            assert_same_history(session)
        with session.fork(tmp_path / "fork.pias") as forked:
            fill(forked, range(100, 110), ids)
            assert_same_history(forked)
    with SessionFile.open(tmp_path / "fork.pias", projection=JOURNAL, readonly=True) as forked:
        assert forked.report.checkpoint is not None
        assert_same_history(forked)


def flip_in_checkpoint(path: Path, offset: int) -> None:
    """Flip one byte inside the compressed part of the checkpoint frame at ``offset``."""
    ends = dict(checkpoint_offsets(path))
    data = bytearray(path.read_bytes())
    data[ends[offset] - 5] ^= 0x40
    path.write_bytes(bytes(data))


def test_a_damaged_run_falls_back_to_the_branch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.pias"
    journal_file(path, 190)
    with SessionFile.open(path, projection=JOURNAL, readonly=True) as session:
        first_run = spine(session)[0][0]
        expected = h.list_history(session.branch(), offset=7, limit=20)
    flip_in_checkpoint(path, first_run)
    with SessionFile.open(path, projection=JOURNAL, readonly=True) as session:
        assert session.report.ok and session.report.notes == ()  # the newest one is whole
        with caplog.at_level(logging.WARNING):
            source = h.source_of_session(session)
        assert "history index unreadable" in caplog.text
        assert h.list_history(source, offset=7, limit=20) == expected
        assert_same_history(session)


def test_a_damaged_newest_checkpoint_is_skipped_and_the_index_still_exact(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.pias"
    ids = journal_file(path, 60)
    *_, (previous, _), (newest, _) = checkpoint_offsets(path)
    flip_in_checkpoint(path, newest)
    with SessionFile.open(
        path, projection=JOURNAL, checkpoint_every=EVERY, checkpoint_ratio=0
    ) as session:
        assert session.report.checkpoint == previous
        assert session.report.notes == (
            f"checkpoint at byte {newest} is damaged (checksum); skipped",
        )
        assert_same_history(session)
        # The next checkpoints continue the chain from the previous one, index included.
        fill(session, range(60, 70), ids)
        assert_same_history(session)


class NoIndex:
    """The journal projection as the previous release wrote it: checkpoints without an index."""

    name = JOURNAL.name

    def empty(self) -> Any:
        return JOURNAL.empty()

    def restore(self, live: Any) -> Any:
        return JOURNAL.restore(live)


def test_checkpoints_without_an_index_are_read_through_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "old.pias"
    ids: list[str] = []
    with SessionFile.open(
        path, projection=NoIndex(), checkpoint_every=EVERY, checkpoint_ratio=0
    ) as session:  # type: ignore[arg-type]
        fill(session, range(40), ids)
    with SessionFile.open(
        path, projection=JOURNAL, checkpoint_every=EVERY, checkpoint_ratio=0
    ) as session:
        assert "history" not in session.checkpoint_at(session.log_prev or 0)
        assert_same_history(session)
        fill(session, range(40, 100), ids)  # new checkpoints: the old chain is one block
        assert spine(session)[0][1] == -1
        assert_same_history(session)
    with SessionFile.open(path, projection=JOURNAL, readonly=True) as session:
        assert_same_history(session)


def test_a_malformed_index_is_refused() -> None:
    columns = pj.LogColumns()
    columns.add_items([["q", "r1", 10, 0, 2], ["c", "r1", 20, 1]])
    packed = columns.pack()
    assert packed["c"] == [] and packed["cr"] == (0).to_bytes(8, "little")  # by place, not id
    again = pj.LogColumns.unpack(packed)
    assert (again.qids, list(again.qnum), again.cids, list(again.cnum)) == (
        ["r1"],
        [10, 0, 2],
        ["r1"],
        [20, 1],
    )
    for broken in (
        {**packed, "qn": packed["qn"][:-1]},
        {**packed, "q": ["r1", "r2"]},
        {**packed, "c": [7]},
        {key: value for key, value in packed.items() if key != "cn"},
        {**packed, "cr": (5).to_bytes(8, "little")},  # names a request the run does not hold
    ):
        with pytest.raises(ValueError, match="malformed history run"):
            pj.LogColumns.unpack(broken)
    with pytest.raises(ValueError):
        columns.add_items([["x", "r1", 1, 0]])


def test_a_forked_sessions_record_is_read_from_one_decoded_frame(tmp_path: Path) -> None:
    """A fork writes its branch in frames of many entries; reading one record (its request
    and its completions, neighbours in the journal) decodes their frame once, not once per
    entry."""
    ids = journal_file(tmp_path / "s.pias", 12)
    with SessionFile.open(tmp_path / "s.pias", projection=JOURNAL) as session:
        session.fork(tmp_path / "fork.pias").close()
    with SessionFile.open(tmp_path / "fork.pias", projection=JOURNAL, readonly=True) as forked:
        decoded: list[int] = []
        real: Callable[..., Any] = forked._decode_frame

        def decode_frame(payload: Any, offset: int) -> Any:
            decoded.append(offset)
            return real(payload, offset)

        forked._decode_frame = decode_frame  # type: ignore[method-assign]
        source = h.source_of_session(forked)
        record = h.read_history(source, ids[0], "q")["record"]
        assert record["status"] == "answered" and record["answer"]["note"] == "note 0"
        assert len(decoded) == 1
