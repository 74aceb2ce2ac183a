"""The team store: every agent's requests, outcomes, drafts, claims and delivery marks in
PostgreSQL, behind any number of desks (``docs/team.md``).

``db`` holds the rules in SQL (psycopg 3, blocking; desks call it in worker threads),
``schema`` the versioned migrations and roles.
"""
