"""Clipboard images through the real runtime, headless.

A ``RecordingSurface`` stands in for the terminal: the tests send the form the commands keys
would send (open an editor, ``AttachImage`` with the open editor's serial, save, go to Review,
submit) and check what the agent receives -- tool results, background-answer messages, wait
results -- and what the session file keeps.
"""

from __future__ import annotations

import base64
import json
import shlex
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

from pi_agent_ask import clipboard as cb
from pi_agent_ask import open_runtime
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.types import Image
from pi_agent_ask.persistence.session_file import SessionFile

from .runtime_support import RecordingSurface, settings_file, settle
from .test_clipboard import GIF, PNG
from .test_resume import interrupted_session

GUARD = 20  # seconds; only stops a hang

PROMPT = "Which layout should the page use?"


def image(n: int, data: bytes = PNG) -> Image:
    """A clipboard image as the UI makes it, with a deterministic id (and distinct bytes:
    trailing bytes after the end of an image do not change its type)."""
    data += f"#{n}".encode()
    return cb.to_image(
        cb.ClipboardImage(cb.sniff_image_type(data) or "", data), new_id=lambda: f"img-{n}"
    )


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def question(qid: str = "layout", kind: str = "single", prompt: str = PROMPT) -> dict[str, Any]:
    return {
        "id": qid,
        "label": qid.capitalize(),
        "prompt": prompt,
        "type": kind,
        "options": [
            {"value": "grid", "label": "Grid"},
            {"value": "list", "label": "List"},
        ],
    }


def ask(*questions: dict[str, Any], background: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"questions": list(questions) or [question()]}
    if background:
        body["background"] = True
    return body


CUSTOM_ROW = 3  # Number(3): the "Type your own" row of a two-option question


@attrs.define
class Form:
    """One visible form, driven the way the key bindings drive it."""

    rt: Any
    surface: RecordingSurface
    flow: str

    @property
    def state(self) -> fs.FormState:
        return self.surface.states[self.flow]

    def serial(self) -> int:
        editor = self.state.editor
        assert editor is not None, "no editor is open"
        return editor.serial

    async def send(self, *commands: fs.Command) -> None:
        for command in commands:
            assert await self.rt.send_command(self.flow, command), command
            await settle()

    async def paste(self, attached: Image) -> None:
        """What the paste key does once the clipboard read finished: attach to the editor
        that was open when the read started."""
        await self.send(fs.AttachImage(attached, self.serial()))

    async def review_and(self, action: int) -> None:
        """Go to Review and press ``1`` (Submit) or ``2`` (Cancel) twice (double-press is on)."""
        await self.send(fs.SelectTab(self.state.review_tab), fs.Number(action), fs.Number(action))


@attrs.define
class Setup:
    rt: Any
    surface: RecordingSurface
    nursery: trio.Nursery
    results: dict[str, dict[str, Any]] = attrs.field(factory=dict)

    async def foreground(self, body: dict[str, Any], call: str = "c1") -> Form:
        async def run() -> None:
            self.results[call] = await self.rt.call_tool("ask_user", body, tool_call_id=call)

        self.nursery.start_soon(run)
        await settle()
        assert self.surface.visible == f"tool:{call}"
        return Form(self.rt, self.surface, f"tool:{call}")

    async def background(self, body: dict[str, Any], call: str = "c1") -> Form:
        receipt = await self.rt.call_tool("ask_user", {**body, "background": True}, call)
        assert receipt["details"]["status"] == "queued"
        await settle()
        assert self.surface.visible == f"tool:{call}"
        return Form(self.rt, self.surface, f"tool:{call}")


@asynccontextmanager
async def running(tmp_path: Path, session: Path | None = None) -> AsyncIterator[Setup]:
    surface = RecordingSurface()
    with trio.fail_after(GUARD):
        async with (
            open_runtime(session=session, settings=settings_file(tmp_path), surface=surface) as rt,
            trio.open_nursery() as nursery,
        ):
            yield Setup(rt, surface, nursery)


