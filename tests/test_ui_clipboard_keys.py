"""Pasting images by key into the real form, with the real clipboard reader and fake tools.

A fake ``wl-paste`` stands first on the PATH the reader is given; keys go in through a pipe
input, the screen is read from the real output.
"""

from __future__ import annotations

import base64
import shlex
from pathlib import Path

import trio

from pi_agent_ask.clipboard import ClipboardResult, read_clipboard_image
from pi_agent_ask.ui.testing import asking

from .test_clipboard import png_1x1

CTRL_V = "\x16"
ESC = "\x1b"
ENTER = "\r"

QUESTION = {
    "id": "shot",
    "label": "Screenshot",
    "prompt": "What does it look like?",
    "options": [{"value": "blank", "label": "Blank page"}],
}

WL_PASTE = """#!/bin/sh
case "$1" in
  --list-types) {list} ;;
  --type) {read} ;;
esac
"""


def fake_clipboard(tmp_path: Path, *, list_types: str, read: str):  # type: ignore[no-untyped-def]
    """A clipboard reader over a fake ``wl-paste`` (``list_types`` / ``read`` are shell)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / "wl-paste"
    tool.write_text(WL_PASTE.format(list=list_types, read=read))
    tool.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "WAYLAND_DISPLAY": "wayland-test"}

    async def read_image() -> ClipboardResult:
        return await read_clipboard_image(env=env, timeout=2.0)

    return read_image


async def paste_once(tmp_path: Path, reader, wait_for: str) -> str:  # type: ignore[no-untyped-def]
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    with trio.fail_after(20):
        async with asking({"questions": [QUESTION]}, settings, clipboard=reader) as ask:
            await ask.wait("What does it look like?")
            ask.send("2")
            await ask.wait("Type answer...")
            ask.send("draft text", CTRL_V)
            await ask.wait(wait_for)
            screen = ask.term.text()
            assert "draft text" in screen  # a notice never clears what was typed
            ask.send("\x03", "\x03")  # dismiss (twice: the form is dirty)
            await ask.finished()
    return screen


async def test_an_empty_clipboard_says_so(tmp_path: Path) -> None:
    reader = fake_clipboard(tmp_path, list_types="echo text/plain", read="echo hello")
    await paste_once(tmp_path, reader, "No image in the clipboard.")


async def test_an_unavailable_clipboard_gives_the_install_hint(tmp_path: Path) -> None:
    reader = fake_clipboard(tmp_path, list_types="exit 1", read="exit 1")
    screen = await paste_once(tmp_path, reader, "Image clipboard is unavailable.")
    assert "wl-clipboard or xclip" in screen.replace("\n", " ")


async def test_a_non_image_pretending_to_be_png_is_refused(tmp_path: Path) -> None:
    reader = fake_clipboard(tmp_path, list_types="echo image/png", read="echo 'not a png'")
    screen = await paste_once(tmp_path, reader, "The clipboard image could not be decoded.")
    assert "[1 image]" not in screen


async def test_a_png_is_attached_and_submitted(tmp_path: Path) -> None:
    image = tmp_path / "clip.png"
    image.write_bytes(png_1x1())
    reader = fake_clipboard(
        tmp_path, list_types="echo image/png", read=f"cat {shlex.quote(str(image))}"
    )
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    with trio.fail_after(20):
        async with asking({"questions": [QUESTION]}, settings, clipboard=reader) as ask:
            await ask.wait("What does it look like?")
            ask.send("2")
            await ask.wait("Type answer...")
            ask.send(CTRL_V)
            await ask.wait("[1 image]")
            ask.send(ENTER)
            await ask.wait("Review your answers")
            ask.send("1", "1")
            status, result = await ask.finished()
    assert status == 0
    [attached] = result["details"]["answers"]["shot"]["customImages"]
    assert base64.b64decode(attached["data"]) == png_1x1()


async def test_a_slow_read_that_outlives_its_editor_attaches_nowhere(tmp_path: Path) -> None:
    image = tmp_path / "clip.png"
    image.write_bytes(png_1x1())
    started = tmp_path / "started"
    reader = fake_clipboard(
        tmp_path,
        list_types="echo image/png",
        read=f"touch {shlex.quote(str(started))}; sleep 1; cat {shlex.quote(str(image))}",
    )
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    with trio.fail_after(20):
        async with asking({"questions": [QUESTION]}, settings, clipboard=reader) as ask:
            await ask.wait("What does it look like?")
            ask.send("2")
            await ask.wait("Type answer...")
            ask.send("words", CTRL_V)
            await ask.wait("Reading image clipboard")
            ask.send(ESC)  # close the editor while the read is still running
            await ask.wait_gone("> words")
            ask.send("\x1b[A", "n")  # another editor (a note on option 1) opens meanwhile
            await ask.wait("Add a note...")
            await trio.sleep(1.5)  # the slow read finishes now, into no editor
            assert "[1 image]" not in ask.term.text()
            ask.send(ESC, "\t")
            await ask.wait("Review your answers")
            ask.send("1", "1")
            status, result = await ask.finished()
    assert started.exists()
    assert status == 0
    answer = result["details"]["answers"]["shot"]
    assert answer["customText"] == "words"
    assert "customImages" not in answer and "optionNoteImages" not in answer
