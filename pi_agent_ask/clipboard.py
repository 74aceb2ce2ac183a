"""Reading an image from the system clipboard, for the paste-image key of the form's editors.

``read_clipboard_image`` asks the platform's clipboard tools for an image and returns one of a
closed set of results; ``notice_for`` gives the notice the form shows for it and ``to_image``
turns an image into the form's ``Image`` (base64, new id). The UI sends the image to the form as
``AttachImage(image, editor_serial)`` with the serial of the editor that was open when the read
*started*, so a read that finishes after its editor closed attaches nowhere.

Strategy (Linux and WSL; nothing else is supported, see ``docs/images.md``):

1. ``wl-paste`` when ``WAYLAND_DISPLAY`` is set or on WSL: ``wl-paste --list-types``, pick the
   preferred image type (png > jpeg > webp > gif), then ``wl-paste --type <mime>``.
2. Otherwise, or when ``wl-paste`` is missing or fails: ``xclip -selection clipboard -t TARGETS
   -o``, then ``xclip -selection clipboard -t <mime> -o``.
3. On WSL, when neither produced an image: ``powershell.exe`` reads the Windows clipboard and
   writes the image as base64 PNG to standard output. It is also tried when the Linux tools
   answered "no image", because under WSLg the Linux side often sees the Windows clipboard
   only as text or as BMP, which is not supported here.

BMP and other formats are not converted: the agent receives png, jpeg, webp or gif as the
clipboard offered them, and the Windows fallback converts to PNG itself.

Invariants:

- every tool runs as a Trio subprocess with standard input from ``/dev/null``, in its own
  process group, under ``trio.move_on_after(timeout)``; a tool that overruns, or writes more
  than the size limit, gets SIGKILL for its whole group (``wl-paste`` forks ``cat`` to copy
  the data, which would otherwise outlive it), and the tool itself is reaped before this
  returns (leftover children are reparented and reaped by the system);
- output is read with a cap, so a misbehaving tool can never make us hold more than
  ``max_bytes`` (plus one read chunk) in memory;
- an image is returned only when its bytes start with the magic number of the type the
  clipboard claimed for it;
- executables are found on the ``PATH`` of the ``env`` passed in, and run with that ``env``;
  nothing here reads ``os.environ`` or any other global state.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
import shutil
import signal
import subprocess
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from typing import TypeAlias

import attrs
import trio

from pi_agent_ask.form.fieldless import Fieldless
from pi_agent_ask.form.types import Image

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_TIMEOUT",
    "EMPTY_NOTICE",
    "IMAGE_MIME_TYPES",
    "READING_NOTICE",
    "UNAVAILABLE_NOTICE",
    "UNDECODABLE_NOTICE",
    "ClipboardEmpty",
    "ClipboardImage",
    "ClipboardResult",
    "ClipboardTooLarge",
    "ClipboardUnavailable",
    "ClipboardUndecodable",
    "is_wsl",
    "notice_for",
    "read_clipboard_image",
    "read_proc_version",
    "sniff_image_type",
    "to_image",
    "too_large_notice",
]

READING_NOTICE = "Reading image clipboard…"
EMPTY_NOTICE = "No image in the clipboard."
UNAVAILABLE_NOTICE = (
    "Image clipboard is unavailable. On Linux, install wl-clipboard or xclip; "
    "on WSL, enable Windows clipboard access."
)
UNDECODABLE_NOTICE = "The clipboard image could not be decoded."

IMAGE_MIME_TYPES: tuple[str, ...] = ("image/png", "image/jpeg", "image/webp", "image/gif")
"""The image types we take from the clipboard, most preferred first."""

DEFAULT_TIMEOUT = 3.0
"""Seconds each clipboard tool may run before it is killed."""

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
"""The largest image accepted: 10 MiB of image bytes (about 13.4 MiB as base64).

Big enough for a full-screen screenshot of a 4K or 5K display (typically 1-8 MiB as PNG), which
is what people paste; small enough that the copies an image has once attached -- the form's
draft journal, the completion entry, the tool result and the model request, each base64 --
stay modest. Larger images are refused with a notice rather than silently shrunk."""

_STDERR_KEEP = 4096
"""Bytes of a tool's standard error kept to recognise "the clipboard is empty" messages."""

