"""Frame payloads of either session format, decoded without the session module's reader.

Version 2 payloads are turned into the version 1 maps they stand for (``{"id", "parentId",
"type", "timestamp", "data"}``, ``{"batch": [...]}``, ``{"leaf": ...}``), and a checkpoint into
``{"checkpoint": value}``, so tests can look at any file the same way.
"""

from __future__ import annotations

import zlib
from typing import Any

import cbor2

from pi_agent_ask.persistence.codec import DICTIONARY
from pi_agent_ask.persistence.session_file import CHECKPOINT_MAGIC


def _id(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes) else value


def _inflate(data: bytes) -> Any:
    unpacker = zlib.decompressobj(-15, DICTIONARY)
    return cbor2.loads(unpacker.decompress(data) + unpacker.flush())


def decode_payload(payload: bytes) -> Any:
    kind = payload[0]
    if kind == 0x01:
        items = [
            {"id": _id(i), "parentId": _id(p), "type": t, "timestamp": ts, "data": d}
            for i, p, t, ts, d in _inflate(payload[1:])
        ]
        return items[0] if len(items) == 1 else {"batch": items}
    if kind == 0x02:
        return {"leaf": _id(cbor2.loads(payload[1:]))}
    if kind == 0x03:
        assert payload[1 : 1 + len(CHECKPOINT_MAGIC)] == CHECKPOINT_MAGIC
        return {"checkpoint": _inflate(payload[1 + len(CHECKPOINT_MAGIC) :])}
    return cbor2.loads(payload)
