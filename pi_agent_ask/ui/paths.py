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


@attrs.frozen(repr=False)
class PathCompletion:
    text: str
    cursor: int
    candidates: tuple[str, ...] = ()
    start: int = attrs.field(default=0, eq=False)
    """Where the completed ``@`` token starts in ``text``."""
    base: str = attrs.field(default="", eq=False)
    """``@`` and the directory part every candidate follows (``@docs/``)."""


@attrs.frozen(repr=False)
class CompletionMenu:
    """Candidates of an ``@`` path shown as a list under the editor; ``index`` is the one
    put into the text (-1: none yet, the common prefix is there)."""

    start: int
    base: str
    candidates: tuple[str, ...]
    index: int = -1

    def moved(self, text: str, delta: int) -> tuple[CompletionMenu, str, int]:
        """The menu with the next (``delta`` 1) or previous candidate chosen, and the text
        and cursor with that candidate in place of the token."""
        count = len(self.candidates)
        index = (self.index + delta) % count if self.index >= 0 or delta > 0 else count - 1
        end = self.start
        while end < len(text) and not text[end].isspace():
            end += 1
        replacement = self.base + self.candidates[index]
        new_text = text[: self.start] + replacement + text[end:]
        return attrs.evolve(self, index=index), new_text, self.start + len(replacement)


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
        new_text,
        start + len(replacement),
        tuple(names) if len(names) > 1 else (),
        start=start,
        base="@" + base,
    )
