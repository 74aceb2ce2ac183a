"""What the stdio MCP server (``mcp_server/``) and the desk (``desk/``) both build on, so the
two import in one direction only (neither imports the other):

- ``tools.py``: ``AgentTools``, one agent's tools on one runtime in MCP's terms;
- ``answers.py``: background answers as MCP clients see them (no SDK import);
- ``connection.py``: the desk's connection file, its agent-key header, and finding a running
  desk through them;
- ``params.py``: the SDK's bare refusals of a request's params, described;
- ``asgi.py``: the ASGI pieces both desks' HTTP sides share (headers, JSON responses, a
  client gone in the middle of a call).

Importing this package stays cheap: the SDK loads with ``tools.py``, and logging and decimal
with the two functions below that use them (the hook command, which runs on every prompt and
tool call of a Claude Code session, imports this package for ``answers.py`` and
``journals.py`` and needs neither)."""

PROGRESS_INTERVAL = 10.0
"""Seconds between progress notifications while a call waits for the person."""


def progress_plus(progress: float, seconds: float) -> float:
    """``progress + seconds`` as a person writes the sum of two decimals: a fractional
    ``--progress-interval`` counts 0.1, 0.2, 0.3, never 0.30000000000000004 (binary floats
    hold no tenth exactly; each value is the shortest decimal of both, added)."""
    from decimal import Decimal

    return float(Decimal(repr(progress)) + Decimal(repr(seconds)))


def package_version() -> str:
    """This package's installed version, which both servers report in ``serverInfo``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pi-agent-ask")
    except PackageNotFoundError:
        return "0"


LIBRARY_LOGGERS = ("mcp", "hypercorn", "httpx2", "sse_starlette", "psycopg")
"""The loggers of the SDK, the HTTP stack and the store's driver (its pool reports its own
retries while PostgreSQL is away) under the servers."""


def quiet_library_logs() -> None:
    """Keep the SDK's and the HTTP stack's log records off standard error, for a command's
    whole process. Python prints them there by default, tracebacks included: on the desk's
    terminal they would break its screen, and in an MCP client's log of ``pi-agent-ask mcp``
    they report, as failures, the connections to a desk that stopped, which the server
    already says in its own words (on standard error and in the call's result)."""
    import logging

    for name in LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
