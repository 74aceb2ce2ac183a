"""End to end: pasting clipboard images in a real terminal, with a fake ``wl-paste`` on PATH.

The installed ``pi-agent-ask ask --session`` runs in a tmux pane; the custom-answer editor
pastes two images (``Ctrl+V``), removes one (``Ctrl+Alt+D``), pastes again, submits; the
printed result and the session history carry the images.
"""

from __future__ import annotations

import base64
import json
import shlex
import sys
from pathlib import Path

import trio

from ..test_clipboard import png_1x1
from .test_e2e_ask import COMMAND, pane, pytestmark  # noqa: F401 - the e2e marks apply here

FAKE_WL_PASTE = """#!/bin/sh
# A clipboard that always holds the same PNG image.
case "$1" in
  --list-types) echo image/png ;;
  --type) cat {image} ;;
  *) exit 1 ;;
esac
"""

PAYLOAD = {
    "questions": [
        {
            "id": "shot",
            "label": "Screenshot",
            "prompt": "What does the broken page look like?",
            "options": [{"value": "blank", "label": "Blank page"}],
        }
    ]
}


async def test_paste_remove_and_submit_images(tmp_path: Path) -> None:
    image = tmp_path / "clip.png"
    image.write_bytes(png_1x1())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "wl-paste"
    fake.write_text(FAKE_WL_PASTE.format(image=shlex.quote(str(image))))
    fake.chmod(0o755)
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps(PAYLOAD))
    out, status, session = tmp_path / "out.json", tmp_path / "status", tmp_path / "s.pas"
    settings = tmp_path / "agent" / "extensions" / "pi-agent-ask.json"
    command = (
        f"env PATH={bin_dir}:$PATH WAYLAND_DISPLAY=wayland-test "
        f"{COMMAND} ask {payload} --settings {settings} --session {session} --output {out}; "
        f"echo $? > {status}; tmux -S {tmp_path / 'tmux.sock'} wait-for -S finished"
    )
    with trio.fail_after(60):
        async with pane(tmp_path, command, 100, 30) as term, trio.open_nursery() as nursery:
            finished = trio.Event()

            async def wait_finished() -> None:
                await term.tmux("wait-for", "finished")
                finished.set()

            nursery.start_soon(wait_finished)
            await term.wait_for("What does the broken page look like?")
            await term.keys("2")  # the custom row: its editor opens
            await term.wait_for("Type answer...")
            await term.keys("C-v")
            await term.wait_for("[1 image]")
            await term.keys("C-v")
            await term.wait_for("[2 images]")
            await term.keys("C-M-d")
            await term.wait_for(lambda s: "[1 image]" in s and "[2 images]" not in s)
            await term.literal("see attached")
            await term.keys("Enter")
            screen = await term.wait_for("Review your answers")
            assert "see attached [1 image]" in screen
            await term.keys("1")
            await term.wait_for("Press 1 again")
            await term.keys("1")
            await finished.wait()

    assert status.read_text().strip() == "0"
    result = json.loads(out.read_text())
    answer = result["details"]["answers"]["shot"]
    assert answer["customText"] == "see attached"
    [attached] = answer["customImages"]
    assert attached["mimeType"] == "image/png"
    assert base64.b64decode(attached["data"]) == png_1x1()
    blocks = result["content"]
    assert blocks[1]["type"] == "text" and "custom answer" in blocks[1]["text"]
    assert blocks[2] == {"type": "image", "mimeType": "image/png", "data": attached["data"]}
    assert result["structuredContent"]["answers"]["shot"]["images"] == [
        {"mimeType": "image/png", "data": attached["data"]}
    ]

    request_id = result["details"]["requestId"]
    read = await trio.run_process(
        [
            sys.executable,
            "-m",
            "pi_agent_ask",
            "history",
            "read",
            "--session",
            str(session),
            request_id,
            "shot",
        ],
        capture_stdout=True,
    )
    record = json.loads(read.stdout)["record"]
    assert record["status"] == "answered"
    assert json.dumps(record).count(attached["data"]) >= 1
