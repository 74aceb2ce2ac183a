"""When checkpoints are written: the amortised rule, checked on real files by counting bytes.

A checkpoint holds the whole live state (every pending form), so a rule of one checkpoint per
512 entries re-encodes that state again and again: with N forms pending, the file's checkpoint
bytes grow as N², not N. The rule (``docs/session-file.md``, Writing): a checkpoint follows
once the fold took in at least ``checkpoint_every`` entries since the last one *and* their
frames hold at least ``checkpoint_ratio`` times the bytes of the last checkpoint's live part.
Checked here, from the frames of the file (the independent parser in ``session_frames``):
every checkpoint was due by that rule and none was left out (the entries after the newest one
are too few or too small for another), the checkpoint bytes stay a bounded share of the entry
bytes at 1k and 4k pending forms (linear), files whose checkpoints keep the live part
anywhere in the map (as earlier releases wrote them) still open, continue and feed the
history index. Nothing is timed.
"""

from __future__ import annotations

import uuid
import zlib
from pathlib import Path
from typing import Any

import attrs
import cbor2
import pytest

from pi_agent_ask.actors.records import AskRequest
from pi_agent_ask.form import text as texts
from pi_agent_ask.persistence import codec
from pi_agent_ask.persistence import history as h
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence import session_file as sf
from pi_agent_ask.persistence.projection import JOURNAL
from pi_agent_ask.persistence.session_file import CHECKPOINT_MAGIC, SessionFile
from tests.session_frames import decode_payload
from tests.test_checkpoints import params, write_form


@attrs.frozen
class Frame:
    offset: int
    size: int  # with its 8-byte head
    value: Any  # decoded (``session_frames``): an entry, a batch, a leaf move or a checkpoint

    @property
    def checkpoint(self) -> dict[str, Any] | None:
        found = self.value.get("checkpoint")
        return found if isinstance(found, dict) else None

    @property
    def entries(self) -> int:
        if self.checkpoint is not None or "leaf" in self.value:
            return 0
        return len(self.value["batch"]) if "batch" in self.value else 1


def frames(path: Path) -> list[Frame]:
    data = path.read_bytes()
    out, pos = [], int.from_bytes(data[:4], "big") + 8  # after the header
    while pos < len(data):
        end = pos + 8 + int.from_bytes(data[pos : pos + 4], "big")
        out.append(Frame(pos, end - pos, decode_payload(data[pos + 8 : end])))
        pos = end
    return out


RATIO = 4
"""The ratio ``docs/session-file.md`` states (``CHECKPOINT_RATIO``)."""


def live_bytes(checkpoint: dict[str, Any]) -> int:
    return len(cbor2.dumps(checkpoint["live"]))


def assert_rule(path: Path, *, every: int = sf.CHECKPOINT_EVERY) -> list[Frame]:
    """Every checkpoint of this single-branch file was due, and no due one is missing: between
    two checkpoints (or the start and the first) the entries are at least ``every`` and their
    frames hold at least ``RATIO`` times the previous live part; a checkpoint comes
    at the first frame that meets both, so the entries after the last one miss one of them.
    Returns the checkpoint frames."""
    checkpoints: list[Frame] = []
    entries = size = 0
    limit = 0  # bytes the frames since the last checkpoint must reach (0 before the first)
    for frame in frames(path):
        if frame.checkpoint is not None:
            assert entries >= every and size >= limit, (frame.offset, entries, size, limit)
            checkpoints.append(frame)
            entries = size = 0
            limit = RATIO * live_bytes(frame.checkpoint)
            continue
        assert not (entries >= every and size >= limit), f"a checkpoint was due at {frame.offset}"
        entries += frame.entries
        size += frame.size
    assert not (entries >= every and size >= limit), "a checkpoint was due at the end"
    return checkpoints


def pending_forms(path: Path, forms: range) -> None:
    with SessionFile.open(path, projection=JOURNAL) as session:
        for n in forms:
            write_form(session, n, answered=False, delivered=False)


