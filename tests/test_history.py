"""Session question history: records, statuses, list/read/export, and the tools in a runtime.

Sessions are real session files holding the entries the runtime writes (built with the journal's
own builders and ``build_result``), so what is read here is what a run leaves behind.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from pi_agent_ask import open_runtime
from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.actors.records import AskRequest, Outcome
from pi_agent_ask.form.result import AskResult, build_result
from pi_agent_ask.form.types import AskParams, Draft, Image
from pi_agent_ask.form.validate import validate_ask_params
from pi_agent_ask.persistence import history as h
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.session_file import Entry, SessionFile

from .runtime_support import auto_answer, settings_file

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mP8/x8AAwMCAO+aH9sAAAAASUVORK5CYII="
CREATED = "2026-01-02T03:04:05.678Z"


# --------------------------------------------------------------------------------------------
# Building realistic journals
# --------------------------------------------------------------------------------------------


def params_of(arguments: Mapping[str, Any]) -> AskParams:
    validation = validate_ask_params(dict(arguments))
    assert validation.ok, validation.issues
    assert validation.params is not None
    return validation.params


SCOPE = params_of(
    {
        "title": "Choose scope",
        "questions": [
            {
                "id": "scope",
                "prompt": "Which **scope**?",
                "context": "Original context\nSecond line",
                "options": [
                    {"value": "small", "label": "Small", "description": "Keep it small"},
                    {"value": "large", "label": "Large", "recommended": True},
                ],
            }
        ],
    }
)


def simple(prompt: str = "Pick one?", qid: str = "q") -> AskParams:
    return params_of(
        {
            "questions": [
                {
                    "id": qid,
                    "prompt": prompt,
                    "options": [
                        {"value": "yes", "label": "Yes"},
                        {"value": "no", "label": "No"},
                    ],
                }
            ]
        }
    )


def ask(
    session: SessionFile,
    params: AskParams,
    *,
    background: bool = False,
    tool_call_id: str | None = "call",
    created_at: str = CREATED,
) -> AskRequest:
    """Journal a request as the runtime does before it waits for input."""
    request = AskRequest(
        request_id=str(uuid.uuid4()),
        params=params,
        background=background,
        created_at=created_at,
        tool_call_id=tool_call_id,
        source="background" if background else "tool",
    )
    entries: list[tuple[str, Mapping[str, Any]]] = [
        (jr.PAYLOAD, jr.payload_entry(params, tool_call_id, created_at)),
        (jr.HISTORY_REQUEST, jr.history_request_entry(request)),
    ]
    if background:
        entries.append((jr.QUEUED, jr.queued_entry(request)))
    session.append_many(entries)
    return request


def finish(
    session: SessionFile,
    request: AskRequest,
    drafts: Sequence[Draft] | Mapping[str, Draft] = (),
    *,
    cancelled: bool = False,
    error: str | None = None,
    presented_types: Sequence[Any] | None = None,
) -> AskResult | None:
    """Journal an outcome as the runtime does before delivering it."""
    result = None
    if error is None:
        result = build_result(
            request.params,
            drafts,
            presented_types=presented_types,
            cancelled=cancelled,
            request_id=request.request_id,
        )
    outcome = Outcome(request.request_id, result=result, error=error)
    session.append_many(jr.completion_entries(outcome, background=request.background))
    return result


def image(n: int) -> Image:
    return Image(id=f"img-{n}", mime_type="image/png", data=PNG)


@pytest.fixture
def session(tmp_path: Path) -> Iterator[SessionFile]:
    with SessionFile.open(tmp_path / "session.pias") as opened:
        yield opened


def branch(session: SessionFile) -> tuple[Entry, ...]:
    return session.branch()


def statuses(session: SessionFile) -> list[str]:
    return [record.status for record in h.build_records(branch(session))]


# --------------------------------------------------------------------------------------------
# Records and statuses
# --------------------------------------------------------------------------------------------


def test_statuses_of_every_outcome(session: SessionFile) -> None:
    answered = ask(session, simple())
    finish(session, answered, [Draft(selected=(0,))])
    empty_submit = ask(session, simple())
    finish(session, empty_submit, [Draft()])
    note_only = ask(session, simple())
    finish(session, note_only, [Draft(note="Not a decision")])
    skipped = ask(session, simple())
    finish(session, skipped, [Draft(skipped=True)])
    cancelled = ask(session, simple())
    finish(session, cancelled, [Draft(selected=(1,))], cancelled=True)
    failed = ask(session, simple())
    finish(session, failed, error="UI disconnected")
    ask(session, simple())  # no outcome yet

    records = h.build_records(branch(session))
    assert [r.status for r in records] == [
        "answered",
        "skipped",
        "skipped",
        "skipped",
        "cancelled",
        "error",
        "waiting",
    ]
    assert [r.has_answer for r in records] == [True, False, False, False, False, False, False]
    assert records[2].answer is not None and records[2].answer.note == "Not a decision"
    # An explicitly skipped question carries nothing; a cancellation is not an answer even
    # when it kept a partial selection.
    assert records[3].answer is None
    assert records[4].answer is not None and records[4].answer.values == ("no",)
    assert records[5].error == "UI disconnected"
    assert records[6].answer is None and records[6].error is None


def test_custom_text_and_image_only_custom_answers_are_answers(session: SessionFile) -> None:
    text = ask(session, simple())
    finish(session, text, [Draft(custom_text="Something else", custom_selected=True)])
    pictured = ask(session, simple())
    finish(session, pictured, [Draft(custom_selected=True, custom_images=(image(1),))])
    deselected = ask(session, simple(), background=True)
    finish(session, deselected, [Draft(custom_text="kept in the draft", custom_selected=False)])
    assert statuses(session) == ["answered", "answered", "skipped"]


def test_note_only_answers_are_kept_but_not_answers(session: SessionFile) -> None:
    request = ask(session, simple())
    finish(session, request, [Draft(note="Needs examples", option_notes={"no": "Too slow"})])
    entries = branch(session)
    listed = h.list_history(entries)
    assert [(r["status"], r["hasAnswer"]) for r in listed["records"]] == [("skipped", False)]
    assert h.list_history(entries, answered_only=True) == {"total": 0, "offset": 0, "records": []}
    record = h.read_history(entries, request.request_id, "q")["record"]
    assert record["answer"] == {
        "values": [],
        "labels": [],
        "indices": [],
        "note": "Needs examples",
        "optionNotes": {"no": "Too slow"},
    }


def test_request_keys_do_not_collide_when_call_and_question_ids_repeat(
    session: SessionFile,
) -> None:
    first = ask(session, SCOPE, tool_call_id="reused")
    finish(session, first, [Draft(selected=(0,))])
    second = ask(session, SCOPE, tool_call_id="reused", background=True)
    assert first.request_id != second.request_id
    records = h.build_records(branch(session))
    assert [(r.request_id, r.question_id, r.status, r.background) for r in records] == [
        (first.request_id, "scope", "answered", False),
        (second.request_id, "scope", "waiting", True),
    ]


def test_latest_completion_wins(session: SessionFile) -> None:
    request = ask(session, simple())
    finish(session, request, error="UI disconnected")
    finish(session, request, [Draft(selected=(1,))])
    [record] = h.build_records(branch(session))
    assert (record.status, record.error) == ("answered", None)
    assert record.answer is not None and record.answer.labels == ("No",)


def test_answers_are_looked_up_by_the_question_s_own_id(session: SessionFile) -> None:
    request = ask(session, simple(qid="constructor"))
    other = ask(session, simple(qid="__class__"))
    finish(session, request, [Draft()])
    finish(session, other, [Draft()])
    assert statuses(session) == ["skipped", "skipped"]


def test_malformed_entries_are_ignored(session: SessionFile) -> None:
    session.append(jr.HISTORY_REQUEST, {"requestId": 7, "questions": []})
    session.append(jr.HISTORY_REQUEST, {"requestId": "x", "questions": [{"id": "q"}]})
    request = ask(session, simple())
    session.append(jr.HISTORY_COMPLETED, {"requestId": request.request_id, "result": {"x": 1}})
    assert [(r.question_id, r.status) for r in h.build_records(branch(session))] == [
        ("q", "waiting")
    ]
    # A malformed later completion does not hide a well-formed earlier one.
    finish(session, request, [Draft(selected=(0,))])
    session.append(jr.HISTORY_COMPLETED, {"requestId": request.request_id, "result": {"x": 1}})
    assert statuses(session) == ["answered"]


def test_final_result_decides_the_question_type(session: SessionFile) -> None:
    request = ask(session, simple())
    finish(session, request, [Draft(selected=(0, 1))], presented_types=["multi"])
    [record] = h.build_records(branch(session))
    assert record.question_json()["type"] == "single"
    assert record.question_json()["presentedType"] == "multi"


# --------------------------------------------------------------------------------------------
# Branches, compaction, reopening
# --------------------------------------------------------------------------------------------


def test_history_follows_the_current_branch_only(session: SessionFile, tmp_path: Path) -> None:
    common = ask(session, simple("Common?"))
    finish(session, common, [Draft(selected=(0,))])
    ancestor = session.leaf_id
    left = ask(session, simple("Left?"), background=True)
    left_leaf = session.leaf_id
    session.move_leaf(ancestor)
    right = ask(session, simple("Right?"), background=True)
    session.compact("Summary without answers")

    def ids() -> list[str]:
        return [r.request_id for r in h.build_records(branch(session))]

    assert ids() == [common.request_id, right.request_id]
    with pytest.raises(h.HistoryError) as raised:
        h.read_history(branch(session), left.request_id, "q")
    assert str(raised.value) == (f"Question not found on the current branch: {left.request_id} / q")
    assert h.list_history(branch(session), query="Left?")["total"] == 0

    forked = session.fork(tmp_path / "fork.pias")
    with forked:
        assert [r.request_id for r in h.build_records(forked.branch())] == ids()

    session.move_leaf(left_leaf)
    assert ids() == [common.request_id, left.request_id]
    assert h.build_records(SessionFile.in_memory().branch()) == []


def test_compaction_hides_nothing(session: SessionFile) -> None:
    request = ask(session, SCOPE)
    finish(session, request, [Draft(selected=(1,), note="Keep this note")])
    before = h.list_history(branch(session))
    session.compact("A summary that mentions no answers")
    assert h.list_history(branch(session)) == before
    assert h.list_history(branch(session), query="keep this note")["total"] == 1


def test_records_survive_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "reopen.pias"
    with SessionFile.open(path) as session:
        session.append("user-message", {"text": "Started"})
        request = ask(session, SCOPE)
        finish(
            session,
            request,
            [Draft(custom_text="Custom text", custom_selected=True, custom_images=(image(1),))],
        )
        written = [r.to_json() for r in h.build_records(session.branch())]
    with SessionFile.open(path, readonly=True) as reopened:
        read = [r.to_json() for r in h.build_records(reopened.branch())]
    assert read == written
    assert read[0]["answer"]["customImages"][0]["data"] == PNG


# --------------------------------------------------------------------------------------------
# list_ask_history
# --------------------------------------------------------------------------------------------


def test_paging_follows_next_offset(session: SessionFile) -> None:
    answered = ask(session, simple())
    finish(session, answered, [Draft(selected=(0,))])
    waiting = ask(session, simple(), background=True)
    entries = branch(session)

    first = h.list_history(entries, limit=1)
    assert first == {
        "total": 2,
        "offset": 0,
        "nextOffset": 1,
        "records": [
            {
                "requestId": answered.request_id,
                "questionId": "q",
                "createdAt": CREATED,
                "background": False,
                "status": "answered",
                "label": "Q1",
                "prompt": "Pick one?",
                "hasAnswer": True,
            }
        ],
    }
    second = h.list_history(entries, offset=first["nextOffset"], limit=1)
    assert "nextOffset" not in second
    assert second["total"] == 2 and second["offset"] == 1
    assert [(r["requestId"], r["status"]) for r in second["records"]] == [
        (waiting.request_id, "waiting")
    ]
    assert h.list_history(entries, offset=5)["records"] == []


def test_default_limit_is_fifty(session: SessionFile) -> None:
    for _ in range(51):
        ask(session, simple())
    page = h.list_history(branch(session))
    assert (page["total"], len(page["records"]), page["nextOffset"]) == (51, 50, 50)


def test_limit_and_offset_are_checked() -> None:
    with pytest.raises(h.HistoryError, match="limit"):
        h.list_history((), limit=201)
    with pytest.raises(h.HistoryError, match="limit"):
        h.list_history((), limit=0)
    with pytest.raises(h.HistoryError, match="offset"):
        h.list_history((), offset=-1)


def test_query_is_trimmed_case_insensitive_and_covers_notes(session: SessionFile) -> None:
    noted = ask(session, SCOPE)
    finish(
        session,
        noted,
        [Draft(selected=(1,), option_notes={"small": "Known note"}, note_images=(image(1),))],
    )
    other = ask(session, simple())
    finish(session, other, [Draft(selected=(0,))])
    entries = branch(session)

    found = h.list_history(entries, query="  KNOWN NOTE ")
    assert (found["total"], found["records"][0]["requestId"]) == (1, noted.request_id)
    assert h.list_history(entries, query="original context")["total"] == 1
    assert h.list_history(entries, query=other.request_id.upper())["total"] == 1
    assert h.list_history(entries, query="answered")["total"] == 2
    assert h.list_history(entries, query="   ")["total"] == 2
    assert h.list_history(entries, query="no such words")["total"] == 0
    # Image bytes are not text anyone searches for.
    assert h.list_history(entries, query="AAAAC0lEQVR42mP8")["total"] == 0


def test_answered_only_keeps_committed_answers(session: SessionFile) -> None:
    for drafts, cancelled in (
        ([Draft(selected=(0,))], False),
        ([Draft(note="only a note")], False),
        ([Draft(selected=(0,))], True),
        ([Draft(skipped=True)], False),
    ):
        finish(session, ask(session, simple()), drafts, cancelled=cancelled)
    ask(session, simple())
    listed = h.list_history(branch(session), answered_only=True)
    assert listed["total"] == 1
    assert [r["status"] for r in listed["records"]] == ["answered"]


# --------------------------------------------------------------------------------------------
# read_ask_history
# --------------------------------------------------------------------------------------------


def pictured_answer(session: SessionFile) -> AskRequest:
    request = ask(session, SCOPE)
    finish(
        session,
        request,
        [
            Draft(
                selected=(1,),
                custom_text="Also this",
                custom_selected=True,
                custom_images=(image(1),),
                note="Question text",
                note_images=(image(2),),
                option_notes={"small": "Unselected note", "large": "Selected note"},
                option_note_images={"small": (image(3),)},
            )
        ],
        presented_types=["multi"],
    )
    return request


def test_read_returns_the_full_record(session: SessionFile) -> None:
    request = pictured_answer(session)
    record = h.read_history(branch(session), request.request_id, "scope")["record"]
    stored = {"id": "img-1", "mimeType": "image/png", "data": PNG}
    assert record == {
        "requestId": request.request_id,
        "questionId": "scope",
        "title": "Choose scope",
        "createdAt": CREATED,
        "background": False,
        "question": {
            "id": "scope",
            "label": "Q1",
            "prompt": "Which **scope**?",
            "type": "single",
            "presentedType": "multi",
            "context": "Original context\nSecond line",
            "options": [
                {"value": "small", "label": "Small", "description": "Keep it small"},
                {"value": "large", "label": "Large", "recommended": True},
            ],
        },
        "status": "answered",
        "hasAnswer": True,
        "answer": {
            "values": ["large", "Also this"],
            "labels": ["Large", "Also this"],
            "indices": [2],
            "customText": "Also this",
            "note": "Question text",
            "optionNotes": {"small": "Unselected note", "large": "Selected note"},
            "customImages": [stored],
            "noteImages": [stored | {"id": "img-2"}],
            "optionNoteImages": {"small": [stored | {"id": "img-3"}]},
        },
    }


def test_read_errors_name_the_missing_key(session: SessionFile) -> None:
    request = ask(session, simple())
    entries = branch(session)
    for request_id, question_id in (("missing", "q"), (request.request_id, "other")):
        with pytest.raises(h.HistoryError) as raised:
            h.read_history(entries, request_id, question_id)
        assert str(raised.value) == (
            f"Question not found on the current branch: {request_id} / {question_id}"
        )


def test_read_content_carries_image_blocks_and_hides_bytes_in_text(session: SessionFile) -> None:
    request = pictured_answer(session)
    [record] = h.build_records(branch(session))
    content = h.read_result_content(record)
    text = content[0]["text"]
    assert PNG not in text
    assert json.loads(text)["record"]["answer"]["customImages"][0] == {
        "id": "img-1",
        "mimeType": "image/png",
        "data": "[image bytes in structuredContent]",
    }
    assert content[1:] == [
        {"type": "text", "text": "Image for [scope] Which **scope**? — custom answer:"},
        {"type": "image", "mimeType": "image/png", "data": PNG},
        {"type": "text", "text": "Image for [scope] Which **scope**? — question note:"},
        {"type": "image", "mimeType": "image/png", "data": PNG},
        {"type": "text", "text": "Image for [scope] Which **scope**? — option note for Small:"},
        {"type": "image", "mimeType": "image/png", "data": PNG},
    ]
    assert request.request_id in text


def test_tool_text_replaces_every_string_named_data() -> None:
    data = {"data": "secret", "nested": [{"data": "bytes", "keep": "data"}], "n": {"data": 3}}
    assert h.tool_text(data) == (
        '{"data":"[image bytes in structuredContent]","nested":[{"data":"[image bytes in '
        'structuredContent]","keep":"data"}],"n":{"data":3}}'
    )
    assert data["data"] == "secret"


# --------------------------------------------------------------------------------------------
# export_ask_history
# --------------------------------------------------------------------------------------------

SMALL_EXPORT = """# Ask history

