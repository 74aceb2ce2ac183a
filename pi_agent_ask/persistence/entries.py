"""The ask journal's entries as one closed set of typed records, and the one parser for them.

``parse(entry)`` turns a session ``Entry`` into the record its type names; the readers of the
journal (queue rebuild, recovery of interrupted calls, history) read these records, never raw
entry data. Parsing is lenient the way every reader always was: a field of the wrong type reads
as missing (``None``), and the reader decides what a missing field means. Data values stay
deep-frozen (``FrozenMap``, tuples); ``journal.thaw`` turns them into JSON values.

Each record names its entry type once (``TYPE``) and has ``to_data()`` (the entry data it
stands for), ``to_cbor()`` (that data as CBOR) and ``from_cbor()`` (the inverse, through
``parse``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

import attrs
import cbor2

from pi_agent_ask.persistence.session_file import Entry

__all__ = [
    "MARK_TYPES",
    "BackgroundAnswer",
    "Draft",
    "HistoryCompleted",
    "HistoryRequest",
    "JournalEntry",
    "Other",
    "Panel",
    "Payload",
    "PendingDismissed",
    "QueueCompleted",
    "Queued",
    "ResumeAnswer",
    "Returned",
    "ToolCall",
    "ToolResult",
    "UserMessage",
    "delivery_mark",
    "map_field",
    "parse",
    "text_field",
]


def _str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def _map(data: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = data.get(key)
    return value if isinstance(value, Mapping) else None


text_field = _str
"""A text field of entry data, or ``None`` when it is missing or not text (how every record
reads one)."""
map_field = _map
"""A mapping field of entry data, or ``None`` when it is missing or not a mapping."""


def _drop_none(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if value is not None}


class _Record:
    """What every journal record has: its type, its data, its CBOR."""

    TYPE: ClassVar[str]

    def to_data(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_cbor(self) -> bytes:
        return cbor2.dumps([self.TYPE, self.to_data()])

    @classmethod
    def from_cbor(cls, payload: bytes) -> JournalEntry:
        """The record of ``[type, data]`` CBOR (``to_cbor``); ``ValueError`` when malformed."""
        try:
            kind, data = cbor2.loads(payload)
        except Exception as exc:  # cbor2 raises several unrelated types on bad input
            raise ValueError(f"not a journal record: {exc}") from exc
        if not isinstance(kind, str) or not isinstance(data, dict):
            raise ValueError("not a journal record")
        return parse(Entry("-", None, kind, 0.0, data))


@attrs.frozen(repr=False)
class ToolCall(_Record):
    TYPE: ClassVar[str] = "tool-call"
    tool_call_id: str | None
    name: str | None
    arguments: Any
    parent_tool_call_id: str | None

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ToolCall:
        return cls(
            _str(data, "toolCallId"),
            _str(data, "name"),
            data.get("arguments"),
            _str(data, "parentToolCallId"),
        )

    def to_data(self) -> dict[str, Any]:
        out = {"toolCallId": self.tool_call_id, "name": self.name, "arguments": self.arguments}
        if self.parent_tool_call_id is not None:
            out["parentToolCallId"] = self.parent_tool_call_id
        return out


@attrs.frozen(repr=False)
class ToolResult(_Record):
    TYPE: ClassVar[str] = "tool-result"
    tool_call_id: str | None
    name: str | None
    result: Mapping[str, Any] | None

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ToolResult:
        return cls(_str(data, "toolCallId"), _str(data, "name"), _map(data, "result"))

    def to_data(self) -> dict[str, Any]:
        return {"toolCallId": self.tool_call_id, "name": self.name, "result": self.result}

    def delivered_ids(self) -> tuple[str, ...]:
        """The request ids a successful ``wait_for_answers`` result handed out."""
        result = self.result
        if self.name != "wait_for_answers" or result is None or result.get("isError"):
            return ()
        details = result.get("details")
        if not isinstance(details, Mapping):
            return ()
        items = details.get("results", ()) or ()
        return tuple(
            item["requestId"]
            for item in items
            if isinstance(item, Mapping) and isinstance(item.get("requestId"), str)
        )


@attrs.frozen(repr=False)
class UserMessage(_Record):
    TYPE: ClassVar[str] = "user-message"
    text: str | None

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> UserMessage:
        return cls(_str(data, "text"))

    def to_data(self) -> dict[str, Any]:
        return {"text": self.text}


@attrs.frozen(repr=False)
class Payload(_Record):
    TYPE: ClassVar[str] = "ask:payload"
    version: Any
    source_entry_id: str | None
    params: Any
    timestamp: str | None

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Payload:
        return cls(
            data.get("version"),
            _str(data, "sourceEntryId"),
            data.get("params"),
            _str(data, "timestamp"),
        )

    def to_data(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "source": "tool",
            "params": self.params,
            "sourceEntryId": self.source_entry_id,
            "timestamp": self.timestamp,
        }


@attrs.frozen(repr=False)
class HistoryRequest(_Record):
    TYPE: ClassVar[str] = "ask:history-request"
    request_id: str | None
    tool_call_id: str | None
    parent_tool_call_id: str | None
    title: Any
    background: Any
    created_at: Any
    questions: Any
    params: Any
    presented_types: Any

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> HistoryRequest:
        return cls(
            _str(data, "requestId"),
            _str(data, "toolCallId"),
            _str(data, "parentToolCallId"),
            data.get("title"),
            data.get("background"),
            data.get("createdAt"),
            data.get("questions"),
            data.get("params"),
            data.get("presentedTypes"),
        )

    def to_data(self) -> dict[str, Any]:
        return _drop_none(
            {
                "version": 1,
                "requestId": self.request_id,
                "background": self.background,
                "createdAt": self.created_at,
                "questions": self.questions,
                "params": self.params,
                "presentedTypes": self.presented_types,
                "toolCallId": self.tool_call_id,
                "parentToolCallId": self.parent_tool_call_id,
                "title": self.title,
            }
        )


@attrs.frozen(repr=False)
class _Completion(_Record):
    """A request's completion. Its two kinds below add no field: they are plain subclasses,
    with this record's fields, ``__init__``, ``__eq__`` (which tells the kinds apart by class)
    and ``__hash__``, which attrs would otherwise compile again for each at import."""

    request_id: str | None
    result: Mapping[str, Any] | None
    error: str | None

    @property
    def has_outcome(self) -> bool:
        return self.result is not None or self.error is not None

    def to_data(self) -> dict[str, Any]:
        return _drop_none(
            {"requestId": self.request_id, "result": self.result, "error": self.error}
        )


class HistoryCompleted(_Completion):
    __slots__ = ()
    TYPE: ClassVar[str] = "ask:history-completed"

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> HistoryCompleted:
        return cls(_str(data, "requestId"), _map(data, "result"), _str(data, "error"))

    def to_data(self) -> dict[str, Any]:
        return {"version": 1, **super().to_data()}


class QueueCompleted(_Completion):
    __slots__ = ()
    TYPE: ClassVar[str] = "ask:queue-completed"

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> QueueCompleted:
        return cls(_str(data, "requestId"), _map(data, "result"), _str(data, "error"))


@attrs.frozen(repr=False)
class Queued(_Record):
    TYPE: ClassVar[str] = "ask:queued"
    request_id: str | None
    tool_call_id: str | None
    parent_tool_call_id: str | None
    params: Any
    presented_types: Any
    created_at: Any

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Queued:
        return cls(
            _str(data, "requestId"),
            _str(data, "toolCallId"),
            _str(data, "parentToolCallId"),
            data.get("params"),
            data.get("presentedTypes"),
            data.get("createdAt"),
        )

    def to_data(self) -> dict[str, Any]:
        return _drop_none(
            {
                "version": 1,
                "requestId": self.request_id,
                "params": self.params,
                "presentedTypes": self.presented_types,
                "createdAt": self.created_at,
                "toolCallId": self.tool_call_id,
                "parentToolCallId": self.parent_tool_call_id,
            }
        )


@attrs.frozen(repr=False)
class PendingDismissed(_Record):
    TYPE: ClassVar[str] = "ask:pending-dismissed"
    tool_call_id: str | None

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> PendingDismissed:
        return cls(_str(data, "toolCallId"))

    def to_data(self) -> dict[str, Any]:
        return {"toolCallId": self.tool_call_id}


@attrs.frozen(repr=False)
class _Message(_Record):
    """A delivered custom message; ``request_id`` is the one its details name. Its two kinds
    below are plain subclasses, as ``_Completion``'s are."""

    request_id: str | None
    message: Mapping[str, Any]

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Any:
        details = _map(data, "details")
        return cls(_str(details, "requestId") if details is not None else None, data)

    def to_data(self) -> dict[str, Any]:
        return dict(self.message)


