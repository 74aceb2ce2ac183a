"""The team store's rules against a model, on a real PostgreSQL: several desks asking,
claiming, keeping drafts, answering, crashing and losing leases, and agents taking their
answers with call keys (retries included). Hypothesis drives the real SQL (``store/db.py``,
the one implementation of the rules) and compares every reply with a plain model.

Invariants checked after every step:
- every request has at most one outcome, and only a pending request gets one;
- a delivery mark, once written, never changes (delivered once, to one call);
- a take returns exactly what the model says: the newly taken and what the same call took
  before (a retried call gets the same answers, any other call never gets them again).
"""

from __future__ import annotations

from typing import Any

import psycopg
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from pi_agent_ask.store.db import Claim, Refused, Store, Submitted
from tests.store_support import Cluster, desk_url, store_db  # noqa: F401

AGENTS = ("a", "b", "c")
DESKS = ("d1", "d2", "d3")
CALLS = ("k1", "k2", "k3", "k4")
PARAMS = {"questions": []}


class Model:
    def __init__(self) -> None:
        self.requests: dict[str, dict[str, Any]] = {}
        self.by_call: dict[tuple[str, str], str] = {}
        self.order: list[str] = []
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.tokens: dict[str, dict[str, str]] = {desk: {} for desk in DESKS}
        """desk -> request id -> the claim token that desk holds (what it remembers)."""

    def free(self, rid: str) -> bool:
        request = self.requests[rid]
        return request["state"] == "pending" and (request["claim"] is None or request["expired"])


