"""The store address's early check (``store/address.py``) against libpq's own parser: what it
refuses libpq refuses, in the same words, and it takes everything libpq takes."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from pi_agent_ask.store import StoreUnavailable
from pi_agent_ask.store.address import check_syntax, not_a_connection_string

KEYWORD_VALUE = [
    "team-db",
    "postgres:/team",
    "postgresq:///team",
    "",
    "   ",
    "host=db dbname=team",
    "host = db",
    "host= 'a b' dbname=team",
    "host='db",
    "host='a\\'b'",
    "host=a\\ b",
    "host='x'dbname=team",
    "host=db\tdbname=team\n",
    "host=db\x0bdbname=team",
    "=team",
    "='team",
    "host",
    "host db",
    "host=db port",
    "host=db =",
    "host=db \\",
    "dbname=\\",
    "host='a\\",
    "host=a=b",
]
URIS = [
    "postgresql://ann@db/team",
    "postgres://ann:secret@db:5432,db2:5433/team?sslmode=require&application_name=desk",
    "postgres://[::1]/team",
    "postgresql://",
    "postgres://db/team?",
    "postgres://[::1/team",
    "postgres://[]/team",
    "postgres://[::1]x/team",
    "postgres://db/team?sslmode",
    "postgres://db/team?sslmode=require=yes",
    "postgres://db/team?&sslmode=require",
    "postgres://db/team?=require",
    "postgres://db/te%zzam",
    "postgres://db/team%2",
    "postgres://db/team%00",
    "postgres://an%zz@db/team",
    "postgres://ann:se%0@db/team",
    "postgres://db,:5%zz/team",
    "postgres://db:5432,db2:%zz/team",
    "postgres://db/team?sslmode=req%zz",
    "postgres://d%41b/team",
]
LEFT_TO_LIBPQ = {
    # Keyword names: which libpq knows depends on its version.
    "colour=blue",
    "postgres://db/team?colour=blue",
    # Spaces in a URI: libpq 18 refuses them, earlier versions take them.
    "postgres://db/te am",
    "postgres:// %zz/team",
}


def libpq_says(address: str) -> str | None:
    try:
        conninfo_to_dict(address)
    except psycopg.ProgrammingError as error:
        return str(error)
    return None


@pytest.mark.parametrize("address", [*KEYWORD_VALUE, *URIS, *sorted(LEFT_TO_LIBPQ)])
def test_the_early_check_refuses_what_libpq_refuses_in_its_words(address: str) -> None:
    refused = libpq_says(address)
    try:
        check_syntax(address)
    except StoreUnavailable as error:
        assert refused is not None, address
        assert str(error) == str(not_a_connection_string(refused))
    else:
        assert refused is None or address in LEFT_TO_LIBPQ, refused
