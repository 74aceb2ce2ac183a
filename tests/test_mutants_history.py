"""Session history behaviour the other history suites left unpinned, found by mutation testing
(``docs/mutation-persistence.md``): the ``only`` filter of ``build_records``, a request without
``createdAt``, stored custom text, what a search matches, the export's key checks and its error
texts, what a read or an export decodes, images in an export, selected positions, and the tool
results' blocks.

Sessions are real session files written with the journal's own builders (``test_history``).
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from pi_agent_ask import open_runtime
from pi_agent_ask.actors.form import NullSurface
from pi_agent_ask.form.types import Draft, Image
from pi_agent_ask.persistence import history as h
from pi_agent_ask.persistence import journal as jr
from pi_agent_ask.persistence.projection import JOURNAL
from pi_agent_ask.persistence.session_file import Entry, SessionFile

from .runtime_support import payload, settings_file
from .test_history import CREATED, PNG, SCOPE, ask, finish, image, params_of, simple
from .test_history_index_runs import flip_in_checkpoint, journal_file, spine

KEYS_TEXT = "keys must be an array of {requestId, questionId} objects."
KEY_TEXT = "Each key must have a requestId and a questionId string."


@pytest.fixture
def session(tmp_path: Path) -> Iterator[SessionFile]:
    with SessionFile.open(tmp_path / "session.pias") as opened:
        yield opened


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


def test_build_records_with_only_keeps_just_the_named_requests(session: SessionFile) -> None:
    first = ask(session, simple("First?"))
    finish(session, first, [Draft(selected=(0,))])
    second = ask(session, simple("Second?"))
    finish(session, second, [Draft(selected=(1,))])
    third = ask(session, simple("Third?"))
    entries = session.branch()
    # The excluded first request comes before the chosen ones: the filter skips it and goes on.
    chosen = h.build_records(entries, only={second.request_id, third.request_id})
    assert [(r.request_id, r.status) for r in chosen] == [
        (second.request_id, "answered"),
        (third.request_id, "waiting"),
    ]
    assert chosen[0].answer is not None and chosen[0].answer.values == ("no",)
    assert h.build_records(entries, only={first.request_id})[0].request_id == first.request_id
    assert h.build_records(entries, only=set()) == []
    assert h.build_records(entries, only={"missing"}) == []


def test_a_stored_custom_text_without_values_is_a_committed_answer(
    session: SessionFile,
) -> None:
    """Files written elsewhere may keep custom text outside ``values``: non-blank custom text
    is a committed answer all the same, blank custom text is not (catalog §5.2)."""
    for text in ("Mine", "   "):
        request = ask(session, simple())
        answer = {"values": [], "labels": [], "indices": [], "customText": text}
        result = {"cancelled": False, "questions": [], "answers": {"q": answer}}
        session.append(
            jr.HISTORY_COMPLETED, {"version": 1, "requestId": request.request_id, "result": result}
        )
    records = h.build_records(session.branch())
    assert [(r.status, r.has_answer) for r in records] == [("answered", True), ("skipped", False)]


def _complete(session: SessionFile, request_id: str, result: dict[str, Any], **extra: Any) -> None:
    """Journal a completion whose stored result is written by hand (older or other writers)."""
    body = {"version": 1, "requestId": request_id, "result": result, **extra}
    session.append(jr.HISTORY_COMPLETED, body)


def test_a_skipped_question_is_skipped_even_with_a_stored_answer(session: SessionFile) -> None:
    request = ask(session, simple())
    answer = {"values": ["yes"], "labels": ["Yes"], "indices": [1]}
    result = {"cancelled": False, "skippedQuestionIds": ["q"], "answers": {"q": answer}}
    _complete(session, request.request_id, result)
    [record] = h.build_records(session.branch())
    assert (record.status, record.answer, record.has_answer) == ("skipped", None, False)


def test_the_final_result_decides_the_question_s_type(session: SessionFile) -> None:
    request = ask(session, simple())
    meta = {"id": "q", "label": "Q1", "prompt": "Pick one?", "type": "multi"}
    _complete(session, request.request_id, {"cancelled": True, "questions": [meta]})
    [record] = h.build_records(session.branch())
    assert (record.question.type, record.question.presented_type) == ("multi", None)
    assert record.question_json()["type"] == "multi"


def test_a_result_with_input_issues_is_an_error_with_their_text(session: SessionFile) -> None:
    invalid = {
        "cancelled": True,
        "error": {"kind": "invalid_input", "issues": [{"path": "q", "message": "is broken"}]},
    }
    only_issues = ask(session, simple())
    _complete(session, only_issues.request_id, invalid)
    both = ask(session, simple())
    _complete(session, both.request_id, invalid, error="UI disconnected")
    fine = ask(session, simple())
    finish(session, fine, [Draft(selected=(0,))])
    records = h.build_records(session.branch())
    assert [(r.status, r.error) for r in records] == [
        ("error", "Invalid ask_user payload:\n- q: is broken"),
        ("error", "UI disconnected"),
        ("answered", None),
    ]


def test_only_a_text_title_with_words_is_kept_and_only_a_text_time(session: SessionFile) -> None:
    question = {"id": "q", "label": "Q1", "prompt": "Why?", "options": []}
    for title, created in (("   ", 5), (7, None), ("Real", "2026-03-04T05:06:07.000Z")):
        data: dict[str, Any] = {"requestId": f"r-{title}", "questions": [question]}
        data |= {"title": title, "createdAt": created}
        session.append(jr.HISTORY_REQUEST, data)
    entries = session.branch()
    records = h.build_records(entries)
    assert [r.title for r in records] == [None, None, "Real"]
    stamp = [
        dt.datetime.fromtimestamp(e.timestamp, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        for e in entries
        if e.type == jr.HISTORY_REQUEST
    ]
    assert [r.created_at for r in records] == [stamp[0], stamp[1], "2026-03-04T05:06:07.000Z"]


def test_an_empty_history_lists_nothing_and_no_next_offset(tmp_path: Path) -> None:
    assert h.list_history(()) == {"total": 0, "offset": 0, "records": []}
    with SessionFile.open(tmp_path / "empty.pias", projection=JOURNAL) as empty:
        assert h.list_history(h.source_of_session(empty)) == {
            "total": 0,
            "offset": 0,
            "records": [],
        }


def test_a_request_with_a_malformed_question_hides_no_later_request(
    session: SessionFile,
) -> None:
    session.append(jr.HISTORY_REQUEST, {"requestId": "x", "questions": [{"id": "q"}]})
    later = ask(session, simple())
    for source in (session.branch(), h.source_of_session(session)):
        listed = h.list_history(source)
        assert [r["requestId"] for r in listed["records"]] == [later.request_id]


def test_a_list_names_the_form_title_of_a_titled_request(session: SessionFile) -> None:
    titled = ask(session, SCOPE)
    plain = ask(session, simple())
    records = h.list_history(session.branch())["records"]
    assert [(r["requestId"], r.get("title")) for r in records] == [
        (titled.request_id, "Choose scope"),
        (plain.request_id, None),
    ]


def test_a_completion_s_error_that_is_not_text_is_ignored(session: SessionFile) -> None:
    request = ask(session, simple())
    result = finish(session, request, [Draft(selected=(0,))])
    assert result is not None
    session.append(
        jr.HISTORY_COMPLETED,
        {"version": 1, "requestId": request.request_id, "result": result.to_details(), "error": 5},
    )
    record = h.read_history(session.branch(), request.request_id, "q")["record"]
    assert (record["status"], record["hasAnswer"], "error" in record) == ("answered", True, False)


def test_a_malformed_latest_completion_does_not_hide_an_earlier_one_in_a_source(
    session: SessionFile,
) -> None:
    """Through the journal's index (``source_of_session``), as ``build_records`` does."""
    request = ask(session, simple())
    other = ask(session, simple())
    finish(session, request, [Draft(selected=(0,))])
    finish(session, other, [Draft(selected=(1,))])
    session.append(jr.HISTORY_COMPLETED, {"requestId": request.request_id, "result": {"x": 1}})
    source = h.source_of_session(session)
    listed = h.list_history(source)["records"]
    assert [(r["requestId"], r["status"]) for r in listed] == [
        (request.request_id, "answered"),
        (other.request_id, "answered"),
    ]
    assert h.read_record(source, request.request_id, "q").status == "answered"


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Asia/Kolkata"])
def test_a_request_without_created_at_takes_the_time_of_its_entry_in_utc(
    zone: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the local time zone, the time is written in UTC with a ``Z``."""
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    data = {
        "requestId": "r1",
        "questions": [{"id": "q", "label": "Q1", "prompt": "Why?", "options": []}],
    }
    # 2026-01-02T03:04:05.678Z, in seconds since the epoch.
    entry = Entry("e1", None, jr.HISTORY_REQUEST, 1767323045.678, data)
    [record] = h.build_records([entry])
    assert record.created_at == "2026-01-02T03:04:05.678Z"
    assert (record.status, record.background, record.title) == ("waiting", False, None)
    monkeypatch.undo()
    time.tzset()


def test_a_search_matches_the_record_s_compact_json_and_its_non_ascii_text(
    session: SessionFile,
) -> None:
    """The query is a substring of the record's JSON as ``JSON.stringify`` writes it: no spaces
    after separators, non-ASCII text as it is (catalog §5.3)."""
    answered = ask(session, simple("Welche Größe?"))
    finish(session, answered, [Draft(selected=(0,), note="naïve café")])
    ask(session, simple("Other?"))
    entries = session.branch()
    for query in (
        '"status":"answered","hasanswer":true',
        '"hasanswer":true',
        "WELCHE GRÖßE",
        "größe",
        "naïve café",
    ):
        found = h.list_history(entries, query=query)
        assert [r["requestId"] for r in found["records"]] == [answered.request_id], query
    assert h.list_history(entries, query='"status": "answered"')["total"] == 0


def test_image_bytes_add_nothing_to_the_search_text(session: SessionFile) -> None:
    pictured = Draft(
        custom_selected=True,
        custom_images=(image(1),),
        note="see",
        note_images=(image(2),),
        option_notes={"yes": "this"},
        option_note_images={"yes": (image(3),)},
    )
    finish(session, ask(session, simple()), [pictured])
    [record] = h.build_records(session.branch())
    assert record.answer is not None
    blank = attrs.evolve(
        record,
        answer=attrs.evolve(
            record.answer,
            custom_images=[attrs.evolve(i, data="") for i in record.answer.custom_images],
            note_images=[attrs.evolve(i, data="") for i in record.answer.note_images],
            option_note_images={
                v: [attrs.evolve(i, data="") for i in images]
                for v, images in record.answer.option_note_images.items()
            },
        ),
    )
    assert record.search_text() == blank.search_text()
    assert '"data":""' in record.search_text()


# --------------------------------------------------------------------------------------------
# export_ask_history: keys, paths, the file
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("keys", ["q", b"q", {"requestId": "r", "questionId": "q"}, 5])
def test_export_keys_that_are_not_an_array_are_refused(
    session: SessionFile, tmp_path: Path, keys: Any
) -> None:
    ask(session, simple())
    with pytest.raises(h.HistoryError) as raised:
        h.export_history(session.branch(), "out.md", keys, tmp_path)
    assert str(raised.value) == KEYS_TEXT
    assert not (tmp_path / "out.md").exists()


def test_each_export_key_needs_both_ids_as_strings(session: SessionFile, tmp_path: Path) -> None:
    request = ask(session, simple())
    rid = request.request_id
    for key in ("x", 7, None, {"requestId": rid}, {"questionId": "q"}, {"requestId": rid, "q": 1}):
        with pytest.raises(h.HistoryError) as raised:
            h.export_history(session.branch(), "out.md", [key], tmp_path)
        assert str(raised.value) == KEY_TEXT, key
    with pytest.raises(h.HistoryError) as raised:
        h.export_history(session.branch(), "out.md", [{"requestId": 1, "questionId": 2}], tmp_path)
    assert str(raised.value) == KEY_TEXT
    assert not (tmp_path / "out.md").exists()


def _counting(source: h.HistorySource) -> tuple[h.HistorySource, list[Entry]]:
    """``source`` with a loader that records every entry it decodes."""
    loaded: list[Entry] = []

    def load(at: Any) -> Entry:
        entry = source.load(at)
        loaded.append(entry)
        return entry

    return attrs.evolve(source, load=load), loaded


def test_a_read_of_a_failed_record_carries_its_error_and_no_presented_type(
    session: SessionFile,
) -> None:
    request = ask(session, simple())
    finish(session, request, error="UI disconnected")
    record = h.read_history(session.branch(), request.request_id, "q")["record"]
    assert record == {
        "requestId": request.request_id,
        "questionId": "q",
        "createdAt": CREATED,
        "background": False,
        "question": {
            "id": "q",
            "label": "Q1",
            "prompt": "Pick one?",
            "type": "single",
            "options": [{"value": "yes", "label": "Yes"}, {"value": "no", "label": "No"}],
        },
        "status": "error",
        "hasAnswer": False,
        "error": "UI disconnected",
    }


def test_a_read_decodes_only_its_own_request(session: SessionFile) -> None:
    requests = [ask(session, simple(f"Question {n}?")) for n in range(3)]
    for request in requests:
        finish(session, request, [Draft(selected=(1,))])
    source, loaded = _counting(h.source_of_session(session))
    record = h.read_record(source, requests[1].request_id, "q")
    assert record.request_id == requests[1].request_id and record.status == "answered"
    assert {entry.data["requestId"] for entry in loaded} == {requests[1].request_id}


@pytest.mark.parametrize("offset", [True, "1", 1.5, -1, None])
def test_an_offset_that_is_not_a_non_negative_integer_is_refused(offset: Any) -> None:
    # ``1.0`` is the integer 1, as JSON Schema's ``integer`` has it (test_history.py).
    with pytest.raises(h.HistoryError) as raised:
        h.list_history((), offset=offset)
    assert str(raised.value) == "offset must be a non-negative integer."


@pytest.mark.parametrize("limit", [True, "5", 5.5, 0, 201, 0.0, 201.0, None])
def test_a_limit_that_is_not_an_integer_from_1_to_200_is_refused(limit: Any) -> None:
    with pytest.raises(h.HistoryError) as raised:
        h.list_history((), limit=limit)
    assert str(raised.value) == "limit must be an integer from 1 to 200."


def test_the_largest_limit_is_accepted(session: SessionFile) -> None:
    for n in range(3):
        ask(session, simple(f"Question {n}?"))
    assert h.list_history(session.branch(), limit=200)["total"] == 3
    assert h.list_history(session.branch(), query="question", limit=200)["total"] == 3


def test_a_stale_record_index_is_rebuilt(session: SessionFile) -> None:
    ask(session, simple("Old question?"))
    stale = h.index_records(h.source_of_session(session))
    ask(session, simple("New question?"))
    source = h.source_of_session(session)
    assert stale.key != source.key
    found = h.list_history(source, query="new question", index=stale)
    assert [r["prompt"] for r in found["records"]] == ["New question?"]
    fresh = h.index_records(source)
    assert h.list_history(source, query="question", index=fresh)["total"] == 2


@pytest.mark.parametrize(("offset", "limit"), [(0, 1), (2, 2), (1, 3), (4, 5)])
def test_an_unfiltered_page_decodes_only_its_own_requests(
    session: SessionFile, offset: int, limit: int
) -> None:
    requests = [ask(session, simple(f"Question {n}?")) for n in range(5)]
    for request in requests:
        finish(session, request, [Draft(selected=(0,))])
    source, loaded = _counting(h.source_of_session(session))
    page = h.list_history(source, offset=offset, limit=limit)
    wanted = [r.request_id for r in requests[offset : offset + limit]]
    assert [r["requestId"] for r in page["records"]] == wanted
    assert {entry.data["requestId"] for entry in loaded} == set(wanted)


def test_a_session_without_the_journal_projection_reads_its_branch(tmp_path: Path) -> None:
    with SessionFile.open(tmp_path / "plain.pias") as plain:
        assert plain.projection is None
        request = ask(plain, SCOPE)
        finish(plain, request, [Draft(selected=(1,))])
        source = h.source_of_session(plain)
        assert h.list_history(source) == h.list_history(plain.branch())
        assert h.read_record(source, request.request_id, "scope").status == "answered"


def test_a_whole_history_index_is_read_without_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.pias"
    journal_file(path, 12)
    with SessionFile.open(path, projection=JOURNAL, readonly=True) as session:
        assert session.log_prev is not None  # the branch has a checkpoint with an index
        with caplog.at_level(logging.WARNING):
            source = h.source_of_session(session)
        assert caplog.records == []
        assert h.list_history(source, limit=200) == h.list_history(session.branch(), limit=200)


def test_an_unreadable_history_index_is_logged_with_the_session_and_the_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.pias"
    journal_file(path, 40)
    with SessionFile.open(path, projection=JOURNAL, readonly=True) as session:
        first_run = spine(session)[0][0]
    flip_in_checkpoint(path, first_run)
    with SessionFile.open(path, projection=JOURNAL, readonly=True) as session:
        with caplog.at_level(logging.WARNING):
            source = h.source_of_session(session)
        [logged] = [r for r in caplog.records if r.name == h.__name__]
        head = f"{session}: history index unreadable ("
        message = logged.getMessage()
        assert message.startswith(head) and message.endswith("); reading the checkpoint chain")
        reason = message[len(head) : -len("); reading the checkpoint chain")]
        assert reason and reason != "None"
        assert h.list_history(source, limit=200) == h.list_history(session.branch(), limit=200)


def test_an_export_of_selected_keys_decodes_only_their_requests(
    session: SessionFile, tmp_path: Path
) -> None:
    requests = [ask(session, simple(f"Question {n}?")) for n in range(4)]
    for request in requests:
        finish(session, request, [Draft(selected=(0,))])
    chosen = requests[2]
    source, loaded = _counting(h.source_of_session(session))
    keys = [{"requestId": chosen.request_id, "questionId": "q"}]
    result = h.export_history(source, "one.md", keys, tmp_path)
    assert result["keys"] == keys
    assert {entry.data["requestId"] for entry in loaded} == {chosen.request_id}
    assert sorted(entry.type for entry in loaded) == [jr.HISTORY_COMPLETED, jr.HISTORY_REQUEST]
    # Without keys, every request is read.
    source, loaded = _counting(h.source_of_session(session))
    h.export_history(source, "all.md", None, tmp_path)
    assert {entry.data["requestId"] for entry in loaded} == {r.request_id for r in requests}


def test_an_export_path_naming_a_directory_is_refused(session: SessionFile, tmp_path: Path) -> None:
    ask(session, simple())
    (tmp_path / "out").mkdir()
    with pytest.raises(h.HistoryError) as raised:
        h.export_history(session.branch(), "out/", None, tmp_path)
    assert str(raised.value) == (
        f"The export path must name a file, not a directory: {tmp_path / 'out'}"
    )
    assert list((tmp_path / "out").iterdir()) == []


def test_an_export_path_the_system_refuses_is_a_history_error(tmp_path: Path) -> None:
    name = "x" * 300 + ".md"
    with pytest.raises(h.HistoryError) as raised:
        h.export_history((), name, None, tmp_path)
    assert str(raised.value) == (
        f"Could not create the export file {tmp_path / name}: {os.strerror(errno.ENAMETOOLONG)}"
    )


def test_a_failed_write_is_reported_even_when_the_partial_file_is_gone(
    session: SessionFile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ask(session, simple())
    target = tmp_path / "gone.md"

    def removed_then_full(fd: int, data: Any) -> int:
        target.unlink()  # someone else removed the file before the write failed
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", removed_then_full)
    with pytest.raises(h.HistoryError) as raised:
        h.export_history(session.branch(), str(target), None, tmp_path)
    monkeypatch.undo()
    assert str(raised.value) == (
        f"Could not write the export file {target}: {os.strerror(errno.ENOSPC)}"
    )
    assert not target.exists()


# --------------------------------------------------------------------------------------------
# export_ask_history: the Markdown
# --------------------------------------------------------------------------------------------


def test_export_images_get_a_safe_mime_type_and_unwrapped_base64(
    session: SessionFile, tmp_path: Path
) -> None:
    wrapped = Image(id="w", mime_type="image/png", data=f"{PNG[:20]}\n{PNG[20:40]} \r\n{PNG[40:]}")
    odd = Image(id="o", mime_type='image/png"><b>', data=PNG)
    finish(session, ask(session, simple()), [Draft(custom_selected=True, custom_images=(wrapped,))])
    finish(session, ask(session, simple()), [Draft(note="see", note_images=(odd,))])
    h.export_history(session.branch(), "images.md", None, tmp_path)
    content = (tmp_path / "images.md").read_text(encoding="utf-8")
    assert f"![Custom answer image 1](data:image/png;base64,{PNG})" in content
    assert f"![Question note image 1](data:application/octet-stream;base64,{PNG})" in content
    assert "<b>" not in content


def test_export_lists_selected_positions_as_compact_json(
    session: SessionFile, tmp_path: Path
) -> None:
    multi = params_of(
        {
            "questions": [
                {
                    "id": "m",
                    "type": "multi",
                    "prompt": "Which ones?",
                    "options": [{"value": v, "label": v.title()} for v in ("a", "b", "c")],
                }
            ]
        }
    )
    finish(session, ask(session, multi), [Draft(selected=(0, 2))])
    h.export_history(session.branch(), "multi.md", None, tmp_path)
    content = (tmp_path / "multi.md").read_text(encoding="utf-8")
    assert "### Answer\n\nSelected positions: [1,3]\n" in content


# --------------------------------------------------------------------------------------------
# Tool results
# --------------------------------------------------------------------------------------------


def test_read_content_opens_with_the_record_as_a_text_block(session: SessionFile) -> None:
    request = ask(session, simple())
    finish(session, request, [Draft(selected=(0,))])
    [record] = h.build_records(session.branch())
    assert h.read_result_content(record) == [
        {"type": "text", "text": h.tool_text({"record": record.to_json()})}
    ]


def test_read_content_of_a_cancelled_or_failed_record_carries_no_images(
    session: SessionFile,
) -> None:
    pictured = Draft(selected=(0,), note="see", note_images=(image(1),))
    cancelled, failed = ask(session, simple()), ask(session, simple())
    result = finish(session, failed, [pictured])
    assert result is not None
    details = result.to_details()
    # Stored results that keep their images: a cancelled one (the runtime drops a cancelled
    # form's images, an older file may not have), and one with an error as well (the error
    # wins, the answer is kept).
    for request_id, extra in ((cancelled.request_id, {}), (failed.request_id, {"error": "x"})):
        body = {**details, "cancelled": True} if not extra else details
        session.append(
            jr.HISTORY_COMPLETED, {"version": 1, "requestId": request_id, "result": body, **extra}
        )
    answered = ask(session, simple())
    finish(session, answered, [pictured])
    records = h.build_records(session.branch())
    assert [r.status for r in records] == ["cancelled", "error", "answered"]
    for record in records[:2]:
        assert record.answer is not None and record.answer.note_images
        assert h.read_result_content(record) == [
            {"type": "text", "text": h.tool_text({"record": record.to_json()})}
        ]
    assert [block["type"] for block in h.read_result_content(records[2])] == [
        "text",
        "text",
        "image",
    ]


async def test_list_and_export_results_carry_their_data_as_one_text_block(
    tmp_path: Path,
) -> None:
    settings = settings_file(tmp_path, historyTools=True)
    with trio.fail_after(20):
        async with open_runtime(settings=settings, surface=NullSurface(), cwd=tmp_path) as rt:
            await rt.call_tool("ask_user", payload("a", background=True), "c1")
            listed = await rt.call_tool("list_ask_history", {}, "c2")
            exported = await rt.call_tool("export_ask_history", {"path": "h.md"}, "c3")
    for result in (listed, exported):
        data: Mapping[str, Any] = result["structuredContent"]
        assert result["content"] == [{"type": "text", "text": h.tool_text(data)}]
        assert json.loads(result["content"][0]["text"]) == data == result["details"]
    assert exported["details"]["path"] == str(tmp_path / "h.md")


def test_tool_text_keeps_non_ascii_text_as_it_is() -> None:
    assert h.tool_text({"note": "naïve café — 日本"}) == '{"note":"naïve café — 日本"}'


async def test_filtered_pages_build_the_record_index_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paging a filtered list with ``nextOffset`` reuses the runtime's index: it is built for
    the first page only, not again inside ``list_history``."""
    built: list[h.RecordIndex] = []
    real = h.index_records

    def index_records(source: Any) -> h.RecordIndex:
        built.append(real(source))
        return built[-1]

    monkeypatch.setattr(h, "index_records", index_records)
    settings = settings_file(tmp_path, historyTools=True)
    with trio.fail_after(20):
        async with open_runtime(settings=settings, surface=NullSurface()) as rt:
            for call in ("c1", "c2", "c3"):
                await rt.call_tool("ask_user", payload("a", background=True), call)
            first = await rt.call_tool("list_ask_history", {"query": "question", "limit": 2})
            rest = {"query": "question", "offset": 2, "limit": 2}
            second = await rt.call_tool("list_ask_history", rest)
            only = await rt.call_tool("list_ask_history", {"answeredOnly": True})
    assert (first["details"]["total"], first["details"]["nextOffset"]) == (3, 2)
    assert [len(second["details"]["records"]), only["details"]["total"]] == [1, 0]
    assert len(built) == 1


async def test_a_tool_that_is_not_a_history_tool_is_refused() -> None:
    with pytest.raises(h.HistoryError) as raised:
        await h.call_history_tool(None, None, "ask_user", {})
    assert str(raised.value) == "Tool 'ask_user' is not available."
