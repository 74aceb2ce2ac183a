"""What the stdio MCP server (``mcp_server/``) and the desk (``desk/``) both build on, so the
two import in one direction only (neither imports the other):

- ``tools.py``: ``AgentTools``, one agent's tools on one runtime in MCP's terms;
- ``answers.py``: background answers as MCP clients see them (no SDK import);
- ``connection.py``: the desk's connection file, its agent-key header, and finding a running
  desk through them;
- ``asgi.py``: the ASGI pieces both desks' HTTP sides share (headers, JSON responses, a
  client gone in the middle of a call).

Importing this package stays cheap: the SDK loads with ``tools.py``."""

PROGRESS_INTERVAL = 10.0
"""Seconds between progress notifications while a call waits for the person."""


def package_version() -> str:
    """This package's installed version, which both servers report in ``serverInfo``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pi-agent-ask")
    except PackageNotFoundError:
        return "0"
