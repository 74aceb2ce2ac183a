"""How a tool call fails, by type (never by comparing message text).

``ToolError`` is the base: the call's result is ``{"content": [text], "isError": True}``.
``ToolInterrupted`` says the call ended without an outcome (it was cancelled, or the session
changed under it); ``ToolFailed`` that the surface or an external UI broke (the outcome is an
error, recorded). Recovery tells the two apart: an interrupted recovered form is reopened by a
later start, a failed one is reported.
"""

from __future__ import annotations


class ToolError(Exception):
    """A tool call failed; the result is ``{"content": [text], "isError": True}``."""


class ToolInterrupted(ToolError):
    """The call ended without an outcome: cancelled, or its session changed."""


class ToolFailed(ToolError):
    """The form's surface (or the external UI) failed; the error outcome is recorded."""
