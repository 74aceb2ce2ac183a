"""What the queue's reducer asks its shell to do (a closed set, performed in order), and the
backoff of the retries it schedules."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import attrs

from pi_agent_ask.actors.queue_messages import (
    Cancellable,
    CommandSink,
    Entry,
    JournalHandle,
    Json,
    QueueMessage,
    ReplyTo,
)
from pi_agent_ask.actors.records import AskRequest
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.fieldless import Fieldless

T = TypeVar("T")


# ------------------------------------------------------------------------------------------
# Effects (a closed set; the shell performs them in order)
# ------------------------------------------------------------------------------------------


@attrs.frozen(repr=False)
class Append:
    """Journal ``entries`` (one write). Fails with the journal's errors: the transition is void.
    ``through`` a caller's branch writer when given, else the queue's own."""

    entries: tuple[Entry, ...]
    through: JournalHandle | None = None


@attrs.frozen(repr=False)
class MarkDelivered:
    """Journal delivery marks, shielded: once a mark may be on the branch its messages leave."""

    entries: tuple[Entry, ...]


@attrs.frozen(repr=False)
class Reply(Generic[T]):
    channel: ReplyTo[T]
    value: T


@attrs.frozen(repr=False)
class CloseReply:
    """Close a reply channel unanswered: its caller hears that nothing happened."""

    channel: ReplyTo[Any]


@attrs.frozen(repr=False)
class ReplyCommands:
    """Answer ``FindFlow`` with a clone of a command channel: a foreground claim's
    ``commands``, or the visible background form's (``request_id``), whose channel the shell
    holds."""

    channel: ReplyTo[CommandSink | None]
    commands: CommandSink | None = None
    request_id: str | None = None


@attrs.frozen(repr=False)
class Wake:
    message: Json


@attrs.frozen(repr=False)
class HerdrChanged:
    active: bool


@attrs.frozen(repr=False)
class StartForm:
    """Open ``request`` as the visible background form (a task in the shell's nursery)."""

    request: AskRequest
    form: fs.FormState
    epoch: int


@attrs.frozen(repr=False)
class CancelForm:
    """Cancel the visible background form of ``request_id``."""

    request_id: str


@attrs.frozen(repr=False)
class CancelClaim:
    """Cancel a foreground claim's scope."""

    scope: Cancellable


@attrs.frozen(repr=False)
class UseJournal:
    journal: JournalHandle


class ScheduleFlush(Fieldless):
    """Send ``FlushDrafts`` after the draft delay."""


@attrs.frozen(repr=False)
class ScheduleWakeRetry:
    """Send ``RetryWake`` after ``delay`` seconds."""

    delay: float


@attrs.frozen(repr=False)
class ScheduleDraftRetry:
    """Send ``RetryDrafts`` after ``delay`` seconds."""

    delay: float


@attrs.frozen(repr=False)
class Continue:
    """Reduce ``message`` next, as a transition of its own, before any other message."""

    message: QueueMessage


Effect = (
    Append
    | MarkDelivered
    | Reply[Any]
    | ReplyCommands
    | Wake
    | HerdrChanged
    | StartForm
    | CancelForm
    | CancelClaim
    | CloseReply
    | UseJournal
    | ScheduleFlush
    | ScheduleWakeRetry
    | ScheduleDraftRetry
    | Continue
)
WRITES = (Append, MarkDelivered)

WAKE_RETRY_FIRST = 0.5
"""Seconds before the first retry of a wake whose delivery mark failed on the disk."""
WAKE_RETRY_MAX = 8.0
"""The longest wait between two retries: the backoff doubles up to this and stays there."""


def _backoff(first: float, failures: int) -> float:
    """``first`` doubled for each failure in a row after the first, at most ``WAKE_RETRY_MAX``."""
    return min(first * 2.0 ** min(failures - 1, 16), WAKE_RETRY_MAX)


def wake_retry_delay(failures: int) -> float:
    """The wait before the retry that follows the ``failures``-th failure in a row."""
    return _backoff(WAKE_RETRY_FIRST, failures)


DRAFT_NOT_SAVED_TEXT = (
    "The draft could not be written to the session file ({error}): it is not saved yet. It "
    "is kept with the form and written again shortly."
)
"""What a sender waiting for its draft (``DraftChanged.saved``) hears when the write failed."""
DEFER_NOT_RECORDED_TEXT = "Not saved for later: writing to the session file failed ({error})"
"""What a ``Defer`` caller hears when its write failed (nothing was put back): the page's Later,
which finishes the sentence with what to do (``desk/web/app.py``)."""
DRAFT_RETRY_FIRST = 0.1
"""Seconds before the first retry of drafts whose write failed on the disk."""
DRAFT_QUIESCE_RETRIES = 4
"""Disk failures in a row of the draft write that ``Quiesce`` callers wait through: while they
wait, each failure is retried at once (the teardown that waits is bounded and a person may be
waiting for it); after that they hear that their drafts were not saved."""


def draft_retry_delay(failures: int) -> float:
    """The wait before the draft retry that follows the ``failures``-th failure in a row."""
    return _backoff(DRAFT_RETRY_FIRST, failures)