# What the tools print when the clipboard simply holds nothing: wl-paste ("No selection"; newer
# releases "Nothing is copied") and xclip ("Error: target TARGETS not available"). These exit
# with an error status, but they mean "empty", not "unavailable".
_EMPTY_MESSAGE = re.compile(r"no selection|nothing is copied|target \S+ not available", re.I)

# PowerShell script for the WSL fallback. It contains no double quotes, so WSL's conversion of
# the argument list into a Windows command line keeps it intact. Prints nothing when the
# clipboard holds no image; clipboard access needs a single-threaded apartment (-STA).
_POWERSHELL_SCRIPT = (
    "Add-Type -AssemblyName System.Windows.Forms,System.Drawing;"
    "$image=[System.Windows.Forms.Clipboard]::GetImage();"
    "if($image -ne $null){"
    "$stream=New-Object System.IO.MemoryStream;"
    "$image.Save($stream,[System.Drawing.Imaging.ImageFormat]::Png);"
    "[Console]::Out.Write([Convert]::ToBase64String($stream.ToArray()))}"
)


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@attrs.frozen
class ClipboardImage:
    """An image from the clipboard: raw bytes whose magic number matches ``mime_type``."""

    mime_type: str
    data: bytes = attrs.field(repr=lambda data: f"<{len(data)} bytes>")


class ClipboardEmpty(Fieldless):
    """A clipboard tool answered, and the clipboard holds no image (text, or nothing)."""


class ClipboardUnavailable(Fieldless):
    """No clipboard tool could be run, or every one failed or timed out."""


class ClipboardUndecodable(Fieldless):
    """The clipboard offers an image we cannot use: its bytes are not the claimed type, or it
    is only offered in a type we do not take (BMP, TIFF, ...)."""


@attrs.frozen
class ClipboardTooLarge:
    """The clipboard image is larger than ``limit`` bytes; it was not read to the end."""

    limit: int


ClipboardResult: TypeAlias = (
    ClipboardImage
    | ClipboardEmpty
    | ClipboardUnavailable
    | ClipboardUndecodable
    | ClipboardTooLarge
)


def too_large_notice(limit: int) -> str:
    """The notice for an image over ``limit`` bytes, e.g. ``... larger than 10 MiB.``."""
    return f"The clipboard image is larger than {_format_size(limit)}."


def notice_for(result: ClipboardResult) -> str | None:
    """The notice the form shows after a read; ``None`` for an image (it is attached instead).

    None of these clears the editor's text or images.
    """
    match result:
        case ClipboardImage():
            return None
        case ClipboardEmpty():
            return EMPTY_NOTICE
        case ClipboardUnavailable():
            return UNAVAILABLE_NOTICE
        case ClipboardUndecodable():
            return UNDECODABLE_NOTICE
        case ClipboardTooLarge(limit=limit):
            return too_large_notice(limit)


def _new_uuid() -> str:
    return str(uuid.uuid4())


def to_image(result: ClipboardImage, *, new_id: Callable[[], str] = _new_uuid) -> Image:
    """The form's ``Image`` for a clipboard image: a new id, the MIME type, and the bytes as
    base64 without a data-URI prefix."""
    return Image(
        id=new_id(),
        mime_type=result.mime_type,
        data=base64.b64encode(result.data).decode("ascii"),
    )


