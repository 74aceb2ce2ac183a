"""Reading images from the clipboard, against fake ``wl-paste``, ``xclip`` and ``powershell.exe``.

Each fake is a shell script in ``tmp_path/bin``, first on the ``PATH`` passed in ``env``. It logs
every call (program name and arguments) and answers from files the test wrote: the type list,
one data file per MIME type, an exit status and a standard-error message.
"""

from __future__ import annotations

import base64
import functools
import os
import shlex
import struct
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs
import pytest
import trio

from pi_agent_ask import clipboard as cb
from pi_agent_ask.form.types import Image

pytestmark = pytest.mark.skipif(not Path("/bin/sh").exists(), reason="needs a POSIX shell")

needs_pidfd = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs pidfd_open (Linux)")

GUARD = 20  # seconds: every test is far quicker; this only stops a hang


def png_1x1() -> bytes:
    """A valid 1×1 RGBA PNG (signature, IHDR, IDAT, IEND with correct CRCs)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00\xff")  # filter byte, one red pixel
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


PNG = png_1x1()
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"
WEBP = b"RIFF" + struct.pack("<I", 12) + b"WEBPVP8L" + b"\x00" * 4
GIF = b"GIF89a" + b"\x01\x00\x01\x00\x00\x00\x00;"
BY_TYPE = {"image/png": PNG, "image/jpeg": JPEG, "image/webp": WEBP, "image/gif": GIF}

WSL_KERNEL = "Linux version 5.15.153.1-microsoft-standard-WSL2 (root@1c602f52c2e4) #1 SMP"


def test_the_test_png_is_well_formed() -> None:
    # The fixture itself: signature, then IHDR for 1×1, and every chunk's CRC matches.
    assert PNG.startswith(b"\x89PNG\r\n\x1a\n")
    offset = 8
    kinds = []
    while offset < len(PNG):
        (length,) = struct.unpack(">I", PNG[offset : offset + 4])
        kind = PNG[offset + 4 : offset + 8]
        body = PNG[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", PNG[offset + 8 + length : offset + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF
        kinds.append(kind)
        offset += 12 + length
    assert kinds == [b"IHDR", b"IDAT", b"IEND"]
    assert struct.unpack(">II", PNG[16:24]) == (1, 1)


# --------------------------------------------------------------------------------------------
# Fake tools
# --------------------------------------------------------------------------------------------


@attrs.define
class Fakes:
    """Fake clipboard tools in ``root/bin`` and the log of their calls."""

    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def log(self) -> Path:
        return self.root / "calls.log"

    def env(self, **extra: str) -> dict[str, str]:
        # The fakes need only sh, cat, sleep and friends from the system directories.
        return {"PATH": f"{self.bin}:/usr/bin:/bin", **extra}

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def script(self, name: str, body: str) -> Path:
        self.bin.mkdir(exist_ok=True)
        path = self.bin / name
        log = shlex.quote(str(self.log))
        path.write_text(f"#!/bin/sh\nprintf '%s\\n' \"${{0##*/}} $*\" >> {log}\n{body}\n")
        path.chmod(0o755)
        return path

    def _files(self, name: str) -> Path:
        folder = self.root / f"{name}.d"
        folder.mkdir(exist_ok=True)
        return folder

    def _answers(
        self,
        name: str,
        *,
        list_condition: str,
        target: str,
        types: Iterator[str] | list[str] | tuple[str, ...],
        list_status: int,
        list_stderr: str,
        data: Mapping[str, bytes],
        read_status: int,
        read_stderr: str,
        slow: str | None,
    ) -> None:
        folder = self._files(name)
        (folder / "types").write_text("".join(f"{t}\n" for t in types))
        (folder / "list_stderr").write_text(list_stderr)
        (folder / "read_stderr").write_text(read_stderr)
        for mime, content in data.items():
            (folder / mime.replace("/", "_")).write_bytes(content)
        d = shlex.quote(str(folder))
        slow_list = slow_read = ""
        if slow is not None:
            # Record this shell's pid and a child's, then wait on the child: the child keeps
            # running (and holding our output pipe) unless the whole group is killed.
            pids = shlex.quote(str(self.root / "pids"))
            block = f"echo $$ >> {pids}; sleep 60 & echo $! >> {pids}; wait"
            slow_list = block if slow == "list" else ""
            slow_read = block if slow == "read" else ""
        self.script(
            name,
            f"""if {list_condition}; then
  {slow_list}
  cat {d}/types
  cat {d}/list_stderr >&2
  exit {list_status}
