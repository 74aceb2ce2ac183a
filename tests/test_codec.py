"""Entry data through cbor2: a value encoded once and written in place (``codec.Spliced``,
through cbor2's ``default`` hook) is stored as the bytes of the plain value, reads back as it
in files of both versions, and what CBOR cannot hold is refused as it would be without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_agent_ask.persistence import codec
from pi_agent_ask.persistence.frames import create_file
from pi_agent_ask.persistence.session_file import Header, SessionFile, freeze

KEY = "3132333435363738"

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _splice_some(value: Any, draw: Any) -> Any:
    """``value`` with some of its arrays and maps (at any depth) made ``Spliced``."""
    if isinstance(value, list):
        value = [_splice_some(v, draw) for v in value]
    elif isinstance(value, dict):
        value = {k: _splice_some(v, draw) for k, v in value.items()}
    else:
        return value
    return codec.Spliced(value) if draw(st.booleans()) else value


@settings(max_examples=300)
@given(data=st.data(), value=st.dictionaries(st.text(), _JSON, max_size=5))
def test_spliced_data_is_stored_as_the_bytes_of_the_plain_data(
    data: st.DataObject, value: dict[str, Any]
) -> None:
    spliced = _splice_some(value, data.draw)
    if isinstance(spliced, codec.Spliced):
        spliced = {"whole": spliced}
        value = {"whole": value}
    item = codec.encode_entry((KEY, None, "t", 1.0, spliced))
    assert item == codec.encode_entry((KEY, None, "t", 1.0, value))
    assert item == cbor2.dumps([bytes.fromhex(KEY), None, "t", 1.0, value])
    assert freeze(spliced) == freeze(value)


def test_a_spliced_entry_reads_back_as_its_plain_data(tmp_path: Path) -> None:
    params = {"questions": [{"id": "q", "options": [{"value": "a"}]}], "background": True}
    shared = codec.Spliced(params)
    for version in (1, 2):
        path = tmp_path / f"s{version}.pas"
        if version == 1:  # a file of the first format: its entries are frozen, then encoded
            create_file(path, Header(1, 0.0, "0" * 32, None).to_cbor(), ())
        with SessionFile.open(path) as session:
            session.append_chains([[("a", {"params": shared}), ("b", {"n": [shared]})]])
            session.append_many([("c", {"params": shared})])
        with SessionFile.open(path, readonly=True) as again:
            assert again.header.version == version
            assert [dict(e.data) for e in again.branch()] == [
                freeze({"params": params}),
                freeze({"n": [params]}),
                freeze({"params": params}),
            ]


def test_what_cbor_cannot_store_is_refused_as_without_the_splice() -> None:
    with pytest.raises(TypeError, match="cannot encode type <class 'object'>"):
        codec.encode_entry((KEY, None, "t", 1.0, {"x": object()}))
    with pytest.raises(TypeError, match="cannot encode type <class 'object'>"):
        codec.Spliced({"x": object()})


def test_an_entries_frame_is_the_array_of_its_entries_as_cbor2_writes_it() -> None:
    rows = [[bytes.fromhex(KEY), None, "t", 1.5, {"n": n, "s": "é" * n}] for n in range(30)]
    items = [
        codec.encode_entry((row[0].hex(), None, row[2], row[3], row[4]))  # type: ignore[union-attr]
        for row in rows
    ]
    plain = codec.entries_plain(items)
    assert plain == cbor2.dumps(rows)
    payload = codec.entries_payload(plain, codec.Packer())
    assert codec.decode_entries(payload) == [
        (KEY, None, "t", 1.5, {"n": n, "s": "é" * n}) for n in range(30)
    ]
