"""What Linux's ``/proc/PID/stat`` says of a process, read in one place for its two readers: the
hook's chain of parent processes (``mcp_server/hook_socket.py``) and the test clusters' check
that their owner still runs (``store/testing.py``).

Imports nothing of the package: the hook command that reads it runs on every prompt of an agent.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["FIRST", "PARENT", "START_TIME", "STATE", "stat_fields"]

FIRST = 3
"""The number (proc(5) counts from 1) of the first field ``stat_fields`` returns: field ``n`` is
``fields[n - FIRST]``."""
STATE = 3
"""The process's state: ``Z`` for one that exited and that its parent has not yet reaped."""
PARENT = 4
"""The parent's process id."""
START_TIME = 22
"""When the process started, in clock ticks since boot: with the id, it names one process (an
id is used again once its process is gone)."""


def stat_fields(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command's name. That name (field 2, in
    parentheses) may hold spaces and parentheses of its own, so the fields are counted from the
    last ``)``. Raises the ``OSError`` of reading the file: ``FileNotFoundError`` when there is
    no such process or no ``/proc``."""
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    return stat.rpartition(")")[2].split()
