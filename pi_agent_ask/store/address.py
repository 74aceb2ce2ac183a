"""The store's address: what a desk can tell is wrong with it before it imports anything heavy.

A desk's store is a libpq connection string: a URI (``postgresql://`` or ``postgres://``) or
``keyword=value`` pairs. Only libpq decides whether one is usable, once the desk connects
(``schema.connect``), and psycopg's own parser loads libpq itself (most of a second, about as
long as the rest of a refusal). So start-up checks the keyword/value form's syntax here, in
plain Python, exactly as libpq's parser reads it: pairs separated by white space, ``=``
after each keyword, a value bare (up to white space) or in single quotes, a backslash escaping
the next character. It refuses only what libpq refuses too, in libpq's words, so a desk says
the same sentence (:func:`not_a_connection_string`) whichever check found the mistake. Keyword
names (which libpq knows depends on its version) and URIs are left to libpq; so of a string
with two mistakes, libpq may name an unknown keyword before the one said here.
"""

from __future__ import annotations

from pi_agent_ask.store import StoreUnavailable

__all__ = ["URI_PREFIXES", "check_syntax", "not_a_connection_string"]

URI_PREFIXES = ("postgresql://", "postgres://")
SPACE = " \t\n\v\f\r"
"""What libpq's parser skips as white space (C's ``isspace`` in the C locale)."""


def not_a_connection_string(why: str) -> StoreUnavailable:
    """The refusal of a store address libpq cannot parse (``why``: its reason, one line)."""
    return StoreUnavailable(
        "the store's address is not a connection string (postgresql://USER@HOST/DB "
        f"or host=... dbname=... user=...): {why}"
    )


def check_syntax(conninfo: str) -> None:
    """Raise :func:`not_a_connection_string` when ``conninfo`` is keyword/value text libpq
    cannot parse (module docstring)."""
    if conninfo.startswith(URI_PREFIXES):
        return
    at, end = 0, len(conninfo)
    while at < end:
        if conninfo[at] in SPACE:
            at += 1
            continue
        start = at
        while at < end and conninfo[at] != "=" and conninfo[at] not in SPACE:
            at += 1
        keyword = conninfo[start:at]
        while at < end and conninfo[at] in SPACE:
            at += 1
        if at == end or conninfo[at] != "=":
            raise not_a_connection_string(
                f'missing "=" after "{keyword}" in connection info string'
            )
        at += 1
        while at < end and conninfo[at] in SPACE:
            at += 1
        at = _after_value(conninfo, at)
        if not keyword:  # libpq reads the value first, then looks the keyword up
            raise not_a_connection_string('invalid connection option ""')


def _after_value(conninfo: str, at: int) -> int:
    """Where the value that starts at ``at`` ends (past its closing quote)."""
    end = len(conninfo)
    quoted = at < end and conninfo[at] == "'"
    if quoted:
        at += 1
    while at < end:
        char = conninfo[at]
        if char == "\\":
            at += 2
        elif quoted and char == "'":
            return at + 1
        elif not quoted and char in SPACE:
            return at
        else:
            at += 1
    if quoted:
        raise not_a_connection_string("unterminated quoted string in connection info string")
    return end
