"""Values the actors pass around: a request to ask, and the terminal outcome of one."""

from __future__ import annotations

from typing import Literal

import attrs

from pi_agent_ask.form.result import BackgroundOutcome
from pi_agent_ask.form.types import AskParams

Source = Literal["tool", "background", "ask:resume"]


@attrs.frozen(repr=False)
class AskRequest:
    """One valid ``ask_user`` call, journaled before anything waits on it.

    ``request_id`` is the history key (a UUID) and never repeats, even when tool-call ids or
    question ids do.
    """

    request_id: str
    params: AskParams
    background: bool
    created_at: str
    tool_call_id: str | None = None
    parent_tool_call_id: str | None = None
    source: Source = "tool"

    @property
    def flow_id(self) -> str:
        """The remote-event flow id: the tool call's, or the request's when there is none."""
        return f"tool:{self.tool_call_id or self.request_id}"


Outcome = BackgroundOutcome
"""The single terminal outcome of a request: a result or an error, never both."""


class StaleBranch(Exception):
    """A write for a branch whose journal view was revoked (a session change is under way or
    done): a surface, call or queue message of the old branch tried to record something."""
