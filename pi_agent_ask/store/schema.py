"""The team store's schema: an ordered list of versioned SQL migrations, and the roles; and
whether a database can serve (``check_store``: it is reached, has the schema, and the login
role is in the role needed), each refusal a sentence naming the fix.

``migrate`` applies, in one transaction under a transaction-level advisory lock (so two
``store init`` runs on one database at once serialise), every migration whose version is above
the highest recorded in ``pi_agent_ask.schema_version``. The roles are the cluster's, shared by
all its databases, which that lock does not cover: each is created (and the desk role made a
member of the agent role) in a block that lets an init on another database win the race. A
migration is never edited once released: a change is a new, higher version. Running it again
is a no-op (exit 0).

Why no migration tool: Alembic needs SQLAlchemy and a configuration tree, yoyo-migrations and
Sqitch read migration files from a directory outside the package (Sqitch is Perl); this store
has a handful of statements that ship inside the wheel. The list below is that tool's core
(versions, one transaction, a lock) and nothing else.

Roles (``NOLOGIN``; grant them to login roles, ``docs/team.md``):

- ``pi_agent_ask_desk``: what a desk connects as. Reads every pending form (the board), claims,
  keeps drafts, writes outcomes; may switch to ``pi_agent_ask_agent`` for an agent's own work.
- ``pi_agent_ask_agent``: an agent's view. Row-level security limits it to the rows whose
  ``agent_key`` is the transaction's ``pi_agent_ask.agent`` setting.
- ``pi_agent_ask_tokens``: owns nothing but may manage the token table (``store token``,
  ``store revoke``); desks check a token only through ``pi_agent_ask.token_agent(digest)``, a
  security-definer function, and never read the table.
"""

from __future__ import annotations

from typing import Any, Final

import psycopg

from pi_agent_ask.store import StoreUnavailable
from pi_agent_ask.store.address import not_a_connection_string

__all__ = [
    "AGENT_ROLE",
    "DESK_ROLE",
    "MIGRATIONS",
    "SCHEMA",
    "TOKENS_ROLE",
    "check_store",
    "connect",
    "init_store",
    "migrate",
]

SCHEMA: Final = "pi_agent_ask"
DESK_ROLE: Final = "pi_agent_ask_desk"
AGENT_ROLE: Final = "pi_agent_ask_agent"
TOKENS_ROLE: Final = "pi_agent_ask_tokens"
_LOCK_KEY: Final = 0x70695F61736B  # "pi_ask": the advisory lock that serialises migrations


def _guarded(statement: str) -> str:
    """``statement`` in a PL/pgSQL block of its own that lets another ``store init`` win: roles
    and their memberships are the cluster's, while the advisory lock is one database's, so an
    init on another database of the cluster may create the same object at the same moment. Its
    insert then holds the catalog's unique index: this one waits for it to commit and gets
    ``unique_violation`` (or ``duplicate_object`` when it looked after that commit)."""
    return f"BEGIN {statement}; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END;"


_ROLES = f"""
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{DESK_ROLE}') THEN
        {_guarded(f"CREATE ROLE {DESK_ROLE} NOLOGIN")}
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{AGENT_ROLE}') THEN
        {_guarded(f"CREATE ROLE {AGENT_ROLE} NOLOGIN")}
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{TOKENS_ROLE}') THEN
        {_guarded(f"CREATE ROLE {TOKENS_ROLE} NOLOGIN")}
    END IF;
    IF NOT pg_has_role('{DESK_ROLE}', '{AGENT_ROLE}', 'MEMBER') THEN
        {_guarded(f"GRANT {AGENT_ROLE} TO {DESK_ROLE}")}
    END IF;
END
$$;
"""