fi
{slow_read}
file={d}/$(printf %s "{target}" | tr / _)
cat {d}/read_stderr >&2
[ -f "$file" ] || exit 1
cat "$file"
exit {read_status}""",
        )

    def wl_paste(
        self,
        types: list[str] | tuple[str, ...] = (),
        *,
        list_status: int = 0,
        list_stderr: str = "",
        data: Mapping[str, bytes] | None = None,
        read_status: int = 0,
        read_stderr: str = "",
        slow: str | None = None,
    ) -> None:
        self._answers(
            "wl-paste",
            list_condition='[ "$1" = --list-types ]',
            target="$2",
            types=types,
            list_status=list_status,
            list_stderr=list_stderr,
            data=data or {},
            read_status=read_status,
            read_stderr=read_stderr,
            slow=slow,
        )

    def xclip(
        self,
        types: list[str] | tuple[str, ...] = (),
        *,
        list_status: int = 0,
        list_stderr: str = "",
        data: Mapping[str, bytes] | None = None,
        read_status: int = 0,
        read_stderr: str = "",
        slow: str | None = None,
    ) -> None:
        self._answers(
            "xclip",
            list_condition='[ "$4" = TARGETS ]',
            target="$4",
            types=["TARGETS", "TIMESTAMP", *types],
            list_status=list_status,
            list_stderr=list_stderr,
            data=data or {},
            read_status=read_status,
            read_stderr=read_stderr,
            slow=slow,
        )

    def powershell(self, stdout: bytes = b"", *, status: int = 0) -> None:
        out = self.root / "powershell.out"
        out.write_bytes(stdout)
        self.script("powershell.exe", f"cat {shlex.quote(str(out))}\nexit {status}")

    def pids(self) -> list[int]:
        path = self.root / "pids"
        return [int(line) for line in path.read_text().split()] if path.exists() else []


@pytest.fixture
def fakes(tmp_path: Path) -> Fakes:
    return Fakes(tmp_path)


async def read(env: Mapping[str, str], **kwargs: object) -> cb.ClipboardResult:
    with trio.fail_after(GUARD):
        return await cb.read_clipboard_image(env=env, **kwargs)  # type: ignore[arg-type]


async def wait_gone(pids: list[int]) -> None:
    """Wait until each process has exited; a pidfd becomes readable at exit, even for a
    process that is not our child (the tool's own children are reparented, not reaped by us).

    Killed processes are gone in milliseconds; the bound only turns a survivor (``sleep 60``)
    into a failure instead of a hang.
    """
    with trio.fail_after(5):
        for pid in pids:
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            try:
                await trio.lowlevel.wait_readable(fd)
            finally:
                os.close(fd)


WL_LIST = "wl-paste --list-types"
XCLIP_LIST = "xclip -selection clipboard -t TARGETS -o"


def xclip_read(mime: str) -> str:
    return f"xclip -selection clipboard -t {mime} -o"


# --------------------------------------------------------------------------------------------
# Wayland and X11
# --------------------------------------------------------------------------------------------


async def test_a_png_from_wl_paste_on_wayland(fakes: Fakes) -> None:
    fakes.wl_paste(["text/plain", "image/png"], data={"image/png": PNG})
    fakes.xclip(["image/png"], data={"image/png": JPEG})
    result = await read(fakes.env(WAYLAND_DISPLAY="wayland-0"))
    assert result == cb.ClipboardImage("image/png", PNG)
    assert fakes.calls() == [WL_LIST, "wl-paste --type image/png"]
    assert cb.notice_for(result) is None


async def test_a_jpeg_from_xclip_without_wayland(fakes: Fakes) -> None:
    fakes.wl_paste(["image/png"], data={"image/png": PNG})
    fakes.xclip(["image/jpeg"], data={"image/jpeg": JPEG})
    result = await read(fakes.env(DISPLAY=":0"))
    assert result == cb.ClipboardImage("image/jpeg", JPEG)
    # Without WAYLAND_DISPLAY (and not on WSL) wl-paste is never asked.
    assert fakes.calls() == [XCLIP_LIST, xclip_read("image/jpeg")]


@pytest.mark.parametrize(
    ("offered", "chosen"),
    [
        (["image/gif", "image/webp", "image/jpeg", "image/png"], "image/png"),
        (["image/gif", "image/webp", "image/jpeg"], "image/jpeg"),
        (["image/gif", "image/webp"], "image/webp"),
        (["text/plain", "image/gif"], "image/gif"),
    ],
)
@pytest.mark.parametrize("tool", ["wl-paste", "xclip"])
async def test_the_preferred_type_is_read(
    fakes: Fakes, tool: str, offered: list[str], chosen: str
) -> None:
    if tool == "wl-paste":
        fakes.wl_paste(offered, data=BY_TYPE)
        wanted = f"wl-paste --type {chosen}"
    else:
        fakes.xclip(offered, data=BY_TYPE)
        wanted = xclip_read(chosen)
    result = await read(fakes.env(WAYLAND_DISPLAY="wayland-0"))
    assert result == cb.ClipboardImage(chosen, BY_TYPE[chosen])
    assert fakes.calls()[-1] == wanted
    assert len(fakes.calls()) == 2


async def test_tools_run_with_the_given_environment_and_no_input(fakes: Fakes) -> None:
    # The fake only answers when it sees the environment we passed, and records its stdin.
    probe = fakes.root / "probe"
    fakes.script(
        "wl-paste",
        f'[ "$WAYLAND_DISPLAY" = wayland-7 ] || exit 9\n'
        f"readlink /proc/$$/fd/0 >> {shlex.quote(str(probe))}\n"
        f'if [ "$1" = --list-types ]; then echo image/png; exit 0; fi\n'
        f"cat {shlex.quote(str(fakes.root / 'png'))}",
    )
    (fakes.root / "png").write_bytes(PNG)
    # Our own standard input is a pipe meanwhile, so a tool that inherited it would show it.
    read_end, write_end = os.pipe()
    saved = os.dup(0)
    try:
        os.dup2(read_end, 0)
        result = await read(fakes.env(WAYLAND_DISPLAY="wayland-7"))
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    assert result == cb.ClipboardImage("image/png", PNG)
    assert probe.read_text().split() == ["/dev/null", "/dev/null"]


# -- empty, text only, unsupported ----------------------------------------------------------


async def test_an_empty_wayland_clipboard(fakes: Fakes) -> None:
    fakes.wl_paste(list_status=1, list_stderr="No selection\n")
    fakes.xclip(["image/png"], data={"image/png": PNG})
    result = await read(fakes.env(WAYLAND_DISPLAY="wayland-0"))
    assert result == cb.ClipboardEmpty()
    assert cb.notice_for(result) == "No image in the clipboard."
    # wl-paste answered "empty": xclip would only repeat it.
    assert fakes.calls() == [WL_LIST]


async def test_newer_wl_paste_wording_for_an_empty_clipboard(fakes: Fakes) -> None:
    fakes.wl_paste(list_status=1, list_stderr="Nothing is copied\n")
    assert await read(fakes.env(WAYLAND_DISPLAY="wayland-0")) == cb.ClipboardEmpty()


async def test_an_empty_x11_clipboard(fakes: Fakes) -> None:
    fakes.xclip(list_status=1, list_stderr="Error: target TARGETS not available\n")
    assert await read(fakes.env(DISPLAY=":0")) == cb.ClipboardEmpty()


async def test_an_empty_type_list_is_an_empty_clipboard(fakes: Fakes) -> None:
    fakes.wl_paste([])
    assert await read(fakes.env(WAYLAND_DISPLAY="wayland-0")) == cb.ClipboardEmpty()
    assert fakes.calls() == [WL_LIST]


@pytest.mark.parametrize("tool", ["wl-paste", "xclip"])
async def test_text_only_is_no_image_and_nothing_is_read(fakes: Fakes, tool: str) -> None:
    text_types = ["text/plain;charset=utf-8", "text/plain", "UTF8_STRING"]
    if tool == "wl-paste":
        fakes.wl_paste(text_types)
    else:
        fakes.xclip(text_types)
    result = await read(fakes.env(WAYLAND_DISPLAY="wayland-0"))
    assert result == cb.ClipboardEmpty()
    assert len(fakes.calls()) == 1


async def test_an_image_only_offered_as_bmp_cannot_be_used(fakes: Fakes) -> None:
    fakes.wl_paste(["image/bmp", "text/plain"], data={"image/bmp": b"BM" + b"\x00" * 60})
    result = await read(fakes.env(WAYLAND_DISPLAY="wayland-0"))
    assert result == cb.ClipboardUndecodable()
    assert fakes.calls() == [WL_LIST]


async def test_the_owner_dropping_the_selection_between_list_and_read(fakes: Fakes) -> None:
    fakes.wl_paste(["image/png"], read_status=1, read_stderr="No selection\n")
    assert await read(fakes.env(WAYLAND_DISPLAY="wayland-0")) == cb.ClipboardEmpty()


async def test_zero_bytes_under_an_image_type_is_no_image(fakes: Fakes) -> None:
    fakes.wl_paste(["image/png"], data={"image/png": b""})
    assert await read(fakes.env(WAYLAND_DISPLAY="wayland-0")) == cb.ClipboardEmpty()


# -- unavailable and fallback ---------------------------------------------------------------


async def test_no_tool_at_all_is_unavailable(fakes: Fakes) -> None:
    fakes.bin.mkdir()
    result = await read(fakes.env(WAYLAND_DISPLAY="wayland-0", DISPLAY=":0"))
    assert result == cb.ClipboardUnavailable()
    assert cb.notice_for(result) == (
        "Image clipboard is unavailable. On Linux, install wl-clipboard or xclip; "
        "on WSL, enable Windows clipboard access."
    )


async def test_an_env_without_path_finds_nothing_of_ours(fakes: Fakes) -> None:
    fakes.wl_paste(["image/png"], data={"image/png": PNG})
    result = await read({"WAYLAND_DISPLAY": "wayland-0", "PATH": ""})
    assert result == cb.ClipboardUnavailable()
    assert fakes.calls() == []


async def test_failing_tools_are_unavailable(fakes: Fakes) -> None:
    fakes.wl_paste(list_status=1, list_stderr="Failed to connect to a Wayland server\n")
    fakes.xclip(list_status=1, list_stderr="Error: Can't open display: (null)\n")
    result = await read(fakes.env(WAYLAND_DISPLAY="wayland-0"))
    assert result == cb.ClipboardUnavailable()
    assert fakes.calls() == [WL_LIST, XCLIP_LIST]


async def test_a_failing_wl_paste_falls_back_to_xclip(fakes: Fakes) -> None:
    fakes.wl_paste(list_status=1, list_stderr="Failed to connect to a Wayland server\n")
    fakes.xclip(["image/png"], data={"image/png": PNG})
    result = await read(fakes.env(WAYLAND_DISPLAY="wayland-0"))
    assert result == cb.ClipboardImage("image/png", PNG)
    assert fakes.calls() == [WL_LIST, XCLIP_LIST, xclip_read("image/png")]


async def test_a_missing_wl_paste_falls_back_to_xclip(fakes: Fakes) -> None:
    fakes.xclip(["image/gif"], data={"image/gif": GIF})
    result = await read(fakes.env(WAYLAND_DISPLAY="wayland-0"))
    assert result == cb.ClipboardImage("image/gif", GIF)


async def test_a_tool_that_is_not_executable_is_skipped(fakes: Fakes) -> None:
    fakes.wl_paste(["image/png"], data={"image/png": PNG})
    (fakes.bin / "wl-paste").chmod(0o644)
    fakes.xclip(["image/jpeg"], data={"image/jpeg": JPEG})
    result = await read(fakes.env(WAYLAND_DISPLAY="wayland-0"))
    assert result == cb.ClipboardImage("image/jpeg", JPEG)


# -- wrong bytes, too large -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("claimed", "content"),
    [
        ("image/png", b"this is text, not a picture\n"),
        ("image/png", JPEG),
        ("image/jpeg", PNG),
        ("image/webp", b"RIFF\x00\x00\x00\x00WAVEfmt "),
        ("image/gif", b"GIF90a"),
    ],
)
async def test_bytes_that_are_not_the_claimed_type_cannot_be_decoded(
    fakes: Fakes, claimed: str, content: bytes
) -> None:
    fakes.wl_paste([claimed], data={claimed: content})
    result = await read(fakes.env(WAYLAND_DISPLAY="wayland-0"))
    assert result == cb.ClipboardUndecodable()
    assert cb.notice_for(result) == "The clipboard image could not be decoded."


async def test_an_image_over_the_limit_is_refused(fakes: Fakes) -> None:
    big = PNG + b"\x00" * 200_000  # more than one pipe read, so the cap is hit mid-stream
    fakes.wl_paste(["image/png"], data={"image/png": big})
    result = await read(fakes.env(WAYLAND_DISPLAY="wayland-0"), max_bytes=64 * 1024)
    assert result == cb.ClipboardTooLarge(64 * 1024)
    assert cb.notice_for(result) == "The clipboard image is larger than 64 KiB."


async def test_an_image_of_exactly_the_limit_is_accepted(fakes: Fakes) -> None:
    fakes.xclip(["image/png"], data={"image/png": PNG})
    result = await read(fakes.env(), max_bytes=len(PNG))
    assert result == cb.ClipboardImage("image/png", PNG)
    smaller = await read(fakes.env(), max_bytes=len(PNG) - 1)
    assert smaller == cb.ClipboardTooLarge(len(PNG) - 1)


def test_the_default_limit_and_its_notice() -> None:
    assert cb.DEFAULT_MAX_BYTES == 10 * 1024 * 1024
    assert cb.too_large_notice(cb.DEFAULT_MAX_BYTES) == (
        "The clipboard image is larger than 10 MiB."
    )
    assert cb.too_large_notice(100) == "The clipboard image is larger than 100 bytes."


async def test_a_non_positive_limit_is_a_programming_error(fakes: Fakes) -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        await read(fakes.env(), max_bytes=0)


# -- slow tools -----------------------------------------------------------------------------


@needs_pidfd
@pytest.mark.parametrize("step", ["list", "read"])
async def test_a_tool_that_overruns_is_killed_with_its_children(fakes: Fakes, step: str) -> None:
    fakes.wl_paste(["image/png"], data={"image/png": PNG}, slow=step)
    result = await read(fakes.env(WAYLAND_DISPLAY="wayland-0"), timeout=1.0)
    # Timed out and no other tool: nothing could answer.
    assert result == cb.ClipboardUnavailable()
    pids = fakes.pids()
    assert len(pids) == 2  # the tool and the child it was waiting for
    await wait_gone(pids)


async def test_an_overrunning_wl_paste_falls_back_to_xclip(fakes: Fakes) -> None:
    fakes.wl_paste(["image/png"], data={"image/png": PNG}, slow="list")
    fakes.xclip(["image/webp"], data={"image/webp": WEBP})
    result = await read(fakes.env(WAYLAND_DISPLAY="wayland-0"), timeout=1.0)
    assert result == cb.ClipboardImage("image/webp", WEBP)


@needs_pidfd
async def test_cancelling_the_read_kills_the_running_tool(fakes: Fakes) -> None:
    fakes.wl_paste(["image/png"], data={"image/png": PNG}, slow="list")
    # The fake reports its pids through a FIFO, so the test knows when both processes run.
    # Opened read-write, it never reports end-of-file between the fake's two writes.
    fifo = fakes.root / "pids"
    os.mkfifo(fifo)
    received = b""
    with trio.fail_after(GUARD):
        async with (
            trio.lowlevel.FdStream(os.open(fifo, os.O_RDWR | os.O_NONBLOCK)) as pids,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(
                functools.partial(
                    cb.read_clipboard_image,
                    env=fakes.env(WAYLAND_DISPLAY="wayland-0"),
                    timeout=GUARD * 2,
                )
            )
            while received.count(b"\n") < 2:
                received += await pids.receive_some()
            # Both run: cancel the read, as disposing the form does.
            nursery.cancel_scope.cancel()
    started = [int(pid) for pid in received.split()]
    assert len(started) == 2
    await wait_gone(started)


# --------------------------------------------------------------------------------------------
# WSL
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "proc_version", "wsl"),
    [
        ({"WSL_DISTRO_NAME": "Ubuntu"}, "", True),
        ({"WSL_INTEROP": "/run/WSL/8_interop"}, "", True),
        ({}, WSL_KERNEL, True),
        ({}, "Linux version 4.4.0-19041-Microsoft (Microsoft@Microsoft.com)", True),
        ({}, "Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075)", False),
        ({"WSL_DISTRO_NAME": ""}, "", False),
    ],
)
def test_wsl_detection(env: dict[str, str], proc_version: str, wsl: bool) -> None:
    assert cb.is_wsl(env, proc_version) is wsl


async def test_read_proc_version_reads_the_file_or_gives_empty(tmp_path: Path) -> None:
    version = tmp_path / "version"
    version.write_text(WSL_KERNEL)
    assert await cb.read_proc_version(str(version)) == WSL_KERNEL
    assert await cb.read_proc_version(str(tmp_path / "missing")) == ""


@pytest.mark.parametrize(
    ("extra", "proc_version"),
    [
        ({"WSL_DISTRO_NAME": "Ubuntu"}, ""),
        ({"WSL_INTEROP": "/run/WSL/8_interop"}, ""),
        ({}, WSL_KERNEL),
    ],
)
async def test_wsl_falls_back_to_powershell(
    fakes: Fakes, extra: dict[str, str], proc_version: str
) -> None:
    # PowerShell writes base64 PNG with a Windows line ending.
    fakes.powershell(base64.b64encode(PNG) + b"\r\n")
    result = await read(fakes.env(**extra), proc_version=proc_version)
    assert result == cb.ClipboardImage("image/png", PNG)
    [call] = fakes.calls()
    assert call.startswith("powershell.exe -NoProfile -NonInteractive -STA -Command ")
    assert "[System.Windows.Forms.Clipboard]::GetImage()" in call


async def test_powershell_is_never_used_outside_wsl(fakes: Fakes) -> None:
    fakes.powershell(base64.b64encode(PNG))
    result = await read(fakes.env(DISPLAY=":0"), proc_version="Linux version 6.8.0-generic")
    assert result == cb.ClipboardUnavailable()
    assert fakes.calls() == []


async def test_wsl_asks_wl_paste_first_even_without_wayland_display(fakes: Fakes) -> None:
    fakes.wl_paste(["image/png"], data={"image/png": PNG})
    fakes.powershell(base64.b64encode(JPEG))
    result = await read(fakes.env(WSL_DISTRO_NAME="Ubuntu"))
    assert result == cb.ClipboardImage("image/png", PNG)
    assert fakes.calls() == [WL_LIST, "wl-paste --type image/png"]


async def test_wsl_uses_powershell_when_linux_only_sees_a_bitmap(fakes: Fakes) -> None:
    fakes.wl_paste(["image/bmp"], data={"image/bmp": b"BM" + b"\x00" * 60})
    fakes.powershell(base64.b64encode(PNG))
    result = await read(fakes.env(WSL_DISTRO_NAME="Ubuntu"))
    assert result == cb.ClipboardImage("image/png", PNG)
    assert [call.split()[0] for call in fakes.calls()] == ["wl-paste", "powershell.exe"]


async def test_wsl_with_text_on_both_sides_is_empty(fakes: Fakes) -> None:
    fakes.wl_paste(["text/plain"])
    fakes.powershell(b"")
    assert await read(fakes.env(WSL_DISTRO_NAME="Ubuntu")) == cb.ClipboardEmpty()


async def test_wsl_keeps_the_linux_answer_when_powershell_fails(fakes: Fakes) -> None:
    fakes.wl_paste(["image/bmp"])
    fakes.powershell(b"", status=1)
    assert await read(fakes.env(WSL_DISTRO_NAME="Ubuntu")) == cb.ClipboardUndecodable()


async def test_wsl_without_any_working_tool_is_unavailable(fakes: Fakes) -> None:
    fakes.wl_paste(list_status=1, list_stderr="Failed to connect to a Wayland server\n")
    fakes.powershell(b"", status=1)
    assert await read(fakes.env(WSL_DISTRO_NAME="Ubuntu")) == cb.ClipboardUnavailable()
    assert [call.split()[0] for call in fakes.calls()] == ["wl-paste", "powershell.exe"]


@pytest.mark.parametrize(
    "stdout",
    [b"not base64 at all!\r\n", base64.b64encode(b"GIF89a this is not a png"), b"QUJD="],
)
async def test_powershell_output_that_is_not_a_png_cannot_be_decoded(
    fakes: Fakes, stdout: bytes
) -> None:
    fakes.powershell(stdout)
    assert await read(fakes.env(WSL_DISTRO_NAME="Ubuntu")) == cb.ClipboardUndecodable()


async def test_powershell_output_over_the_limit_is_refused(fakes: Fakes) -> None:
    fakes.powershell(base64.b64encode(PNG + b"\x00" * 30_000))
    result = await read(fakes.env(WSL_DISTRO_NAME="Ubuntu"), max_bytes=10_000)
    assert result == cb.ClipboardTooLarge(10_000)


# --------------------------------------------------------------------------------------------
# Notices and images
# --------------------------------------------------------------------------------------------


def test_notice_texts() -> None:
    assert cb.READING_NOTICE == "Reading image clipboard…"
    assert cb.notice_for(cb.ClipboardImage("image/png", PNG)) is None
    assert cb.notice_for(cb.ClipboardEmpty()) == "No image in the clipboard."
    assert cb.notice_for(cb.ClipboardUnavailable()) == (
        "Image clipboard is unavailable. On Linux, install wl-clipboard or xclip; "
        "on WSL, enable Windows clipboard access."
    )
    assert cb.notice_for(cb.ClipboardUndecodable()) == "The clipboard image could not be decoded."
    assert cb.notice_for(cb.ClipboardTooLarge(3 * 1024 * 1024)) == (
        "The clipboard image is larger than 3 MiB."
    )


def test_to_image_is_base64_without_a_data_uri_prefix() -> None:
    ids = iter(["img-1", "img-2"])
    image = cb.to_image(cb.ClipboardImage("image/png", PNG), new_id=lambda: next(ids))
    assert image == Image(id="img-1", mime_type="image/png", data=base64.b64encode(PNG).decode())
    assert not image.data.startswith("data:")
    assert base64.b64decode(image.data, validate=True) == PNG
    second = cb.to_image(cb.ClipboardImage("image/gif", GIF), new_id=lambda: next(ids))
    assert (second.id, second.mime_type) == ("img-2", "image/gif")


def test_to_image_ids_are_fresh_uuids_by_default() -> None:
    first = cb.to_image(cb.ClipboardImage("image/png", PNG))
    second = cb.to_image(cb.ClipboardImage("image/png", PNG))
    assert first.id != second.id
    assert len(first.id) == 36 and first.id.count("-") == 4


def test_sniffing() -> None:
    assert {cb.sniff_image_type(data) for data in BY_TYPE.values()} == set(cb.IMAGE_MIME_TYPES)
    assert [cb.sniff_image_type(data) for data in BY_TYPE.values()] == list(BY_TYPE)
    assert cb.sniff_image_type(b"") is None
    assert cb.sniff_image_type(b"\x89PNG\r\n") is None
    assert cb.sniff_image_type(b"BM\x00\x00") is None


def test_clipboard_image_repr_never_shows_the_bytes() -> None:
    assert repr(cb.ClipboardImage("image/png", PNG)) == (
        f"ClipboardImage(mime_type='image/png', data=<{len(PNG)} bytes>)"
    )