def test_checkpoint_bytes_stay_a_bounded_share_of_the_entries_at_any_number_pending(
    tmp_path: Path,
) -> None:
    """Linear, not quadratic: the checkpoints of 4,000 pending forms take no larger a share of
    the file than those of 1,000 (one per 512 entries, each holding every pending form, took
    0.17 of the entry bytes at 1k and 0.75 at 4k: that share grows with N)."""
    shares = []
    for count in (1_000, 4_000):
        path = tmp_path / f"{count}.pias"
        pending_forms(path, range(count))
        found = frames(path)
        checkpoint_bytes = sum(f.size for f in found if f.checkpoint is not None)
        entry_bytes = sum(f.size for f in found if f.checkpoint is None)
        shares.append(checkpoint_bytes / entry_bytes)
        checkpoints = assert_rule(path)
        assert len(checkpoints) >= 5  # the rule wrote checkpoints; it did not stop
        # The newest checkpoint holds every form queued before it (all are pending).
        queued = sum(
            f.entries
            for f in found
            if f.offset < checkpoints[-1].offset and "batch" in f.value  # the queued batches
        )
        assert len(checkpoints[-1].checkpoint["live"]["requests"]) == queued / 3  # type: ignore[index]
    assert all(share <= 0.3 for share in shares), shares
    assert shares[1] <= shares[0] * 1.5, shares


def form_chain(n: int) -> list[tuple[str, dict[str, Any]]]:
    """The chain the runtime writes when it queues a background form (one frame)."""
    form = params(n)
    call = f"call-{n}"
    request = AskRequest(str(uuid.uuid4()), form, True, "2026-12-01T00:00:00.000Z", call)
    shared = jr.shared_params(form)
    receipt = texts.receipt_tool_result(request.request_id, ["q", "r"], 1)
    return [
        (jr.TOOL_CALL, {"toolCallId": call, "name": "ask_user", "arguments": {}}),
        (jr.PAYLOAD, jr.payload_entry(form, call, request.created_at, shared=shared)),
        (jr.HISTORY_REQUEST, jr.history_request_entry(request, shared=shared)),
        (jr.QUEUED, jr.queued_entry(request, shared=shared)),
        (jr.TOOL_RESULT, {"toolCallId": call, "name": "ask_user", "result": receipt}),
    ]


@pytest.mark.parametrize("chains_per_call", [1, 2])
def test_the_write_path_of_the_runtime_keeps_to_the_rule(
    tmp_path: Path, chains_per_call: int
) -> None:
    """``append_chains`` (how the persistence actor writes: one chain alone, or a batch of
    several) counts its frames toward the rule as ``append`` does. It counted their entries
    but not their bytes, so after the first checkpoint no other came (1 in 24,000 entries)."""
    path = tmp_path / "s.pias"
    with SessionFile.open(path, projection=JOURNAL) as session:
        for first in range(0, 1_500, chains_per_call):
            calls = [form_chain(n) for n in range(first, first + chains_per_call)]
            assert all(isinstance(r, tuple) for r in session.append_chains(calls))
    checkpoints = assert_rule(path)
    assert len(checkpoints) >= 5


def test_an_open_reads_at_most_the_rule_allows_after_the_newest_checkpoint(
    tmp_path: Path,
) -> None:
    """The open indexes only the entries after the newest checkpoint, and those are bounded by
    the rule: fewer than ``checkpoint_every``, or frames of less than the ratio times that
    checkpoint's live part. Across reopens (the rule measures the live part of the
    checkpoint an open started from) the file keeps to the rule."""
    path = tmp_path / "s.pias"
    pending_forms(path, range(1_500))
    for more in (range(1_500, 1_700), range(1_700, 2_300)):
        with SessionFile.open(path, projection=JOURNAL) as session:
            assert session.report.checkpoint is not None
            newest = frames(path)
            last = max(i for i, f in enumerate(newest) if f.checkpoint is not None)
            after = newest[last + 1 :]
            assert session.report.checkpoint == newest[last].offset
            assert session.indexed == 1 + sum(f.entries for f in after)  # the stub, then those
            tail = sum(f.size for f in after)
            live = live_bytes(newest[last].checkpoint)  # type: ignore[arg-type]
            assert sum(f.entries for f in after) < sf.CHECKPOINT_EVERY or tail < RATIO * live
            for n in more:
                write_form(session, n, answered=False, delivered=False)
        assert_rule(path)
    with SessionFile.open(path, projection=JOURNAL, readonly=True) as session:
        assert len(session.fold().requests) == 2_300  # type: ignore[attr-defined]