def image_blocks(content: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The content after the first text block as (kind, text-or-data) pairs."""
    out = []
    for block in content[1:]:
        if block["type"] == "text":
            out.append(("text", block["text"]))
        else:
            assert set(block) == {"type", "mimeType", "data"}
            out.append((block["mimeType"], block["data"]))
    return out


def no_image_data_in(value: Any, *images: Image) -> bool:
    text = json.dumps(value)
    return not any(img.data in text for img in images)


# --------------------------------------------------------------------------------------------
# Foreground results
# --------------------------------------------------------------------------------------------


async def test_a_pasted_image_alone_answers_the_question(tmp_path: Path) -> None:
    # The bytes come from the clipboard reader itself, through a fake wl-paste.
    tools = tmp_path / "bin"
    tools.mkdir()
    (tmp_path / "clip.png").write_bytes(PNG)
    fake = tools / "wl-paste"
    fake.write_text(
        '#!/bin/sh\nif [ "$1" = --list-types ]; then echo image/png; exit 0; fi\n'
        f"cat {shlex.quote(str(tmp_path / 'clip.png'))}\n"
    )
    fake.chmod(0o755)
    env = {"PATH": f"{tools}:/usr/bin:/bin", "WAYLAND_DISPLAY": "wayland-0"}

    async with running(tmp_path) as setup:
        form = await setup.foreground(ask())
        await form.send(fs.Number(CUSTOM_ROW))
        serial = form.serial()
        read = await cb.read_clipboard_image(env=env)
        assert isinstance(read, cb.ClipboardImage)
        pasted = cb.to_image(read, new_id=lambda: "img-1")
        await form.send(fs.AttachImage(pasted, serial), fs.EditorSubmit())
        # Image-only saved: the custom answer is selected and the form moved on to Review.
        assert form.state.on_review
        assert form.state.drafts[0].custom_images == (pasted,)
        await form.review_and(1)
    result = setup.results["c1"]
    request_id = result["details"]["requestId"]
    answer = result["details"]["answers"]["layout"]
    # Answered, with no synthetic values, labels or custom text.
    assert answer == {
        "values": [],
        "labels": [],
        "indices": [],
        "customImages": [{"id": "img-1", "mimeType": "image/png", "data": b64(PNG)}],
    }
    assert result["structuredContent"]["answers"] == {
        "layout": {
            "values": [],
            "labels": [],
            "images": [{"mimeType": "image/png", "data": b64(PNG)}],
        }
    }
    assert result["content"][0] == {
        "type": "text",
        "text": f"ask_user [{request_id}]\nLayout: [1 image]",
    }
    assert image_blocks(result["content"]) == [
        ("text", f"Image for [layout] {PROMPT} — custom answer:"),
        ("image/png", b64(PNG)),
    ]


async def test_custom_note_and_option_note_images_each_keep_their_owner(tmp_path: Path) -> None:
    custom, note, option_note = image(1), image(2, GIF), image(3)
    async with running(tmp_path) as setup:
        form = await setup.foreground(ask(question(kind="multi")))
        # Question note with text and an image.
        await form.send(fs.OpenQuestionNote(), fs.EditorChanged("see screenshot"))
        await form.paste(note)
        await form.send(fs.EditorSubmit())
        # Option note on List, which stays unselected.
        await form.send(fs.NextOption(), fs.OpenOptionNote())
        assert form.state.editor is not None and form.state.editor.option_value == "list"
        await form.paste(option_note)
        await form.send(fs.EditorSubmit())
        # Grid selected, and a custom answer with text and an image.
        await form.send(fs.Number(1), fs.NextOption(), fs.NextOption())
        assert form.state.editor is not None and form.state.editor.kind == "custom"
        await form.send(fs.EditorChanged("cards"))
        await form.paste(custom)
        await form.send(fs.EditorSubmit())
        await form.review_and(1)
    result = setup.results["c1"]
    answer = result["details"]["answers"]["layout"]
    assert answer["values"] == ["grid", "cards"]
    assert answer["customText"] == "cards"
    assert answer["note"] == "see screenshot"
    assert answer["customImages"] == [custom.to_json()]
    assert answer["noteImages"] == [note.to_json()]
    # The note on the unselected option is submitted, with its image.
    assert answer["optionNoteImages"] == {"list": [option_note.to_json()]}
    assert result["structuredContent"]["answers"]["layout"]["images"] == [
        {"mimeType": img.mime_type, "data": img.data} for img in (custom, note, option_note)
    ]
    assert image_blocks(result["content"]) == [
        ("text", f"Image for [layout] {PROMPT} — custom answer:"),
        ("image/png", custom.data),
        ("text", f"Image for [layout] {PROMPT} — question note:"),
        ("image/gif", note.data),
        ("text", f"Image for [layout] {PROMPT} — option note for List:"),
        ("image/png", option_note.data),
    ]
    summary = result["content"][0]["text"].splitlines()[1:]
    assert summary == [
        "Layout: Grid, cards [1 image]",
        "Layout note: see screenshot [1 image]",
        "Layout / List (not selected) note: [1 image]",
    ]


async def test_several_images_in_one_editor_and_removing_the_last(tmp_path: Path) -> None:
    async with running(tmp_path) as setup:
        form = await setup.foreground(ask())
        await form.send(fs.OpenQuestionNote())
        for n in (1, 2, 3):
            await form.paste(image(n))
        await form.send(fs.RemoveLastImage(), fs.EditorClose())
        # Reopening the note editor shows the saved images again.
        await form.send(fs.OpenQuestionNote())
        assert form.state.editor is not None
        assert form.state.editor.images == (image(1), image(2))
        await form.send(fs.EditorClose(), fs.Number(1))
        await form.review_and(1)
    answer = setup.results["c1"]["details"]["answers"]["layout"]
    assert answer["noteImages"] == [image(1).to_json(), image(2).to_json()]
    assert answer["values"] == ["grid"]


async def test_images_stay_with_their_editor_across_tabs(tmp_path: Path) -> None:
    async with running(tmp_path) as setup:
        form = await setup.foreground(ask(question("first"), question("second")))
        await form.send(fs.OpenQuestionNote())
        await form.paste(image(1))
        await form.send(fs.EditorClose(), fs.NextTab(), fs.OpenQuestionNote())
        await form.paste(image(2))
        await form.send(fs.EditorClose(), fs.PreviousTab())
        assert form.state.drafts[0].note_images == (image(1),)
        assert form.state.drafts[1].note_images == (image(2),)
        await form.review_and(1)
    answers = setup.results["c1"]["details"]["answers"]
    assert answers["first"]["noteImages"] == [image(1).to_json()]
    assert answers["second"]["noteImages"] == [image(2).to_json()]
    # Note-only entries: the questions stay unanswered.
    assert answers["first"]["values"] == [] and "customImages" not in answers["first"]
    text = setup.results["c1"]["content"][0]["text"]
    assert "First: (no answer)" in text and "Second: (no answer)" in text


async def test_deselected_custom_images_stay_in_the_draft_but_are_not_submitted(
    tmp_path: Path,
) -> None:
    session = tmp_path / "s.pas"
    async with running(tmp_path, session) as setup:
        form = await setup.background(ask(question(kind="multi")))
        await form.send(fs.Number(CUSTOM_ROW))
        await form.paste(image(1))
        await form.send(fs.EditorSubmit())
        assert form.state.drafts[0].custom_selected
        # Space on the saved custom row deselects it, keeping its image.
        await form.send(fs.Toggle(), fs.Number(2))
        draft = form.state.drafts[0]
        assert (draft.custom_selected, draft.custom_images, draft.selected) == (
            False,
            (image(1),),
            (1,),
        )
        # Hiding the panel saves the draft at once; reopening restores it, image included.
        await setup.rt.defer_queue()
        await settle()
        await setup.rt.show_queue()
        await settle()
        assert form.state.drafts[0] == draft
        setup.rt.agent_started()
        await form.review_and(1)
        [message] = await setup.rt.turn_boundary()
    answer = message["details"]["result"]["answers"]["layout"]
    assert answer == {"values": ["list"], "labels": ["List"], "indices": [2]}
    # No image blocks: the content is the text alone.
    assert isinstance(message["content"], str)
    # The draft journal kept the deselected image.
    drafts = [
        e.data for e in SessionFile.open(session, readonly=True).branch() if e.type == "ask:draft"
    ]
    assert drafts, "no draft was journaled"
    assert image(1).data in json.dumps(_thaw(drafts[-1]))


def _thaw(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_thaw(v) for v in value]
    return value


async def test_cancelling_strips_image_data_and_sends_no_image_blocks(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    images = (image(1), image(2), image(3))
    async with running(tmp_path, session) as setup:
        form = await setup.foreground(ask(question(kind="multi")))
        await form.send(fs.OpenQuestionNote(), fs.EditorChanged("keep this note"))
        await form.paste(images[0])
        await form.send(fs.EditorSubmit(), fs.OpenOptionNote())
        await form.paste(images[1])
        await form.send(fs.EditorSubmit(), fs.Number(1), fs.Number(CUSTOM_ROW))
        await form.paste(images[2])
        await form.send(fs.EditorSubmit())
        await form.review_and(2)
    result = setup.results["c1"]
    assert result["details"]["cancelled"] is True
    answer = result["details"]["answers"]["layout"]
    assert answer["note"] == "keep this note"
    assert not {"customImages", "noteImages", "optionNoteImages"} & set(answer)
    assert "images" not in result["structuredContent"]["answers"]["layout"]
    assert [block["type"] for block in result["content"]] == ["text"]
    assert no_image_data_in(result, *images)
    [completed] = [
        e.data
        for e in SessionFile.open(session, readonly=True).branch()
        if e.type == "ask:history-completed"
    ]
    assert no_image_data_in(_thaw(completed), *images)


# --------------------------------------------------------------------------------------------
# Background answers, waits, the session file
# --------------------------------------------------------------------------------------------


async def test_background_answers_carry_image_blocks(tmp_path: Path) -> None:
    async with running(tmp_path) as setup:
        setup.rt.agent_started()
        form = await setup.background(ask())
        await form.send(fs.Number(CUSTOM_ROW), fs.EditorChanged("like this"))
        await form.paste(image(1))
        await form.send(fs.EditorSubmit())
        await form.review_and(1)
        [message] = await setup.rt.turn_boundary()
    assert message["customType"] == "ask:background-answer"
    content = message["content"]
    assert content[0]["type"] == "text"
    assert "Background answer [" in content[0]["text"]
    assert content[0]["text"].endswith("\nLayout [layout]: like this [1 image]")
    assert image_blocks(content) == [
        ("text", f"Image for [layout] {PROMPT} — custom answer:"),
        ("image/png", image(1).data),
    ]
    answer = message["details"]["result"]["answers"]["layout"]
    assert answer["customImages"] == [image(1).to_json()]
    assert answer["customText"] == "like this"


async def test_a_text_only_boundary_leaves_image_answers_for_a_later_one(tmp_path: Path) -> None:
    """What a hook takes (text only): an answer with images waits, also once given back."""
    async with running(tmp_path) as setup:
        setup.rt.agent_started()
        form = await setup.background(ask())
        await form.send(fs.Number(CUSTOM_ROW), fs.EditorChanged("like this"))
        await form.paste(image(1))
        await form.send(fs.EditorSubmit())
        await form.review_and(1)
        assert await setup.rt.turn_boundary(text_only=True) == []
        [message] = await setup.rt.turn_boundary()
        assert image_blocks(message["content"])
        await setup.rt.give_back([message])
        assert await setup.rt.turn_boundary(text_only=True) == []
        assert await setup.rt.turn_boundary() == [message]


async def test_idle_wake_messages_carry_image_blocks(tmp_path: Path) -> None:
    async with running(tmp_path) as setup:
        setup.rt.agent_settled()
        form = await setup.background(ask())
        await form.send(fs.OpenQuestionNote())
        await form.paste(image(1))
        await form.send(fs.EditorSubmit(), fs.Number(1))
        await form.review_and(1)
        wake = setup.rt.wakeups.receive_nowait()
    assert image_blocks(wake["content"]) == [
        ("text", f"Image for [layout] {PROMPT} — question note:"),
        ("image/png", image(1).data),
    ]


async def test_background_answers_name_a_noted_option_by_its_label(tmp_path: Path) -> None:
    """The option's label comes from the request's params (the result holds values only)."""
    async with running(tmp_path) as setup:
        setup.rt.agent_started()
        form = await setup.background(ask())
        await form.send(fs.NextOption(), fs.OpenOptionNote())
        await form.paste(image(1))
        await form.send(fs.EditorSubmit(), fs.Number(1))
        await form.review_and(1)
        await settle()
        [message] = await setup.rt.turn_boundary()
    assert image_blocks(message["content"]) == [
        ("text", f"Image for [layout] {PROMPT} — option note for List:"),
        ("image/png", image(1).data),
    ]


async def test_wait_results_carry_image_blocks(tmp_path: Path) -> None:
    async with running(tmp_path) as setup:
        setup.rt.agent_started()
        form = await setup.background(ask())

        async def wait() -> None:
            setup.results["wait"] = await setup.rt.call_tool("wait_for_answers", {}, "w1")

        setup.nursery.start_soon(wait)
        await settle()
        await form.send(fs.NextOption(), fs.OpenOptionNote())
        await form.paste(image(1))
        await form.send(fs.EditorSubmit(), fs.Number(1))
        await form.review_and(1)
        await settle()
        # Delivered through the wait, so never again at a turn boundary.
        assert await setup.rt.turn_boundary() == []
    result = setup.results["wait"]
    assert result["details"]["status"] == "complete"
    [outcome] = result["details"]["results"]
    assert outcome["result"]["answers"]["layout"]["optionNoteImages"] == {
        "list": [image(1).to_json()]
    }
    assert image_blocks(result["content"]) == [
        ("text", f"Image for [layout] {PROMPT} — option note for List:"),
        ("image/png", image(1).data),
    ]


async def test_the_session_file_keeps_submitted_image_data(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    async with running(tmp_path, session) as setup:
        form = await setup.foreground(ask())
        await form.send(fs.Number(CUSTOM_ROW))
        await form.paste(image(1, GIF))
        await form.send(fs.EditorSubmit())
        await form.review_and(1)
    request_id = setup.results["c1"]["details"]["requestId"]
    entries = SessionFile.open(session, readonly=True).branch()
    [completed] = [_thaw(e.data) for e in entries if e.type == "ask:history-completed"]
    assert completed["requestId"] == request_id
    assert completed["result"]["answers"]["layout"]["customImages"] == [
        {"id": "img-1", "mimeType": "image/gif", "data": b64(GIF + b"#1")}
    ]


# --------------------------------------------------------------------------------------------
# Late reads
# --------------------------------------------------------------------------------------------


async def test_an_image_for_a_closed_editor_attaches_nowhere(tmp_path: Path) -> None:
    async with running(tmp_path) as setup:
        form = await setup.foreground(ask())
        # A paste starts in the custom editor ...
        await form.send(fs.Number(CUSTOM_ROW))
        stale = form.serial()
        # ... which closes before the read finishes; the note editor opens meanwhile.
        await form.send(fs.EditorClose(), fs.OpenQuestionNote())
        assert form.serial() != stale
        await form.send(fs.AttachImage(image(1), stale))
        assert form.state.editor is not None and form.state.editor.images == ()
        assert all(not d.custom_images and not d.note_images for d in form.state.drafts)
        # The same read for the editor that is open does attach.
        await form.paste(image(2))
        assert form.state.editor is not None and form.state.editor.images == (image(2),)
        # A stale read landing after the editor closed, on the navigation screen, is dropped.
        note_serial = form.serial()
        await form.send(fs.EditorSubmit())
        await form.send(fs.AttachImage(image(3), note_serial))
        assert form.state.editor is None
        assert form.state.drafts[0].note_images == (image(2),)
        await form.review_and(1)
        # After the form is gone, a late read has nowhere to go at all.
        assert (
            await setup.rt.send_command(form.flow, fs.AttachImage(image(4), note_serial)) is False
        )
    answer = setup.results["c1"]["details"]["answers"]["layout"]
    assert answer["noteImages"] == [image(2).to_json()]
    assert "customImages" not in answer
    assert no_image_data_in(setup.results["c1"], image(1), image(3), image(4))


# --------------------------------------------------------------------------------------------
# History, restarts and recovered forms
# --------------------------------------------------------------------------------------------


async def test_history_reads_and_exports_carry_the_images(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    settings = settings_file(tmp_path, historyTools=True)
    custom, note = image(1), image(2, GIF)
    surface = RecordingSurface()
    with trio.fail_after(GUARD):
        async with (
            open_runtime(session=session, settings=settings, surface=surface) as rt,
            trio.open_nursery() as nursery,
        ):
            setup = Setup(rt, surface, nursery)
            form = await setup.foreground(ask())
            await form.send(fs.OpenQuestionNote())
            await form.paste(note)
            await form.send(fs.EditorSubmit(), fs.Number(CUSTOM_ROW))
            await form.paste(custom)
            await form.send(fs.EditorSubmit())
            await form.review_and(1)
        request_id = setup.results["c1"]["details"]["requestId"]
        # A later run on the same session file reads and exports the journal.
        async with open_runtime(
            session=session, settings=settings, surface=RecordingSurface()
        ) as rt:
            read = await rt.call_tool(
                "read_ask_history", {"requestId": request_id, "questionId": "layout"}, "h1"
            )
            out = tmp_path / "history.md"
            export = await rt.call_tool("export_ask_history", {"path": str(out)}, "h2")
    assert "isError" not in export
    record = read["details"]["record"]
    assert json.dumps(record).count(custom.data) == 1
    # The JSON text leaves the bytes to the image blocks that follow it.
    assert no_image_data_in(read["content"][0], custom, note)
    assert image_blocks(read["content"]) == [
        ("text", f"Image for [layout] {PROMPT} — custom answer:"),
        ("image/png", custom.data),
        ("text", f"Image for [layout] {PROMPT} — question note:"),
        ("image/gif", note.data),
    ]
    markdown = out.read_text(encoding="utf-8")
    assert f"![Custom answer image 1](data:image/png;base64,{custom.data})" in markdown
    assert f"![Question note image 1](data:image/gif;base64,{note.data})" in markdown


async def test_an_undelivered_background_answer_keeps_its_images_across_a_restart(
    tmp_path: Path,
) -> None:
    session = tmp_path / "s.pas"
    async with running(tmp_path, session) as setup:
        setup.rt.agent_started()
        form = await setup.background(ask())
        await form.send(fs.Number(CUSTOM_ROW))
        await form.paste(image(1))
        await form.send(fs.EditorSubmit())
        await form.review_and(1)
        # The process ends before any turn boundary delivered the answer.
    async with running(tmp_path, session) as setup:
        # A new runtime starts idle: the recovered answer starts a turn of its own.
        await settle()
        message = setup.rt.wakeups.receive_nowait()
        assert await setup.rt.turn_boundary() == []
    assert message["customType"] == "ask:background-answer"
    assert image_blocks(message["content"]) == [
        ("text", f"Image for [layout] {PROMPT} — custom answer:"),
        ("image/png", image(1).data),
    ]


async def test_a_recovered_interrupted_form_delivers_its_images(tmp_path: Path) -> None:
    session = tmp_path / "s.pas"
    interrupted_session(session, call_id="call-7")
    async with running(tmp_path, session) as setup:
        await settle()
        form = Form(setup.rt, setup.surface, "tool:call-7")
        assert setup.surface.visible == form.flow
        await form.send(fs.Number(3))
        await form.paste(image(1))
        await form.send(fs.EditorSubmit(), fs.Number(1))
        await form.review_and(1)
        message = setup.rt.wakeups.receive_nowait()
    assert message["customType"] == "ask:resume-answer"
    assert message["details"]["result"]["answers"]["scope"]["customImages"] == [image(1).to_json()]
    assert image_blocks(message["content"]) == [
        ("text", "Image for [scope] Question scope? — custom answer:"),
        ("image/png", image(1).data),
    ]