class BackgroundAnswer(_Message):
    __slots__ = ()
    TYPE: ClassVar[str] = "ask:background-answer"


class ResumeAnswer(_Message):
    __slots__ = ()
    TYPE: ClassVar[str] = "ask:resume-answer"


@attrs.frozen(repr=False)
class Returned(_Record):
    """Delivered messages given back undelivered (``Runtime.give_back``): the agent never got
    them (the call that took them was cut, a connection broke). Each goes out again, and is
    marked again when it does; until then it undoes its earlier mark."""

    TYPE: ClassVar[str] = "ask:returned"
    messages: tuple[Mapping[str, Any], ...]
    """The messages as they were handed out; items that are not mappings read as absent."""

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Returned:
        items = data.get("messages")
        if not isinstance(items, (list, tuple)):
            return cls(())
        return cls(tuple(item for item in items if isinstance(item, Mapping)))

    def to_data(self) -> dict[str, Any]:
        return {"version": 1, "messages": [dict(message) for message in self.messages]}

    def marks(self) -> tuple[tuple[int, str, str], ...]:
        """Each given-back message that names its mark: ``(index, entry type, request id)``
        (``delivery_mark``)."""
        found = []
        for index, message in enumerate(self.messages):
            mark = delivery_mark(message)
            if mark is not None:
                found.append((index, *mark))
        return tuple(found)