def sniff_image_type(data: bytes) -> str | None:
    """The MIME type whose magic number ``data`` starts with, among ``IMAGE_MIME_TYPES``."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    return None


def _format_size(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.4g} {unit}"
    return f"{size} bytes"


# --------------------------------------------------------------------------------------------
# Platform
# --------------------------------------------------------------------------------------------


def is_wsl(env: Mapping[str, str], proc_version: str = "") -> bool:
    """Whether we run under the Windows Subsystem for Linux: ``WSL_DISTRO_NAME`` or
    ``WSL_INTEROP`` is set, or the kernel version string (``/proc/version``) names Microsoft."""
    if env.get("WSL_DISTRO_NAME") or env.get("WSL_INTEROP"):
        return True
    return "microsoft" in proc_version.lower()


async def read_proc_version(path: str = "/proc/version") -> str:
    """The kernel version string for ``is_wsl``; empty when it cannot be read."""
    try:
        return await trio.Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


async def read_clipboard_image(
    *,
    env: Mapping[str, str],
    proc_version: str = "",
    # Per tool run, which a deadline around the whole call cannot express.
    timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> ClipboardResult:
    """Read an image from the clipboard (the strategy is in the module docstring).

    ``env`` supplies ``PATH`` (where the tools are looked for), ``WAYLAND_DISPLAY``, ``DISPLAY``
    and the WSL variables, and is the tools' environment; ``proc_version`` is the text of
    ``/proc/version`` (``read_proc_version()``), used only to detect WSL. ``timeout`` bounds
    each tool run in seconds; ``max_bytes`` bounds the image size. Never raises for anything a
    tool does; cancelling the caller kills the running tool.
    """
    if max_bytes < 1:
        raise ValueError("max_bytes must be positive")
    wsl = is_wsl(env, proc_version)
    search_path = env.get("PATH", os.defpath)
    tools = _Tools(env=env, timeout=timeout, max_bytes=max_bytes)
    readers: list[tuple[str, Callable[[str], Awaitable[ClipboardResult | None]]]] = []
    if env.get("WAYLAND_DISPLAY") or wsl:
        readers.append(("wl-paste", tools.wl_paste))
    readers.append(("xclip", tools.xclip))
    result: ClipboardResult = ClipboardUnavailable()
    for name, reader in readers:
        executable = shutil.which(name, path=search_path)
        if executable is None:
            continue
        answer = await reader(executable)
        if answer is not None:
            # The first tool that answers decides: X and Wayland clipboards are kept in step
            # (XWayland), so asking the other one would only repeat the answer.
            result = answer
            break
    if wsl and not isinstance(result, ClipboardImage | ClipboardTooLarge):
        executable = shutil.which("powershell.exe", path=search_path)
        if executable is not None:
            answer = await tools.powershell(executable)
            if answer is not None:
                result = _more_useful(result, answer)
    return result


def _more_useful(first: ClipboardResult, second: ClipboardResult) -> ClipboardResult:
    """Of two answers, the one that tells the person the most."""
    rank = {
        ClipboardUnavailable: 0,
        ClipboardEmpty: 1,
        ClipboardUndecodable: 2,
        ClipboardTooLarge: 3,
        ClipboardImage: 4,
    }
    return second if rank[type(second)] > rank[type(first)] else first


@attrs.frozen
class _Run:
    """A finished tool run. ``overflow``: it wrote more than the limit and was killed."""

    returncode: int
    stdout: bytes
    stderr: str
    overflow: bool

    @property
    def says_empty(self) -> bool:
        """It failed with the tool's own "the clipboard is empty" message."""
        return self.returncode != 0 and _EMPTY_MESSAGE.search(self.stderr) is not None