## Question 1

Status: answered

Created: 2026-01-02T03:04:05.678Z

Background: false

### Request key

```text
{rid}
```

### Question key

```text
scope
```

### Form title

```text
Choose scope
```

### Label

```text
Q1
```

### Question

```text
Which **scope**?
```

### Context

```text
Original context
Second line
```

Type: single

Presented type: single

### Option 1

### Value

```text
small
```

### Label

```text
Small
```

### Description

```text
Keep it small
```

### Option 2

### Value

```text
large
```

### Label

```text
Large
```

Recommended: true

### Answer

Selected positions: [1]

### Selected value 1

```text
small
```

### Selected value 2

````text
Use ``` fences
````

### Selected label 1

```text
Small
```

### Selected label 2

````text
Use ``` fences
````

### Custom answer

````text
Use ``` fences
````

### Question note

```text
Keep this note
```

### Noted option value

```text
large
```

### Option note

```text
Not this one
```
"""


def test_export_format_is_exact(session: SessionFile, tmp_path: Path) -> None:
    request = ask(session, SCOPE)
    finish(
        session,
        request,
        [
            Draft(
                selected=(0,),
                custom_text="Use ``` fences",
                custom_selected=True,
                note="Keep this note",
                option_notes={"large": "Not this one"},
            )
        ],
    )
    target = tmp_path / "export.md"
    result = h.export_history(branch(session), str(target), None, tmp_path)
    assert result == {
        "path": str(target),
        "keys": [{"requestId": request.request_id, "questionId": "scope"}],
    }
    expected = SMALL_EXPORT.replace("{rid}", request.request_id)
    # The fence of a block is longer than any backtick run inside it, so the custom answer's
    # block opens with four backticks.
    for line in ("````text", "Use ``` fences", "````"):
        assert line in expected.splitlines()
    assert target.read_text(encoding="utf-8") == expected


