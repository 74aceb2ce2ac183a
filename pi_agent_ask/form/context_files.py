"""Context files: a question's ``context`` that is a single-line absolute path is read as a
UTF-8 text file, and its raw text replaces the path (legacy ``previewFile`` paths too).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

CONTEXT_FILE_MAX_BYTES = 1024 * 1024
"""Largest context file accepted (1 MiB).

A context is read beside the options in a terminal panel, and the loaded text is copied into the
session journal (payload, history request, queue entry) and into history reads and exports. A
mebibyte is far more than anyone reads in a form, yet bounds what one careless path (a log, a
data dump) can add to every one of those copies and to memory.
"""

# --------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------


def is_context_path(context: str) -> bool:
    """Whether a (trimmed) context names a file: a single line starting with ``/``."""
    return context.startswith("/") and "\n" not in context and "\r" not in context


def load_context_file(path: str, *, max_bytes: int = CONTEXT_FILE_MAX_BYTES) -> str:
    """Read a context file as raw UTF-8 text; raise :class:`ContextFileError` with the reason.

    The path is ``stat``-ed before anything opens it, so a FIFO, socket or device is refused
    without blocking; the file is then opened non-blocking and checked again through its
    descriptor, which closes the window where the path is swapped between the two steps.
    """
    try:
        info = Path(path).stat()
    except (OSError, ValueError) as error:  # ValueError: a NUL or lone surrogate in the path
        raise ContextFileError(_os_reason(error)) from None
    if not stat.S_ISREG(info.st_mode):
        raise ContextFileError("Expected a regular text file")
    if info.st_size > max_bytes:
        raise ContextFileError(f"Context file is larger than {max_bytes} bytes")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        raise ContextFileError(_os_reason(error)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ContextFileError("Expected a regular text file")
        chunks: list[bytes] = []
        size = 0
        # Read one byte past the cap so a file that grew after stat is still refused.
        while size <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as error:
        raise ContextFileError(_os_reason(error)) from None
    finally:
        os.close(fd)
    if size > max_bytes:
        raise ContextFileError(f"Context file is larger than {max_bytes} bytes")
    return _decode_text(b"".join(chunks), empty="Context file is empty")


class ContextFileError(Exception):
    """A context file cannot be used; ``reason`` is the text after the path in the issue."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --------------------------------------------------------------------------------------------
# Pipeline
# --------------------------------------------------------------------------------------------


def load_preview_file(path: str) -> str:
    """``load_context_file`` for a legacy ``previewFile``: the same rules, its own words."""
    try:
        return load_context_file(path)
    except ContextFileError as error:
        if error.reason == "Context file is empty":
            raise ContextFileError("Preview file is empty") from None
        if error.reason.startswith("Context file is larger"):
            raise ContextFileError(
                f"Preview file is larger than {CONTEXT_FILE_MAX_BYTES} bytes"
            ) from None
        raise


def _decode_text(data: bytes, *, empty: str) -> str:
    # NUL first: most binary formats contain one, and "binary data" says more than the
    # position of the first byte that is not UTF-8.
    if b"\x00" in data:
        raise ContextFileError("Expected UTF-8 text, not binary data")
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as error:
        raise ContextFileError(
            f"Expected UTF-8 text, found an invalid byte at offset {error.start}"
        ) from None
    if not text.strip():
        raise ContextFileError(empty)
    return text


def _os_reason(error: OSError | ValueError) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error)


# --------------------------------------------------------------------------------------------
