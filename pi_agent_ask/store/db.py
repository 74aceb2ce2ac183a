"""The team store's operations: every rule of claims, outcomes and deliveries, in SQL.

Each method is blocking (psycopg 3's sync API) and runs one transaction; the desk calls them
in Trio worker threads (``store.run``). Every value travels as a query parameter; no SQL is
ever built from text a person or an agent supplied.

The rules (``docs/team.md`` states them as invariants):

- **A request is keyed twice**: by its id, and by ``(agent_key, call_key)``, the key of the
  tool call that asked it. Asking again with the same call key (a forwarder retrying a call on
  another desk) finds the same request: the wait is resumed, nothing is asked twice.
- **A claim is a lease**: ``claim`` takes a pending form whose claim is free or expired
  (``FOR UPDATE SKIP LOCKED``: two desks never wait on each other), writes a fresh
  ``claim_token`` and ``lease_until``; ``heartbeat`` extends it while the desk lives. A dead
  desk's lease runs out and the form, with its last saved draft, is free again.
- **First submission wins**: ``submit`` moves the request from ``pending`` to ``done`` with a
  conditional ``UPDATE ... RETURNING`` (only a pending request, only by the claim's holder or
  when nobody holds a live claim) and inserts the one outcome keyed by request id in the same
  transaction. A later submission finds ``done`` and is refused with who answered and when.
- **Delivered once, to one call**: ``take`` marks undelivered outcomes with the call key of
  the tool call that carries them (``delivered_call IS NULL`` is the condition) and returns
  them together with those already marked for that same call. A call retried on another desk
  gets exactly what the lost attempt took; any other call never gets them again.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import socket
import threading
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

import attrs
import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from pi_agent_ask.store.schema import (
    AGENT_ROLE,
    DESK_ROLE,
    SCHEMA,
    TOKENS_ROLE,
    check_store,
    init_store,
)

__all__ = [
    "CHANNEL",
    "Claim",
    "Delivered",
    "FormRow",
    "Left",
    "Refused",
    "Store",
    "Submitted",
    "desk_name",
    "hash_token",
    "local_time",
    "machine",
]

CHANNEL: Final = "pi_agent_ask"
"""The one ``LISTEN`` channel. Payloads: ``b`` (the board changed) and ``o <agent key>`` (an
outcome of that agent was written)."""
TOKEN_PREFIX: Final = "pia_"
BOARD_NOTE: Final = "b"
OUTCOME_NOTE: Final = "o "


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


@attrs.frozen
class FormRow:
    """One pending form as every desk's board shows it, with who is on it."""

    request_id: str
    agent_key: str
    params: dict[str, Any]
    background: bool
    seq: int
    created_at: datetime
    draft: dict[str, Any] | None
    draft_by: str | None
    claimed_by: str | None
    claim_desk: str | None
    lease_left: float | None
    """Seconds the claim's lease had left when the board was read, by the database's clock
    (negative: it ran out; ``None``: never claimed). A desk times a lease by this, never by
    comparing its own clock with the database's: the two clocks may differ."""
    claim_live: bool
    """The claim's lease has not run out (as the database's clock says)."""
    wait_left: float | None
    """Seconds the lease of the agent's ``wait_for_answers`` call in progress (on any desk; the
    longest, if several) had left when the board was read, by the database's clock
    (``None``: no call waits)."""

    @property
    def agent_waits(self) -> bool:
        """A ``wait_for_answers`` call of the agent is in progress: it is blocked on this form
        though it asked it in the background."""
        return self.wait_left is not None


@attrs.frozen
class Claim:
    request_id: str
    token: str
    row: FormRow