def test_export_everything_with_every_status(session: SessionFile, tmp_path: Path) -> None:
    finish(session, ask(session, SCOPE, background=True), [Draft(skipped=True)])
    finish(session, ask(session, simple("Broken?")), error="UI disconnected")
    ask(session, simple("Still open?"))
    target = tmp_path / "all.md"
    result = h.export_history(branch(session), str(target), None, tmp_path)
    assert len(result["keys"]) == 3
    content = target.read_text(encoding="utf-8")
    assert content.startswith("# Ask history\n\n## Question 1\n\nStatus: skipped\n\n")
    assert content.count("No committed answer.") == 3
    assert "## Question 2\n\nStatus: error\n\n" in content
    assert "### Error\n\n```text\nUI disconnected\n```" in content
    assert "## Question 3\n\nStatus: waiting\n\n" in content
    assert "Background: true" in content
    assert "Mode:" not in content
    assert content.endswith("No committed answer.\n")


def test_export_of_an_empty_history_is_a_heading(tmp_path: Path) -> None:
    target = tmp_path / "empty.md"
    assert h.export_history((), "empty.md", None, tmp_path) == {"path": str(target), "keys": []}
    assert target.read_text(encoding="utf-8") == "# Ask history\n"


def test_export_embeds_images_as_data_uris(session: SessionFile, tmp_path: Path) -> None:
    pictured_answer(session)
    target = tmp_path / "images.md"
    h.export_history(branch(session), str(target), None, tmp_path)
    content = target.read_text(encoding="utf-8")
    uri = f"data:image/png;base64,{PNG}"
    assert f"### Custom answer image 1\n\n![Custom answer image 1]({uri})" in content
    assert f"### Question note image 1\n\n![Question note image 1]({uri})" in content
    assert (
        "### Image note option value\n\n```text\nsmall\n```\n\n"
        f"### Option note image 1\n\n![Option note image 1]({uri})"
    ) in content
    assert "Presented type: multi" in content
    # Images follow their own field: custom answer, then its images, then the note.
    assert content.index("### Custom answer\n") < content.index("### Custom answer image 1")
    assert content.index("### Custom answer image 1") < content.index("### Question note\n")


