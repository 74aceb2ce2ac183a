"""Tests that kill mutants of the history index in ``persistence/projection.py`` (the log
columns, their packed runs, the spine of a checkpoint chain; docs/mutation-persistence.md,
"projection.py"). A reader that finds an index it cannot use falls back to the checkpoint
chain and gets the same records, so the suites that compare records cannot see a wrong shape
or a refusal. These read the index functions directly: a chain of checkpoints is built the way
``SessionFile`` builds it (``JOURNAL.checkpoint_fields`` of each new checkpoint's log and the
previous checkpoint, read through ``read``, its ``checkpoint_at``)."""

from __future__ import annotations

import array
import struct
from typing import Any

import pytest

from pi_agent_ask.persistence import projection as pj
from pi_agent_ask.persistence.projection import JOURNAL, LogColumns


def q(rid: str, offset: int, slot: int = -1, count: int = 1) -> list[Any]:
    return ["q", rid, offset, slot, count]


def c(rid: str, offset: int, slot: int = -1) -> list[Any]:
    return ["c", rid, offset, slot]


def log_of(k: int) -> list[list[Any]]:
    """Checkpoint ``k``'s log: a request, the completion of the previous checkpoint's request
    (named by id in a run that does not hold it) and of its own (named by place)."""
    items = [q(f"r{k}", 10 * k + 1, k % 3 - 1, k % 4 + 1), c(f"r{k}", 10 * k + 3, k % 2)]
    if k:
        items.insert(1, c(f"r{k - 1}", 10 * k + 2, -1))
    return items


class Chain:
    """Checkpoint maps by offset, each ``{"log", "prev"}`` plus the projection's fields."""

    def __init__(self) -> None:
        self.frames: dict[int, dict[str, Any]] = {}
        self.newest: int | None = None
        self.logs: list[list[Any]] = []

    def read(self, offset: int) -> dict[str, Any]:
        return self.frames[offset]

    def add(self, log: list[Any], *, index: bool = True) -> dict[str, Any]:
        value: dict[str, Any] = {"log": log, "prev": self.newest}
        if index:
            value.update(JOURNAL.checkpoint_fields(log, self.newest, self.read))
        offset = 1000 * (len(self.frames) + 1)
        self.frames[offset] = value
        self.newest = offset
        self.logs.append(log)
        return value

    def offset(self, k: int) -> int:
        return 1000 * (k + 1)


def items(columns: LogColumns) -> tuple[list[Any], list[Any]]:
    """The columns as log items: the requests in order, the completions by place."""
    qs = [q(rid, *columns.qnum[3 * i : 3 * i + 3]) for i, rid in enumerate(columns.qids)]
    cs = [c(rid, *columns.cnum[2 * i : 2 * i + 2]) for i, rid in enumerate(columns.cids)]
    return qs, sorted(cs, key=lambda item: (item[2], item[3]))


def expected(*logs: list[Any]) -> tuple[list[Any], list[Any]]:
    every = [item for log in logs for item in log]
    return [i for i in every if i[0] == "q"], sorted(
        (i for i in every if i[0] == "c"), key=lambda item: (item[2], item[3])
    )


def shape(value: dict[str, Any]) -> tuple[list[int], int]:
    history = value["history"]
    return [level for _offset, level in history["spine"]], history["level"]


# ---- the merged runs ---------------------------------------------------------------------


def test_every_checkpoint_s_index_holds_the_whole_log_before_it() -> None:
    chain = Chain()
    own = [q("own", 999_999), c("r0", 999_998, 0)]
    for k in range(300):
        chain.add(log_of(k))
        assert items(pj.history_log(own, chain.newest, chain.read)) == expected(*chain.logs, own)
    assert items(pj.history_log(own, None, chain.read)) == expected(own)