@attrs.frozen
class Refused:
    """A claim or a submission that did not happen, with the sentence a person reads."""

    reason: Literal["answered", "claimed", "unknown", "lease_lost", "invalid", "unavailable"]
    message: str
    holder: str | None = None
    """``claimed``: who is on the form (their ``--as`` name); ``answered``: who answered it."""
    desk: str | None = None
    """``claimed``: the desk that holds it; ``answered``: the desk it was answered on."""
    until: datetime | None = None
    """``claimed``: when the holder's lease runs out unless their desk extends it, on the
    reading desk's clock (``Store.clock``)."""
    cause: str | None = None
    """``unavailable``: what happened, as a clause ("the team's store cannot be reached ..."),
    for a sentence that says what to do its own way (Later and Esc not put back)."""


@attrs.frozen
class Submitted:
    request_id: str
    agent_key: str
    answered_by: str
    answered_at: datetime


@attrs.frozen
class Left:
    """What became of a form that left the board: answered or cancelled (by ``by`` on desk
    ``desk`` at ``at``), or withdrawn (it is not in the store any more: removed there)."""

    request_id: str
    ended: Literal["submitted", "cancelled", "withdrawn"]
    by: str | None = None
    desk: str | None = None
    at: datetime | None = None


@attrs.frozen
class Delivered:
    """An outcome handed to one tool call (``call_key``) of its agent."""

    request_id: str
    result: dict[str, Any]
    params: dict[str, Any]
    background: bool
    answered_by: str
    answered_on: str
    answered_at: datetime


_LEASE_LEFT: Final = "extract(epoch FROM lease_until - now())::float8 AS lease_left"
_FORM_COLUMNS: Final = (
    "request_id, agent_key, params, background, seq, created_at, draft, draft_by, claimed_by, "
    f"claim_desk, {_LEASE_LEFT}, (claim_token IS NOT NULL AND lease_until > now()) AS claim_live"
)
BOARD_SQL: Final = (
    f"SELECT {_FORM_COLUMNS} FROM {SCHEMA}.requests WHERE state = 'pending' ORDER BY seq"
)
"""The board's forms, in the order they were asked (the partial index ``requests_pending``)."""
WAITS_SQL: Final = (
    "SELECT agent_key, extract(epoch FROM max(until) - now())::float8 AS wait_left"
    f" FROM {SCHEMA}.waits WHERE until > now() GROUP BY agent_key"
)
"""The agents whose ``wait_for_answers`` is in progress, with the longest lease's time left:
read beside the forms in the same transaction (the same ``now()``), once per board, not once
per form (a per-row subquery cost 1.1 ms of server time on 500 forms, against 0.16 ms for the
two statements: docs/team.md, "Figures")."""


def local_time(moment: datetime) -> str:
    """``moment`` in this desk's time zone (the server's session may run in another zone),
    for the sentences a person reads."""
    return f"{moment.astimezone():%H:%M:%S}"


