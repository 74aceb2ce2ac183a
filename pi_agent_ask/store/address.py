"""The store's address: whether libpq can read it, told before the desk's heavy import.

A desk's store is a libpq connection string: ``keyword=value`` pairs or a URI
(``postgresql://`` or ``postgres://``). Only libpq reads one, here through psycopg's public
``conninfo_to_dict``: loading psycopg and libpq takes a fraction of a second, the desk's own
import seconds, so a mistyped address is refused first (``commands.desk.early_refusal``), and
a desk that starts needs them anyway. The sentence is one (:func:`not_a_connection_string`),
whether this check or the connection (``schema.connect``) finds the mistake.
"""

from __future__ import annotations

from pi_agent_ask.store import StoreUnavailable

__all__ = ["check_syntax", "not_a_connection_string"]


def not_a_connection_string(why: str) -> StoreUnavailable:
    """The refusal of a store address libpq cannot parse (``why``: its reason, made one line
    here: libpq's ends with a line break, and quotes the address, which may hold several)."""
    return StoreUnavailable(
        "the store's address is not a connection string (postgresql://USER@HOST/DB "
        f"or host=... dbname=... user=...): {' '.join(why.split())}"
    )


def check_syntax(conninfo: str) -> None:
    """Raise :func:`not_a_connection_string` when libpq cannot parse ``conninfo``. Whether it
    reaches a server, and as whom, only connecting tells."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as error:
        raise not_a_connection_string(str(error)) from None
