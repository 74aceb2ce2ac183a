"""Damaged session files, and the session tree against a model.

Property tests take real session files, damage them (flipped bytes, truncation, garbage at the
end, overwritten ranges) and open them: opening raises nothing but ``SessionFileError``, and
that only when the header itself is damaged; every entry whose frame lies wholly before the
first damaged byte is kept, exactly as it was; a read-only open never changes the file.

A stateful test drives a ``SessionFile`` (on disk and in memory) with random appends, batches,
leaf moves, compactions, forks, reloads and reopenings, and compares branches and leaves with a
plain model of the tree.
"""

from __future__ import annotations

import functools
import struct
import tempfile
import zlib
from pathlib import Path
from typing import Any

import attrs
import cbor2
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    precondition,
    rule,
)

from pi_agent_ask.persistence.session_file import Entry, SessionFile, SessionFileError
from tests.session_frames import decode_payload

# ---- real files and their frames -----------------------------------------------------------


@attrs.frozen
class Frame:
    start: int
    end: int
    entries: tuple[Entry, ...]
    leaf: str | None  # the leaf after this frame


@attrs.frozen(repr=False)
class Sample:
    content: bytes
    header_end: int
    frames: tuple[Frame, ...]

    def __repr__(self) -> str:
        return f"<Sample of {len(self.content)} bytes, {len(self.frames)} frames>"

    def is_boundary(self, position: int) -> bool:
        return position == self.header_end or any(f.end == position for f in self.frames)

    def kept_before(self, position: int) -> tuple[tuple[Entry, ...], str | None]:
        """Entries of the frames lying wholly before ``position``, and the leaf they leave."""
        entries: list[Entry] = []
        leaf = None
        for frame in self.frames:
            if frame.end > position:
                break
            entries.extend(frame.entries)
            leaf = frame.leaf
        return tuple(entries), leaf


def parse(content: bytes) -> Sample:
    """Split a session file into frames with a parser independent of the module."""
    pos = 0
    frames: list[Frame] = []
    header_end = 0
    leaf: str | None = None
    while pos < len(content):
        length, crc = struct.unpack(">II", content[pos : pos + 8])
        payload = content[pos + 8 : pos + 8 + length]
        assert zlib.crc32(payload) == crc
        value = decode_payload(payload)
        end = pos + 8 + length
        if "magic" in value:
            header_end = end
        else:
            if "leaf" in value:
                entries: tuple[Entry, ...] = ()
                leaf = value["leaf"]
            else:
                maps = value.get("batch", [value])
                entries = tuple(Entry.from_cbor(cbor2.dumps(m)) for m in maps)
                leaf = entries[-1].id
            frames.append(Frame(pos, end, entries, leaf))
        pos = end
    return Sample(content, header_end, tuple(frames))


@functools.cache
def samples() -> tuple[Sample, ...]:
    with tempfile.TemporaryDirectory() as directory:
        varied = Path(directory) / "varied.pias"
        with SessionFile.open(varied) as session:
            root = session.append("message", {"text": "héllo ☃", "n": [1, 2.5, None, True]})
            session.append_many([("ask:queued", {"requestId": "r1"}), ("ask:panel", {})])
            session.move_leaf(root.id)
            session.append("image", {"data": "A" * 70_000, "nested": {"k": [{"x": b"\x00"}]}})
            session.compact("summary of things")
            session.append_many([("a", {}), ("b", {"i": 1}), ("c", {"i": 2})])
            session.move_leaf(None)
            session.append("second-root", {})
        small = Path(directory) / "small.pias"
        with SessionFile.open(small) as session:
            for n in range(40):
                session.append("m", {"n": n})
        return (parse(varied.read_bytes()), parse(small.read_bytes()))


def test_samples_are_what_the_module_reads() -> None:
    for sample in samples():
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "s.pias"
            path.write_bytes(sample.content)
            with SessionFile.open(path, readonly=True) as session:
                entries, leaf = sample.kept_before(len(sample.content))
                assert session.entries == entries
                assert session.leaf_id == leaf
                assert session.report.ok


# ---- damage --------------------------------------------------------------------------------


