"""A store address libpq cannot read is refused in one sentence, by the early check
(``store/address.py``) and by the connection (``schema.connect``) alike, and one it can read
passes the check."""

from __future__ import annotations

import pytest

from pi_agent_ask.store import StoreUnavailable
from pi_agent_ask.store.address import check_syntax
from pi_agent_ask.store.schema import connect

PREFIX = (
    "the store's address is not a connection string (postgresql://USER@HOST/DB "
    "or host=... dbname=... user=...): "
)
REFUSED = {
    "team-db": 'missing "=" after "team-db" in connection info string',
    "host='db": "unterminated quoted string in connection info string",
    "postgres://db/te%zzam": 'invalid percent-encoded token: "te%zzam"',
    "postgres://[::1/team": 'end of string reached when looking for matching "]" in IPv6 host',
}


@pytest.mark.parametrize("address", sorted(REFUSED))
def test_an_address_libpq_cannot_read_is_refused_in_one_line(address: str) -> None:
    with pytest.raises(StoreUnavailable) as early:
        check_syntax(address)
    said = str(early.value)
    assert said.startswith(PREFIX + REFUSED[address]) and "\n" not in said
    with pytest.raises(StoreUnavailable) as connecting:
        connect(address).close()
    assert str(connecting.value) == said


@pytest.mark.parametrize(
    "address",
    [
        "host=db dbname=team",
        "host= 'a b' dbname=team",
        "postgresql://ann@db/team",
        "postgres://ann:secret@db:5432,db2:5433/team?sslmode=require&application_name=desk",
        "postgres://[::1]/team",
    ],
)
def test_an_address_libpq_reads_passes(address: str) -> None:
    check_syntax(address)