MIGRATIONS: Final[tuple[tuple[int, str], ...]] = (
    (
        1,
        f"""
CREATE TABLE {SCHEMA}.tokens (
    token_hash bytea PRIMARY KEY,
    agent_key text NOT NULL CHECK (length(agent_key) BETWEEN 1 AND 200),
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
CREATE INDEX tokens_agent ON {SCHEMA}.tokens (agent_key);

CREATE TABLE {SCHEMA}.requests (
    request_id text PRIMARY KEY,
    agent_key text NOT NULL CHECK (length(agent_key) BETWEEN 1 AND 200),
    call_key text NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    params jsonb NOT NULL,
    background boolean NOT NULL,
    state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done')),
    created_at timestamptz NOT NULL DEFAULT now(),
    draft jsonb,
    draft_at timestamptz,
    draft_by text,
    claim_token uuid,
    claimed_by text,
    claim_desk text,
    lease_until timestamptz,
    UNIQUE (agent_key, call_key)
);
CREATE INDEX requests_pending ON {SCHEMA}.requests (seq) WHERE state = 'pending';
CREATE INDEX requests_agent ON {SCHEMA}.requests (agent_key, state);

CREATE TABLE {SCHEMA}.outcomes (
    request_id text PRIMARY KEY REFERENCES {SCHEMA}.requests ON DELETE CASCADE,
    agent_key text NOT NULL,
    result jsonb NOT NULL,
    answered_by text NOT NULL,
    answered_on text NOT NULL,
    answered_at timestamptz NOT NULL DEFAULT now(),
    delivered_call text,
    delivered_at timestamptz
);
CREATE INDEX outcomes_undelivered ON {SCHEMA}.outcomes (agent_key) WHERE delivered_call IS NULL;
CREATE INDEX outcomes_call ON {SCHEMA}.outcomes (agent_key, delivered_call);

CREATE FUNCTION {SCHEMA}.token_agent(digest bytea) RETURNS text
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT agent_key FROM {SCHEMA}.tokens
          WHERE token_hash = digest AND revoked_at IS NULL $$;
REVOKE ALL ON FUNCTION {SCHEMA}.token_agent(bytea) FROM PUBLIC;

ALTER TABLE {SCHEMA}.requests ENABLE ROW LEVEL SECURITY;
ALTER TABLE {SCHEMA}.outcomes ENABLE ROW LEVEL SECURITY;
CREATE POLICY desk_all ON {SCHEMA}.requests TO {DESK_ROLE} USING (true) WITH CHECK (true);
CREATE POLICY desk_all ON {SCHEMA}.outcomes TO {DESK_ROLE} USING (true) WITH CHECK (true);
CREATE POLICY own_rows ON {SCHEMA}.requests TO {AGENT_ROLE}
    USING (agent_key = current_setting('pi_agent_ask.agent', true))
    WITH CHECK (agent_key = current_setting('pi_agent_ask.agent', true));
CREATE POLICY own_rows ON {SCHEMA}.outcomes TO {AGENT_ROLE}
    USING (agent_key = current_setting('pi_agent_ask.agent', true))
    WITH CHECK (agent_key = current_setting('pi_agent_ask.agent', true));

GRANT USAGE ON SCHEMA {SCHEMA} TO {DESK_ROLE}, {AGENT_ROLE}, {TOKENS_ROLE};
GRANT SELECT, UPDATE ON {SCHEMA}.requests TO {DESK_ROLE};
GRANT SELECT, INSERT ON {SCHEMA}.outcomes TO {DESK_ROLE};
GRANT SELECT, INSERT ON {SCHEMA}.requests TO {AGENT_ROLE};
GRANT USAGE ON SEQUENCE {SCHEMA}.requests_seq_seq TO {AGENT_ROLE};
GRANT SELECT, UPDATE (delivered_call, delivered_at) ON {SCHEMA}.outcomes TO {AGENT_ROLE};
GRANT UPDATE (background) ON {SCHEMA}.requests TO {AGENT_ROLE};
GRANT EXECUTE ON FUNCTION {SCHEMA}.token_agent(bytea) TO {DESK_ROLE};
GRANT SELECT, INSERT, UPDATE ON {SCHEMA}.tokens TO {TOKENS_ROLE};
""",
    ),
    (
        2,
        # An agent's wait_for_answers in progress, on whichever desk serves it: it blocks the
        # agent on all its pending background forms, which every desk shows as blocking. A
        # lease, like a claim's: a desk that dies mid-wait stops extending it.
        f"""
CREATE TABLE {SCHEMA}.waits (
    agent_key text NOT NULL CHECK (length(agent_key) BETWEEN 1 AND 200),
    call_key text NOT NULL,
    until timestamptz NOT NULL,
    PRIMARY KEY (agent_key, call_key)
);
ALTER TABLE {SCHEMA}.waits ENABLE ROW LEVEL SECURITY;
CREATE POLICY desk_all ON {SCHEMA}.waits TO {DESK_ROLE} USING (true) WITH CHECK (true);
CREATE POLICY own_rows ON {SCHEMA}.waits TO {AGENT_ROLE}
    USING (agent_key = current_setting('pi_agent_ask.agent', true))
    WITH CHECK (agent_key = current_setting('pi_agent_ask.agent', true));
GRANT SELECT ON {SCHEMA}.waits TO {DESK_ROLE};
GRANT SELECT, INSERT, UPDATE, DELETE ON {SCHEMA}.waits TO {AGENT_ROLE};
""",
    ),
)