def test_runs_merge_sixteen_blocks_at_each_level_up_to_the_top() -> None:
    chain = Chain()
    shapes = [shape(chain.add(log_of(k))) for k in range(16 * 16 * 16)]
    assert shapes[0] == ([], 0)
    assert shapes[14] == ([0] * 14, 0)
    # The sixteenth checkpoint merges the fifteen before it and its own log into one run.
    assert shapes[15] == ([], 1)
    run = chain.frames[chain.offset(15)]["history"]
    assert items(LogColumns.unpack(run["run"])) == expected(*chain.logs[:16])
    assert shapes[16] == ([1], 0)
    assert shapes[30] == ([1, *[0] * 14], 0)
    assert shapes[31] == ([1], 1)
    assert shapes[254] == ([1] * 15 + [0] * 14, 0)
    assert shapes[255] == ([], 2)
    top = chain.frames[chain.offset(255)]["history"]
    assert items(LogColumns.unpack(top["run"])) == expected(*chain.logs[:256])
    assert shapes[256] == ([2], 0)
    # Blocks of the top level are never merged: fifteen of them stay on the spine.
    assert shapes[16 * 16 * 16 - 1] == ([2] * 15, 2)
    spine = chain.frames[chain.newest or 0]["history"]["spine"]
    assert [offset for offset, _level in spine] == [chain.offset(256 * n - 1) for n in range(1, 16)]
    assert items(pj.history_log([], chain.newest, chain.read)) == expected(*chain.logs)


def test_a_level_zero_checkpoint_holds_no_run_and_a_merged_one_a_packed_run() -> None:
    chain = Chain()
    first = chain.add(log_of(0))
    assert first["history"] == {"spine": [], "level": 0, "run": None}
    second = chain.add(log_of(1))
    assert second["history"] == {"spine": [[chain.offset(0), 0]], "level": 0, "run": None}


def test_checkpoints_without_an_index_are_one_block_read_through_prev() -> None:
    chain = Chain()
    for k in range(4):
        chain.add(log_of(k), index=False)
    newer = [chain.add(log_of(k)) for k in range(4, 40)]
    # The chain without an index is one block; it never merges with the blocks after it.
    assert newer[0]["history"]["spine"] == [[chain.offset(3), -1]]
    assert all(value["history"]["spine"][0] == [chain.offset(3), -1] for value in newer)
    assert shape(newer[-1])[0][0] == -1 and 1 in shape(newer[-1])[0]
    assert items(pj.history_log([], chain.newest, chain.read)) == expected(*chain.logs)
    # Read from a checkpoint that has no index itself: its whole chain, through ``prev``.
    assert items(pj.history_log([], chain.offset(3), chain.read)) == expected(*chain.logs[:4])


# ---- malformed indexes -------------------------------------------------------------------


def newest_with(index: Any) -> Chain:
    """A chain of three indexed checkpoints whose newest holds ``index``."""
    chain = Chain()
    for k in range(3):
        chain.add(log_of(k))
    chain.frames[chain.offset(2)]["history"] = index
    return chain


GOOD = {"spine": [[1000, 0], [2000, 0]], "level": 0, "run": None}


@pytest.mark.parametrize(
    "index",
    [
        GOOD,
        {**GOOD, "spine": [[1, -1]]},
        {**GOOD, "spine": [[2999, 2]]},
        {**GOOD, "spine": []},
        {"spine": [], "level": 1, "run": LogColumns().pack()},
        {"spine": [], "level": 2, "run": LogColumns().pack()},
    ],
)
def test_a_well_formed_index_is_read(index: Any) -> None:
    chain = newest_with(index)
    chain.frames[1] = {"log": [], "prev": None}
    chain.frames[2999] = {
        "log": [],
        "prev": None,
        "history": {"level": 2, "run": LogColumns().pack()},
    }
    pj.history_log([], chain.offset(2), chain.read)  # no error
    spine = pj.history_fields([], chain.offset(2), chain.read)["spine"]
    assert spine == [*index["spine"], [chain.offset(2), index["level"]]]