def machine(store: Store, admin: str) -> type[RuleBasedStateMachine]:
    class TeamRules(RuleBasedStateMachine):
        requests = Bundle("requests")

        def __init__(self) -> None:
            super().__init__()
            self.model = Model()
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute("TRUNCATE pi_agent_ask.outcomes, pi_agent_ask.requests")

        @rule(
            target=requests,
            agent=st.sampled_from(AGENTS),
            call=st.sampled_from(CALLS),
            background=st.booleans(),
        )
        def ask(self, agent: str, call: str, background: bool) -> Any:
            rid, bg, state = store.ask(agent, call, PARAMS, background=background)
            known = self.model.by_call.get((agent, call))
            if known is not None:
                assert rid == known
                assert (bg, state) == (
                    self.model.requests[rid]["background"],
                    self.model.requests[rid]["state"],
                )
                return multiple()
            self.model.by_call[agent, call] = rid
            self.model.order.append(rid)
            self.model.requests[rid] = {
                "agent": agent,
                "background": background,
                "state": "pending",
                "claim": None,
                "expired": False,
                "draft": None,
            }
            return rid

        @rule(desk=st.sampled_from(DESKS), rid=st.one_of(st.none(), requests))
        def claim(self, desk: str, rid: str | None) -> None:
            got = store.claim(rid, desk=desk, person=desk, lease=3600)
            if rid is None:
                free = [r for r in self.model.order if self.model.free(r)]
                expected = free[0] if free else None
            else:
                expected = rid if self.model.free(rid) else None
            if expected is None:
                assert isinstance(got, Refused)
                return
            assert isinstance(got, Claim) and got.request_id == expected
            assert got.row.draft == self.model.requests[expected]["draft"]
            request = self.model.requests[expected]
            request["claim"], request["expired"] = got.token, False
            self.model.tokens[desk][expected] = got.token

        @rule(rid=requests)
        def lease_runs_out(self, rid: str) -> None:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(
                    "UPDATE pi_agent_ask.requests SET lease_until = now() - interval '1 s'"
                    " WHERE request_id = %s AND claim_token IS NOT NULL",
                    (rid,),
                )
            if self.model.requests[rid]["claim"] is not None:
                self.model.requests[rid]["expired"] = True

        @rule(desk=st.sampled_from(DESKS))
        def desk_crashes(self, desk: str) -> None:
            self.model.tokens[desk] = {}  # its claims stay in the store until they expire

        @rule(desk=st.sampled_from(DESKS), rid=requests)
        def heartbeat(self, desk: str, rid: str) -> None:
            token = self.model.tokens[desk].get(rid)
            if token is None:
                return
            alive = store.heartbeat(token, lease=3600) is not None
            request = self.model.requests[rid]
            expected = request["state"] == "pending" and request["claim"] == token
            assert alive == expected
            if alive:
                request["expired"] = False

        @rule(desk=st.sampled_from(DESKS), rid=requests, draft=st.integers(0, 9))
        def save_draft(self, desk: str, rid: str, draft: int) -> None:
            token = self.model.tokens[desk].get(rid)
            if token is None:
                return
            saved = store.save_draft(token, {"d": draft}, person=desk)
            request = self.model.requests[rid]
            assert saved == (request["state"] == "pending" and request["claim"] == token)
            if saved:
                request["draft"] = {"d": draft}

        @rule(desk=st.sampled_from(DESKS), rid=requests, with_claim=st.booleans())
        def submit(self, desk: str, rid: str, with_claim: bool) -> None:
            token = self.model.tokens[desk].get(rid) if with_claim else None
            got = store.submit(rid, {"by": desk}, person=desk, desk=desk, claim_token=token)
            request = self.model.requests[rid]
            allowed = request["state"] == "pending" and (
                request["claim"] is None or request["expired"] or request["claim"] == token
            )
            if request["state"] == "done" and self.model.outcomes[rid]["by"] == desk:
                assert isinstance(got, Submitted)  # its own answer: idempotent
                return
            if not allowed:
                assert isinstance(got, Refused)
                assert got.reason == (
                    "answered"
                    if request["state"] == "done"
                    else ("lease_lost" if token is not None else "claimed")
                )
                return
            assert isinstance(got, Submitted)
            request["state"], request["claim"] = "done", None
            self.model.outcomes[rid] = {"by": desk, "delivered": None}

        @rule(agent=st.sampled_from(AGENTS), call=st.sampled_from(CALLS))
        def take(self, agent: str, call: str) -> None:
            got = [d.request_id for d in store.take(agent, "t-" + call)]
            self._expect_take(agent, "t-" + call, None, got)

        @rule(rid=requests)
        def take_own(self, rid: str) -> None:
            agent = self.model.requests[rid]["agent"]
            got = [d.request_id for d in store.take(agent, rid + "/own", request_id=rid)]
            self._expect_take(agent, rid + "/own", rid, got)

        @rule(rid=requests)
        def to_background(self, rid: str) -> None:
            store.to_background(self.model.requests[rid]["agent"], rid)
            self.model.requests[rid]["background"] = True

        def _expect_take(self, agent: str, call: str, only: str | None, got: list[str]) -> None:
            for rid in self.model.order:
                outcome = self.model.outcomes.get(rid)
                request = self.model.requests[rid]
                if outcome is None or request["agent"] != agent or outcome["delivered"]:
                    continue
                if (rid == only) if only is not None else request["background"]:
                    outcome["delivered"] = call
            expected = [
                rid
                for rid in self.model.order
                if rid in self.model.outcomes
                and self.model.requests[rid]["agent"] == agent
                and self.model.outcomes[rid]["delivered"] == call
            ]
            assert got == expected

        @invariant()
        def outcomes_match(self) -> None:
            rows = store.outcomes()
            assert {row["request_id"]: row["delivered_call"] for row in rows} == {
                rid: outcome["delivered"] for rid, outcome in self.model.outcomes.items()
            }
            assert {row["request_id"]: row["answered_by"] for row in rows} == {
                rid: outcome["by"] for rid, outcome in self.model.outcomes.items()
            }
            pending = {row.request_id for row in store.board()}
            assert pending == {
                rid for rid, r in self.model.requests.items() if r["state"] == "pending"
            }

    return TeamRules


def test_store_rules_match_the_model(
    pg_cluster: Cluster,
    store_db: str,  # noqa: F811
    desk_url: str,  # noqa: F811
) -> None:
    store = Store(desk_url)
    store.open()
    try:
        rules = machine(store, pg_cluster.url(store_db))
        run_state_machine_as_test(
            rules,
            settings=settings(
                max_examples=50,
                stateful_step_count=40,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            ),
        )
    finally:
        store.close()