def migrate(conn: Any) -> list[int]:
    """Create the roles and apply every migration not applied yet; returns the versions applied
    now (empty when the schema was current). ``conn`` is a psycopg connection of a role that
    may create roles and the schema (the cluster's owner, or a database owner with
    ``CREATEROLE``); it is left with no transaction open."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        conn.execute(_ROLES)
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {SCHEMA}.schema_version ("
            " version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        row = conn.execute(
            f"SELECT coalesce(max(version), 0) FROM {SCHEMA}.schema_version"
        ).fetchone()
        current = int(row[0])
        applied = []
        for version, sql in MIGRATIONS:
            if version <= current:
                continue
            conn.execute(sql)
            conn.execute(f"INSERT INTO {SCHEMA}.schema_version (version) VALUES (%s)", (version,))
            applied.append(version)
    return applied


def init_store(conninfo: str) -> list[int]:
    """``store init``: :func:`migrate` on a connection to ``conninfo``; what stops it is said in
    a sentence naming the fix (:class:`StoreUnavailable`)."""
    with connect(conninfo) as conn:
        try:
            return migrate(conn)
        except psycopg.errors.InsufficientPrivilege as error:
            # The server's sentence without its CONTEXT (the PL/pgSQL that raised it).
            said = error.diag.message_primary or _one_line(error)
            raise StoreUnavailable(
                f"the login role {conn.info.user} may not create the schema and roles "
                f"({said}): run `pi-agent-ask store init URL` as the cluster's owner, or as "
                "the database's owner with CREATEROLE (docs/team.md, Set-up)."
            ) from None


def connect(conninfo: str) -> psycopg.Connection[Any]:
    """An autocommit connection to ``conninfo``; :class:`StoreUnavailable`, in a sentence,
    when it is not a connection string or reaches no database (every command's first step,
    ``store init`` as much as a desk's start)."""
    try:
        return psycopg.connect(conninfo, autocommit=True)
    except psycopg.ProgrammingError as error:  # libpq could not parse it
        raise not_a_connection_string(str(error)) from None
    except psycopg.OperationalError as error:
        raise StoreUnavailable(f"cannot reach the store: {_one_line(error)}") from None


def check_store(conninfo: str, role: str, acting: str) -> None:
    """Raise :class:`StoreUnavailable`, in a sentence naming the fix, unless ``conninfo`` is a
    connection string that reaches a database with the schema, as a login role that is a
    member of ``role`` (``acting``: what that role does, in words)."""
    with connect(conninfo) as conn:
        schema = conn.execute(
            "SELECT 1 FROM pg_catalog.pg_class c"
            " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = 'requests'",
            (SCHEMA,),
        ).fetchone()
        if schema is None:
            raise StoreUnavailable(
                f"the database has no {SCHEMA} schema yet: run `pi-agent-ask store init "
                "URL` once, as a role that may create roles (docs/team.md, Set-up)."
            )
        row = conn.execute(
            "SELECT current_user, pg_has_role(current_user, %s, 'MEMBER')", (role,)
        ).fetchone()
        if row is None or not row[1]:
            user = "?" if row is None else row[0]
            raise StoreUnavailable(
                f"the login role {user} may not {acting}: GRANT {role} TO {user}; "
                "(docs/team.md, Set-up)."
            )


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())