@pytest.mark.parametrize(
    "index",
    [
        [GOOD],
        {**GOOD, "level": 3},
        {**GOOD, "level": -1},
        {**GOOD, "level": True},
        {**GOOD, "level": "0"},
        {**GOOD, "spine": ((1000, 0),)},
        {**GOOD, "spine": [(1000, 0)]},
        {**GOOD, "spine": [[1000, 0, 0]]},
        {**GOOD, "spine": [[1000]]},
        {**GOOD, "spine": [["1000", 0]]},
        {**GOOD, "spine": [[1000, "0"]]},
        {**GOOD, "spine": [[True, 0]]},
        {**GOOD, "spine": [[1000, False]]},
        {**GOOD, "spine": [[0, 0]]},
        {**GOOD, "spine": [[3000, 0]]},
        {**GOOD, "spine": [[3001, 0]]},
        {**GOOD, "spine": [[1000, -2]]},
        {**GOOD, "spine": [[1000, 3]]},
        {**GOOD, "run": LogColumns().pack()},
        {"spine": [], "level": 1, "run": None},
        {"spine": [], "level": 1},
    ],
)
def test_a_malformed_index_is_refused(index: Any) -> None:
    chain = newest_with(index)
    with pytest.raises(ValueError, match=r"^malformed history index$"):
        pj.history_log([], chain.offset(2), chain.read)
    with pytest.raises(ValueError, match=r"^malformed history index$"):
        pj.history_fields([], chain.offset(2), chain.read)


@pytest.mark.parametrize("found", [None, {"level": 0, "spine": [], "run": None}, {"level": 2}])
def test_a_spine_block_of_another_level_is_refused(found: Any) -> None:
    chain = newest_with({"spine": [[1000, 1]], "level": 0, "run": None})
    if found is None:
        del chain.frames[1000]["history"]
    else:
        chain.frames[1000]["history"] = found
    with pytest.raises(ValueError, match=r"^a history block names a checkpoint of another level$"):
        pj.history_log([], chain.offset(2), chain.read)


# ---- the columns ---------------------------------------------------------------------------


def le(*numbers: int) -> bytes:
    return struct.pack(f"<{len(numbers)}q", *numbers)


def test_a_run_names_completions_of_its_own_requests_by_place_and_others_by_id() -> None:
    columns = LogColumns()
    columns.add_items(
        [
            q("a", 10, -1, 2),
            c("x", 11, 0),
            q("b", 12, 3, 1),
            c("b", 13, -1),
            q("a", 14, 0, 1),  # asked again: completions name its first place
            c("y", 15, 1),
            c("a", 16, 2),
            c("z", 17, -1),
        ]
    )
    packed = columns.pack()
    assert packed == {
        "q": ["a", "b", "a"],
        "qn": le(10, -1, 2, 12, 3, 1, 14, 0, 1),
        "cr": le(1, 0),
        "crn": le(13, -1, 16, 2),
        "c": ["x", "y", "z"],
        "cn": le(11, 0, 15, 1, 17, -1),
    }
    again = LogColumns.unpack(packed)
    assert (again.qids, list(again.qnum)) == (["a", "b", "a"], [10, -1, 2, 12, 3, 1, 14, 0, 1])
    assert again.cids == ["b", "a", "x", "y", "z"]
    assert list(again.cnum) == [13, -1, 16, 2, 11, 0, 15, 1, 17, -1]
    merged = LogColumns()
    merged.add(again)
    merged.add(LogColumns.unpack(packed))
    assert merged.qids == ["a", "b", "a"] * 2 and list(merged.qnum) == list(again.qnum) * 2
    assert merged.cids == again.cids * 2 and list(merged.cnum) == list(again.cnum) * 2


def test_a_run_without_completions_of_its_own_requests_is_read() -> None:
    columns = LogColumns()
    columns.add_items([q("a", 10), c("x", 11)])
    packed = columns.pack()
    assert packed["cr"] == b"" and packed["crn"] == b""
    again = LogColumns.unpack(packed)
    assert (again.qids, again.cids, list(again.cnum)) == (["a"], ["x"], [11, -1])
    assert LogColumns.unpack(LogColumns().pack()).qids == []


