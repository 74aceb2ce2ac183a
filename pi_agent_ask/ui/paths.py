"""``@`` file references in the editors: complete the path after an ``@`` with Tab.

The token is the run of non-space characters that ends at the cursor and starts with ``@``.
Relative paths are taken from the runtime's working directory, absolute ones as they are.
One match completes fully (a directory gets a trailing ``/``); several extend the token to
their common prefix and are offered as candidates; none leaves the text alone.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

CANDIDATE_LIMIT = 200
"""Directory entries looked at, at most: a huge directory must not stall a key press."""


@attrs.frozen
class PathCompletion:
    text: str
    cursor: int
    candidates: tuple[str, ...] = ()


def at_token(text: str, cursor: int) -> tuple[int, str] | None:
    """``(start, path)`` of the ``@`` token ending at ``cursor``, or ``None``."""
    start = cursor
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    if start < cursor and text[start] == "@":
        return start, text[start + 1 : cursor]
    return None


def complete_at_path(text: str, cursor: int, cwd: Path) -> PathCompletion | None:
    """Complete the ``@`` path before ``cursor``; ``None`` when there is no ``@`` token."""
    token = at_token(text, cursor)
    if token is None:
        return None
    start, path = token
    head, _, prefix = path.rpartition("/")
    directory = Path(head or "/") if path.startswith("/") else cwd / head
    names: list[str] = []
    try:
        with os.scandir(directory) as entries:
            for count, entry in enumerate(entries):
                if count >= CANDIDATE_LIMIT:
                    break
                if not entry.name.startswith(prefix):
                    continue
                if entry.name.startswith(".") and not prefix.startswith("."):
                    continue
                names.append(entry.name + ("/" if entry.is_dir() else ""))
    except OSError:
        return PathCompletion(text, cursor)
    if not names:
        return PathCompletion(text, cursor)
    names.sort()
    # Names of one directory: a character prefix is the completion wanted here.
    completed = names[0] if len(names) == 1 else os.path.commonprefix(names)  # noqa: RUF071
    base = f"{head}/" if path.startswith("/") or head else ""
    if path.startswith("/") and not head:
        base = "/"
    replacement = "@" + base + completed
    new_text = text[:start] + replacement + text[cursor:]
    return PathCompletion(
        new_text, start + len(replacement), tuple(names) if len(names) > 1 else ()
    )
