"""Frames on disk: ``length:u32be | crc32:u32be | payload``, and the file operations around
them (positional reads through a window, whole writes, atomic creation, the sidecar copy of a
damaged tail). ``docs/session-file.md`` is the format; ``session_file`` the session.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import struct
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import attrs
import cbor2

from pi_agent_ask.persistence.session_values import (
    MAGIC,
    MAX_FRAME_BYTES,
    Damage,
    DamageReason,
    Header,
    SessionFileError,
    header_from,
)

__all__ = [
    "HEAD_SIZE",
    "READ_WINDOW",
    "BadFrame",
    "Reader",
    "create_file",
    "decode",
    "encode_frame",
    "reach",
    "read_frame",
    "read_header",
    "refuse_odd_file",
    "save_sidecar",
    "write_all",
]

FRAME_HEAD: Final = struct.Struct(">II")
HEAD_SIZE: Final = FRAME_HEAD.size
READ_WINDOW: Final = 1 << 20
"""Bytes read at a time by a sequential reader."""


def encode_frame(payload: bytes) -> bytes:
    """``length | crc32 | payload``."""
    return FRAME_HEAD.pack(len(payload), zlib.crc32(payload)) + payload


class BadFrame(Exception):
    def __init__(self, reason: DamageReason, detail: str) -> None:
        super().__init__(detail)
        self.reason: DamageReason = reason
        self.detail = detail


def decode(payload: bytes | memoryview) -> Any:
    try:
        return cbor2.loads(payload)
    except Exception as exc:  # any decoder failure is damage, whatever its type
        raise BadFrame("undecodable", type(exc).__name__) from exc


def read_frame(fd: int, offset: int, size: int, *, check: bool = False) -> bytes | None:
    """The payload of the frame at ``offset`` read on its own (two exact reads), or ``None``
    when no whole frame (with ``check``: no frame whose checksum holds) is there."""
    head = os.pread(fd, HEAD_SIZE, offset)
    if len(head) < HEAD_SIZE:
        return None
    length, crc = FRAME_HEAD.unpack(head)
    if not 0 < length <= MAX_FRAME_BYTES or offset + HEAD_SIZE + length > size:
        return None
    payload = os.pread(fd, length, offset + HEAD_SIZE)
    if len(payload) < length or (check and zlib.crc32(payload) != crc):
        return None
    return payload


def reach(damage: Damage | None, size: int) -> Damage | None:
    """A damaged tail found before ``size`` runs to ``size`` (the end of the file)."""
    return damage if damage is None or damage.end == size else attrs.evolve(damage, end=size)


class Reader:
    """Positional reads through a window, so a sequential scan makes few system calls."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = size
        self.header_end = 0
        self._start = 0
        self._buf = b""

    def read(self, offset: int, length: int) -> memoryview:
        end = offset + length
        if offset < self._start or end > self._start + len(self._buf):
            want = max(READ_WINDOW, length)
            self._buf = os.pread(self.fd, min(want, max(self.size - offset, length)), offset)
            self._start = offset
            if len(self._buf) < length:
                raise BadFrame("torn", "file ended early")
        rel = offset - self._start
        return memoryview(self._buf)[rel : rel + length]

    def payload(self, offset: int, length: int) -> memoryview:
        try:
            return self.read(offset + HEAD_SIZE, length)
        except BadFrame as exc:
            raise SessionFileError(None, "unreadable", "session file shrank under us") from exc


def read_header(reader: Reader, path: Path) -> Header:
    """Read and check the header frame; ``SessionFileError`` when there is no usable one."""
    head = os.pread(reader.fd, min(reader.size, 64 * 1024 + HEAD_SIZE), 0)
    # The magic text inside the first bytes tells a damaged header from a foreign file.
    if MAGIC.encode() in head[:256]:
        refused = SessionFileError(path, "damaged-header", "session header frame is damaged")
    else:
        refused = SessionFileError(path, "not-a-session-file", "not a pi-agent-ask session file")
    if len(head) < HEAD_SIZE:
        raise refused
    length, crc = FRAME_HEAD.unpack_from(head)
    payload = head[HEAD_SIZE : HEAD_SIZE + length]
    if length == 0 or len(payload) < length or zlib.crc32(payload) != crc:
        raise refused
    try:
        value = decode(payload)
    except BadFrame:
        raise refused from None
    reader.header_end = HEAD_SIZE + length
    return header_from(value, path)


def write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)
    if written == len(data):  # the usual case: one call, no view of the bytes
        return
    view = memoryview(data)[written:]
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def refuse_odd_file(path: Path, fd: int | None = None) -> None:
    """``SessionFileError("not-a-regular-file")`` unless ``path`` (or the open ``fd``) is a
    regular file; a missing path passes (it may be created)."""
    try:
        mode = os.fstat(fd).st_mode if fd is not None else path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    if not stat.S_ISREG(mode):
        raise SessionFileError(
            path, "not-a-regular-file", "not a regular file (a FIFO, device or directory)"
        )


def create_file(path: Path, header: bytes, payloads: Iterable[bytes]) -> bool:
    """Create ``path`` atomically with these frames; ``False`` if it already exists.

    The frames go to a temporary file that is flushed and then hard-linked to ``path``: the
    name appears complete or not at all, and an existing file is never replaced.
    """
    directory = path.parent if str(path.parent) else Path()
    tmp = directory / f".{path.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        try:
            buffer = bytearray(encode_frame(header))
            for payload in payloads:
                buffer += encode_frame(payload)
                if len(buffer) >= READ_WINDOW:
                    write_all(fd, bytes(buffer))
                    buffer.clear()
            write_all(fd, bytes(buffer))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        fsync_dir(directory)
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def save_sidecar(path: Path, reader: Reader, damage: Damage) -> Path | None:
    """Copy the damaged bytes next to the session (``<name>.cut-<offset>[-n]``)."""
    for n in range(100):
        suffix = f".cut-{damage.start}" + (f"-{n}" if n else "")
        target = path.with_name(path.name + suffix)
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            continue
        try:
            pos = damage.start
            while pos < damage.end:
                chunk = os.pread(reader.fd, min(READ_WINDOW, damage.end - pos), pos)
                if not chunk:
                    break
                write_all(fd, chunk)
                pos += len(chunk)
            os.fsync(fd)
        finally:
            os.close(fd)
        return target
    return None