@st.composite
def damaged(draw: st.DrawFn) -> tuple[Sample, bytes, int, str]:
    """A sample, its damaged content, the first damaged position, and what was done."""
    sample = draw(st.sampled_from(samples()))
    content = bytearray(sample.content)
    size = len(content)
    kind = draw(st.sampled_from(["flip", "truncate", "garbage", "overwrite"]))
    if kind == "flip":
        positions = draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=4, unique=True))
        for position in positions:
            content[position] ^= draw(st.integers(1, 255))
        first = min(positions)
    elif kind == "truncate":
        first = draw(st.integers(0, size - 1))
        del content[first:]
    elif kind == "garbage":
        content += draw(st.binary(min_size=1, max_size=64))
        first = size
    else:
        first = draw(st.integers(0, size - 1))
        replacement = draw(st.binary(min_size=1, max_size=32))
        old = bytes(content[first : first + len(replacement)])
        content[first : first + len(replacement)] = replacement
        if replacement[: len(old)] == old and first + len(replacement) <= size:
            return sample, bytes(content), size, "nothing"  # nothing changed after all
        # The first byte that actually differs is where the damage starts.
        first += next(
            (n for n, (a, b) in enumerate(zip(old, replacement, strict=False)) if a != b),
            min(len(old), len(replacement)),
        )
    return sample, bytes(content), first, kind


@settings(max_examples=300)
@given(damaged())
def test_opening_a_damaged_file_keeps_every_whole_entry_before_the_damage(
    case: tuple[Sample, bytes, int, str],
) -> None:
    sample, content, first, kind = case
    note(f"{kind} at {first}")
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "s.pias"
        path.write_bytes(content)
        header_damaged = first < sample.header_end and not (kind == "truncate" and first == 0)

        # Read-only first: same findings, and the file stays as it is.
        try:
            with SessionFile.open(path, readonly=True) as reader:
                read_only = (reader.entries, reader.leaf_id, reader.report)
        except SessionFileError as exc:
            assert header_damaged or (kind == "truncate" and first == 0), exc
            read_only = None
        assert path.read_bytes() == content

        try:
            session = SessionFile.open(path)
        except SessionFileError as exc:
            assert header_damaged, exc
            assert exc.reason in ("not-a-session-file", "damaged-header", "future-version")
            assert path.read_bytes() == content
            assert sorted(p.name for p in Path(directory).iterdir()) == ["s.pias"]
            return
        assert not header_damaged
        with session:
            kept, leaf = sample.kept_before(first)
            assert session.entries == kept
            assert session.leaf_id == leaf
            report = session.report
            clean_cut = kind == "truncate" and (first == 0 or sample.is_boundary(first))
            if kind == "nothing" or clean_cut:
                assert report.ok
            else:
                assert report.damage is not None
                assert report.damage.end == len(content)
                assert report.damage.bad_bytes == len(content) - report.damage.start
                assert report.damage.start <= max(first, sample.header_end)
                assert report.cut
                assert report.saved_to is not None
                assert report.saved_to.read_bytes() == content[report.damage.start :]
                assert path.stat().st_size == report.damage.start
                assert str(report.damage.bad_bytes) in report.describe()
            if read_only is not None:
                assert read_only[:2] == (session.entries, session.leaf_id)
                assert read_only[2].damage == report.damage
            # The repaired file takes new entries and reopens clean.
            added = session.append("after-repair", {"ok": True})
        with SessionFile.open(path) as again:
            assert again.report.ok
            assert again.entries == (*kept, added)


@settings(max_examples=50)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_refused_or_read_never_crash(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "s.pias"
        path.write_bytes(content)
        try:
            with SessionFile.open(path, readonly=True) as session:
                assert session.entries == ()
        except SessionFileError as exc:
            assert exc.reason in ("not-a-session-file", "damaged-header")
        assert path.read_bytes() == content


# ---- the tree against a model --------------------------------------------------------------

json_leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=8)
)
data_strategy = st.dictionaries(
    st.text(max_size=6),
    st.recursive(
        json_leaves,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=6,
    ),
    max_size=3,
)
types = st.sampled_from(["message", "ask:queued", "ask:panel", "tool-call"])