def desk_name() -> str:
    """A desk's name on the board: host, process and a short random tail (``vm:26871:2f36``),
    unique among the desks of a store. It stays in the store, logs and JSON; a sentence names
    the machine (:func:`machine`)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:4]}"


def machine(desk: str | None) -> str:
    """The machine of the desk named ``desk`` (:func:`desk_name`), for the sentences a person
    reads: "bob is answering this form on vm", not on ``vm:26871:2f36``, whose process and
    tail mean nothing to them ("another desk": none named)."""
    return (desk or "").split(":", 1)[0] or desk or "another desk"


def _waits(cur: Any) -> dict[str, float]:
    """Each waiting agent's wait lease's time left (:data:`WAITS_SQL`)."""
    return {row["agent_key"]: row["wait_left"] for row in cur.execute(WAITS_SQL).fetchall()}


def _form(row: dict[str, Any], waits: dict[str, float]) -> FormRow:
    return FormRow(
        wait_left=waits.get(row["agent_key"]),
        **{
            field.name: row[field.name]
            for field in attrs.fields(FormRow)
            if field.name != "wait_left"
        },
    )


@attrs.define(eq=False)
class Store:
    """A connection pool on one store and the operations on it (blocking; one transaction
    each). ``conninfo``: a ``postgresql://`` URL or a libpq keyword string."""

    conninfo: str
    max_connections: int = 8
    wait: float = 2.0
    """Seconds an operation waits for a pooled connection (the server away or restarting)
    before it fails with ``PoolTimeout``. Short: it waits in a worker thread, which
    cancellation cannot reach, so a form leaving the screen or a desk stopping waited this
    long for a draft's save (30 s, once); the waiting for the server to come back is
    ``AsyncStore.run``'s retries, which cancellation ends at once. (Never for a connection in
    use: ``AsyncStore`` runs at most ``max_connections`` operations at once.)"""
    clock: Callable[[], datetime] = attrs.field(default=lambda: datetime.now(UTC))
    """This desk's wall clock, which may differ from the database's: a lease's end in a
    sentence is this clock's now plus the time the database says is left."""
    _pool: ConnectionPool[Any] | None = None
    _pool_lock: threading.Lock = attrs.field(factory=threading.Lock)
    """Held while the pool is made, renewed or closed (the listener's thread renews it)."""

    def open(self, *, timeout: float = 30.0) -> None:
        """Check that the store can serve a desk (:meth:`check`), then open the pool."""
        self.check()
        pool = self._new_pool()
        pool.open(wait=True, timeout=timeout)
        with self._pool_lock:
            self._pool = pool

    def _new_pool(self) -> ConnectionPool[Any]:
        return ConnectionPool(
            self.conninfo,
            min_size=1,
            max_size=self.max_connections,
            open=False,
            # A connection broken by a server restart is found and replaced before use.
            check=ConnectionPool.check_connection,
            timeout=self.wait,
            kwargs={"autocommit": True},
        )

    def renew(self) -> None:
        """The server answers again after an outage (the listener reconnected): a new pool at
        once. The old pool's own reconnection waits out a pause that doubles after each failed
        attempt, which after an outage of 20 s kept every call waiting 8 s or more after the
        server was back; its waiting calls fail (``PoolClosed``) and are tried again
        (``AsyncStore.run``) on the new one. Nothing when the store is closed."""
        with self._pool_lock:
            old = self._pool
            if old is None:
                return
            self._pool = self._new_pool()
            self._pool.open(wait=False)
        old.close(timeout=1.0)

    def check(self) -> None:
        """Raise :class:`StoreUnavailable` with what to do when the store cannot serve a desk.

        One plain connection, so that the first problem is said at once in its own words: the
        pool would only retry it in the background and time out."""
        check_store(self.conninfo, DESK_ROLE, "act as a desk")

    def close(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    @contextmanager
    def _transaction(
        self, role: str, agent: str | None = None
    ) -> Iterator[psycopg.Connection[Any]]:
        pool = self._pool
        assert pool is not None, "Store.open was not called"
        with pool.connection() as conn, conn.transaction():
            # set_config(..., true) is SET LOCAL: both end with the transaction. One statement,
            # one round trip: the role, and the agent whose rows row-level security admits.
            conn.execute(
                "SELECT set_config('role', %s, true), set_config('pi_agent_ask.agent', %s, true)",
                (role, agent or ""),
            )
            yield conn

    # -- administration (the cluster owner's URL) ---------------------------------------------

    @staticmethod
    def init(conninfo: str) -> list[int]:
        return init_store(conninfo)

    @staticmethod
    def new_token(conninfo: str, agent: str) -> str:
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        check_store(conninfo, TOKENS_ROLE, "manage agent tokens")
        with psycopg.connect(conninfo, autocommit=True) as conn, conn.transaction():
            conn.execute(f"SET LOCAL ROLE {TOKENS_ROLE}")
            conn.execute(
                f"INSERT INTO {SCHEMA}.tokens (token_hash, agent_key) VALUES (%s, %s)",
                (hash_token(token), agent),
            )
        return token

    @staticmethod
    def revoke(conninfo: str, agent: str) -> int:
        """Revoke every live token of ``agent``; returns how many."""
        check_store(conninfo, TOKENS_ROLE, "manage agent tokens")
        with psycopg.connect(conninfo, autocommit=True) as conn, conn.transaction():
            conn.execute(f"SET LOCAL ROLE {TOKENS_ROLE}")
            cursor = conn.execute(
                f"UPDATE {SCHEMA}.tokens SET revoked_at = now()"
                " WHERE agent_key = %s AND revoked_at IS NULL",
                (agent,),
            )
            return cursor.rowcount

    # -- what a desk checks -------------------------------------------------------------------

    def agent_for_token(self, token: str) -> str | None:
        with self._transaction(DESK_ROLE) as conn:
            row = conn.execute(f"SELECT {SCHEMA}.token_agent(%s)", (hash_token(token),)).fetchone()
        return None if row is None else row[0]

    # -- an agent's side (row-level security: its own rows only) ------------------------------

    def ask(
        self,
        agent: str,
        call_key: str,
        params: dict[str, Any],
        *,
        background: bool,
    ) -> tuple[str, bool, str]:
        """The request of ``(agent, call_key)``, made now if it is new: ``(request id,
        background, state)``. A retried call finds the request its first attempt made."""
        request_id = str(uuid.uuid4())
        with self._transaction(AGENT_ROLE, agent) as conn:
            row = conn.execute(
                f"INSERT INTO {SCHEMA}.requests"
                " (request_id, agent_key, call_key, params, background)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (agent_key, call_key) DO NOTHING"
                " RETURNING request_id, background, state",
                (request_id, agent, call_key, json.dumps(params), background),
            ).fetchone()
            if row is None:
                row = conn.execute(
                    f"SELECT request_id, background, state FROM {SCHEMA}.requests"
                    " WHERE agent_key = %s AND call_key = %s",
                    (agent, call_key),
                ).fetchone()
                assert row is not None
            else:
                conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, BOARD_NOTE))
        return row[0], row[1], row[2]

    def pending_of(self, agent: str) -> list[str]:
        """The agent's pending background requests, oldest first."""
        with self._transaction(AGENT_ROLE, agent) as conn:
            rows = conn.execute(
                f"SELECT request_id FROM {SCHEMA}.requests"
                " WHERE agent_key = %s AND state = 'pending' AND background ORDER BY seq",
                (agent,),
            ).fetchall()
        return [row[0] for row in rows]

    def give_back(self, agent: str, call_key: str, request_ids: Sequence[str] | None = None) -> int:
        """Unmark what the call ``call_key`` carried (``request_ids``: those of it only), so the
        agent's next call takes it again: a hook's take whose reply could not be passed on, or
        an answer a hook leaves for a tool result. Returns how many outcomes were given back."""
        which = "" if request_ids is None else "AND request_id = ANY(%(ids)s)"
        with self._transaction(AGENT_ROLE, agent) as conn:
            cursor = conn.execute(
                f"""
                UPDATE {SCHEMA}.outcomes SET delivered_call = NULL, delivered_at = NULL
                WHERE agent_key = %(agent)s AND delivered_call = %(call)s {which}
                """,
                {"agent": agent, "call": call_key, "ids": list(request_ids or ())},
            )
            return cursor.rowcount

    def take(self, agent: str, call_key: str, *, request_id: str | None = None) -> list[Delivered]:
        """Mark the agent's undelivered outcomes as carried by the call ``call_key`` and return
        them with those this call already carried (a retried call gets the same ones).

        ``request_id``: that request's outcome only (a foreground ask takes its own answer);
        otherwise the outcomes of background requests."""
        which = "o.request_id = %(request)s" if request_id is not None else "r.background"
        with self._transaction(AGENT_ROLE, agent) as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(
                f"""
                WITH taken AS (
                    UPDATE {SCHEMA}.outcomes o SET delivered_call = %(call)s,
                        delivered_at = now()
                    FROM {SCHEMA}.requests r
                    WHERE o.request_id = r.request_id AND o.agent_key = %(agent)s
                        AND o.delivered_call IS NULL AND {which}
                    RETURNING o.request_id
                )
                SELECT o.request_id, o.result, r.params, r.background, o.answered_by,
                    o.answered_on, o.answered_at, r.seq
                FROM {SCHEMA}.outcomes o JOIN {SCHEMA}.requests r USING (request_id)
                WHERE o.agent_key = %(agent)s
                    AND (o.request_id IN (SELECT request_id FROM taken)
                        OR o.delivered_call = %(call)s)
                ORDER BY r.seq
                """,
                {"call": call_key, "agent": agent, "request": request_id},
            ).fetchall()
        return [
            Delivered(
                request_id=row["request_id"],
                result=row["result"],
                params=row["params"],
                background=row["background"],
                answered_by=row["answered_by"],
                answered_on=row["answered_on"],
                answered_at=row["answered_at"],
            )
            for row in rows
        ]

    def mark_wait(self, agent: str, call_key: str, *, lease: float) -> None:
        """The agent's ``wait_for_answers`` call ``call_key`` is in progress for ``lease``
        seconds more (made, or extended); every desk's board is woken when it begins. The
        agent's marks whose lease ran out (their desk died mid-wait) go at the same time."""
        with self._transaction(AGENT_ROLE, agent) as conn:
            conn.execute(
                f"DELETE FROM {SCHEMA}.waits WHERE agent_key = %s AND until <= now()", (agent,)
            )
            row = conn.execute(
                f"INSERT INTO {SCHEMA}.waits (agent_key, call_key, until)"
                " VALUES (%s, %s, now() + make_interval(secs => %s))"
                " ON CONFLICT (agent_key, call_key) DO UPDATE SET until = excluded.until"
                " RETURNING xmax = 0",
                (agent, call_key, lease),
            ).fetchone()
            if row is not None and row[0]:  # a new wait, not an extended one
                conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, BOARD_NOTE))

    def unmark_wait(self, agent: str, call_key: str) -> None:
        """The wait ``call_key`` ended (answered, or its client went away)."""
        with self._transaction(AGENT_ROLE, agent) as conn:
            cursor = conn.execute(
                f"DELETE FROM {SCHEMA}.waits WHERE agent_key = %s AND call_key = %s",
                (agent, call_key),
            )
            if cursor.rowcount:
                conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, BOARD_NOTE))

    def request_state(self, agent: str, request_id: str) -> str | None:
        with self._transaction(AGENT_ROLE, agent) as conn:
            row = conn.execute(
                f"SELECT state FROM {SCHEMA}.requests WHERE request_id = %s", (request_id,)
            ).fetchone()
        return None if row is None else row[0]

    def to_background(self, agent: str, request_id: str) -> None:
        """A foreground ask whose call ended without its answer: the answer now goes out as a
        background answer (``wait_for_answers``, the next tool result). Every desk's board is
        woken: the form no longer blocks its agent."""
        with self._transaction(AGENT_ROLE, agent) as conn:
            cursor = conn.execute(
                f"UPDATE {SCHEMA}.requests SET background = true"
                " WHERE request_id = %s AND NOT background",
                (request_id,),
            )
            if cursor.rowcount:
                conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, BOARD_NOTE))
                # The agent's calls are woken too: the same call sent again to another desk
                # (its desk stopped, not its client) waits there, and makes it foreground
                # again (``waited_on``), whichever of the two came first.
                conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, OUTCOME_NOTE + agent))

    def waited_on(self, agent: str, request_id: str) -> str | None:
        """The state of the request a foreground ask's call waits on, made foreground again if
        it was made a background one meanwhile: a desk that stopped under an earlier attempt
        of the call did so (``to_background``), and the forwarder sent the call, with the same
        call key, to another desk, where it waits. Every desk's board is woken then: the form
        blocks its agent again, and its answer goes to this call."""
        with self._transaction(AGENT_ROLE, agent) as conn:
            cursor = conn.execute(
                f"UPDATE {SCHEMA}.requests SET background = false"
                " WHERE request_id = %s AND background AND state = 'pending'",
                (request_id,),
            )
            if cursor.rowcount:
                conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, BOARD_NOTE))
            row = conn.execute(
                f"SELECT state FROM {SCHEMA}.requests WHERE request_id = %s", (request_id,)
            ).fetchone()
        return None if row is None else row[0]

    def history(self, agent: str, *, limit: int = 100) -> list[dict[str, Any]]:
        """The agent's answered requests, newest first: who answered, on which desk, when."""
        with self._transaction(AGENT_ROLE, agent) as conn, conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(
                f"SELECT o.request_id, r.params->>'title' AS title, o.answered_by,"
                f" o.answered_on, o.answered_at, o.delivered_at,"
                f" (o.result->>'cancelled')::boolean AS cancelled"
                f" FROM {SCHEMA}.outcomes o JOIN {SCHEMA}.requests r USING (request_id)"
                f" WHERE o.agent_key = %s ORDER BY o.answered_at DESC LIMIT %s",
                (agent, limit),
            ).fetchall()

    # -- a desk's side: the board, claims, drafts, outcomes -------------------------------

    def agents(self) -> list[str]:
        """Every agent key with a request in the store, sorted."""
        with self._transaction(DESK_ROLE) as conn:
            rows = conn.execute(
                f"SELECT DISTINCT agent_key FROM {SCHEMA}.requests ORDER BY agent_key"
            ).fetchall()
        return [row[0] for row in rows]

    def requests_of(self, agent: str, *, as_agent: bool = False) -> list[dict[str, Any]]:
        """Every request of ``agent``, oldest first, with its outcome and who gave it (``result``
        and ``answered_by`` are ``None`` while it waits): what its history is made of.
        ``as_agent``: read as the agent itself (its history tools), where row-level security
        admits only its own rows; else as the desk (the page's history of every agent)."""
        role, key = (AGENT_ROLE, agent) if as_agent else (DESK_ROLE, None)
        with self._transaction(role, key) as conn, conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(
                f"SELECT r.request_id, r.params, r.background, r.created_at, o.result,"
                f" o.answered_by, o.answered_on, o.answered_at"
                f" FROM {SCHEMA}.requests r LEFT JOIN {SCHEMA}.outcomes o USING (request_id)"
                f" WHERE r.agent_key = %s ORDER BY r.seq",
                (agent,),
            ).fetchall()

    def board(self) -> list[FormRow]:
        """Every pending form of every agent, in the order they were asked."""
        return self.board_since(())[0]

    def board_since(self, shown: Collection[str]) -> tuple[list[FormRow], list[Left]]:
        """The board (:meth:`board`), and what became of each form of ``shown`` (the board a
        desk read before) that is not on it any more, in one transaction."""
        with self._transaction(DESK_ROLE) as conn, conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(BOARD_SQL).fetchall()
            waits = _waits(cur) if rows else {}
            left = set(shown).difference(row["request_id"] for row in rows)
            ends = {
                row["request_id"]: Left(
                    row["request_id"],
                    "cancelled" if row["cancelled"] else "submitted",
                    row["answered_by"],
                    row["answered_on"],
                    row["answered_at"],
                )
                for row in (
                    cur.execute(
                        "SELECT request_id, (result->>'cancelled')::boolean AS cancelled,"
                        f" answered_by, answered_on, answered_at FROM {SCHEMA}.outcomes"
                        " WHERE request_id = ANY(%s)",
                        (sorted(left),),
                    ).fetchall()
                    if left
                    else ()
                )
            }
        # No outcome: the request was removed from the store (a retention DELETE of pending
        # requests, say) without one.
        return [_form(row, waits) for row in rows], [
            ends.get(request_id, Left(request_id, "withdrawn")) for request_id in sorted(left)
        ]

    def claim(
        self,
        request_id: str | None,
        *,
        desk: str,
        person: str,
        lease: float,
        token: str | None = None,
    ) -> Claim | Refused:
        """Claim ``request_id`` (``None``: the first free pending form) for ``lease`` seconds.

        ``token``: the claim's token, made by the caller so that a retry (the reply of a
        committed claim was lost with the connection) finds its own claim instead of being
        refused by it."""
        token = token or str(uuid.uuid4())
        where = "request_id = %(request)s AND " if request_id is not None else ""
        with self._transaction(DESK_ROLE) as conn, conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(
                f"""
                UPDATE {SCHEMA}.requests SET claim_token = %(token)s, claimed_by = %(person)s,
                    claim_desk = %(desk)s, lease_until = now() + make_interval(secs => %(lease)s)
                WHERE request_id = (
                    SELECT request_id FROM {SCHEMA}.requests
                    WHERE {where} state = 'pending'
                        AND (claim_token IS NULL OR lease_until <= now()
                            OR claim_token = %(token)s)
                    ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED
                )
                RETURNING {_FORM_COLUMNS}
                """,
                {
                    "token": token,
                    "person": person,
                    "desk": desk,
                    "lease": lease,
                    "request": request_id,
                },
            ).fetchone()
            if row is not None:
                conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, BOARD_NOTE))
                return Claim(row["request_id"], token, _form(row, _waits(cur)))
            if request_id is None:
                return Refused("unknown", "No form is waiting.")
            return self._why_not(cur, request_id)

    def _why_not(self, cur: Any, request_id: str) -> Refused:
        row = cur.execute(
            f"SELECT r.state, r.claimed_by, r.claim_desk, {_LEASE_LEFT}, o.answered_by,"
            f" o.answered_on, o.answered_at,"
            f" (r.claim_token IS NOT NULL AND r.lease_until > now()) AS claim_live"
            f" FROM {SCHEMA}.requests r LEFT JOIN {SCHEMA}.outcomes o USING (request_id)"
            f" WHERE r.request_id = %s",
            (request_id,),
        ).fetchone()
        if row is None:
            return Refused("unknown", f"There is no form {request_id}.")
        if row["state"] == "done":
            return Refused(
                "answered",
                f"{row['answered_by']} already answered this form on "
                f"{machine(row['answered_on'])} at {local_time(row['answered_at'])}; your answer "
                "was not sent.",
                holder=row["answered_by"],
                desk=row["answered_on"],
            )
        if not row["claim_live"]:
            # Pending and free as last committed, yet not claimable: another desk's claim of
            # it is in flight (its row is locked, which SKIP LOCKED passes by).
            return Refused("claimed", "Another desk is opening this form at this moment.")
        until = self.clock() + timedelta(seconds=row["lease_left"])
        return Refused(
            "claimed",
            f"{row['claimed_by']} is answering this form on {machine(row['claim_desk'])} "
            f"(until {local_time(until)} unless they keep it).",
            holder=row["claimed_by"],
            desk=row["claim_desk"],
            until=until,
        )

    def submit_refusal(self, request_id: str) -> Refused:
        """Why a form that is not pending cannot be answered (answered, or unknown)."""
        with self._transaction(DESK_ROLE) as conn, conn.cursor(row_factory=dict_row) as cur:
            return self._why_not(cur, request_id)

    def heartbeat(self, token: str, *, lease: float) -> datetime | None:
        """Extend a live claim; ``None`` when it is no longer this token's (lost or answered)."""
        with self._transaction(DESK_ROLE) as conn:
            row = conn.execute(
                f"UPDATE {SCHEMA}.requests"
                " SET lease_until = now() + make_interval(secs => %s)"
                " WHERE claim_token = %s AND state = 'pending' RETURNING lease_until",
                (lease, token),
            ).fetchone()
        return None if row is None else row[0]

    def save_draft(self, token: str, draft: dict[str, Any], *, person: str) -> bool:
        """Keep the claimed form's draft (it comes back with the form if the claim is lost).
        The other desks are woken too: they show the holder's draft as it is typed."""
        with self._transaction(DESK_ROLE) as conn:
            cursor = conn.execute(
                f"UPDATE {SCHEMA}.requests SET draft = %s, draft_at = now(), draft_by = %s"
                " WHERE claim_token = %s AND state = 'pending'",
                (json.dumps(draft), person, token),
            )
            if cursor.rowcount != 1:
                return False
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, BOARD_NOTE))
            return True

    def release(self, token: str, draft: dict[str, Any] | None = None) -> None:
        """Give a claimed form back to every desk (with its draft when given)."""
        with self._transaction(DESK_ROLE) as conn:
            conn.execute(
                f"UPDATE {SCHEMA}.requests SET claim_token = NULL, claimed_by = NULL,"
                " claim_desk = NULL, lease_until = NULL, draft = coalesce(%s, draft)"
                " WHERE claim_token = %s AND state = 'pending'",
                (None if draft is None else json.dumps(draft), token),
            )
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, BOARD_NOTE))

    def submit(
        self,
        request_id: str,
        result: dict[str, Any],
        *,
        person: str,
        desk: str,
        claim_token: str | None = None,
    ) -> Submitted | Refused:
        """Record the one outcome of ``request_id``. Allowed while the request is pending and
        either ``claim_token`` holds its claim or no live claim exists; otherwise refused,
        unless the outcome is already this one, by this person on this desk (then it is that
        outcome: a retry whose reply was lost). Another answer from the same desk is refused
        like anyone's: it was not sent."""
        with self._transaction(DESK_ROLE) as conn, conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(
                f"UPDATE {SCHEMA}.requests SET state = 'done', claim_token = NULL,"
                " lease_until = NULL"
                " WHERE request_id = %(request)s AND state = 'pending'"
                " AND (claim_token IS NULL OR lease_until <= now()"
                " OR claim_token = %(token)s)"
                " RETURNING agent_key",
                {"request": request_id, "token": claim_token},
            ).fetchone()
            if row is None:
                mine = cur.execute(
                    f"SELECT agent_key, answered_at FROM {SCHEMA}.outcomes"
                    " WHERE request_id = %s AND answered_by = %s AND answered_on = %s"
                    " AND result = %s::jsonb",
                    (request_id, person, desk, json.dumps(result)),
                ).fetchone()
                if mine is not None:
                    # This very answer is recorded: a retry whose first attempt committed (its
                    # reply was lost with the connection), or a second press of Submit.
                    return Submitted(request_id, mine["agent_key"], person, mine["answered_at"])
                refused = self._why_not(cur, request_id)
                if claim_token is not None and refused.reason == "claimed":
                    # Who holds it now, when, and where stay: the page's 423 and the
                    # terminal's short status name them.
                    return attrs.evolve(
                        refused,
                        reason="lease_lost",
                        message="Your claim on this form ran out and "
                        + refused.message[0].lower()
                        + refused.message[1:],
                    )
                return refused
            agent = row["agent_key"]
            done = cur.execute(
                f"INSERT INTO {SCHEMA}.outcomes"
                " (request_id, agent_key, result, answered_by, answered_on)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (request_id) DO NOTHING"
                " RETURNING answered_at",
                (request_id, agent, json.dumps(result), person, desk),
            ).fetchone()
            assert done is not None, "a pending request has no outcome"
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, OUTCOME_NOTE + agent))
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, BOARD_NOTE))
        return Submitted(request_id, agent, person, done["answered_at"])

    def outcomes(self, request_ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Outcomes with who answered and the delivery mark (desk role: every agent's)."""
        with self._transaction(DESK_ROLE) as conn, conn.cursor(row_factory=dict_row) as cur:
            if request_ids is None:
                return cur.execute(
                    f"SELECT * FROM {SCHEMA}.outcomes ORDER BY answered_at"
                ).fetchall()
            return cur.execute(
                f"SELECT * FROM {SCHEMA}.outcomes WHERE request_id = ANY(%s)",
                (list(request_ids),),
            ).fetchall()
