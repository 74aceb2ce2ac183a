"""Edit an editor's text in ``$VISUAL`` / ``$EDITOR`` (the editors' Ctrl+G).

The form steps aside (prompt_toolkit's ``run_in_terminal``) while the editor runs on the
controlling terminal: ``ask`` may have its standard input and output redirected (the payload
comes in on one, the JSON result goes out on the other), so the editor gets ``/dev/tty`` for
all three streams, never the process's own. What comes back is neutralised as a paste is.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.document import Document

from pi_agent_ask.form.sanitize import sanitize_text

__all__ = ["EditorFailed", "edit_in_external_editor", "editor_command"]

FALLBACK_EDITORS = ("editor", "nano", "vi")


def editor_command(env: dict[str, str] | os._Environ[str]) -> list[str] | None:
    """The editor to run: ``$VISUAL``, ``$EDITOR``, else the first of the usual ones found."""
    for name in ("VISUAL", "EDITOR"):
        value = env.get(name, "").strip()
        if value:
            return shlex.split(value)
    for candidate in FALLBACK_EDITORS:
        if shutil.which(candidate, path=env.get("PATH")) is not None:
            return [candidate]
    return None


@contextlib.contextmanager
def _terminal() -> Iterator[IO[bytes] | None]:
    try:
        tty = open("/dev/tty", "r+b", buffering=0)  # noqa: SIM115 - closed below
    except OSError:
        yield None  # no controlling terminal (tests): the editor inherits the streams
        return
    with tty:
        yield tty


class EditorFailed(Exception):
    """The editor could not be run, or exited with an error: the text stays as it was."""


def _edit_file(command: list[str], text: str) -> str:
    """Blocking (run in a worker thread): the text after the editor saved it; raises
    :class:`EditorFailed` saying what went wrong."""
    handle, name = tempfile.mkstemp(suffix=".md", prefix="pi-agent-ask-")
    path = Path(name)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        with _terminal() as tty:
            try:
                status = subprocess.call([*command, name], stdin=tty, stdout=tty, stderr=tty)
            except OSError as error:
                raise EditorFailed(
                    f"Could not run {command[0]}: {error.strerror}; the text is unchanged."
                ) from None
        if status != 0:
            raise EditorFailed(f"{command[0]} exited with status {status}; the text is unchanged.")
        return path.read_text(encoding="utf-8", errors="replace")
    finally:
        with contextlib.suppress(OSError):
            path.unlink()


async def edit_in_external_editor(buffer: Buffer) -> str | None:
    """Open ``buffer``'s text in the external editor and take back what it saved. ``None``
    when it did; else what went wrong, for the person (the text is then left as it was)."""
    command = editor_command(os.environ)
    if command is None:
        return "No external editor: set $VISUAL or $EDITOR."
    original = buffer.text
    try:
        edited = await run_in_terminal(lambda: _edit_file(command, original), in_executor=True)
    except EditorFailed as failure:
        return str(failure)
    text = sanitize_text(edited.removesuffix("\n"))
    buffer.set_document(Document(text, len(text)))
    return None
