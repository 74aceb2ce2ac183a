"""The team store: every agent's requests, outcomes, drafts, claims and delivery marks in
PostgreSQL, behind any number of desks (``docs/team.md``).

``db`` holds the rules in SQL (psycopg 3, blocking; desks call it in worker threads),
``schema`` the versioned migrations and roles.
"""

__all__ = ["StoreUnavailable"]


class StoreUnavailable(Exception):
    """The store cannot serve a desk, said in a sentence that names the fix: not a connection
    string, no server reached, no schema yet (``store init``), or a login role that is not a
    member of the desk role (for ``store init``: a role that may not create the schema and
    roles). Raised when a desk starts, before anything is served, and by the ``store``
    commands."""