def old_writer(value: dict[str, Any], magic: bytes) -> tuple[bytes, int]:
    """A checkpoint as earlier releases wrote it: the keys in the order the writer built them
    (``live`` before ``log``, ``prev`` and ``history``), deflated at level 6. (The live part
    may come encoded already, a ``codec.Spliced``: its bytes are those of the plain value.)"""
    keys = [key for key in value if key != "live"]
    keys.insert(keys.index("entries") + 1, "live")  # where those releases built it
    plain = codec.dumps({key: value[key] for key in keys})
    payload = bytes([codec.KIND_CHECKPOINT]) + magic + deflate(plain)
    return payload, len(codec.dumps(value["live"]))


def deflate(plain: bytes) -> bytes:
    """Raw DEFLATE with the format's dictionary at level 6, as earlier releases wrote it."""
    packer = zlib.compressobj(6, zlib.DEFLATED, -15, 4, zlib.Z_DEFAULT_STRATEGY, codec.DICTIONARY)
    return packer.compress(plain) + packer.flush()


def test_checkpoints_with_the_live_part_anywhere_still_open_continue_and_index_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file whose checkpoints hold ``live`` in the middle of the map (an earlier release):
    it opens from its newest checkpoint, the log and the history index read through those
    checkpoints (decoded whole: their live part is not last), and new checkpoints continue
    the chain."""
    path = tmp_path / "s.pias"
    with monkeypatch.context() as patched:
        patched.setattr(codec, "encode_checkpoint_sized", old_writer)
        ids: list[str] = []
        with SessionFile.open(path, projection=JOURNAL, checkpoint_every=20) as session:
            ids += [write_form(session, n, answered=n % 3 > 0, delivered=True) for n in range(60)]
    old = [f for f in frames(path) if f.checkpoint is not None]
    assert len(old) >= 10
    data = path.read_bytes()
    for frame in old:  # live is not the last key of these maps
        payload = data[frame.offset + 8 : frame.offset + frame.size]
        plain = codec.inflate(payload[1 + len(CHECKPOINT_MAGIC) :])
        assert list(cbor2.loads(plain))[-1] != "live"
    with SessionFile.open(path, projection=JOURNAL, checkpoint_every=20) as session:
        assert session.report.checkpoint == old[-1].offset
        ids += [write_form(session, n, answered=True, delivered=True) for n in range(60, 90)]
        assert session.log_prev is not None and session.log_prev > old[-1].offset
        branch = h.source_of_branch(session.branch())
        source = h.source_of_session(session)
        listed = h.list_history(source, limit=200)
        assert listed == h.list_history(branch, limit=200)
        assert len(listed["records"]) == 2 * 90  # type: ignore[arg-type]
    new = [f for f in frames(path) if f.checkpoint is not None][len(old) :]
    assert new and all(list(f.checkpoint)[-1] == "live" for f in new)  # type: ignore[arg-type]


def test_a_checkpoint_decodes_to_its_map_with_its_live_part_last() -> None:
    value = {"projection": "p", "log": [["q", "r", 1, 2, 3]], "prev": None, "live": {"a": [1]}}
    payload = codec.encode_checkpoint(value, CHECKPOINT_MAGIC)
    assert codec.decode_checkpoint(payload, CHECKPOINT_MAGIC) == value
    # ``live`` is written last whatever order the map was built in.
    first = {"live": {"a": [1]}, "log": [], "prev": 7}
    packed = codec.encode_checkpoint(first, CHECKPOINT_MAGIC)
    plain = codec.inflate(packed[1 + len(CHECKPOINT_MAGIC) :])
    assert list(cbor2.loads(plain)) == ["log", "prev", "live"]
    assert codec.encode_checkpoint_sized(first, CHECKPOINT_MAGIC)[1] == len(cbor2.dumps({"a": [1]}))
    # Not last (an earlier writer): decoded all the same. Malformed CBOR: a CodecError.
    old = bytes([codec.KIND_CHECKPOINT]) + CHECKPOINT_MAGIC + deflate(cbor2.dumps(first))
    assert codec.decode_checkpoint(old, CHECKPOINT_MAGIC) == first
    broken = bytes([codec.KIND_CHECKPOINT]) + CHECKPOINT_MAGIC + deflate(b"\xa2\x61")
    with pytest.raises(codec.CodecError, match=r"^not CBOR"):
        codec.decode_checkpoint(broken, CHECKPOINT_MAGIC)
