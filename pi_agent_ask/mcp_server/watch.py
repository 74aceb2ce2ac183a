"""Changes to one file, as they happen: the desk's connection file, for ``pi-agent-ask mcp``.

:func:`watch_file` calls back each time the file is created, replaced (an atomic rename onto
it), rewritten or removed. On Linux it asks the kernel (inotify on the file's directory, read
when the descriptor is readable): no timer, no poll of the file. Elsewhere there is nothing to
wait on, so it never calls back, and the server re-checks the file on each call instead (which it
does anyway: the watch only lets it act between calls).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import struct
import sys
from collections.abc import Callable
from pathlib import Path

import trio

__all__ = ["watch_file"]

IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
WATCHED = IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
EVENT = struct.Struct("iIII")
"""``struct inotify_event`` without its name: wd, mask, cookie, len."""


def _inotify(folder: Path) -> int | None:
    """A non-blocking inotify descriptor watching ``folder``, or ``None`` where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        fd = int(libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    if libc.inotify_add_watch(fd, os.fsencode(folder), WATCHED) < 0:
        os.close(fd)
        return None
    return fd


def _names(data: bytes) -> set[str]:
    names = set()
    offset = 0
    while offset + EVENT.size <= len(data):
        _wd, _mask, _cookie, length = EVENT.unpack_from(data, offset)
        raw = data[offset + EVENT.size : offset + EVENT.size + length]
        names.add(os.fsdecode(raw.rstrip(b"\0")))
        offset += EVENT.size + length
    return names


async def watch_file(path: Path, changed: Callable[[], None]) -> None:
    """Call ``changed()`` once per batch of changes to ``path``, until cancelled (its directory
    is created, mode 0700, when missing, so a file that appears later is seen). Never calls it
    where the platform offers no watch."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = _inotify(path.parent)
    if fd is None:
        await trio.sleep_forever()
    try:
        while True:
            # The one way to sleep until a descriptor that no trio stream wraps is readable.
            await trio.lowlevel.wait_readable(fd)
            try:
                data = os.read(fd, 64 * 1024)
            except BlockingIOError:
                continue
            if path.name in _names(data):
                changed()
    finally:
        os.close(fd)