def test_export_selection_is_deduplicated_in_journal_order(
    session: SessionFile, tmp_path: Path
) -> None:
    first = ask(session, simple("First?"))
    second = ask(session, simple("Do not export this"))
    third = ask(session, simple("Third?"))
    keys = [
        {"requestId": third.request_id, "questionId": "q"},
        {"requestId": first.request_id, "questionId": "q"},
        {"requestId": third.request_id, "questionId": "q"},
    ]
    result = h.export_history(branch(session), "selected.md", keys, tmp_path)
    assert result["keys"] == [
        {"requestId": first.request_id, "questionId": "q"},
        {"requestId": third.request_id, "questionId": "q"},
    ]
    content = (tmp_path / "selected.md").read_text(encoding="utf-8")
    assert "Do not export this" not in content and second.request_id not in content
    assert content.index("First?") < content.index("Third?")
    assert content.count("\n## Question ") == 2


def test_one_bad_key_creates_no_file(session: SessionFile, tmp_path: Path) -> None:
    first = ask(session, simple())
    keys = [
        {"requestId": first.request_id, "questionId": "q"},
        {"requestId": "missing", "questionId": "q"},
    ]
    with pytest.raises(h.HistoryError) as raised:
        h.export_history(branch(session), "bad.md", keys, tmp_path)
    assert str(raised.value) == "Question not found on the current branch: missing / q"
    assert not (tmp_path / "bad.md").exists()
    with pytest.raises(h.HistoryError) as raised:
        h.export_history(branch(session), "empty.md", [], tmp_path)
    assert str(raised.value) == ("Select at least one question or omit keys to export all history.")
    assert not (tmp_path / "empty.md").exists()


