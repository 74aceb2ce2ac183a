"""The store address's early check (``store/address.py``) against libpq's own parser: it
refuses what libpq refuses, in libpq's words, and nothing libpq takes."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from pi_agent_ask.store import StoreUnavailable
from pi_agent_ask.store.address import check_syntax, not_a_connection_string

ADDRESSES = [
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
    "postgresql://ann@db/team",
    "postgres://[::1]/team",
]


def libpq_says(address: str) -> str | None:
    try:
        conninfo_to_dict(address)
    except psycopg.ProgrammingError as error:
        return " ".join(str(error).split())
    return None


@pytest.mark.parametrize("address", ADDRESSES)
def test_the_early_check_refuses_what_libpq_refuses_in_its_words(address: str) -> None:
    refused = libpq_says(address)
    try:
        check_syntax(address)
    except StoreUnavailable as error:
        assert refused is not None, address
        assert str(error) == str(not_a_connection_string(refused))
    else:
        # Left to libpq: nothing it takes, or a keyword it does not know.
        assert refused is None or refused.startswith("invalid connection option"), refused