@attrs.frozen(repr=False)
class Draft(_Record):
    TYPE: ClassVar[str] = "ask:draft"
    request_id: str | None
    form: Mapping[str, Any] | None

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Draft:
        return cls(_str(data, "requestId"), _map(data, "form"))

    def to_data(self) -> dict[str, Any]:
        return {"requestId": self.request_id, "form": self.form}


@attrs.frozen(repr=False)
class Panel(_Record):
    TYPE: ClassVar[str] = "ask:panel"
    visible: bool

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Panel:
        return cls(bool(data.get("visible", True)))

    def to_data(self) -> dict[str, Any]:
        return {"visible": self.visible}


@attrs.frozen(repr=False)
class Other(_Record):
    """Any entry the ask journal does not read (host records, compaction, other tools)."""

    TYPE: ClassVar[str] = ""
    type: str
    data: Mapping[str, Any]

    def to_data(self) -> dict[str, Any]:
        return dict(self.data)

    def to_cbor(self) -> bytes:
        return cbor2.dumps([self.type, self.to_data()])


JournalEntry = (
    ToolCall
    | ToolResult
    | UserMessage
    | Payload
    | HistoryRequest
    | HistoryCompleted
    | QueueCompleted
    | Queued
    | PendingDismissed
    | BackgroundAnswer
    | ResumeAnswer
    | Returned
    | Draft
    | Panel
    | Other
)

_TYPES: Final[dict[str, Any]] = {
    cls.TYPE: cls
    for cls in (
        ToolCall,
        ToolResult,
        UserMessage,
        Payload,
        HistoryRequest,
        HistoryCompleted,
        QueueCompleted,
        Queued,
        PendingDismissed,
        BackgroundAnswer,
        ResumeAnswer,
        Returned,
        Draft,
        Panel,
    )
}


MARK_TYPES: Final = (BackgroundAnswer.TYPE, ResumeAnswer.TYPE)
"""The delivery marks a turn boundary writes: the messages that can be given back
(``Returned``)."""


def delivery_mark(message: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(entry type, request id)`` of the delivery mark a handed-out message is (its
    ``customType`` and ``details.requestId``), or ``None`` when it is not one."""
    kind = _str(message, "customType")
    details = _map(message, "details")
    request_id = _str(details, "requestId") if details is not None else None
    if kind in MARK_TYPES and request_id is not None:
        return kind, request_id
    return None


def parse(entry: Entry) -> JournalEntry:
    """The typed record of a session entry (``Other`` for types the journal does not read)."""
    cls = _TYPES.get(entry.type)
    if cls is None:
        return Other(entry.type, entry.data)
    record: JournalEntry = cls.from_data(entry.data)
    return record


def parse_type(entry_type: str) -> type[Any] | None:
    """The record class of an entry type (``None``: not one the journal reads)."""
    return _TYPES.get(entry_type)