def test_blank_path_is_refused(tmp_path: Path) -> None:
    for path in ("", "   "):
        with pytest.raises(h.HistoryError) as raised:
            h.export_history((), path, None, tmp_path)
        assert str(raised.value) == "An export path is required."
    assert list(tmp_path.iterdir()) == []


def test_existing_file_is_never_replaced(session: SessionFile, tmp_path: Path) -> None:
    ask(session, simple())
    target = tmp_path / "taken.md"
    target.write_text("Keep existing data")
    with pytest.raises(h.HistoryError, match="already exists"):
        h.export_history(branch(session), str(target), None, tmp_path)
    assert target.read_text() == "Keep existing data"


def test_symlink_at_destination_is_not_followed(session: SessionFile, tmp_path: Path) -> None:
    ask(session, simple())
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "link.md"
    link.symlink_to(victim)
    dangling = tmp_path / "dangling.md"
    dangling.symlink_to(tmp_path / "would-be-created.md")
    for destination in (link, dangling):
        with pytest.raises(h.HistoryError, match="already exists"):
            h.export_history(branch(session), str(destination), None, tmp_path)
    assert victim.read_text() == "precious"
    assert not (tmp_path / "would-be-created.md").exists()
    assert link.is_symlink() and dangling.is_symlink()


def test_missing_parent_directory_is_an_error(session: SessionFile, tmp_path: Path) -> None:
    ask(session, simple())
    with pytest.raises(h.HistoryError) as raised:
        h.export_history(branch(session), "absent/export.md", None, tmp_path)
    assert str(raised.value) == f"The export directory does not exist: {tmp_path / 'absent'}"
    assert not (tmp_path / "absent").exists()