class SessionMachine(RuleBasedStateMachine):
    """A session compared with a model: ``parents`` (id → parent), file ``order``, ``leaf``."""

    on_disk = True
    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.TemporaryDirectory()
        self.forks = 0
        self.session = self._new()
        self.parents: dict[str, str | None] = {}
        self.data: dict[str, tuple[str, Any]] = {}
        self.order: list[str] = []
        self.leaf: str | None = None

    def _new(self) -> SessionFile:
        if self.on_disk:
            return SessionFile.open(Path(self.directory.name) / "session.pias")
        return SessionFile.in_memory()

    def teardown(self) -> None:
        self.session.close()
        self.directory.cleanup()

    def _branch(self, leaf: str | None) -> list[str]:
        out = []
        while leaf is not None:
            out.append(leaf)
            leaf = self.parents[leaf]
        return out[::-1]

    def _record(self, entries: tuple[Entry, ...], parent: str | None) -> None:
        for entry in entries:
            assert entry.parent_id == parent
            self.parents[entry.id] = parent
            self.data[entry.id] = (entry.type, entry.data)
            self.order.append(entry.id)
            parent = entry.id
        if entries:
            self.leaf = entries[-1].id

    @initialize(target=ids, entry_type=types, data=data_strategy)
    def first(self, entry_type: str, data: dict[str, Any]) -> str:
        entry = self.session.append(entry_type, data)
        self._record((entry,), None)
        return entry.id

    @rule(target=ids, entry_type=types, data=data_strategy)
    def append_to_leaf(self, entry_type: str, data: dict[str, Any]) -> str:
        parent = self.leaf
        entry = self.session.append(entry_type, data)
        self._record((entry,), parent)
        return entry.id

    @rule(target=ids, parent=ids, entry_type=types)
    def append_under(self, parent: str, entry_type: str) -> str:
        if parent not in self.parents:
            with pytest.raises(KeyError):
                self.session.append(entry_type, {}, parent_id=parent)
            return parent
        entry = self.session.append(entry_type, {"under": parent}, parent_id=parent)
        self._record((entry,), parent)
        return entry.id

    @rule(target=ids, items=st.lists(st.tuples(types, data_strategy), max_size=4))
    def append_batch(self, items: list[tuple[str, dict[str, Any]]]) -> str:
        parent = self.leaf
        entries = self.session.append_many(items)
        assert len(entries) == len(items)
        self._record(entries, parent)
        return self.leaf if self.leaf is not None else "none"

    @rule(target=ids, summary=st.text(max_size=10))
    def compact(self, summary: str) -> str:
        parent = self.leaf
        before = len(self.order)
        entry = self.session.compact(summary)
        assert entry.type == "compaction"
        assert entry.data["summary"] == summary
        self._record((entry,), parent)
        assert len(self.session) == before + 1
        return entry.id

    @rule(target=ids)
    def new_root(self) -> str:
        self.session.move_leaf(None)
        self.leaf = None
        entry = self.session.append("root", {})
        self._record((entry,), None)
        return entry.id

    @rule(entry_id=ids)
    def move_leaf(self, entry_id: str) -> None:
        if entry_id not in self.parents:
            with pytest.raises(KeyError):
                self.session.move_leaf(entry_id)
            return
        self.session.move_leaf(entry_id)
        self.leaf = entry_id

    @rule(entry_id=consumes(ids))
    def branch_of_any_entry(self, entry_id: str) -> None:
        if entry_id in self.parents:
            assert list(self.session.branch_ids(entry_id)) == self._branch(entry_id)

    @precondition(lambda self: self.on_disk)
    @rule()
    def reopen(self) -> None:
        path = self.session.path
        assert path is not None
        self.session.close()
        self.session = SessionFile.open(path)
        assert self.session.report.ok

    @rule()
    def reload(self) -> None:
        report = self.session.reload()
        assert report.ok

    @precondition(lambda self: self.on_disk)
    @rule()
    def concurrent_reader(self) -> None:
        assert self.session.path is not None
        with SessionFile.open(self.session.path, readonly=True) as reader:
            assert list(reader.branch_ids()) == self._branch(self.leaf)
            assert list(reader.ids()) == self.order

    @rule(in_memory=st.booleans())
    def fork(self, in_memory: bool) -> None:
        self.forks += 1
        target = None if in_memory else Path(self.directory.name) / f"fork-{self.forks}.pias"
        forked = self.session.fork(target)
        self.session.close()
        self.session = forked
        branch = self._branch(self.leaf)
        self.parents = {i: self.parents[i] for i in branch}
        self.data = {i: self.data[i] for i in branch}
        self.order = branch
        self.on_disk = not in_memory

    @invariant()
    def matches_the_model(self) -> None:
        session = self.session
        assert session.leaf_id == self.leaf
        assert list(session.ids()) == self.order
        assert list(session.branch_ids()) == self._branch(self.leaf)

    @invariant()
    def entries_hold_their_data(self) -> None:
        for entry in self.session.branch():
            entry_type, data = self.data[entry.id]
            assert (entry.type, entry.data) == (entry_type, data)


class InMemorySessionMachine(SessionMachine):
    on_disk = False


TestSessionOnDisk = SessionMachine.TestCase
TestSessionOnDisk.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
TestSessionInMemory = InMemorySessionMachine.TestCase
TestSessionInMemory.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
