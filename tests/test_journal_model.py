"""The queue state rebuilt from a session branch, against a simple model (hypothesis stateful).

Random appends of queue entries (requests, completions, deliveries, wait results, drafts,
panel changes) interleave with leaf moves, forks into new files and reopenings; after every
step, ``rebuild_queue`` over the real file's branch must equal the model's reading of its own
copy of the tree, and so must the queue rebuilt from the session's own fold (``journal.recover``:
checkpoints, partial index) of a session opened with the journal projection.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pi_agent_ask.actors.records import AskRequest, Outcome
from pi_agent_ask.form.result import build_result
from pi_agent_ask.form.types import AskParams, Option, Question
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.projection import JOURNAL
from pi_agent_ask.persistence.session_file import SessionFile

# The journal projection with a checkpoint every few entries: reopenings start from one.
OPTIONS: dict[str, Any] = {"projection": JOURNAL, "checkpoint_every": 3}

PARAMS = AskParams(
    questions=(Question("q", "Q1", "Pick?", "single", (Option("a", "A"), Option("b", "B"))),),
    background=True,
)


def model_rebuild(path: list[tuple[str, Any]]) -> tuple[Any, ...]:
    """The model: a plain fold over the branch's events, in order."""
    order: list[str] = []
    outcome: dict[str, bool] = {}
    delivered: set[str] = set()
    draft: dict[str, int] = {}
    panel = True
    for kind, value in path:
        if kind == "queued" and value not in order:
            order.append(value)
        elif kind == "completed" and value[0] in order:
            outcome[value[0]] = value[1]
        elif kind == "delivered":
            delivered.add(value)
        elif kind == "wait":
            delivered.update(value)
        elif kind == "draft":
            draft[value[0]] = value[1]
        elif kind == "panel":
            panel = value
    # Settled requests (an outcome recorded and delivered) are done with: not rebuilt.
    return (
        tuple(
            (rid, outcome.get(rid), rid in delivered, draft.get(rid))
            for rid in order
            if not (rid in outcome and rid in delivered)
        ),
        panel,
    )


def real_rebuild(session: SessionFile) -> tuple[Any, ...]:
    return _summary(jr.rebuild_queue(session.branch()))


def folded_rebuild(session: SessionFile) -> tuple[Any, ...]:
    rebuilt, _ = jr.recover(session, revalidate=lambda _arguments: None)
    return _summary(rebuilt)


def _summary(rebuilt: jr.RebuiltQueue) -> tuple[Any, ...]:
    return (
        tuple(
            (
                r.request.request_id,
                None if r.outcome is None else r.outcome.result.cancelled,
                r.delivered,
                None if r.draft is None else r.draft["tab"],
            )
            for r in rebuilt.requests
        ),
        rebuilt.panel_visible,
    )


class JournalMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="journal-model-"))
        self.files = 0
        self.session = SessionFile.open(self._new_path(), **OPTIONS)
        self.tree: dict[str, tuple[str | None, tuple[str, Any]]] = {}
        self.leaf: str | None = None
        self.requests: list[str] = []

    def _new_path(self) -> Path:
        self.files += 1
        return self.dir / f"s{self.files}.pas"

    def _append(self, entry_type: str, data: dict[str, Any], event: tuple[str, Any]) -> None:
        entry = self.session.append(entry_type, data)
        self.tree[entry.id] = (self.leaf, event)
        self.leaf = entry.id

    def _path(self) -> list[tuple[str, Any]]:
        out = []
        node = self.leaf
        while node is not None:
            parent, event = self.tree[node]
            out.append(event)
            node = parent
        return out[::-1]

    @initialize()
    def start(self) -> None:
        self._append("session", {"note": "root"}, ("other", None))

    @rule()
    def queue_request(self) -> None:
        rid = f"r{len(self.requests)}"
        self.requests.append(rid)
        request = AskRequest(rid, PARAMS, True, "2026-11-30T00:00:00Z", f"call-{rid}")
        self._append(jr.QUEUED, jr.queued_entry(request), ("queued", rid))

    @precondition(lambda self: self.requests)
    @rule(data=st.data(), cancelled=st.booleans())
    def complete(self, data: st.DataObject, cancelled: bool) -> None:
        rid = data.draw(st.sampled_from(self.requests))
        result = build_result(PARAMS, (), cancelled=cancelled, request_id=rid)
        [(_, body)] = jr.completion_entries(Outcome(rid, result=result), background=True)[1:]
        self._append(jr.QUEUE_COMPLETED, body, ("completed", (rid, cancelled)))

    @precondition(lambda self: self.requests)
    @rule(data=st.data())
    def deliver(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(self.requests))
        message = {
            "customType": jr.BACKGROUND_ANSWER,
            "content": "x",
            "details": {"requestId": rid},
        }
        self._append(jr.BACKGROUND_ANSWER, message, ("delivered", rid))

    @precondition(lambda self: self.requests)
    @rule(data=st.data(), failed=st.booleans())
    def wait_result(self, data: st.DataObject, failed: bool) -> None:
        rids = data.draw(st.lists(st.sampled_from(self.requests), max_size=3, unique=True))
        if failed:
            result: dict[str, Any] = {"content": [], "isError": True}
            event: tuple[str, Any] = ("other", None)
        else:
            details = {
                "status": "complete",
                "requestIds": rids,
                "results": [{"requestId": r} for r in rids],
            }
            result = {"content": [], "details": details, "structuredContent": details}
            event = ("wait", rids)
        self._append(
            jr.TOOL_RESULT, {"toolCallId": "w", "name": "wait_for_answers", "result": result}, event
        )

    @precondition(lambda self: self.requests)
    @rule(data=st.data(), tab=st.integers(0, 1))
    def draft(self, data: st.DataObject, tab: int) -> None:
        rid = data.draw(st.sampled_from(self.requests))
        self._append(jr.DRAFT, {"requestId": rid, "form": {"tab": tab}}, ("draft", (rid, tab)))

    @rule(visible=st.booleans())
    def panel(self, visible: bool) -> None:
        self._append(jr.PANEL, {"visible": visible}, ("panel", visible))

    @rule(data=st.data())
    def move_leaf(self, data: st.DataObject) -> None:
        # Insertion order, not the random ids: replays must draw the same way.
        target = data.draw(st.sampled_from(list(self.tree)))
        self.session.move_leaf(target)
        self.leaf = target

    @rule()
    def fork(self) -> None:
        forked = self.session.fork(self._new_path())
        self.session.close()
        self.session = forked
        # The new file holds only the branch: the model keeps only the path to the leaf.
        keep = {}
        node = self.leaf
        while node is not None:
            keep[node] = self.tree[node]
            node = self.tree[node][0]
        self.tree = keep

    @rule()
    def reopen(self) -> None:
        path = self.session.path
        self.session.close()
        self.session = SessionFile.open(path, **OPTIONS)

    @invariant()
    def rebuilt_state_matches_the_model(self) -> None:
        expected = model_rebuild(self._path())
        assert real_rebuild(self.session) == expected
        assert folded_rebuild(self.session) == expected

    def teardown(self) -> None:
        self.session.close()
        shutil.rmtree(self.dir, ignore_errors=True)


JournalMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
TestJournalModel = JournalMachine.TestCase
