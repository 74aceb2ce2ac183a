"""Requests the SDK refuses before any handler runs, answered with what is wrong.

The SDK checks each request's ``params`` against the protocol's schema before a handler runs
and answers a mismatch (``arguments`` that are a list, a ``tools/call`` without ``name``) with
``-32602 Invalid request parameters`` and empty ``data``, on purpose: no library text on the
wire. It answers a request sent before ``initialize`` the same way. A client, or the model
behind it, is left guessing what to change. :func:`described_params` is a server middleware
(``Server.middleware``) that keeps the code and says where and why:
``Invalid request parameters: params.arguments: Input should be a valid object``, with
``data`` ``{"issues": [{"path", "message"}]}``, or that ``initialize`` comes first.
"""

from __future__ import annotations

from typing import Any, TypeVar

from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import ValidationError

__all__ = ["NOT_INITIALIZED", "described_params", "describing"]

NOT_INITIALIZED = (
    "Invalid request parameters: the session is not initialized; send initialize (and then "
    "notifications/initialized) before {method}"
)
T = TypeVar("T")
SHOWN_ISSUES = 5
"""Issues spelled out in the message; ``data`` holds all of them."""


def _issues(error: ValidationError) -> list[dict[str, str]]:
    issues = []
    for detail in error.errors():
        path = ".".join(str(part) for part in detail["loc"])
        # The protocol speaks JSON: an object, not Python's dictionary.
        message = detail["msg"].replace("valid dictionary", "valid object")
        issues.append({"path": path, "message": message})
    return issues


async def described_params(ctx: Any, call_next: Any) -> Any:
    """The server middleware: the SDK's bare refusals of a request's params, described."""
    try:
        return await call_next(ctx)
    except ValidationError as error:
        if ctx.request_id is None or not all(d["loc"][:1] == ("params",) for d in error.errors()):
            raise  # a notification gets no answer; anything else is not the request's params
        issues = _issues(error)
        said = "; ".join(f"{issue['path']}: {issue['message']}" for issue in issues[:SHOWN_ISSUES])
        more = len(issues) - SHOWN_ISSUES
        if more > 0:
            said += f"; and {more} more (data.issues)"
        message = f"Invalid request parameters: {said}"
        raise MCPError(INVALID_PARAMS, message, {"issues": issues}) from None
    except MCPError as error:
        # The SDK's other bare refusal is its gate before ``initialize``.
        bare = error.code == INVALID_PARAMS and not error.data
        if bare and ctx.request_id is not None and ctx.session.client_params is None:
            raise MCPError(INVALID_PARAMS, NOT_INITIALIZED.format(method=ctx.method)) from None
        raise


def describing(server: Server[T]) -> Server[T]:
    """``server`` (an SDK ``Server``) with :func:`described_params` as its innermost
    middleware."""
    server.middleware.append(described_params)
    return server