@attrs.frozen
class _Tools:
    """The three clipboard readers. Each returns ``None`` when its tool could not answer
    (could not start, failed, timed out), so the caller moves on to the next tool."""

    env: Mapping[str, str]
    timeout: float
    max_bytes: int

    async def wl_paste(self, executable: str) -> ClipboardResult | None:
        return await self._by_type(
            list_types=[executable, "--list-types"],
            read_type=lambda mime: [executable, "--type", mime],
        )

    async def xclip(self, executable: str) -> ClipboardResult | None:
        base = [executable, "-selection", "clipboard", "-t"]
        return await self._by_type(
            list_types=[*base, "TARGETS", "-o"],
            read_type=lambda mime: [*base, mime, "-o"],
        )

    async def _by_type(
        self, *, list_types: Sequence[str], read_type: Callable[[str], Sequence[str]]
    ) -> ClipboardResult | None:
        listed = await self._run(list_types, limit=64 * 1024)
        if listed is None or listed.overflow:
            return None
        if listed.returncode != 0:
            return ClipboardEmpty() if listed.says_empty else None
        offered = _parse_types(listed.stdout)
        mime = next((m for m in IMAGE_MIME_TYPES if m in offered), None)
        if mime is None:
            # An image in a type we do not take is not "no image": say it cannot be used.
            if any(m.startswith("image/") for m in offered):
                return ClipboardUndecodable()
            return ClipboardEmpty()
        read = await self._run(read_type(mime), limit=self.max_bytes)
        if read is None:
            return None
        if read.overflow:
            return ClipboardTooLarge(self.max_bytes)
        if read.returncode != 0:
            # The owner may have dropped the selection between the two calls.
            return ClipboardEmpty() if read.says_empty else None
        return _checked(mime, read.stdout)

    async def powershell(self, executable: str) -> ClipboardResult | None:
        argv = [executable, "-NoProfile", "-NonInteractive", "-STA", "-Command", _POWERSHELL_SCRIPT]
        # Base64 of max_bytes, plus room for a line ending and stray whitespace.
        limit = 4 * -(-self.max_bytes // 3) + 64
        run = await self._run(argv, limit=limit)
        if run is None:
            return None
        if run.overflow:
            return ClipboardTooLarge(self.max_bytes)
        if run.returncode != 0:
            return None
        text = b"".join(run.stdout.split())
        if not text:
            return ClipboardEmpty()
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            return ClipboardUndecodable()
        if len(data) > self.max_bytes:
            return ClipboardTooLarge(self.max_bytes)
        return _checked("image/png", data)

    async def _run(self, argv: Sequence[str], *, limit: int) -> _Run | None:
        return await _run_tool(argv, env=self.env, seconds=self.timeout, limit=limit)


def _parse_types(output: bytes) -> frozenset[str]:
    text = output.decode("utf-8", errors="replace")
    return frozenset(line.strip().lower() for line in text.splitlines() if line.strip())


def _checked(mime: str, data: bytes) -> ClipboardResult:
    if not data:
        return ClipboardEmpty()
    if sniff_image_type(data) != mime:
        return ClipboardUndecodable()
    return ClipboardImage(mime_type=mime, data=data)


# --------------------------------------------------------------------------------------------
# Running a tool
# --------------------------------------------------------------------------------------------


def _kill_group(process: trio.Process) -> None:
    """SIGKILL the tool's process group (it leads its own session), or the tool alone."""
    if os.name == "posix":
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    with suppress(ProcessLookupError, OSError):
        process.kill()


async def _deliver_cancel(process: trio.Process) -> None:
    # A clipboard tool holds nothing worth a graceful shutdown; SIGTERM and the default
    # five-second grace period would only keep the person waiting.
    _kill_group(process)


async def _run_tool(
    argv: Sequence[str], *, env: Mapping[str, str], seconds: float, limit: int
) -> _Run | None:
    """Run ``argv`` and collect at most ``limit`` bytes of its output.

    ``None`` when it cannot be started or does not finish within ``seconds``. Whatever the
    outcome, the tool has exited and been reaped, and its process group has been sent SIGKILL.
    """
    with trio.move_on_after(seconds):
        async with trio.open_nursery() as nursery:
            try:
                process: trio.Process = await nursery.start(
                    functools.partial(
                        trio.run_process,
                        list(argv),
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        check=False,
                        env=dict(env),
                        start_new_session=True,
                        deliver_cancel=_deliver_cancel,
                    )
                )
            except OSError:
                return None
            assert process.stdout is not None and process.stderr is not None
            out = _Capture(limit)
            err = _Capture(_STDERR_KEEP)
            async with trio.open_nursery() as readers:
                readers.start_soon(_read_stdout, process, out)
                readers.start_soon(_drain, process.stderr, err)
                readers.start_soon(_reap, process)
        assert process.returncode is not None
        return _Run(
            returncode=process.returncode,
            stdout=bytes(out.data),
            stderr=bytes(err.data).decode("utf-8", errors="replace"),
            overflow=out.overflow,
        )
    return None


@attrs.define(eq=False)
class _Capture:
    """Bytes collected from one pipe, up to ``limit``."""

    limit: int
    data: bytearray = attrs.field(factory=bytearray)
    overflow: bool = False


async def _read_stdout(process: trio.Process, capture: _Capture) -> None:
    stream = process.stdout
    assert stream is not None
    async with stream:
        async for chunk in stream:
            capture.data += chunk
            if len(capture.data) > capture.limit:
                capture.overflow = True
                del capture.data[capture.limit :]
                _kill_group(process)
                return


async def _reap(process: trio.Process) -> None:
    await process.wait()
    # Whatever the tool left in its group (a child still holding the pipe) must not outlive
    # it, nor keep the readers waiting for the end of the output. Bytes already in the pipe
    # stay readable after their writer is gone.
    _kill_group(process)


async def _drain(stream: trio.abc.ReceiveStream, capture: _Capture) -> None:
    """Read a pipe to its end, keeping the first ``limit`` bytes: a tool that writes a lot of
    warnings must not block on a full pipe."""
    async with stream:
        async for chunk in stream:
            room = capture.limit - len(capture.data)
            if room > 0:
                capture.data += chunk[:room]