def run(**fields: Any) -> dict[str, Any]:
    """Two requests, one completion by place (of the second), one by id."""
    packed = {
        "q": ["a", "b"],
        "qn": le(10, 0, 1, 20, 0, 1),
        "cr": le(1),
        "crn": le(21, 0),
        "c": ["x"],
        "cn": le(30, 0),
    }
    return {**packed, **fields}


def test_a_run_whose_last_request_is_named_by_place_is_read() -> None:
    again = LogColumns.unpack(run())
    assert again.cids == ["b", "x"] and list(again.cnum) == [21, 0, 30, 0]
    assert LogColumns.unpack(run(cr=le(0))).cids == ["a", "x"]


@pytest.mark.parametrize(
    "fields",
    [
        {"qn": le(10, 0, 1, 20, 0)},
        {"qn": le(10, 0, 1, 20, 0, 1, 30)},
        {"crn": le(21)},
        {"crn": le(21, 0, 22)},
        {"cn": le(30)},
        {"cn": le(30, 0, 31, 0)},
        {"cr": le(2)},
        {"cr": le(-1)},
    ],
)
def test_columns_that_do_not_fit_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"^malformed history run: columns that do not fit$"):
        LogColumns.unpack(run(**fields))


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"qn": "not bytes"}, "a number column is not a byte string"),
        ({"cn": bytearray(16)}, "a number column is not a byte string"),
        ({"crn": b"\x00" * 15}, "bytes length not a multiple of item size"),
    ],
)
def test_a_number_column_that_is_not_whole_integers_is_refused(
    fields: dict[str, Any], reason: str
) -> None:
    with pytest.raises(ValueError, match=f"^malformed history run: {reason}$"):
        LogColumns.unpack(run(**fields))


def test_a_run_with_a_missing_column_is_refused_with_its_name() -> None:
    for key in ("q", "c", "qn", "cr", "crn", "cn"):
        broken = run()
        del broken[key]
        with pytest.raises(ValueError, match=f"^malformed history run: '{key}'$"):
            LogColumns.unpack(broken)


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        (["q", 7, 1, 0, 1], "a log item's request id is not text"),
        (["c", "r", 1, 0, 5], "unknown log item"),
        (["q", "r", 1, 0], "unknown log item"),
        (["q", "r", 1, 0, 1, 2], "unknown log item"),
        (["x", "r", 1, 0], "unknown log item"),
        (["Q", "r", 1, 0, 1], "unknown log item"),
        (["c", "r", "1", 0], "malformed log item: .+"),
        (["q", "r", 1, 0, 2**64], "malformed log item: .+"),
    ],
)
def test_a_malformed_log_item_is_refused_with_its_reason(item: list[Any], reason: str) -> None:
    columns = LogColumns()
    with pytest.raises(ValueError, match=f"^{reason}$"):
        columns.add_items([q("ok", 1), item])


def test_on_a_big_endian_machine_the_numbers_are_still_written_little_endian(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``_LE`` is the machine's byte order; with it flipped, ``array`` holds the numbers in
    the other order, so they are swapped both ways (here: what the bytes of a big-endian
    machine's arrays look like, read through the swap)."""
    columns = LogColumns()
    columns.add_items([q("a", 10, -1, 2), c("a", 11, 0), c("x", 12, -1)])
    monkeypatch.setattr(pj, "_LE", False)
    packed = columns.pack()
    assert packed["qn"] == struct.pack(">3q", 10, -1, 2)
    assert packed["cn"] == struct.pack(">2q", 12, -1)
    again = LogColumns.unpack(packed)
    assert list(again.qnum) == [10, -1, 2] and list(again.cnum) == [11, 0, 12, -1]
    assert list(pj._from_le(struct.pack(">q", -5))) == [-5]
    assert pj._le_bytes(array.array("q", [1, -1])) == struct.pack(">2q", 1, -1)