def test_a_parent_that_takes_no_file_is_not_said_to_be_missing(
    session: SessionFile, tmp_path: Path
) -> None:
    """Only a missing directory is reported missing: a regular file on the way is not a
    directory, and a directory that takes no new file (``/proc``) says the system's reason."""
    ask(session, simple())
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(h.HistoryError) as on_a_file:
        h.export_history(branch(session), "notes.txt/export.md", None, tmp_path)
    assert str(on_a_file.value) == (
        f"The export directory is not a directory: {tmp_path / 'notes.txt'}"
    )
    assert (tmp_path / "notes.txt").read_text() == "mine"
    if not Path("/proc/self").is_dir():
        return  # no procfs here
    with pytest.raises(h.HistoryError) as in_proc:
        h.export_history(branch(session), "/proc/export.md", None, tmp_path)
    assert str(in_proc.value) == (
        "Could not create the export file /proc/export.md: No such file or directory"
    )


def test_relative_paths_resolve_against_cwd_and_files_are_private(
    session: SessionFile, tmp_path: Path
) -> None:
    ask(session, simple())
    work = tmp_path / "work"
    (work / "out").mkdir(parents=True)
    result = h.export_history(branch(session), "out/../out/history.md", None, work)
    target = work / "out" / "history.md"
    assert result["path"] == str(target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert target.read_text(encoding="utf-8").startswith("# Ask history\n")


def test_a_failed_write_leaves_no_file(
    session: SessionFile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ask(session, simple())
    real_write = os.write
    calls = 0

    def full_disk(fd: int, data: Any) -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            return real_write(fd, bytes(data[:10]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(h.HistoryError) as raised:
        h.export_history(branch(session), "full.md", None, tmp_path)
    monkeypatch.undo()
    assert calls == 2
    assert str(raised.value) == (
        f"Could not write the export file {tmp_path / 'full.md'}: {os.strerror(errno.ENOSPC)}"
    )
    assert not (tmp_path / "full.md").exists()


# --------------------------------------------------------------------------------------------
# Through the runtime
# --------------------------------------------------------------------------------------------

FORM = {
    "title": "Release",
    "questions": [
        {
            "id": "scope",
            "prompt": "Which **scope**?",
            "options": [{"value": "small", "label": "Small"}, {"value": "large", "label": "Large"}],
        },
        {"id": "later", "prompt": "Anything else?", "options": [{"value": "no", "label": "No"}]},
    ],
}


async def test_history_tools_in_a_runtime(tmp_path: Path) -> None:
    session_path = tmp_path / "run.pias"
    settings = settings_file(tmp_path, historyTools=True)
    work = tmp_path / "work"
    work.mkdir()

    def decide(started: dict[str, Any]) -> dict[str, Any] | None:
        if started["flowId"] != "tool:c1":
            return None  # the background form stays open: its record is waiting
        return {
            "kind": "answer",
            "answers": {
                "scope": {"values": ["large"], "optionNotes": {"small": "Known note"}},
                "later": {"skipped": True},
            },
        }

    with trio.fail_after(20):
        async with open_runtime(
            session=session_path, mode="tui", settings=settings, surface=NullSurface(), cwd=work
        ) as rt:
            auto_answer(rt.events, decide)
            asked = await rt.call_tool("ask_user", FORM, tool_call_id="c1")
            request_id = asked["details"]["requestId"]
            queued = await rt.call_tool("ask_user", {**FORM, "background": True}, tool_call_id="c2")
            queued_id = queued["details"]["requestId"]

            listed = await rt.call_tool("list_ask_history", {})
            found = await rt.call_tool("list_ask_history", {"query": "KNOWN NOTE"})
            answered = await rt.call_tool("list_ask_history", {"answeredOnly": True, "limit": 1})
            read = await rt.call_tool(
                "read_ask_history", {"requestId": request_id, "questionId": "scope"}
            )
            missing = await rt.call_tool(
                "read_ask_history", {"requestId": queued_id, "questionId": "nope"}
            )
            exported = await rt.call_tool(
                "export_ask_history",
                {
                    "path": "history.md",
                    "keys": [
                        {"requestId": queued_id, "questionId": "scope"},
                        {"requestId": request_id, "questionId": "scope"},
                        {"requestId": request_id, "questionId": "scope"},
                    ],
                },
            )
            again = await rt.call_tool("export_ask_history", {"path": "history.md"})
            empty = await rt.call_tool("export_ask_history", {"path": "x.md", "keys": []})
            blank = await rt.call_tool("export_ask_history", {"path": " "})
            bad = await rt.call_tool("list_ask_history", {"limit": 500})

    assert [
        (r["requestId"], r["questionId"], r["status"], r["hasAnswer"])
        for r in listed["structuredContent"]["records"]
    ] == [
        (request_id, "scope", "answered", True),
        (request_id, "later", "skipped", False),
        (queued_id, "scope", "waiting", False),
        (queued_id, "later", "waiting", False),
    ]
    assert listed["details"] == listed["structuredContent"]
    assert json.loads(listed["content"][0]["text"]) == listed["structuredContent"]
    assert [r["questionId"] for r in found["details"]["records"]] == ["scope"]
    assert found["details"]["records"][0]["requestId"] == request_id
    assert answered["details"]["total"] == 1 and "nextOffset" not in answered["details"]

    record = read["structuredContent"]["record"]
    assert record["title"] == "Release"
    assert record["answer"]["values"] == ["large"]
    assert record["answer"]["indices"] == [2]
    assert record["answer"]["optionNotes"] == {"small": "Known note"}
    assert missing == {
        "content": [
            {
                "type": "text",
                "text": f"Question not found on the current branch: {queued_id} / nope",
            }
        ],
        "isError": True,
    }

    assert exported["details"] == {
        "path": str(work / "history.md"),
        "keys": [
            {"requestId": request_id, "questionId": "scope"},
            {"requestId": queued_id, "questionId": "scope"},
        ],
    }
    content = (work / "history.md").read_text(encoding="utf-8")
    assert "```text\nWhich **scope**?\n```" in content
    assert content.count("\n## Question ") == 2
    assert again["isError"] is True
    assert "already exists" in again["content"][0]["text"]
    assert empty["content"][0]["text"] == (
        "Select at least one question or omit keys to export all history."
    )
    assert not (work / "x.md").exists()
    assert blank["content"][0]["text"] == "An export path is required."
    assert bad["isError"] is True
    assert bad["content"][0]["text"].startswith('Validation failed for tool "list_ask_history"')

    # The journal on disk is enough: reopening gives the same records.
    with SessionFile.open(session_path, readonly=True) as reopened:
        page = h.list_history(reopened.branch())
    assert page == listed["details"]


async def test_history_tools_are_off_by_default(tmp_path: Path) -> None:
    with trio.fail_after(20):
        async with open_runtime(settings=settings_file(tmp_path), surface=NullSurface()) as rt:
            result = await rt.call_tool("list_ask_history", {})
    assert result == {
        "content": [{"type": "text", "text": "Tool 'list_ask_history' is not available."}],
        "isError": True,
    }


def test_a_listing_over_built_records_takes_whole_numbers_written_with_a_point(
    session: SessionFile,
) -> None:
    """``list_records``, the page a team desk lists from its store's rows, reads ``2.0`` as
    ``2`` like the journal's listing (it sliced with the floats: a ``TypeError``)."""
    for _ in range(3):
        ask(session, SCOPE)
    records = h.build_records(branch(session))
    pointed = h.list_records(records, None, False, 2.0, 1.0)
    assert pointed == h.list_records(records, None, False, 2, 1)
    assert [r["requestId"] for r in pointed["records"]] == [records[2].request_id]


async def test_whole_numbers_written_with_a_point_are_the_integers_the_schema_takes(
    tmp_path: Path,
) -> None:
    """JSON Schema's ``integer`` takes ``2.0`` (a client in Python may send it), so the schema
    let ``{"offset": 2.0, "limit": 1.0}`` through, and the listing then refused it in words of
    its own ("limit must be an integer from 1 to 200."). It lists as ``2`` and ``1``; a
    fraction is still the schema's refusal."""
    settings = settings_file(tmp_path, historyTools=True)
    with trio.fail_after(20):
        async with open_runtime(
            session=tmp_path / "run.pias", mode="tui", settings=settings, surface=NullSurface()
        ) as rt:
            for _ in range(3):
                await rt.call_tool("ask_user", {**FORM, "background": True})
            pointed = await rt.call_tool("list_ask_history", {"offset": 2.0, "limit": 1.0})
            plain = await rt.call_tool("list_ask_history", {"offset": 2, "limit": 1})
            fraction = await rt.call_tool("list_ask_history", {"limit": 1.5})
    assert pointed.get("isError") is not True, pointed
    assert pointed["structuredContent"] == plain["structuredContent"]
    assert pointed["structuredContent"]["nextOffset"] == 3
    assert fraction["isError"] is True
    assert fraction["content"][0]["text"] == (
        'Validation failed for tool "list_ask_history":\n  - limit: must be integer, not number'
    )
