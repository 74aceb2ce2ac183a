"""The store's address: what a desk can tell is wrong with it before it imports anything heavy.

A desk's store is a libpq connection string: ``keyword=value`` pairs or a URI
(``postgresql://`` or ``postgres://``). Only libpq decides whether one is usable, once the desk
connects (``schema.connect``), and psycopg's own parser loads libpq itself (most of a second,
about as long as the rest of a refusal). So start-up checks the syntax of both forms here, in
plain Python, exactly as libpq's parser reads them:

- keyword/value: pairs separated by white space, ``=`` after each keyword, a value bare (up to
  white space) or in single quotes, a backslash escaping the next character;
- URI: ``[user[:password]@][host[:port][,...]][/dbname][?key=value&...]``, a host in brackets
  (an IPv6 address) not empty and closed, followed by ``:``, ``/``, ``?``, ``,`` or the end,
  every ``key=value`` with one ``=``, and each part's percent-encoding two hex digits, not
  ``%00``.

It refuses only what libpq refuses too, in libpq's words, so a desk says the same sentence
(:func:`not_a_connection_string`) whichever check found the mistake. Left to libpq: keyword
names (which it knows depends on its version; so of a string with two mistakes, libpq may name
an unknown keyword before the one said here), and a URI with a space in it (libpq 18 refuses
one, earlier versions take it).
"""

from __future__ import annotations

import contextlib

from pi_agent_ask.store import StoreUnavailable

__all__ = ["URI_PREFIXES", "check_syntax", "not_a_connection_string"]

URI_PREFIXES = ("postgresql://", "postgres://")
SPACE = " \t\n\v\f\r"
"""What libpq's parser skips as white space (C's ``isspace`` in the C locale)."""


def not_a_connection_string(why: str) -> StoreUnavailable:
    """The refusal of a store address libpq cannot parse (``why``: its reason, made one line
    here: libpq's ends with a line break, and quotes the address, which may hold several)."""
    return StoreUnavailable(
        "the store's address is not a connection string (postgresql://USER@HOST/DB "
        f"or host=... dbname=... user=...): {' '.join(why.split())}"
    )


def check_syntax(conninfo: str) -> None:
    """Raise :func:`not_a_connection_string` when libpq cannot parse ``conninfo`` (module
    docstring)."""
    for prefix in URI_PREFIXES:
        if conninfo.startswith(prefix):
            with contextlib.suppress(_LeftToLibpq):
                _check_uri(conninfo, len(prefix))
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


def _check_uri(uri: str, start: int) -> None:
    """The URI form of :func:`check_syntax` (``start``: past its prefix), in libpq's order."""
    end = len(uri)
    at = _first_of(uri, "@/", start)
    if at < end and uri[at] == "@":
        user, colon, password = uri[start:at].partition(":")
        _decoded(user)
        if colon:
            _decoded(password)
        at += 1
    else:
        at = start
    hosts: list[str] = []
    ports: list[str] = []
    while True:
        if at < end and uri[at] == "[":
            close = uri.find("]", at + 1)
            if close < 0:
                raise not_a_connection_string(
                    'end of string reached when looking for matching "]" in IPv6 host '
                    f'address in URI: "{uri}"'
                )
            if close == at + 1:
                raise not_a_connection_string(f'IPv6 host address may not be empty in URI: "{uri}"')
            hosts.append(uri[at + 1 : close])
            at = close + 1
            if at < end and uri[at] not in ":/?,":
                if not uri[at].isascii():
                    raise _LeftToLibpq  # libpq names one byte of it
                position = len(uri[:at].encode()) + 1
                raise not_a_connection_string(
                    f'unexpected character "{uri[at]}" at position {position} in URI '
                    f'(expected ":" or "/"): "{uri}"'
                )
        else:
            stop = _first_of(uri, ":/?,", at)
            hosts.append(uri[at:stop])
            at = stop
        port = ""
        if at < end and uri[at] == ":":
            stop = _first_of(uri, "/?,", at + 1)
            port = uri[at + 1 : stop]
            at = stop
        ports.append(port)  # one per host, so libpq's list and its words have every comma
        if at == end or uri[at] != ",":
            break
        at += 1
    _decoded(",".join(hosts))
    _decoded(",".join(ports))
    if at < end and uri[at] == "/":
        stop = _first_of(uri, "?", at + 1)
        _decoded(uri[at + 1 : stop])
        at = stop
    if at < end:
        _check_query(uri[at + 1 :])


def _check_query(query: str) -> None:
    """The ``key=value&...`` part of a URI."""
    at, end = 0, len(query)
    while at < end:
        start, equals = at, -1
        while at < end and query[at] != "&":
            if query[at] == "=":
                if equals >= 0:
                    raise not_a_connection_string(
                        'extra key/value separator "=" in URI query parameter: '
                        f'"{query[start:equals]}"'
                    )
                equals = at
            at += 1
        if equals < 0:
            raise not_a_connection_string(
                f'missing key/value separator "=" in URI query parameter: "{query[start:at]}"'
            )
        _decoded(query[start:equals])
        _decoded(query[equals + 1 : at])
        if equals == start:  # no keyword is empty
            raise not_a_connection_string('invalid URI query parameter: ""')
        at += 1  # past the "&" (or the end)


HEX_DIGITS = "0123456789abcdefABCDEF"


def _decoded(text: str) -> None:
    """Refuse ``text`` when its percent-encoding is not libpq's. A space stops the whole
    check: libpq 18 refuses one in a URI's part, earlier versions take it, so that string is
    left to the libpq at hand."""
    at = 0
    while at < len(text):
        if text[at] == " ":
            raise _LeftToLibpq
        if text[at] != "%":
            at += 1
            continue
        digits = text[at + 1 : at + 3]
        if len(digits) < 2 or any(digit not in HEX_DIGITS for digit in digits):
            raise not_a_connection_string(f'invalid percent-encoded token: "{text}"')
        if digits == "00":
            raise not_a_connection_string(f'forbidden value %00 in percent-encoded value: "{text}"')
        at += 3


class _LeftToLibpq(Exception):
    """What follows is for libpq to judge (its versions differ there)."""


def _first_of(text: str, chars: str, start: int) -> int:
    """Where the first of ``chars`` is in ``text`` from ``start`` on, else its length."""
    for at in range(start, len(text)):
        if text[at] in chars:
            return at
    return len(text)
